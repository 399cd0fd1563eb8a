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


# -- per hardware layer, in scenario reports ----------------------------------------------------
# Units whose statistics belong to a hardware layer of each kind (a convolution's SDP runs on the
# fly behind it; a fused PDP is a layer of its own).
UNITS_BY_KIND: dict[str, tuple[str, ...]] = {
    "conv": ("CDMA", "CACC", "SDP_RDMA", "SDP"),
    "sdp": ("SDP_RDMA", "SDP"),
    "pdp": ("PDP",),
    "cdp": ("CDP",),
}
# Flag thresholds (docs/precision.md): saturated results over the layer's output elements, and
# LUT lookups that fell outside both tables over all lookups.
SATURATION_FLAG = 0.001
LUT_RANGE_FLAG = 0.01
LUT_KEYS = ("LE_HIT", "LO_HIT", "HYBRID", "UFLOW", "OFLOW")


class StatisticsTap:
    """The statistics registers as the units write them at the end of each hardware layer (what
    software reads after each layer's interrupt), summed until `take()`.  A CBUF split runs a
    convolution as several hardware layers in alternating register groups, so reading the
    registers once after the step would lose all but the last two."""

    def __init__(self, engine: "Engine"):
        self.records: list[tuple[str, str, int]] = []
        wanted: dict[str, set[str]] = {}
        for unit, reg in STATISTICS_REGISTERS:
            wanted.setdefault(unit, set()).add(reg)
        for unit, regs in wanted.items():
            unit_regs = engine.regs.units.get(unit)
            if unit_regs is not None:
                unit_regs.update_hooks.append(self._hook(unit, regs))

    def _hook(self, unit: str, regs: set[str]):
        def hook(name: str, value: int, group) -> None:
            if name in regs:
                self.records.append((unit, name, value))
        return hook

    def take(self) -> dict[str, int]:
        """`UNIT.REG` -> sum of the values written since the last take."""
        out: dict[str, int] = {}
        for unit, name, value in self.records:
            key = f"{unit}.{name}"
            out[key] = out.get(key, 0) + value
        self.records = []
        return out


def split_by_layer(kinds: list[str], totals: dict[str, int]) -> list[dict[str, int]]:
    """A step's statistics shared out to its hardware layers (kinds in step order) by unit."""
    out: list[dict[str, int]] = []
    for kind in kinds:
        units = UNITS_BY_KIND.get(kind, ())
        out.append({k: v for k, v in totals.items() if k.split(".")[0] in units})
    return out


def saturations(stats: dict[str, int] | None) -> int | None:
    """Saturated results counted by the layer's units (CACC, SDP, CDP); None: none counted."""
    if not stats:
        return None
    vals = [v for k, v in stats.items() if k.endswith("SATURATION")]
    return sum(vals) if vals else None


def lut_counts(stats: dict[str, int] | None) -> tuple[str, dict[str, int]] | None:
    """(unit, {le_hit, lo_hit, hybrid, uflow, oflow}) of the LUT the layer used, or None."""
    if not stats:
        return None
    for unit in ("SDP", "CDP"):
        keys = [f"{unit}.D_PERF_LUT_{k}" for k in LUT_KEYS]
        if all(k in stats for k in keys):
            return unit, {k.lower(): stats[key] for k, key in zip(LUT_KEYS, keys)}
    return None


def lut_lookups(unit: str, counts: dict[str, int]) -> int:
    """Lookups the counters cover.  SDP: every lookup ends as a hit (HYBRID counts the hits of
    the table the priorities chose), an underflow or an overflow (LE_HIT / LO_HIT count each
    table's own hits).  CDP: the five counters are disjoint cases of one lookup."""
    if unit == "SDP":
        return counts["hybrid"] + counts["uflow"] + counts["oflow"]
    return sum(counts.values())


def statistics_flags(stats: dict[str, int] | None, output_elements: int) -> list[str]:
    """Why a layer's statistics stand out (empty: nothing to flag; see the thresholds)."""
    flags = []
    sat = saturations(stats)
    if sat and output_elements and sat > SATURATION_FLAG * output_elements:
        flags.append(f"{sat} saturated ({100 * sat / output_elements:.2f}% of outputs)")
    lut = lut_counts(stats)
    if lut is not None:
        unit, counts = lut
        lookups = lut_lookups(unit, counts)
        out = counts["uflow"] + counts["oflow"]
        if lookups and out > LUT_RANGE_FLAG * lookups:
            flags.append(f"{unit} LUT out of range {100 * out / lookups:.1f}% "
                         f"({counts['uflow']} under, {counts['oflow']} over)")
    return flags


# -- report rows ---------------------------------------------------------------------------------
STATS_CSV_COLUMNS = ("saturated", "lut_lookups", "lut_out_of_range", "stats_flags")


