"""Fit the SDP two-level hybrid LUT to a function, measured on the bit-exact SDP kernel.

Units.  INT8 / INT16 pipelines: the LUT input is an integer u whose real value is u * in_scale
(default: the range's largest |x| over the type's largest value, so the INT8 / INT16 cube SDP reads
from memory spans the range); table entries are int16 of real value entry * out_scale (default
max |f| / 32767).  FP16: u and the entries are the real values (FP32 registers, FP16 entries).

Designs (lut-programming document, "2 level" and "hybrid"; every one is measured):
  - LO linear "raw" table over the whole range (257 entries, step 2^LO_INDEX_SELECT), LE unused;
  - LO raw + LE linear "density" table (65 entries, a finer step) where the raw table errs most;
    both hit -> LE (hybrid priority), outside the range both miss -> LO (under/overflow priority);
  - LE exponent "raw" table (entry i at START + 2^(LE_INDEX_OFFSET + i): fine near START, coarse
    far away), alone or with an LO linear density table where it errs most (both hit -> LO).
Entries are f at the nodes (beyond the range, or where f is not finite outside it, the tangent
at the range end).  Under/overflow slopes are f' at the table ends (SCALE / 2^SHIFT in
output units per input unit, SHIFT a signed 5-bit value; FP16: SCALE is f' in FP16), so a value
outside a table continues along the function's tangent.  The design with the smallest measured
max error (then RMS) at the LUT's own resolution wins; the reported errors are those of the
output the layer writes (INT8: through the C converter to int8 of scale out_scale * 32767 / 127,
max|f| / 127 by default).

Every measurement writes the LUT registers exactly as `write_lut` emits them into a register
file, decodes them as the SDP unit does (`units.sdp.sdp_compute`) and runs the kernel, so the
registers handed out reproduce the reported errors.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from ..compiler.emit import IDENTITY, Converter, ProgramBuilder
from ..compiler.lut import LE_ENTRIES, LO_ENTRIES, Lut, Slope, write_lut
from ..config import HardwareConfig, load_hardware
from ..datatype import FP16, INT8, INT16, DataType, from_name, require_supported
from ..errors import NvdlaSimError
from ..precision import converter
from ..program import RegWrite
from ..regs import RegisterFile, register_map
from ..units.lut_memory import LutMemory
from ..units.sdp import sdp_compute
from .functions import Function, parse_function

INT16_MAX = 32767
INT32_MAX = (1 << 31) - 1
FP16_MAX = 65504.0
FP32_MAX_BITS = 0x7F7FFFFF
SLOPE_SHIFT_MIN, SLOPE_SHIFT_MAX = -16, 15       # S_LUT_*_SLOPE_SHIFT: signed 5 bits
INDEX_FIELD = (-128, 127)                         # INDEX_SELECT / INDEX_OFFSET: signed 8 bits
MAX_POINTS = 65537
DENSITY_STEPS = 6                                 # density tables 2^1 .. 2^6 times finer


# -- tables in input units ----------------------------------------------------------------------
@dataclass(frozen=True)
class Table:
    """One table's coverage: linear (node i at start + i * 2^select) or exponent (node i at
    start + 2^(offset + i)); `disabled` tables start beyond every input (always underflow)."""
    entries: int
    start: float
    select: int = 0
    exponent: bool = False
    offset: int = 0
    disabled: bool = False

    def nodes(self) -> np.ndarray:
        i = np.arange(self.entries, dtype=np.float64)
        if self.exponent:
            return self.start + np.exp2(self.offset + i)
        return self.start + i * 2.0 ** self.select

    @property
    def end(self) -> float:
        return float(self.nodes()[-1])


@dataclass(frozen=True)
class Design:
    le: Table
    lo: Table
    uflow_lo: bool
    oflow_lo: bool
    hybrid_lo: bool
    description: str


@dataclass
class Measurement:
    x: np.ndarray               # real inputs
    y: np.ndarray               # real outputs of the layer
    error: np.ndarray           # y - f(x)
    counters: dict

    @property
    def max_error(self) -> float:
        return float(np.max(np.abs(self.error))) if self.error.size else 0.0

    @property
    def rms_error(self) -> float:
        return float(np.sqrt(np.mean(self.error ** 2))) if self.error.size else 0.0


@dataclass
class LutFit:
    """A fitted LUT: its registers (`lut`, written by compiler.lut.write_lut), scales, the output
    converter of the layer and the errors measured by the bit-exact SDP kernel."""
    function: Function
    x_range: tuple[float, float]
    precision: DataType
    hw: HardwareConfig
    design: Design
    lut: Lut
    in_scale: float             # real value of one LUT input unit (1 for FP16)
    out_scale: float            # real value of one unit of a table entry (1 for FP16)
    output_converter: Converter # SDP C converter to the output precision
    output_scale: float         # real value of one unit of the output
    output: Measurement         # what the layer writes, over the range
    lut_only: Measurement       # the LUT's own result (16-bit entries / FP17), over the range
    output_range: float         # max f - min f over the range
    candidates: list[tuple[str, float, float]] = field(default_factory=list)  # (design, max, rms)

    @property
    def unit(self) -> str:
        return "SDP"

    @property
    def max_error(self) -> float:
        return self.output.max_error

    @property
    def rms_error(self) -> float:
        return self.output.rms_error

    @property
    def relative_max_error(self) -> float:
        """Max error as a fraction of the output range."""
        return self.max_error / self.output_range if self.output_range > 0 else math.inf

    @property
    def hit_statistics(self) -> dict[str, int]:
        return dict(self.output.counters)

    def measure(self, x_range: tuple[float, float] | None = None) -> Measurement:
        """The layer's output error over another input range (e.g. beyond the fitted one, to see
        the under/overflow lines), with the same registers."""
        return _measure(self._context(x_range), self.lut, self.precision,
                        self.output_converter, self.output_scale)

    def _context(self, x_range=None) -> "_Context":
        return _Context.make(self.function, x_range or self.x_range, self.precision, self.hw,
                             self.in_scale, self.out_scale)

    # output forms live in nvdla_sim/lut/output.py
    def registers(self) -> dict:
        from .output import registers_dict
        return registers_dict(self)

    def cfg_fragment(self) -> str:
        from .output import cfg_fragment
        return cfg_fragment(self)

    def summary(self) -> str:
        from .output import summary
        return summary(self)

    def write(self, folder) -> dict:
        from .output import write_outputs
        return write_outputs(self, folder)


# -- evaluation context -------------------------------------------------------------------------
def _fp16_grid(lo: float, hi: float) -> np.ndarray:
    every = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    v = every[np.isfinite(every)].astype(np.float64)
    v = np.unique(v[(v >= lo) & (v <= hi)])
    return v


def _subsample(u: np.ndarray) -> np.ndarray:
    if u.size <= MAX_POINTS:
        return u
    pick = np.unique(np.round(np.linspace(0, u.size - 1, MAX_POINTS)).astype(np.int64))
    return u[pick]


@dataclass
class _Context:
    fn: Function
    lo: float
    hi: float
    dtype: DataType
    hw: HardwareConfig
    in_scale: float
    out_scale: float
    u: np.ndarray               # LUT inputs (integers for INT, FP16 values for FP16)
    x: np.ndarray               # their real values
    f: np.ndarray               # f(x)
    k_lo: float                 # f' at the range ends (real units)
    k_hi: float

    @classmethod
    def make(cls, fn: Function, x_range, dtype: DataType, hw: HardwareConfig,
             in_scale: float, out_scale: float) -> "_Context":
        lo, hi = (float(v) for v in x_range)
        if dtype.is_float:
            u = _fp16_grid(lo, hi)
            x = u
        else:
            ulo, uhi = math.ceil(lo / in_scale), math.floor(hi / in_scale)
            if ulo < -INT32_MAX or uhi > INT32_MAX:
                raise NvdlaSimError(f"range [{lo:g}, {hi:g}] at in_scale {in_scale:g} needs LUT "
                                    "inputs beyond 32 bits (raise in_scale)")
            u = _subsample(np.arange(ulo, uhi + 1, dtype=np.float64)) if uhi >= ulo \
                else np.zeros(0)
            x = u * in_scale
        if u.size < 2:
            raise NvdlaSimError(f"range [{lo:g}, {hi:g}] holds fewer than 2 {dtype} LUT inputs "
                                f"(in_scale {in_scale:g})")
        f = fn(x)
        bad = ~np.isfinite(f)
        if bad.any():
            raise NvdlaSimError(f"function '{fn.name}' is not finite at x={x[bad][0]:g} in the "
                                f"range [{lo:g}, {hi:g}]")
        h = (hi - lo) * 1e-6
        k_lo = float((fn(np.array([lo + h]))[0] - fn(np.array([lo]))[0]) / h)
        k_hi = float((fn(np.array([hi]))[0] - fn(np.array([hi - h]))[0]) / h)
        k_lo = k_lo if math.isfinite(k_lo) else 0.0
        k_hi = k_hi if math.isfinite(k_hi) else 0.0
        return cls(fn, lo, hi, dtype, hw, in_scale, out_scale, u, x, f, k_lo, k_hi)

    @property
    def u_lo(self) -> float:
        return float(self.u[0])

    @property
    def u_hi(self) -> float:
        return float(self.u[-1])

    def f_at(self, u: np.ndarray) -> np.ndarray:
        """f at LUT inputs u; outside the range where f is not finite, its tangent at the end."""
        x = np.asarray(u, np.float64) * (1.0 if self.dtype.is_float else self.in_scale)
        y = self.fn(x)
        f_lo, f_hi = self.fn(np.array([self.lo, self.hi]))
        below, above = x < self.lo, x > self.hi
        y = np.where(below & ~np.isfinite(y), f_lo + self.k_lo * (x - self.lo), y)
        y = np.where(above & ~np.isfinite(y), f_hi + self.k_hi * (x - self.hi), y)
        return np.where(np.isfinite(y), y, np.where(x < self.lo, f_lo, f_hi))


# -- registers ----------------------------------------------------------------------------------
def _int16_entries(values: np.ndarray, out_scale: float) -> tuple[int, ...]:
    v = np.asarray(values, np.float64) / out_scale
    q = np.trunc(v + np.copysign(0.5, v))
    return tuple(int(e) for e in np.clip(q, -INT16_MAX - 1, INT16_MAX))


def _fp16_bits(values) -> np.ndarray:
    """FP16 (round to nearest even, saturated to +-65504) bit patterns as signed int16."""
    v = np.clip(np.asarray(values, np.float64), -FP16_MAX, FP16_MAX)
    return v.astype(np.float16).view(np.int16).astype(np.int64)


def _fp32_register(value: float) -> int:
    """An FP32 value's bits as the signed 32-bit register value write_lut takes."""
    bits = int(np.array([value], np.float32).view(np.uint32)[0])
    return bits - (1 << 32) if bits >> 31 else bits


