"""Lookup tables of SDP and CDP: the register-level description, how the firmware loads it, and
the table designs the compiler uses: sigmoid and tanh on SDP (INT8/INT16 here, FP16 in
scenario/quantize.py) are fitted by `nvdla_sim.lut.fit`, which measures every design on the
bit-exact SDP kernel and keeps the best (docs/precision.md compares it with the earlier hand
design: smaller max and RMS error); LRN on CDP (INT8/INT16 `lrn_lut`, FP16 `lrn_lut_fp16`) keeps
the designs below, because the fit measures SDP's index path, not CDP's 38-bit square sums.

The NVDLA software ships no INT8 tables (umd LutManager.cpp: "Empty INT8 LRN/Sigmoid LUT"), so the
LRN designs are this project's own, in NVDLA terms:
- LO table (257 entries, linear index): covers the whole input range of interest,
  entry i = f(LO_START + i * 2^LO_INDEX_SELECT) scaled to int16; between entries the hardware
  interpolates linearly (reference map 5.7 / 5.9);
- LE table (65 entries): exponent mode (entry i = f(2^i), a fallback for inputs above the LO
  range);
- priorities make LO win whenever it hits (HYBRID = LO) and under/overflow clamp to the table ends
  (slopes 0).
Every design carries its measured error (`Lut.measured`) for the scenario report.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import lru_cache

import numpy as np

from ..errors import NvdlaSimError
from .emit import ProgramBuilder

LE_ENTRIES, LO_ENTRIES = 65, 257
INT16_MAX = (1 << 15) - 1


@dataclass(frozen=True)
class Slope:
    """Under/overflow slope: value beyond the table end = end entry + (x - edge) * scale >> shift."""
    scale: int = 0
    shift: int = 0


@dataclass(frozen=True)
class Lut:
    le_table: tuple[int, ...]
    lo_table: tuple[int, ...]
    le_function: str = "EXPONENT"          # or "LINEAR"
    le_index_offset: int = 0               # exponent mode
    le_index_select: int = 0               # linear mode
    lo_index_select: int = 0
    le_start: int = 0
    le_end: int = 0
    lo_start: int = 0
    lo_end: int = 0
    le_uflow: Slope = field(default_factory=Slope)
    le_oflow: Slope = field(default_factory=Slope)
    lo_uflow: Slope = field(default_factory=Slope)
    lo_oflow: Slope = field(default_factory=Slope)
    uflow_priority: str = "LE"             # "LE" or "LO"
    oflow_priority: str = "LE"
    hybrid_priority: str = "LE"
    # How well the tables fit their function, measured on the bit-exact kernel (function,
    # range, max_error, rms_error in the function's units, design); reports show it.
    measured: dict | None = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        if len(self.le_table) != LE_ENTRIES or len(self.lo_table) != LO_ENTRIES:
            raise NvdlaSimError(f"LUT tables need {LE_ENTRIES} LE and {LO_ENTRIES} LO entries, "
                                f"got {len(self.le_table)} and {len(self.lo_table)}")
        for v in self.le_table + self.lo_table:
            if not -(1 << 15) <= v <= INT16_MAX:
                raise NvdlaSimError(f"LUT entry {v} does not fit int16")


def constant_lut(value: int) -> Lut:
    """Every entry `value`, slopes 0: the LUT returns `value` whatever its input."""
    return Lut((value,) * LE_ENTRIES, (value,) * LO_ENTRIES)


def write_lut(b: ProgramBuilder, unit: str, lut: Lut) -> None:
    """Load `lut` into SDP or CDP in the order of the firmware's update_lut (common.c)."""
    for table_id, table in (("LE", lut.le_table), ("LO", lut.lo_table)):
        b.reg(unit, "S_LUT_ACCESS_CFG", LUT_TABLE_ID=table_id, LUT_ACCESS_TYPE="WRITE")
        for entry in table:
            b.reg(unit, "S_LUT_ACCESS_DATA", LUT_DATA=int(entry))
    b.reg(unit, "S_LUT_CFG", LUT_LE_FUNCTION=lut.le_function,
          LUT_HYBRID_PRIORITY=lut.hybrid_priority, LUT_UFLOW_PRIORITY=lut.uflow_priority,
          LUT_OFLOW_PRIORITY=lut.oflow_priority)
    if lut.le_function == "EXPONENT":
        b.reg(unit, "S_LUT_INFO", LUT_LE_INDEX_OFFSET=lut.le_index_offset,
              LUT_LO_INDEX_SELECT=lut.lo_index_select)
    else:
        b.reg(unit, "S_LUT_INFO", LUT_LE_INDEX_SELECT=lut.le_index_select,
              LUT_LO_INDEX_SELECT=lut.lo_index_select)
    wide = unit == "CDP"        # CDP starts/ends are 38-bit (LOW word + HIGH[5:0]); SDP's 32-bit
    for name, value in (("LE_START", lut.le_start), ("LE_END", lut.le_end),
                        ("LO_START", lut.lo_start), ("LO_END", lut.lo_end)):
        if wide:
            if not -(1 << 37) <= value < (1 << 37):
                raise NvdlaSimError(f"CDP LUT {name} {value} does not fit 38 bits")
            b.word(unit, f"S_LUT_{name}_LOW", value & 0xFFFFFFFF)
            b.reg(unit, f"S_LUT_{name}_HIGH", **{f"LUT_{name}_HIGH": (value >> 32) & 0x3F})
        else:
            if not -(1 << 31) <= value < (1 << 31):
                raise NvdlaSimError(f"SDP LUT {name} {value} does not fit 32 bits")
            b.word(unit, f"S_LUT_{name}", value)
    for table, uflow, oflow in (("LE", lut.le_uflow, lut.le_oflow),
                                ("LO", lut.lo_uflow, lut.lo_oflow)):
        b.reg(unit, f"S_LUT_{table}_SLOPE_SCALE", **{f"LUT_{table}_SLOPE_UFLOW_SCALE": uflow.scale,
                                                     f"LUT_{table}_SLOPE_OFLOW_SCALE": oflow.scale})
        b.reg(unit, f"S_LUT_{table}_SLOPE_SHIFT", **{f"LUT_{table}_SLOPE_UFLOW_SHIFT": uflow.shift,
                                                     f"LUT_{table}_SLOPE_OFLOW_SHIFT": oflow.shift})


