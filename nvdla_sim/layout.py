"""Feature-cube layout in memory: a re-export of `nvdla_sim.formats.feature` (one
implementation of the feature data format; see that module and docs/formats.md)."""
from __future__ import annotations

from .formats.feature import byte_offsets as _byte_offsets  # noqa: F401  (former private name)
from .formats.feature import read_cube, surfaces, write_cube

__all__ = ["read_cube", "surfaces", "write_cube"]