def _fp32_floor(value: float) -> float:
    """The largest FP32 value <= value."""
    v = np.float32(value)
    if float(v) > value:
        v = np.nextafter(v, np.float32(-np.inf))
    return float(v)


def slope_fixed(k: float) -> Slope:
    """Slope k (output units per input unit) as SCALE / 2^SHIFT, SCALE int16, SHIFT in -16..15
    (negative: a left shift), the most precise pair that fits (saturated when none does)."""
    if k == 0 or not math.isfinite(k):
        return Slope(0, 0)
    shift = SLOPE_SHIFT_MAX
    while shift > SLOPE_SHIFT_MIN and abs(round(k * 2.0 ** shift)) > INT16_MAX:
        shift -= 1
    scale = int(np.clip(round(k * 2.0 ** shift), -INT16_MAX - 1, INT16_MAX))
    return Slope(scale, shift)


def _slope(ctx: _Context, k_real: float) -> Slope:
    if ctx.dtype.is_float:
        return Slope(int(_fp16_bits([k_real])[0]), 0)
    return slope_fixed(k_real * ctx.in_scale / ctx.out_scale)


def _table_registers(ctx: _Context, t: Table) -> dict:
    if t.disabled:
        start = end = (_fp32_register(float(np.float32(3.0e38))) if ctx.dtype.is_float
                       else INT32_MAX)
        return {"table": (0,) * t.entries, "start": start, "end": end,
                "uflow": Slope(), "oflow": Slope()}
    nodes = t.nodes()
    values = ctx.f_at(nodes)
    if ctx.dtype.is_float:
        table = tuple(int(v) for v in _fp16_bits(values))
        start, end = _fp32_register(t.start), _fp32_register(float(np.float32(t.end)))
    else:
        table = _int16_entries(values, ctx.out_scale)
        start, end = int(t.start), int(min(t.end, INT32_MAX))
        if start < -INT32_MAX - 1:
            raise NvdlaSimError(f"LUT start {start} does not fit the 32-bit register")
    # Slopes: the tangent at the table ends, clamped to the fitted range.
    x_start = min(max(nodes[0], ctx.u_lo), ctx.u_hi)
    x_end = min(max(nodes[-1], ctx.u_lo), ctx.u_hi)
    k = _slopes_at(ctx, x_start, x_end)
    return {"table": table, "start": start, "end": end,
            "uflow": _slope(ctx, k[0]), "oflow": _slope(ctx, k[1])}


