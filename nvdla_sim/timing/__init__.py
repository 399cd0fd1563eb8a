"""Cycle-approximate timing: SimPy processes passing sized tokens over bounded channels.

Units compute a layer's values whole with the kernels, then hand the timing module of their unit
(`sdp`, `pdp`, `cdp`, `conv`) a small geometry object decoded from their registers; the timing
processes never touch values.  See docs/timing.md.
"""
from .model import TimingModel
from .params import TimingParams

__all__ = ["TimingModel", "TimingParams"]
