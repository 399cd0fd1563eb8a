"""Convertor / truncate / shifter calculator (the precision-preservation document).

From the float scales of a layer's input, weights and output (a tensor holds integers q with real
value scale * q), compute the register settings of NVDLA's precision-control stages, the error
they add and whether they saturate:

  convertor  y = sat(round((x - offset) * scale / 2^shift))   offset/scale signed, shift unsigned
  truncate   y = sat(round(x / 2^t))                            (CACC CLIP_TRUNCATE, EW_TRUNCATE)
  shifter    y = sat(x << s)                                    (SDP X ALU operand shift)
Rounding is half away from zero everywhere.  Field widths come from the register map:

  CDMA input convertor   D_CVT_OFFSET 16, D_CVT_SCALE 16, D_CVT_CFG.CVT_TRUNCATE 6 bits
  CACC truncate          D_CLIP_CFG.CLIP_TRUNCATE 5 bits
  SDP X1/X2 (BS/BN)      ALU operand 16 bits << ALU_SHIFT_VALUE (6 bits); MUL operand 16 bits,
                         MUL_SHIFT_VALUE (6 bits used)
  SDP EW operand cvt     EW_*_CVT_OFFSET 32, EW_*_CVT_SCALE 16, EW_*_CVT_TRUNCATE 6 bits
  SDP output convertor   D_CVT_OFFSET 32, D_CVT_SCALE 16, D_CVT_SHIFT 6 bits
  CDP convertors         DATIN offset 16 / scale 16 / shifter 5 bits; LUT entries 16 bits (no
                         offset); DATOUT offset 32 / scale 16 / shifter 6 bits

A multiplier r is held as scale / 2^shift with the largest shift whose scale still fits, i.e.
at least 14 significant bits when r is representable at all (one rule, with the field widths as
parameters, that every stage and the compiler share).  The
expected quantisation error of a stage is its output rounding (RMS 1/sqrt(12) LSB, at most 0.5)
plus the multiplier's relative error times the largest output.  A warning names every setting
that saturates the largest expected input or cannot represent the ratio.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .datatype import INT8, INT16, DataType
from .errors import NvdlaSimError

ROUNDING_RMS_LSB = 1.0 / math.sqrt(12.0)


def _signed_max(bits: int) -> int:
    return (1 << (bits - 1)) - 1


@dataclass(frozen=True)
class Setting:
    """One convertor / truncate / shifter: its register values and what they cost."""
    name: str                          # e.g. "SDP output convertor"
    registers: dict[str, int]          # UNIT.REGISTER.FIELD -> value
    ratio: float = 1.0                 # the real multiplier asked for (output LSB per input LSB)
    achieved: float = 1.0              # what the registers give
    offset: int = 0
    scale: int = 1
    shift: int = 0
    out_bits: int = 32
    max_output: float | None = None    # largest |output| expected (output LSB), if known
    warnings: tuple[str, ...] = ()

    @property
    def relative_error(self) -> float:
        return self.achieved / self.ratio - 1.0 if self.ratio else 0.0

    @property
    def rms_error_lsb(self) -> float:
        """Expected RMS error of the output in output LSB (rounding + multiplier mismatch over a
        uniform output distribution up to max_output)."""
        mismatch = abs(self.relative_error) * (self.max_output or 0.0) / math.sqrt(3.0)
        return math.sqrt(ROUNDING_RMS_LSB ** 2 + mismatch ** 2)

    @property
    def max_error_lsb(self) -> float:
        return 0.5 + abs(self.relative_error) * (self.max_output or 0.0)

    def describe(self) -> str:
        regs = ", ".join(f"{k}={v}" for k, v in self.registers.items())
        text = (f"{self.name}: {regs}  (ratio {self.ratio:.6g}, achieved {self.achieved:.6g}, "
                f"rel {self.relative_error:+.2e}, error rms {self.rms_error_lsb:.3f} / max "
                f"{self.max_error_lsb:.3f} LSB)")
        return text + "".join(f"\n  warning: {w}" for w in self.warnings)


def fixed_point(ratio: float, scale_bits: int = 16, shift_bits: int = 6,
                max_shift: int | None = None) -> tuple[int, int, bool]:
    """(scale, shift, fits): scale / 2^shift closest to `ratio` with |scale| < 2^(scale_bits-1)
    and 0 <= shift <= max_shift (default 2^shift_bits - 1), the largest shift that fits.  When
    even shift 0 cannot hold it, scale saturates and fits is False."""
    if not math.isfinite(ratio):
        raise NvdlaSimError(f"multiplier {ratio}: not a finite number")
    limit = _signed_max(scale_bits)
    top = (1 << shift_bits) - 1 if max_shift is None else max_shift
    if ratio == 0:
        return 0, 0, True
    if abs(ratio) > limit + 0.5:
        return int(math.copysign(limit, ratio)), 0, False
    shift = 0
    while shift < top and abs(round(ratio * 2.0 ** (shift + 1))) <= limit:
        shift += 1
    scale = int(round(ratio * 2.0 ** shift))
    return scale, shift, scale != 0 or ratio == 0


def converter(ratio: float, *, offset: int = 0, scale_bits: int = 16, shift_bits: int = 6,
              offset_bits: int = 32, out_bits: int = 8, max_input: float | None = None,
              name: str = "convertor", fields: tuple[str, str, str] = ("OFFSET", "SCALE", "SHIFT")
              ) -> Setting:
    """A convertor y = sat_out(round((x - offset) * scale / 2^shift)) for y ~ (x - offset) * ratio;
    `max_input` (largest |x - offset|) enables the saturation check."""
    warnings = []
    if not -(1 << (offset_bits - 1)) <= offset <= _signed_max(offset_bits):
        raise NvdlaSimError(f"{name}: offset {offset} does not fit {offset_bits} bits")
    if abs(ratio - 1.0) < 1e-12:
        scale, shift, fits = 1, 0, True          # the identity, as the compiler writes it
    else:
        scale, shift, fits = fixed_point(ratio, scale_bits, shift_bits)
    if not fits:
        warnings.append(f"ratio {ratio:.6g} is outside what a {scale_bits}-bit scale and "
                        f"{shift_bits}-bit shift can hold (scale {scale}, shift {shift})")
    achieved = scale / 2.0 ** shift
    max_out = None
    if max_input is not None:
        max_out = abs(max_input) * abs(achieved)
        if max_out > _signed_max(out_bits) + 0.5:
            warnings.append(f"saturates: |input| up to {max_input:.6g} gives |output| "
                            f"{max_out:.6g} > {_signed_max(out_bits)} ({out_bits} bits)")
    regs = dict(zip(fields, (offset, scale, shift)))
    return Setting(name, regs, ratio, achieved, offset, scale, shift, out_bits, max_out,
                   tuple(warnings))


def truncate_for(max_abs: float, out_bits: int, field_bits: int = 5, name: str = "truncate"
                 ) -> Setting:
    """The smallest right shift t with max_abs / 2^t < 2^(out_bits - 1): |x| <= max_abs then
    fits out_bits signed bits (a result rounding up to 2^(out_bits-1) saturates by one)."""
    limit = _signed_max(out_bits)
    t = 0
    while max_abs / 2.0 ** t >= limit + 1 and t < (1 << field_bits) - 1:
        t += 1
    warnings = ()
    if max_abs / 2.0 ** t >= limit + 1:
        warnings = (f"saturates: |x| up to {max_abs:.6g} exceeds {out_bits} bits even after the "
                    f"largest truncation {t}",)
    return Setting(name, {"TRUNCATE": t}, 2.0 ** -t, 2.0 ** -t, 0, 1, t, out_bits,
                   max_abs / 2.0 ** t, warnings)


def shifted_operand(values, operand_bits: int = 16, shift_bits: int = 6,
                    name: str = "operand") -> tuple[np.ndarray, Setting]:
    """Integers v and one left shift a with v * 2^a ~ values (X ALU operand << ALU_SHIFT): the
    smallest a for which the largest |value| fits `operand_bits`."""
    v = np.atleast_1d(np.asarray(values, np.float64))
    limit = _signed_max(operand_bits)
    top = float(np.max(np.abs(v))) if v.size else 0.0
    a = 0
    while top / 2.0 ** a > limit and a < (1 << shift_bits) - 1:
        a += 1
    q = v / 2.0 ** a
    ops = np.clip(np.trunc(q + np.copysign(0.5, q)), -limit - 1, limit).astype(np.int64)
    err = float(np.max(np.abs(ops * 2.0 ** a - v))) if v.size else 0.0
    warnings = ()
    if top / 2.0 ** a > limit:
        warnings = (f"saturates: operand {top:.6g} does not fit {operand_bits} bits << {a}",)
    s = Setting(name, {"SHIFT": a}, 1.0, 1.0, 0, 1, a, operand_bits, top / 2.0 ** a, warnings)
    return ops, s


def shared_multiplier(ratios, scale_bits: int = 16, shift_bits: int = 6,
                      name: str = "multiplier") -> tuple[np.ndarray, Setting]:
    """Per-kernel integer multipliers m and one shift n with m / 2^n ~ ratios (SDP X MUL operand
    and MUL_SHIFT): n is the largest shift for which the largest ratio still fits."""
    r = np.atleast_1d(np.asarray(ratios, np.float64))
    top = float(np.max(np.abs(r))) if r.size else 0.0
    if top == 0:
        return np.zeros(r.shape, np.int64), Setting(name, {"SHIFT": 0}, 0.0, 0.0, 0, 0, 0)
    scale, n, fits = fixed_point(top, scale_bits, shift_bits)
    q = r * 2.0 ** n
    m = np.trunc(q + np.copysign(0.5, q)).astype(np.int64)
    rel = np.abs(m / 2.0 ** n / np.where(r == 0, 1, r) - 1)
    rel = np.where(r == 0, 0, rel)
    worst = int(np.argmax(rel))
    warnings = () if fits else (f"ratio {top:.6g} does not fit a {scale_bits}-bit multiplier",)
    return m, Setting(name, {"SHIFT": n}, float(r[worst]), float(m[worst] / 2.0 ** n), 0,
                      int(m[worst]), n, 32, None, warnings)


# -- the layer-level calculators of the document ------------------------------------------------
def _bits(dtype: DataType) -> int:
    return 8 * dtype.bytes


def cdma_input_converter(pixel_scale: float, in_scale: float, mean: float = 0.0,
                         dtype: DataType = INT8, max_pixel: int = 255) -> Setting:
    """CDMA image convertor (cc_cvt): pixel codes p (real value p * pixel_scale) minus the mean
    code, to the feature type of scale `in_scale` (D_CVT_OFFSET / SCALE / CVT_TRUNCATE)."""
    offset = int(round(mean))
    return converter(pixel_scale / in_scale, offset=offset, scale_bits=16, shift_bits=6,
                     offset_bits=16, out_bits=_bits(dtype),
                     max_input=max(abs(max_pixel - offset), abs(offset)),
                     name="CDMA input convertor",
                     fields=("CDMA.D_CVT_OFFSET", "CDMA.D_CVT_SCALE", "CDMA.D_CVT_CFG.CVT_TRUNCATE"))


def cacc_truncate(weight_abs_sum: float, dtype: DataType = INT8) -> Setting:
    """CACC CLIP_TRUNCATE (cc_out_trunc): the smallest t such that the largest accumulator,
    Q * max_k sum|q_w[k]| (Q = the type's largest input), fits the 32-bit SDP input."""
    q = dtype.integer_range()[1]
    s = truncate_for(q * float(weight_abs_sum), 32, 5, "CACC truncate")
    return Setting(s.name, {"CACC.D_CLIP_CFG.CLIP_TRUNCATE": s.shift}, s.ratio, s.achieved, 0, 1,
                   s.shift, 32, s.max_output, s.warnings)


def sdp_output_converter(units: float, out_scale: float, dtype: DataType = INT8,
                         max_abs_real: float | None = None, offset: int = 0) -> Setting:
    """SDP C convertor: a value in `units` (real value of one LSB) to the output type of scale
    `out_scale` (D_CVT_OFFSET / D_CVT_SCALE / D_CVT_SHIFT)."""
    if dtype.is_float:
        return Setting("SDP output convertor (FP16: none)", {}, 1.0, 1.0, out_bits=16)
    max_in = None if max_abs_real is None else max_abs_real / units
    return converter(units / out_scale, offset=offset, scale_bits=16, shift_bits=6,
                     offset_bits=32, out_bits=_bits(dtype), max_input=max_in,
                     name="SDP output convertor",
                     fields=("SDP.D_CVT_OFFSET", "SDP.D_CVT_SCALE", "SDP.D_CVT_SHIFT"))


def sdp_bias(bias, units) -> tuple[np.ndarray, Setting]:
    """BS ALU operand and shifter (bs_cvt + bs_shifter): int16 b and ALU_SHIFT a with
    b * 2^a = bias / units (SF_bs * 2^bs_shift = the convolution's units)."""
    ops, s = shifted_operand(np.asarray(bias, np.float64) / np.asarray(units, np.float64),
                             16, 6, "SDP BS bias shifter")
    return ops, Setting(s.name, {"SDP.D_DP_BS_ALU_CFG.BS_ALU_SHIFT_VALUE": s.shift}, 1.0, 1.0,
                        0, 1, s.shift, 16, s.max_output, s.warnings)


def sdp_multiplier(units_in, units_out: float, stage: str = "BS") -> tuple[np.ndarray, Setting]:
    """X1/X2 MUL operand(s) and MUL_SHIFT bringing per-kernel units_in to units_out."""
    m, s = shared_multiplier(np.asarray(units_in, np.float64) / units_out, 16, 6,
                             f"SDP {stage} multiplier")
    return m, Setting(s.name, {f"SDP.D_DP_{stage}_MUL_CFG.{stage}_MUL_SHIFT_VALUE": s.shift},
                      s.ratio, s.achieved, 0, s.scale, s.shift, 32, None, s.warnings)


def sdp_bn_mean(mean, units) -> tuple[np.ndarray, Setting]:
    """BN mean operand (bn_m_cvt + bn_m_shifter): int16 m and BN_ALU_SHIFT with
    m * 2^shift = -mean / units (SF_in = SF_bn_m_cvt * 2^bn_m_shifter)."""
    ops, s = shifted_operand(-np.asarray(mean, np.float64) / np.asarray(units, np.float64),
                             16, 6, "SDP BN mean shifter")
    return ops, Setting(s.name, {"SDP.D_DP_BN_ALU_CFG.BN_ALU_SHIFT_VALUE": s.shift}, 1.0, 1.0,
                        0, 1, s.shift, 16, s.max_output, s.warnings)


def sdp_ew_operand_converter(operand_scale: float, units: float, operation: str = "sum",
                             operand_offset: int = 0, max_operand: int = 127,
                             part: str = "ALU") -> Setting:
    """EW memory-operand convertor (ew_cvt): an operand tensor (integers of scale
    `operand_scale`, zero at `operand_offset`) brought to the pipeline's `units` for SUM / MAX /
    MIN (same scale; MAX / MIN also need the same offset, i.e. the offset removed here) or PROD
    (the offset must be 0 after conversion; the product's scale is then units * operand units)."""
    if operation not in ("sum", "max", "min", "prod"):
        raise NvdlaSimError(f"EW operation '{operation}': one of sum, max, min, prod")
    ratio = operand_scale / units
    s = converter(ratio, offset=operand_offset, scale_bits=16, shift_bits=6, offset_bits=32,
                  out_bits=32, max_input=max_operand + abs(operand_offset),
                  name=f"SDP EW {part} operand convertor ({operation})",
                  fields=(f"SDP.D_DP_EW_{part}_CVT_OFFSET_VALUE",
                          f"SDP.D_DP_EW_{part}_CVT_SCALE_VALUE",
                          f"SDP.D_DP_EW_{part}_CVT_TRUNCATE_VALUE"))
    return s


def cdp_converters(in_scale: float, out_scale: float, lut_entry_scale: float, m: int,
                   dtype: DataType = INT8, max_lut_input: float | None = None) -> list[Setting]:
    """CDP convertors: cdp_in_cvt makes the LUT input x * 2^M (DATIN: ratio in_scale * 2^M,
    offset 0 for symmetric data), cdp_lut_cvt is the LUT entry scale (no offset; reported), and
    cdp_out_cvt brings LUT * input (real value per LSB lut_entry_scale * 2^-M) to `out_scale`
    (DATOUT)."""
    bits = _bits(dtype)
    q = dtype.integer_range()[1]
    cin = converter(in_scale * 2.0 ** m, scale_bits=16, shift_bits=5, offset_bits=16,
                    out_bits=bits + 1, max_input=q, name="CDP input convertor",
                    fields=("CDP.D_DATIN_OFFSET", "CDP.D_DATIN_SCALE", "CDP.D_DATIN_SHIFTER"))
    lut = Setting("CDP LUT entries (cdp_lut_cvt)", {"entry_scale": lut_entry_scale},
                  out_bits=16, max_output=max_lut_input)
    cout = converter(lut_entry_scale * 2.0 ** -m / out_scale, scale_bits=16, shift_bits=6,
                     offset_bits=32, out_bits=bits, name="CDP output convertor",
                     fields=("CDP.D_DATOUT_OFFSET", "CDP.D_DATOUT_SCALE", "CDP.D_DATOUT_SHIFTER"))
    return [cin, lut, cout]


@dataclass
class ConvPrecision:
    """Every precision setting of a convolution layer (CACC -> SDP X1 -> SDP C)."""
    settings: list[Setting]
    units: list[float]                 # real value of one LSB after CACC, X1, C
    bias_operands: np.ndarray | None = field(default=None, repr=False)
    multipliers: np.ndarray | None = field(default=None, repr=False)

    @property
    def warnings(self) -> list[str]:
        return [f"{s.name}: {w}" for s in self.settings for w in s.warnings]

    def describe(self) -> str:
        return "\n".join(s.describe() for s in self.settings)


def conv_layer(in_scale: float, weight_scale, out_scale: float, weight_abs_sum,
               bias=None, dtype: DataType = INT8, max_abs_output: float | None = None,
               x1_target: float | None = None) -> ConvPrecision:
    """Settings of a convolution from float scales: input scale s_x, per-kernel (or one) weight
    scale s_w, output scale s_y; weight_abs_sum = per-kernel sum |q_w| of the quantised weights.
    CACC truncates by t (units u0 = s_x * s_w * 2^t), X1 adds the bias (int16 << ALU_SHIFT) and
    multiplies to x1_target (default s_y: the C convertor is then the identity), C converts to
    s_y."""
    if dtype.is_float:
        return ConvPrecision([Setting("FP16: no convertors", {}, out_bits=16)], [1.0, 1.0, 1.0])
    for name, v in (("in_scale", in_scale), ("out_scale", out_scale)):
        if not (v > 0 and math.isfinite(v)):
            raise NvdlaSimError(f"{name} {v}: must be a positive number")
    s_w = np.atleast_1d(np.asarray(weight_scale, np.float64))
    if np.any(s_w <= 0) or not np.all(np.isfinite(s_w)):
        raise NvdlaSimError("weight_scale: every scale must be a positive number")
    trunc = cacc_truncate(float(np.max(weight_abs_sum)), dtype)
    u0 = in_scale * s_w * 2.0 ** trunc.shift
    settings = [trunc]
    bias_ops = None
    if bias is not None:
        bias_ops, bs = sdp_bias(bias, u0)
        settings.append(bs)
    target = out_scale if x1_target is None else x1_target
    mult, ms = sdp_multiplier(u0, target, "BS")
    settings.append(ms)
    out = sdp_output_converter(target, out_scale, dtype, max_abs_output)
    settings.append(out)
    return ConvPrecision(settings, [float(np.max(u0)), target, out_scale], bias_ops, mult)


INT_TYPES = (INT8, INT16)