def _slopes_at(ctx: _Context, u0: float, u1: float) -> tuple[float, float]:
    if u0 <= ctx.u_lo:
        k0 = ctx.k_lo
    else:
        k0 = _derivative(ctx, u0)
    if u1 >= ctx.u_hi:
        k1 = ctx.k_hi
    else:
        k1 = _derivative(ctx, u1)
    return k0, k1


def _derivative(ctx: _Context, u: float) -> float:
    x = u * (1.0 if ctx.dtype.is_float else ctx.in_scale)
    h = (ctx.hi - ctx.lo) * 1e-6
    d = (ctx.fn(np.array([x + h]))[0] - ctx.fn(np.array([x - h]))[0]) / (2 * h)
    return float(d) if math.isfinite(d) else 0.0


def build_lut(ctx: _Context, design: Design) -> Lut:
    le = _table_registers(ctx, design.le)
    lo = _table_registers(ctx, design.lo)
    pri = {True: "LO", False: "LE"}
    return Lut(le_table=le["table"], lo_table=lo["table"],
               le_function="EXPONENT" if design.le.exponent else "LINEAR",
               le_index_offset=design.le.offset if design.le.exponent else 0,
               le_index_select=0 if design.le.exponent else design.le.select,
               lo_index_select=design.lo.select,
               le_start=le["start"], le_end=le["end"], lo_start=lo["start"], lo_end=lo["end"],
               le_uflow=le["uflow"], le_oflow=le["oflow"], lo_uflow=lo["uflow"],
               lo_oflow=lo["oflow"], uflow_priority=pri[design.uflow_lo],
               oflow_priority=pri[design.oflow_lo], hybrid_priority=pri[design.hybrid_lo])


