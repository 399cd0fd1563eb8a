"""Precision statistics registers read back from the simulated register file after a run.

The NVDLA precision-preservation notes name counters software reads to judge a layer's numeric
range: convertor saturations (CACC D_OUT_SATURATION, SDP D_PERF_OUT_SATURATION, CDP
D_OUT_SATURATION), NaN/Inf input and output counts of the FP16 pipes (CDMA, SDP, SDP_RDMA, PDP,
CDP) and LUT hit / underflow / overflow / hybrid counts (SDP, CDP).  They are per register group.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..engine import Engine

# (unit, register) in report order; a register the map lacks is skipped.
STATISTICS_REGISTERS: tuple[tuple[str, str], ...] = (
    ("CACC", "D_OUT_SATURATION"),
    ("CDMA", "D_NAN_INPUT_DATA_NUM"), ("CDMA", "D_INF_INPUT_DATA_NUM"),
    ("CDMA", "D_NAN_INPUT_WEIGHT_NUM"), ("CDMA", "D_INF_INPUT_WEIGHT_NUM"),
    ("SDP_RDMA", "D_STATUS_NAN_INPUT_NUM"), ("SDP_RDMA", "D_STATUS_INF_INPUT_NUM"),
    ("SDP", "D_PERF_OUT_SATURATION"),
    ("SDP", "D_STATUS_NAN_INPUT_NUM"), ("SDP", "D_STATUS_INF_INPUT_NUM"),
    ("SDP", "D_STATUS_NAN_OUTPUT_NUM"),
    ("SDP", "D_PERF_LUT_UFLOW"), ("SDP", "D_PERF_LUT_OFLOW"), ("SDP", "D_PERF_LUT_HYBRID"),
    ("SDP", "D_PERF_LUT_LE_HIT"), ("SDP", "D_PERF_LUT_LO_HIT"),
    ("PDP", "D_NAN_INPUT_NUM"), ("PDP", "D_INF_INPUT_NUM"), ("PDP", "D_NAN_OUTPUT_NUM"),
    ("CDP", "D_OUT_SATURATION"),
    ("CDP", "D_NAN_INPUT_NUM"), ("CDP", "D_INF_INPUT_NUM"), ("CDP", "D_NAN_OUTPUT_NUM"),
    ("CDP", "D_PERF_LUT_UFLOW"), ("CDP", "D_PERF_LUT_OFLOW"), ("CDP", "D_PERF_LUT_HYBRID"),
    ("CDP", "D_PERF_LUT_LE_HIT"), ("CDP", "D_PERF_LUT_LO_HIT"),
)


def read_statistics(engine: "Engine | None") -> dict[str, list[int]]:
    """`UNIT.REG` -> [group 0 value, group 1 value] for the statistics registers of every unit
    that ran a layer ({} without an engine)."""
    if engine is None:
        return {}
    out: dict[str, list[int]] = {}
    for unit_name, reg_name in STATISTICS_REGISTERS:
        unit = engine.units.get(unit_name)
        regs = engine.regs.units.get(unit_name)
        if unit is None or regs is None or not unit.stats.get("layers"):
            continue
        reg = regs.definition.regs.get(reg_name)
        if reg is None:
            continue
        groups = (0, 1) if regs.definition.is_dual(reg.offset) else (None,)
        out[f"{unit_name}.{reg_name}"] = [regs.read_word(reg, g) for g in groups]
    return out


def format_statistics(stats: dict[str, list[int]]) -> str:
    """One line per register: `UNIT.REG  g0 g1` (empty when no unit ran)."""
    if not stats:
        return ""
    width = max(len(k) for k in stats)
    lines = ["statistics registers (group 0, group 1):"]
    for name, values in stats.items():
        lines.append(f"  {name:<{width}} " + " ".join(f"{v:>10}" for v in values))
    return "\n".join(lines)