def _int16(values: np.ndarray) -> tuple[int, ...]:
    return tuple(int(v) for v in np.clip(np.rint(values), -(1 << 15), INT16_MAX))


def index_select_for(span: float, entries: int) -> int:
    """Smallest INDEX_SELECT >= 0 with (entries - 1) * 2^select >= span."""
    select = 0
    while (entries - 1) * (1 << select) < span:
        select += 1
    return select


# -- CDP: local response normalisation -------------------------------------------------------
@dataclass(frozen=True)
class LrnLutDesign:
    lut: Lut
    entry_lsb: float         # real value of one unit of a table entry (2^-table_bits; FP16: 1)
    max_square_sum: float


def lrn_lut(local_size: int, alpha: float, beta: float, k: float, in_scale: float,
            max_input: int = 128) -> LrnLutDesign:
    """f(ss) = (k + alpha/n * ss * in_scale^2)^-beta over the integer square sums ss of an INT8
    (or, with max_input 32768, INT16) input (|x| <= max_input) -- the factor LRN multiplies each
    input by.  Both the hand design (`lrn_lut_hand`) and, where the square sums fit the 32-bit
    range `nvdla_sim.lut.fit` takes (INT8), the fitted table are measured on the bit-exact CDP
    kernel (`nvdla_sim.lut.cdp`); the smaller max error (then RMS) wins."""
    return _lrn_best(local_size, float(alpha), float(beta), float(k), float(in_scale),
                     int(max_input))