def layer_registers(hw: HardwareConfig, lut: Lut, proc: DataType, out: DataType,
                    cvt: Converter) -> list[RegWrite]:
    """The LUT writes (write_lut) and an SDP register group whose only active stage is the LUT:
    X1/X2 bypassed, Y with only the LUT, C converter `cvt`."""
    b = ProgramBuilder(hw, "lut", images=False)
    write_lut(b, "SDP", lut)
    for stage in ("BS", "BN"):
        b.reg("SDP", f"D_DP_{stage}_CFG", **{f"{stage}_BYPASS": "YES",
                                             f"{stage}_ALU_BYPASS": "YES",
                                             f"{stage}_MUL_BYPASS": "YES",
                                             f"{stage}_RELU_BYPASS": "YES"})
    b.reg("SDP", "D_DP_EW_CFG", EW_BYPASS="NO", EW_ALU_BYPASS="YES", EW_MUL_BYPASS="YES",
          EW_LUT_BYPASS="NO")
    b.reg("SDP", "D_DATA_FORMAT", PROC_PRECISION=proc.name, OUT_PRECISION=out.name)
    b.word("SDP", "D_CVT_OFFSET", cvt.offset)
    b.reg("SDP", "D_CVT_SCALE", CVT_SCALE=cvt.scale)
    b.reg("SDP", "D_CVT_SHIFT", CVT_SHIFT=cvt.shift)
    return [c for c in b.commands if isinstance(c, RegWrite)]


def run_registers(hw: HardwareConfig, writes: list[RegWrite], x: np.ndarray):
    """Apply register writes to a fresh SDP (its LUT memory hooked) and run group 0 over the
    cube `x`; returns units.sdp.SdpResult."""
    rmap = register_map(hw.nvdla_version)
    rf = RegisterFile(rmap)
    memory = LutMemory(rmap.units["SDP"]).install(rf["SDP"])
    for w in writes:
        rf.write(w.addr, w.value)
    return sdp_compute(rf["SDP"].view(0), x, None, memory)


def _measure(ctx: _Context, lut: Lut, out_type: DataType, cvt: Converter,
             output_scale: float) -> Measurement:
    writes = layer_registers(ctx.hw, lut, ctx.dtype, out_type, cvt)
    if ctx.dtype.is_float:
        cube = ctx.u.astype(np.float16).reshape(1, 1, -1)
    else:
        cube = ctx.u.astype(np.int32).reshape(1, 1, -1)
    result = run_registers(ctx.hw, writes, cube)
    y = result.output.reshape(-1).astype(np.float64) * output_scale
    return Measurement(ctx.x, y, y - ctx.f, result.counters)