def layer_output_elements(plan, layer) -> int:
    """Elements of a hardware layer's output (its channels, not the padded lanes)."""
    if layer.output is not None:
        t = plan.tensors[layer.output.tensor]
        return layer.output.channels * t.shape.h * t.shape.w
    if layer.conv is not None:
        return int(layer.conv.weight.shape[0]) * layer.conv.out_h * layer.conv.out_w
    if layer.sdp is not None:
        return layer.sdp.channels * layer.sdp.h * layer.sdp.w
    return 0


def layer_lut(layer):
    """The compiler.lut.Lut a hardware layer programs (SDP Y stage or CDP), or None."""
    q = layer.quant
    if q is None:
        return None
    if layer.kind == "cdp":
        return getattr(q, "lut", None)
    sdp = q if layer.kind == "sdp" else getattr(q, "sdp", None)
    y = getattr(sdp, "y", None)
    return getattr(y, "lut", None)


def _sum(dicts: list[dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for d in dicts:
        for k, v in d.items():
            out[k] = out.get(k, 0) + v
    return out


def attach_statistics(row, plan, layers, timings: dict, batch: int = 1) -> None:
    """Fill a report row's statistics (summed over its hardware layers and the batch's images;
    None when no layer was counted: timing-only runs), flags (per hardware layer, against the
    batch's output elements) and LUT descriptions."""
    counted = [timings[layer.name].statistics for layer in layers
               if layer.name in timings and timings[layer.name].statistics is not None]
    row.statistics = _sum(counted) if counted else None
    row.stats_flags = []
    for layer in layers:
        t = timings.get(layer.name)
        if t is not None and t.statistics is not None:
            row.stats_flags += [f"{layer.name}: {f}" for f in
                                statistics_flags(t.statistics,
                                                 batch * layer_output_elements(plan, layer))]
    luts = []
    for layer in layers:
        lut = layer_lut(layer)
        if lut is None:
            continue
        info = {"layer": layer.name, "unit": "CDP" if layer.kind == "cdp" else "SDP"}
        info.update(getattr(lut, "measured", None) or {})
        t = timings.get(layer.name)
        counts = lut_counts(t.statistics) if t is not None else None
        if counts is not None:
            info["hits"] = counts[1]
            info["lookups"] = lut_lookups(*counts)
        luts.append(info)
    row.luts = luts or None


def stats_csv_values(row) -> dict:
    sat = saturations(row.statistics)
    lut = lut_counts(row.statistics)
    return {"saturated": sat,
            "lut_lookups": lut_lookups(*lut) if lut else None,
            "lut_out_of_range": lut[1]["uflow"] + lut[1]["oflow"] if lut else None,
            "stats_flags": "; ".join(row.stats_flags or []) or None}


def _lut_line(info: dict) -> str:
    text = f"{info['unit']} LUT"
    if info.get("function"):
        text += f" {info['function']}"
    if info.get("max_error") is not None:
        text += (f": max error {info['max_error']:.3g}, RMS {info['rms_error']:.3g}"
                 f" ({info.get('design', 'measured')}")
        if info.get("range"):
            text += f", over [{info['range'][0]:g}, {info['range'][1]:g}]"
        text += ")"
    if "hits" in info:
        h = info["hits"]
        text += (f"; {info['lookups']} lookups: LE hit {h['le_hit']}, LO hit {h['lo_hit']}, "
                 f"hybrid {h['hybrid']}, under {h['uflow']}, over {h['oflow']}")
    return text


def statistics_lines(rep) -> list[str]:
    """Console lines: each LUT's measured error and hit counts, each flagged layer."""
    rows = [r for r in rep.rows if getattr(r, "statistics", None) is not None or
            getattr(r, "luts", None)]
    if not rows:
        return []
    counted = any(r.statistics is not None for r in rep.rows)
    lines = []
    for r in rows:
        for info in r.luts or []:
            lines.append(f"  {info['layer']}: {_lut_line(info)}")
    flagged = [(r, f) for r in rep.rows for f in (getattr(r, "stats_flags", None) or [])]
    for r, f in flagged:
        lines.append(f"  FLAG {f}")
    if counted:
        head = (f"statistics registers: {len(flagged)} flag{'s' if len(flagged) != 1 else ''} "
                f"(saturations > {100 * SATURATION_FLAG:g}% of outputs, LUT under/overflow > "
                f"{100 * LUT_RANGE_FLAG:g}% of lookups)")
        sat = sum(saturations(r.statistics) or 0 for r in rep.rows if r.statistics)
        head += f"; {sat} saturated results in all"
    else:
        head = "statistics registers: n/a (timing-only run)"
    return [head] + lines


def any_counter_nonzero(rep) -> bool:
    return any(v for r in rep.rows if getattr(r, "statistics", None) for v in r.statistics.values())
