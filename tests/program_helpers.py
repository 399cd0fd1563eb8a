"""Helpers for tests that build register programs by hand."""
from __future__ import annotations

from nvdla_sim.program import RegWrite
from nvdla_sim.regs import register_map


def reg_writes(regs: dict[str, dict[str, int]], version: int = 2) -> list[RegWrite]:
    """{"UNIT.REG": {"FIELD": value, ...}, ...} -> CSB writes, fields placed by the register map."""
    rmap = register_map(version)
    out = []
    for name, fields in regs.items():
        unit, reg = name.split(".")
        u, r = rmap.resolve(unit, reg)
        value = sum(v << r.fields[f].lo for f, v in fields.items())
        out.append(RegWrite(rmap.base(u.name) + r.offset, value, name))
    return out