def _lut_resolution(ctx: _Context) -> tuple[DataType, float]:
    """Output type and scale that show the LUT's result unconverted."""
    return (FP16, 1.0) if ctx.dtype.is_float else (INT16, ctx.out_scale)


# -- designs ------------------------------------------------------------------------------------
def _linear_select(ctx: _Context, span: float, entries: int) -> int:
    """Smallest select with (entries - 1) * 2^select >= span (>= 0 for integer inputs)."""
    sel = math.ceil(math.log2(span / (entries - 1))) if span > 0 else 0
    if not ctx.dtype.is_float:
        sel = max(sel, 0)
    return int(min(max(sel, INDEX_FIELD[0]), INDEX_FIELD[1]))


def _start(ctx: _Context, value: float) -> float:
    return _fp32_floor(value) if ctx.dtype.is_float else float(math.floor(value))


def _disabled(ctx: _Context, entries: int) -> Table:
    return Table(entries, 0.0, disabled=True)


def _raw_designs(ctx: _Context) -> list[Design]:
    span = ctx.u_hi - ctx.u_lo
    lo_raw = Table(LO_ENTRIES, _start(ctx, ctx.u_lo), _linear_select(ctx, span, LO_ENTRIES))
    designs = [Design(_disabled(ctx, LE_ENTRIES), lo_raw, True, True, True,
                      "LO linear raw table")]
    # LE exponent raw: octaves of (u - start); integer inputs start one below the range
    if ctx.dtype.is_float:
        start = _start(ctx, ctx.u_lo)
        top = math.ceil(math.log2(max(ctx.u_hi - start, 2.0 ** -100)))
        offset = top - (LE_ENTRIES - 1)
    else:
        start = float(ctx.u_lo - 1)
        offset = 0
    offset = int(min(max(offset, INDEX_FIELD[0]), INDEX_FIELD[1]))
    le_exp = Table(LE_ENTRIES, start, exponent=True, offset=offset)
    designs.append(Design(le_exp, _disabled(ctx, LO_ENTRIES), False, False, False,
                          "LE exponent raw table"))
    return designs


def _density_windows(ctx: _Context, error: np.ndarray, width: float) -> list[float]:
    """Start points of a density table `width` wide: over the largest squared error, and
    centred on the largest error; kept inside the range."""
    u = ctx.u
    e2 = np.concatenate([[0.0], np.cumsum(error ** 2)])
    j = np.searchsorted(u, u + width, side="right")
    best = int(np.argmax(e2[j] - e2[np.arange(u.size)]))
    peak = float(u[int(np.argmax(np.abs(error)))])
    starts = []
    for s in (float(u[best]), peak - width / 2):
        s = min(max(s, ctx.u_lo), ctx.u_hi - width)
        if not ctx.dtype.is_float:
            s -= 1                              # u == START underflows: start one below
        s = _start(ctx, s)
        if s not in starts:
            starts.append(s)
    return starts


def _density_designs(ctx: _Context, raw: Design, error: np.ndarray) -> list[Design]:
    span = ctx.u_hi - ctx.u_lo
    out = []
    if not raw.le.disabled and raw.le.exponent:
        # LE exponent raw + LO linear density (both hit -> LO)
        base = _linear_select(ctx, span, LO_ENTRIES)
        for sel in range(base - 1, base - 1 - DENSITY_STEPS, -1):
            if sel < INDEX_FIELD[0] or (sel < 0 and not ctx.dtype.is_float):
                break
            width = (LO_ENTRIES - 1) * 2.0 ** sel
            for s in _density_windows(ctx, error, width):
                out.append(Design(raw.le, Table(LO_ENTRIES, s, sel), False, False, True,
                                  f"LE exponent raw + LO linear density (step 2^{sel})"))
    elif not raw.lo.disabled:
        # LO linear raw + LE linear density (both hit -> LE)
        for sel in range(raw.lo.select - 1, raw.lo.select - 1 - DENSITY_STEPS, -1):
            if sel < INDEX_FIELD[0] or (sel < 0 and not ctx.dtype.is_float):
                break
            width = (LE_ENTRIES - 1) * 2.0 ** sel
            if width >= span:
                continue
            for s in _density_windows(ctx, error, width):
                out.append(Design(Table(LE_ENTRIES, s, sel), raw.lo, True, True, False,
                                  f"LO linear raw + LE linear density (step 2^{sel})"))
    return out


def _check_hardware(hw: HardwareConfig, dtype: DataType) -> None:
    require_supported(dtype, hw.data_types, hw.name, "precision")
    if not hw.sdp.lut:
        raise NvdlaSimError(f"{hw.name} has no SDP lookup table")