@lru_cache(maxsize=64)
def _lrn_best(local_size: int, alpha: float, beta: float, k: float, in_scale: float,
              max_input: int) -> LrnLutDesign:
    from ..lut.cdp import measure_cdp_lut
    from ..lut.functions import Function
    hand = lrn_lut_hand(local_size, alpha, beta, k, in_scale, max_input)
    coeff = alpha / local_size * in_scale * in_scale

    def f(ss):
        return np.power(k + coeff * np.asarray(ss, np.float64), -beta)

    name = f"(k + alpha/n ss s^2)^-beta, n={local_size} alpha={alpha:g} beta={beta:g} k={k:g}"
    candidates = [(hand.lut, "LO linear + LE exponent (hand design)")]
    if hand.max_square_sum < (1 << 31) - 1:
        from ..lut.fit import fit
        start = -1.0 if np.isfinite(f(-1.0)) else 0.0   # ss = 0 a hit (see lrn_lut_hand)
        fitted = fit(Function("lrn", name, f), (start, hand.max_square_sum), "int8",
                     FIT_HARDWARE, in_scale=1.0, out_scale=hand.entry_lsb)
        candidates.append((fitted.lut, f"{fitted.design.description} (lut.fit)"))
    measured = [replace(lut, measured=measure_cdp_lut(lut, f, hand.entry_lsb, hand.max_square_sum,
                                                      "LRN", design))
                for lut, design in candidates]
    best = min(measured, key=lambda lut: (lut.measured["max_error"], lut.measured["rms_error"]))
    return LrnLutDesign(best, hand.entry_lsb, hand.max_square_sum)


def lrn_lut_hand(local_size: int, alpha: float, beta: float, k: float, in_scale: float,
                 max_input: int = 128) -> LrnLutDesign:
    """The hand LRN design: LO linear from -1 over every square sum of the input type, LE
    exponent (entry i = f(2^i)) behind it, LO wins when it hits, slopes 0."""
    if k <= 0 and beta > 0:
        raise NvdlaSimError(f"LRN k={k} must be > 0")
    coeff = alpha / local_size * in_scale * in_scale

    def f(ss):
        return np.power(k + coeff * np.asarray(ss, np.float64), -beta)

    max_ss = local_size * max_input * max_input
    f_max = float(max(f(0), f(max_ss)))
    bits = 0
    while bits < 30 and f_max * (1 << (bits + 1)) <= INT16_MAX:
        bits += 1
    scale = float(1 << bits)
    # LO starts at -1: an all-zero window (ReLU zeros, the padding lanes of the last atom) hits
    # the table instead of counting as an underflow in D_PERF_LUT_UFLOW.
    lo_select = index_select_for(max_ss + 1, LO_ENTRIES)
    lo_points = -1.0 + np.arange(LO_ENTRIES, dtype=np.float64) * (1 << lo_select)
    le_points = np.power(2.0, np.arange(LE_ENTRIES, dtype=np.float64))
    lo_values = f(lo_points)
    lo_values = np.where(np.isfinite(lo_values), lo_values, f(0))
    lut = Lut(le_table=_int16(f(le_points) * scale), lo_table=_int16(lo_values * scale),
              le_function="EXPONENT", le_index_offset=0, lo_index_select=lo_select,
              le_start=0, le_end=0, lo_start=-1, lo_end=int(lo_points[-1]),
              uflow_priority="LO", oflow_priority="LE", hybrid_priority="LO")
    return LrnLutDesign(lut, 1.0 / scale, max_ss)


