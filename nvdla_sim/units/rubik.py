"""RUBIK (nv_full's data-reshape engine: contract, split, merge).

Not modelled yet: a layer that enables it stops with an UnsupportedError naming the unit and its
mode, rather than waiting forever for an interrupt that would never come.
"""
from __future__ import annotations

from typing import Generator

from ..regs import GroupView
from .base import Unit

RUBIK_MODES = {0: "CONTRACT", 1: "SPLIT", 2: "MERGE"}


class Rubik(Unit):
    block = "RBK"
    interrupt = "RUBIK"

    def execute(self, view: GroupView) -> Generator:
        mode = view.field("D_MISC_CFG", "RUBIK_MODE")
        raise self.unsupported(f"RUBIK_MODE={RUBIK_MODES.get(mode, mode)}: the Rubik data-reshape "
                               "engine is not modelled")
        yield  # pragma: no cover  (makes this a generator)