def fit(function: str | Function, x_range: tuple[float, float], precision: str | DataType = "int8",
        hw: str | HardwareConfig = "nv_large", in_scale: float | None = None,
        out_scale: float | None = None, designs: str = "auto") -> LutFit:
    """Program the SDP LUT for `function` over `x_range` as accurately as the hardware allows.

    `function`: sigmoid, tanh, exp, rsqrt or a numpy expression of x; `precision` int8, int16 or
    fp16 (the SDP processing and output precision; the hardware must support it); `in_scale` /
    `out_scale`: real value of one LUT input / entry unit (INT only; defaults in the module doc);
    `designs`: "auto" (every design, the best measured wins), "linear" (LO raw, with or without an
    LE density table) or "exponent" (LE exponent raw, with or without an LO density table).
    """
    fn = function if isinstance(function, Function) else parse_function(function)
    dtype = precision if isinstance(precision, DataType) else from_name(precision)
    hw = hw if isinstance(hw, HardwareConfig) else load_hardware(hw)
    _check_hardware(hw, dtype)
    try:
        lo, hi = (float(v) for v in x_range)
    except (TypeError, ValueError):
        raise NvdlaSimError(f"range {x_range!r}: give two numbers LOW HIGH") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise NvdlaSimError(f"range [{lo:g}, {hi:g}]: LOW must be below HIGH, both finite")
    if designs not in ("auto", "linear", "exponent"):
        raise NvdlaSimError(f"designs '{designs}': one of auto, linear, exponent")
    if dtype.is_float:
        if in_scale not in (None, 1.0) or out_scale not in (None, 1.0):
            raise NvdlaSimError("FP16 LUTs take real values: in_scale and out_scale are 1")
        in_scale = out_scale = 1.0
    elif in_scale is None:
        in_scale = max(abs(lo), abs(hi)) / dtype.integer_range()[1]
    if not (in_scale > 0 and math.isfinite(in_scale)):
        raise NvdlaSimError(f"in_scale {in_scale}: must be a positive number")
    ctx = _Context.make(fn, (lo, hi), dtype, hw, in_scale, 1.0)
    f_max = float(np.max(np.abs(ctx.f)))
    if out_scale is None:
        out_scale = (f_max if f_max > 0 else 1.0) / INT16_MAX
    if not (out_scale > 0 and math.isfinite(out_scale)):
        raise NvdlaSimError(f"out_scale {out_scale}: must be a positive number")
    ctx.out_scale = 1.0 if dtype.is_float else out_scale

    res_type, res_scale = _lut_resolution(ctx)
    tried: list[tuple[Design, Lut, Measurement]] = []

    def attempt(design: Design) -> Measurement:
        lut = build_lut(ctx, design)
        m = _measure(ctx, lut, res_type, IDENTITY, res_scale)
        tried.append((design, lut, m))
        return m

    for raw in _raw_designs(ctx):
        if designs == "linear" and raw.le.exponent or designs == "exponent" and not raw.le.exponent:
            continue
        m = attempt(raw)
        for dense in _density_designs(ctx, raw, m.error):
            attempt(dense)
    design, lut, lut_m = min(tried, key=lambda t: (t[2].max_error, t[2].rms_error))

    lut = replace(lut, measured={"function": fn.name, "range": (lo, hi),
                                 "max_error": lut_m.max_error, "rms_error": lut_m.rms_error,
                                 "design": design.description})
    cvt, output_scale = _output_converter(ctx)
    out_m = _measure(ctx, lut, dtype, cvt, output_scale)
    return LutFit(fn, (lo, hi), dtype, hw, design, lut, ctx.in_scale, ctx.out_scale, cvt,
                  output_scale, out_m, lut_m, float(np.max(ctx.f) - np.min(ctx.f)),
                  [(d.description, m.max_error, m.rms_error) for d, _, m in tried])


def _output_converter(ctx: _Context) -> tuple[Converter, float]:
    """SDP C converter from table units to the output type: INT8 keeps the entries' range
    (output unit out_scale * 32767 / 127, i.e. max|f| / 127 by default)."""
    if ctx.dtype.is_float or ctx.dtype == INT16:
        return IDENTITY, ctx.out_scale
    ratio = INT8.integer_range()[1] / INT16_MAX
    s = converter(ratio, scale_bits=16, shift_bits=6, out_bits=8)
    return Converter(s.offset, s.scale, s.shift), ctx.out_scale / ratio