def lrn_lut_fp16(local_size: int, alpha: float, beta: float, k: float,
                 max_abs_input: float) -> LrnLutDesign:
    """f(ss) = (k + alpha/n * ss)^-beta over the FP32 square sums ss of an FP16 input whose
    values stay within +-max_abs_input (the calibrated range; no scales in FP16).

    FP16 tables hold FP16 entries (here as signed int16 bit patterns) and FP32 START/END
    patterns; INDEX_SELECT is a signed 8-bit power of two, so a linear table may step by less
    than 1.  LO spans [0, n * max_abs^2] (rounded up to 256 steps of a power of two); LE is
    linear too, over the first 1/32 of it at 8 times LO's resolution, where f bends most (near
    ss = 0, |f''| is largest).  Both hit: LE; only one: that one; both underflow (ss = 0) or
    overflow (beyond the calibrated range): LO, with slope 0 (f(0), f(LO end))."""
    from ..lut.fit import _fp16_bits, _fp32_register      # one FP16 / FP32 encoding rule
    if k <= 0 and beta > 0:
        raise NvdlaSimError(f"LRN k={k} must be > 0")
    coeff = alpha / local_size

    def f(ss):
        return np.power(k + coeff * np.asarray(ss, np.float64), -beta)

    max_ss = local_size * float(max_abs_input) ** 2
    if not math.isfinite(max_ss) or max_ss <= 0:
        max_ss = 1.0
    lo_select = max(-120, math.ceil(math.log2(max_ss / (LO_ENTRIES - 1))))
    le_select = lo_select - 3
    if lo_select > 120:
        raise NvdlaSimError(f"LRN: square sums up to {max_ss:.6g} do not fit an FP16 table")
    lo_step, le_step = 2.0 ** lo_select, 2.0 ** le_select
    lo_points = np.arange(LO_ENTRIES, dtype=np.float64) * lo_step
    le_points = np.arange(LE_ENTRIES, dtype=np.float64) * le_step

    def table(points):
        return tuple(int(v) for v in _fp16_bits(f(points)))
    lut = Lut(le_table=table(le_points), lo_table=table(lo_points), le_function="LINEAR",
              le_index_select=le_select, lo_index_select=lo_select,
              le_start=0, le_end=_fp32_register(float(le_points[-1])),
              lo_start=0, lo_end=_fp32_register(float(lo_points[-1])),
              uflow_priority="LO", oflow_priority="LO", hybrid_priority="LE")
    from ..lut.cdp import measure_cdp_lut_fp16
    lut = replace(lut, measured=measure_cdp_lut_fp16(
        lut, f, max_ss, "LO linear + LE linear near 0 (FP16 hand design)"))
    return LrnLutDesign(lut, 1.0, max_ss)


# -- SDP: sigmoid and tanh, fitted by nvdla_sim.lut.fit ---------------------------------------
@dataclass(frozen=True)
class ActivationLutDesign:
    lut: Lut
    entry_lsb: float         # real value of one unit of a table entry


# Half-width of the fitted input range: where the function is within 2.5e-7 of its
# asymptote (1/130 of an entry unit), so the fitted under/overflow slopes (its tangent there) round to 0 and inputs
# beyond the range stay on the asymptote (docs/precision.md: measured errors).
ACTIVATIONS: dict[str, float] = {"sigmoid": 16.0, "tanh": 8.0}
FIT_HARDWARE = "nv_large"    # any preset with the SDP LUT: the tables do not depend on it


def activation_lut(function: str, in_scale: float,
                   int_range: tuple[int, int] | None = None) -> ActivationLutDesign:
    """A table for sigmoid/tanh of an int32 SDP value x whose real value is x * in_scale, entries
    in units of 1/32767: `nvdla_sim.lut.fit` over +-ACTIVATIONS[function] (or `int_range`),
    the best of its designs as measured on the bit-exact SDP kernel."""
    if function not in ACTIVATIONS:
        raise NvdlaSimError(f"no LUT design for '{function}' (known: {', '.join(ACTIVATIONS)})")
    if int_range is None:
        half = ACTIVATIONS[function]
        x_range = (-half, half)
    else:
        x_range = (int_range[0] * in_scale, int_range[1] * in_scale)
    return ActivationLutDesign(_fitted(function, float(in_scale), x_range), 1.0 / INT16_MAX)


@lru_cache(maxsize=64)
def _fitted(function: str, in_scale: float, x_range: tuple[float, float]) -> Lut:
    from ..lut.fit import fit
    return fit(function, x_range, "int8", FIT_HARDWARE, in_scale=in_scale,
               out_scale=1.0 / INT16_MAX).lut
