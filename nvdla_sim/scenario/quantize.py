"""Quantisation: per-tensor scales calibrated on the input, and every hardware layer's parameters
expressed as what the NVDLA datapath can do, in the plan's precision (`HwPlan.dtype`).

INT8 and INT16 are the same integer scheme with Q = 127 or 32767 (the type's largest value); FP16
needs no calibration (`_FloatLayers` at the end): weights, activations and the SDP's bias, PReLU
and affine operands are converted to FP16 (round to nearest even, saturating at +-65504), the
output converter is the identity and every tensor's scale is 1.

Notation: a tensor T holds integers q_T with real value s_T * q_T (symmetric, s_T = amax_T / Q
where amax_T is the largest |value| of T in the float reference run on the scenario's input, or a
percentile of |T|).  Tensors that the DLA cannot rescale between share one scale: a pooling's input
and output (PDP has no output scaling), a concatenation and its inputs (address placement), and a
flatten and its source.

Convolution layer (CDMA -> CMAC -> CACC -> SDP), input scale s_x:
  weights      q_w[k] = round(w[k] / s_w[k]),  s_w[k] = max|w[k]| / Q (per kernel) or one s_w for
               the whole layer (`per_tensor`)
  CACC         acc = sat32(round(sum q_x*q_w / 2^t)), CLIP_TRUNCATE t = the smallest shift for which
               Q * max_k sum|q_w[k]| fits 31 bits (0 for every built-in network in INT8)
               -> units u0[k] = s_x * s_w[k] * 2^t
  SDP X1 (BS)  ALU  SUM, per-kernel int16 operand b16[k] shifted left by ALU_SHIFT a:
                    b16[k] * 2^a = round(bias[k] / u0[k])
               MUL  per-kernel int16 m[k] (or one register value), MUL_SHIFT n:
                    m[k] / 2^n = u0[k] / u1, then ReLU if fused
  SDP X2 (BN)  element-wise add/max/min: per-element operand q_T (int8 from memory) << ALU_SHIFT F,
                    which is why X1 targets u1 = s_T / 2^F;  then MUL m2 / 2^n2 = u1 / u2 (register)
               PReLU: MUL_PRELU, per-kernel slope16[k] / 2^n = slope[k] (positive values pass);
               element-wise product: MUL by q_T, then >> n2 (u2 = u1 * s_T * 2^n2);
               affine (a batch norm that could not be folded): ALU per-kernel round(b/(u1*sc)),
                    MUL per-kernel u1*sc/u2
  SDP Y (EW)   sigmoid/tanh through the LUT: X stages bring the value to units 2^-12; the table is
               compiler/lut.activation_lut's (entries in units of its entry_lsb)
  SDP C        CVT_OFFSET 0, CVT_SCALE / 2^CVT_SHIFT = u_last / s_out, saturated to the type
An SDP layer reading a tensor from memory is the same with u0 = s_in (one value for all channels).
F (fraction bits kept between stages) is 8, reduced when the stage's calibrated range would not fit
31 bits; when X1 is the only stage it targets s_out directly (u1 = s_out, C is the identity), so a
plain convolution rounds once.

Multiplier/shift pairs take the largest shift for which the int16 multiplier still fits
(precision.fixed_point), i.e. at least 14 significant bits; per-kernel multipliers share the shift
of the largest.  Float -> integer conversions here round half away from zero.

Sub-8-bit what-if (`QuantConfig.weight_bits` / `activation_bits` N < 8, INT8 only; lowbit.py):
  weights      the INT8 q_w above requantized to N bits by gemmlowp's formula in its symmetric
               form (lowbit.quantize_int8) with the scenario's rounding mode, offline (the
               compiler does it, as gemmlowp's packing stage): codes |c| <= 2^(N-1) - 1 in the
               INT8 container, s_w[k] grows by 127 / (2^(N-1) - 1), the SDP multipliers absorb it
  activations  every tensor's scale is amax / grid with grid = 2^(N-1) - 1 (signed tensors) or
               min(2^N - 1, 127) (non-negative ones): the SDP output converter of the layer that
               writes it rounds to nearest (the hardware's only rounding) onto the N-bit grid
  clamp        that SDP also clamps to the grid's ends (emit_sdp.grid_clamp: an unused BN ALU
               and/or EW ALU in MIN/MAX mode with register operands at the converter's preimages
               of the end codes), else it would saturate at the INT8 limits; a ReLU'd tensor
               needs only the ceiling; a side with no free stage is left at the INT8 limit
               (Calibration.clamps lists the bounds placed per layer)
  input        the host stores it: INT8, then gemmlowp's requantization with the rounding mode
The register program is the INT8 one plus those ALU stages; the engine runs it bit-exactly.

PDP: the same scale in and out (emit_pdp.PdpLayer, zero pad value: real 0 is q 0).
CDP (LRN): emit_cdp.lrn_layer with the calibrated input and output scales (identity input
converter, LUT of (k + alpha/n * s_x^2 * ss)^-beta, output converter to s_y).
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

from .. import lowbit, precision
from ..compiler.emit import IDENTITY, Converter
from ..compiler.emit_cdp import CdpLayer, lrn_layer
from ..compiler.emit_pdp import PdpLayer
from ..compiler.emit_sdp import SdpLayer, XStage, YStage, grid_clamp
from ..compiler.hwlayers import HwLayer, HwPlan, PostOp
from ..compiler.lut import activation_lut
from ..compiler.weight_views import compact, expand, repeats_per_kernel
from ..compiler.reformat import is_reformat, reformat_quant
from ..datatype import FP16, INT8, DataType
from ..errors import NvdlaSimError, UnsupportedError

INT16_MAX = 32767
FP16_MAX = 65504.0
FRACTION_BITS = 8
LUT_IN_SHIFT = 12        # SDP LUT input units: 2^-12 of a real value


def round_away(v) -> np.ndarray:
    """Float -> nearest integer, ties away from zero (as the datapath rounds), as int64."""
    v = np.asarray(v, np.float64)
    return np.trunc(v + np.copysign(0.5, v)).astype(np.int64)


def qmax(dtype: DataType) -> int:
    """Q: the largest value of an integer type (127, 32767)."""
    return dtype.integer_range()[1]


def to_fp16(x) -> np.ndarray:
    """Float -> FP16, round to nearest even, saturated to +-65504 (the hardware never makes INF)."""
    return np.clip(np.asarray(x, np.float64), -FP16_MAX, FP16_MAX).astype(np.float16)


def quantize_tensor(x: np.ndarray, scale: float, dtype: DataType = INT8) -> np.ndarray:
    """Float tensor -> `dtype` with real = scale * q (saturating; FP16 rounds to nearest even)."""
    v = np.asarray(x, np.float64) / scale
    if dtype.is_float:
        return to_fp16(v)
    lo, hi = dtype.integer_range()
    return np.clip(round_away(v), lo, hi).astype(dtype.numpy)


WEIGHT_BLOCK_ELEMENTS = 1 << 16       # weight_codes: elements rounded at a time


def weight_codes(w: np.ndarray, s_w: np.ndarray, q: int, dtype) -> np.ndarray:
    """Per-kernel weight codes clip(round(w[k] / s_w[k]), -q, q) as `dtype`, rounding half away
    from zero in float32 (big FC layers): a block of kernels at a time, so the temporaries stay
    in cache (AlexNet's 61 M weights: no five 240 MiB arrays), each element through the same
    float32 operations as the whole-array form."""
    out = np.empty(w.shape, dtype)
    per = max(1, WEIGHT_BLOCK_ELEMENTS // max(1, int(np.prod(w.shape[1:], dtype=np.int64))))
    s32 = s_w.astype(np.float32).reshape((-1,) + (1,) * (w.ndim - 1))
    for k0 in range(0, w.shape[0], per):
        v = w[k0:k0 + per] / s32[k0:k0 + per]
        v += np.copysign(np.float32(0.5), v)
        np.trunc(v, out=v)
        np.clip(v, -q, q, out=v)
        out[k0:k0 + per] = v
    return out


def dequantize(q: np.ndarray, scale: float) -> np.ndarray:
    return q.astype(np.float32) * np.float32(scale)


def _fitting(setting: precision.Setting) -> precision.Setting:
    """A multiplier setting, refused when its ratio does not fit the 16-bit scale."""
    if setting.warnings:
        raise NvdlaSimError(f"{setting.name}: {setting.warnings[0]}")
    return setting


def _shifted(values) -> tuple[np.ndarray, int]:
    """int16 operands and one left shift (precision.shifted_operand: the X ALU operand form)."""
    ops, s = precision.shifted_operand(values)
    return ops, s.shift


def _shared_shift(ratios) -> tuple[np.ndarray, int]:
    """int16 multipliers m and one right shift n with m / 2^n ~ ratios (precision.shared_multiplier:
    the largest shift for which the largest ratio still fits; the others use it too)."""
    m, s = precision.shared_multiplier(ratios)
    return m, _fitting(s).shift


# --------------------------------------------------------------------------------------------------
# Integer parameters per hardware layer.  SDP, PDP and CDP parameters use the lowering's own types
# (compiler/emit_sdp.py XStage / YStage / SdpLayer, emit.Converter, emit_pdp.PdpLayer,
# emit_cdp.CdpLayer); a per-element operand is given as a hwlayers.TensorRef, which lowering
# replaces by the operand's TensorPlacement.

@dataclass
class ConvQuant:
    weight: np.ndarray = field(repr=False)     # (K, C, R, S) of the plan's type (int8/int16/fp16)
    weight_scale: np.ndarray = field(repr=False)   # float (K,)
    in_scale: float = 1.0
    clip_truncate: int = 0                     # CACC CLIP_TRUNCATE
    sdp: SdpLayer | None = None
    units: list[float] = field(default_factory=list)   # real value of one unit after each stage


@dataclass
class QuantConfig:
    weights: str = "per_kernel"                # per_kernel / per_tensor
    calibration: str = "max"                   # max / percentile
    percentile: float = 99.99
    weight_bits: int = 8                       # sub-8-bit what-if (INT8 only; section below)
    activation_bits: int = 8
    rounding: str = "nearest"                  # lowbit.ROUNDING_MODES
    seed: int = 0                              # probabilistic rounding's generator, add-mod x_0

    @property
    def lowbit(self) -> bool:
        return self.weight_bits < 8 or self.activation_bits < 8


@dataclass
class Calibration:
    amax: dict[str, float]                     # every tensor's calibrated range
    scales: dict[str, float]                   # every tensor's scale (after sharing; FP16: 1)
    groups: dict[str, str]                     # tensor -> representative of its scale group
    grid: dict[str, int] = field(default_factory=dict)   # largest code of each tensor (127: INT8)
    clamps: dict[str, tuple[str, ...]] = field(default_factory=dict)   # SDP layer -> grid bounds
                                               # placed in registers ("low", "high"; N-bit only)


# --------------------------------------------------------------------------------------------------
# Sub-8-bit what-if (nvdla_sim/lowbit.py, the gemmlowp document; docs/precision.md)

def activation_grid(dtype: DataType, cfg: QuantConfig, signed: bool = True, name: str = "") -> int:
    """The largest code of a tensor: Q of its type, or with `activation_bits` N < 8 (INT8 only)
    lowbit.grid_max(N, signed) -- the tensor's scale is amax / that, so the SDP output converter
    of the layer writing it (CVT_SCALE / 2^CVT_SHIFT = u_last / scale) rounds its 32-bit result
    to nearest straight onto the N-bit grid in the INT8 container."""
    if cfg.activation_bits >= 8 or dtype.is_float or dtype != INT8:
        return qmax(dtype) if not dtype.is_float else 1
    if signed and cfg.activation_bits < 2:
        raise NvdlaSimError(f"quantization.activation_bits: 1 bit has no code for 0, and tensor "
                            f"'{name}' has negative values (use 2..8; 1 bit suits non-negative "
                            "tensors only)")
    return lowbit.grid_max(cfg.activation_bits, signed)


def quantize_input(x: np.ndarray, scale: float, dtype: DataType, grid: int,
                   cfg: QuantConfig) -> np.ndarray:
    """The network input as the host stores it: INT8 at amax / 127, then (activation_bits < 8)
    requantized to the N-bit grid with the scenario's rounding mode (the host does the rounding,
    like gemmlowp's packing stage); `scale` and `grid` are the tensor's calibrated ones."""
    if grid == qmax(dtype) or dtype.is_float:
        return quantize_tensor(x, scale, dtype)
    q8 = quantize_tensor(x, scale * grid / qmax(dtype), dtype)
    rounder = lowbit.Rounder(cfg.rounding, cfg.seed + 1)     # not the weights' offsets
    if grid == lowbit.grid_max(cfg.activation_bits, signed=False):      # a non-negative input
        return lowbit.quantize_uint7(q8, cfg.activation_bits, rounder=rounder)[0]
    return lowbit.quantize_int8(q8, cfg.activation_bits, rounder=rounder)[0]


# --------------------------------------------------------------------------------------------------
# Calibration

def _find(parent: dict, x: str) -> str:
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


def calibrate(plan: HwPlan, values: dict[str, np.ndarray], cfg: QuantConfig) -> Calibration:
    """Scales of every tensor from the float reference `values`, with the sharing rules (FP16:
    the ranges only, every scale 1)."""
    net = plan.network
    amax: dict[str, float] = {}
    for name, v in values.items():
        a = np.abs(v)
        if cfg.calibration == "percentile" and a.size > 1:
            amax[name] = float(np.percentile(a, cfg.percentile))
        else:
            amax[name] = float(a.max()) if a.size else 0.0
    if plan.dtype.is_float:
        ones = {name: 1.0 for name in values}
        return Calibration(amax, ones, {name: name for name in values})
    for op in net.ops:
        if op.kind == "clip" and op.attrs.get("max") is not None:
            amax[op.name] = float(op.attrs["max"])   # the ceiling is the saturation point
    parent = {name: name for name in values}

    def union(a: str, b: str) -> None:
        ra, rb = _find(parent, a), _find(parent, b)
        if ra != rb:
            parent[rb] = ra

    for op in net.ops:
        if not plan.tensors[op.name].on_dla:
            continue
        if op.kind in ("pool", "flatten", "slice"):     # a slice is read in place
            union(op.name, op.inputs[0])
        elif op.kind == "concat":
            for i in op.inputs:
                union(op.name, i)
    group_amax: dict[str, float] = {}
    group_signed: dict[str, bool] = {}
    for name, v in values.items():
        r = _find(parent, name)
        group_amax[r] = max(group_amax.get(r, 0.0), amax[name])
        group_signed[r] = group_signed.get(r, False) or bool(v.size and v.min() < 0)
    scales, groups, grid = {}, {}, {}
    for name in values:
        r = _find(parent, name)
        groups[name] = r
        a = group_amax[r]
        dt = plan.tensor_dtype(name) if name in plan.tensors else plan.dtype
        if dt.is_float:                     # FP16 in an INT8 plan: its INT8 copy's scale
            dt = plan.dtype
        grid[name] = activation_grid(dt, cfg, group_signed[r], name)
        scales[name] = (a if a > 0 else 1.0) / grid[name]
    return Calibration(amax, scales, groups, grid)


# --------------------------------------------------------------------------------------------------
# Per-layer parameters

def _fraction_bits(units_scale: float, amax: float) -> int:
    """Fraction bits F such that amax / (units_scale / 2^F) stays below 2^30."""
    if amax <= 0:
        return FRACTION_BITS
    head = math.floor(math.log2(2.0 ** 30 * units_scale / amax))
    return max(0, min(FRACTION_BITS, head))


def _converter(ratio: float) -> Converter:
    """The SDP output converter for `ratio` (precision.converter; the identity for 1)."""
    c = _fitting(precision.converter(ratio))
    return Converter(c.offset, c.scale, c.shift)


def _operand(values: np.ndarray, per_kernel: bool):
    """A per-kernel operand array, or one register value when all kernels share it."""
    return values.astype(np.int64) if per_kernel else int(values[0])


class _LayerQuantizer:
    """Integer parameters (INT8, INT16) of every hardware layer."""

    def __init__(self, plan: HwPlan, cal: Calibration, cfg: QuantConfig):
        self.plan, self.cal, self.cfg = plan, cal, cfg
        self.rounder = lowbit.Rounder(cfg.rounding, cfg.seed)   # weights, layer after layer
        self.begin(None)

    def begin(self, layer: HwLayer | None) -> None:
        """Quantise `layer` next: its precision (INT8 / INT16) sets Q and the weights' type."""
        self.dtype = self.plan.dtype if layer is None else self.plan.layer_dtype(layer)
        self.q = qmax(self.dtype)
        self.out_dtype = None if layer is None or not layer.on_dla else self.plan.out_dtype(layer)

    def scale(self, tensor: str) -> float:
        return self.cal.scales[tensor]

    def amax(self, tensor: str | None) -> float:
        return self.cal.amax.get(tensor, 0.0) if tensor else 0.0

    def conv(self, layer: HwLayer) -> ConvQuant:
        c = layer.conv
        k = c.weight.shape[0]
        # a timing-only stand-in is a broadcast view: quantise its distinct values, broadcast
        # the codes back (the same numbers element by element; compiler/weight_views.py)
        small = compact(c.weight)
        if self.cfg.weight_bits < 8 and self.dtype == INT8:
            small = np.asarray(c.weight)    # N-bit rounding draws one offset per element
        flat = small.reshape(k, -1)       # max |w| per kernel without an |w| copy of the layer
        per_k = np.maximum(flat.max(axis=1), -flat.min(axis=1)).astype(np.float64)
        if self.cfg.weights == "per_tensor":
            per_k = np.full(k, per_k.max())
        q = self.q
        s_w = np.where(per_k > 0, per_k, 1.0) / q
        q_w = weight_codes(small, s_w, q, self.dtype.numpy)
        if self.cfg.weight_bits < 8 and self.dtype == INT8:      # INT16 layers stay INT16
            q_w, factor = lowbit.quantize_int8(q_w, self.cfg.weight_bits, rounder=self.rounder)
            s_w = s_w * factor
        sum_abs_qw = int(np.abs(q_w.reshape(k, -1)).sum(axis=1, dtype=np.int64).max(initial=0)) \
            * repeats_per_kernel(c.weight, q_w)
        q_w = expand(q_w, c.weight.shape)
        t = precision.cacc_truncate(sum_abs_qw, self.dtype).shift
        s_x = self.scale(self._input_tensor(layer))
        u0 = s_x * s_w * 2.0 ** t
        sdp, units = self.sdp(layer, u0, conv_out=layer.ops[0])
        return ConvQuant(q_w, s_w, s_x, t, sdp, units)

    def _input_tensor(self, layer: HwLayer) -> str:
        """The logical tensor a layer reads (for its scale): its first op's main input."""
        op = self.plan.network.op(layer.ops[0])
        name = op.inputs[0]
        t = self.plan.tensors[name]
        if op.kind == "fc" and t.alias_of is not None and not t.materialised:
            return t.alias_of
        if layer.kind == "sdp" and op.kind in ("add", "mul", "max", "min"):
            operands = {p.operand_tensor for p in layer.sdp.post_ops}
            return next(i for i in op.inputs if i not in operands)
        return name

    def sdp(self, layer: HwLayer, u0, conv_out: str) -> tuple[SdpLayer, list[float]]:
        """The SDP stages of `layer`; u0 = units of the SDP input (per kernel for a convolution),
        `conv_out` the tensor the SDP input holds (the convolution's output, or the tensor read)."""
        spec = layer.sdp
        post = spec.post_ops
        s_out = self.scale(layer.out_scale or layer.ops[-1])   # a fused PDP's output shares the
                                                # SDP output scale; out_scale: deconv.py
        units = np.atleast_1d(np.asarray(u0, np.float64))
        # relative only: INT16 units (s_x * s_w ~ 1e-10) are below any absolute tolerance
        per_kernel = units.size > 1 and not np.allclose(units, units[0], atol=0.0)
        out: dict[str, object] = {}
        trail: list[float] = []
        for i, st in enumerate(spec.stages):
            nxt = spec.stages[i + 1] if i + 1 < len(spec.stages) else None
            value = (post[st.post_ops[-1]].out_tensor if st.post_ops else None) or conv_out
            target = self._stage_target(nxt, post, s_out, value)
            if st.name == "x1":
                alu = alu_operand = None
                alu_shift = 0
                if st.alu == "bias":
                    bias = next(p for p in post if p.kind == "bias").bias
                    ops16, alu_shift = _shifted(bias / units)
                    alu, alu_operand = "sum", ops16
                m, n = _shared_shift(units / target)
                out["x1"] = XStage(alu, 0 if alu_operand is None else alu_operand, alu_shift,
                                   "mul", _operand(m, per_kernel), n, st.relu)
                units = np.full_like(units, target)
            elif st.name == "x2":
                out["x2"], units = self._x2(st, post, units, target)
            else:
                design = activation_lut(st.lut, float(units[0]))
                out["y"] = YStage(lut=design.lut)
                units = np.full_like(units, design.entry_lsb)
            trail.append(float(units[0]))
        widen = self.out_dtype if self.out_dtype not in (None, self.dtype) else None
        sdp = SdpLayer(out.get("x1"), out.get("x2"), out.get("y"),
                       _converter(float(units[0]) / s_out), layer.name, self.dtype, widen)
        return self._clamp(layer, sdp), trail

    def _clamp(self, layer: HwLayer, sdp: SdpLayer) -> SdpLayer:
        """With activation_bits N < 8: the output codes clamped to the tensor's N-bit grid in the
        SDP (emit_sdp.grid_clamp: ALU MIN/MAX stages before the output converter); INT8 layers
        are returned as they are."""
        grid = self.cal.grid.get(layer.ops[-1], self.q)
        if grid >= self.q or self.dtype != INT8 or sdp.out_dtype not in (None, INT8):
            return sdp
        unsigned = grid == lowbit.grid_max(self.cfg.activation_bits, signed=False)
        sdp, placed = grid_clamp(sdp, 0 if unsigned else -grid, grid, self.plan.hw.sdp.ew)
        self.cal.clamps[layer.name] = placed
        return sdp

    def _stage_target(self, nxt, post: list[PostOp], s_out: float, value_tensor: str | None) -> float:
        """Units a stage's output is in (what its MUL aims for)."""
        if nxt is None:
            return s_out
        if nxt.name == "y":
            return 2.0 ** -LUT_IN_SHIFT
        amax = self.amax(value_tensor)
        q = self.q
        if isinstance(nxt.alu, tuple):                       # add / max / min: operand aligned
            s_t = self.scale(post[nxt.alu[1]].operand_tensor)
            return s_t / 2.0 ** _fraction_bits(s_t, max(amax, q * s_t))
        base = s_out if nxt.mul == "prelu" else max(amax, 1e-30) / q
        return base / 2.0 ** _fraction_bits(base, max(amax, q * base))

    def _x2(self, st, post: list[PostOp], units: np.ndarray, target: float):
        u1 = float(units[0])
        if isinstance(st.alu, tuple):                        # element-wise add / max / min
            p = post[st.alu[1]]
            s_t = self.scale(p.operand_tensor)
            shift = round(math.log2(s_t / u1))
            if shift < 0 or abs(s_t / u1 - 2.0 ** shift) > 1e-9 * s_t / u1:
                raise NvdlaSimError(f"'{p.op}': operand scale not aligned with the stage units")
            m, n = _shared_shift(np.array([u1 / target]))
            alu = {"add": "sum", "max": "max", "min": "min"}[st.alu[0]]
            return XStage(alu, p.operand, shift, "mul", int(m[0]), n, st.relu), np.full_like(units, target)
        if st.mul == "prelu":
            p = next(post[i] for i in st.post_ops if post[i].kind == "prelu")
            m, n = _shared_shift(p.slope)
            per_kernel = not np.allclose(p.slope, p.slope[0])
            return XStage(mul="prelu", mul_operand=_operand(m, per_kernel), mul_shift=n,
                          relu=st.relu), units
        if isinstance(st.mul, tuple):                        # element-wise product
            p = post[st.mul[1]]
            s_t = self.scale(p.operand_tensor)
            amax_x = self.amax(p.op)
            head = amax_x / s_t / u1 * self.q if amax_x else 2.0 ** 30
            n = max(0, math.ceil(math.log2(max(head, 1.0))) - 30)
            return XStage(mul="mul", mul_operand=p.operand, mul_shift=n, relu=st.relu), \
                units * s_t * 2.0 ** n
        if st.alu == "bias":                                 # affine: (x + b/(u1*sc)) * (u1*sc/u2)
            p = next(post[i] for i in st.post_ops if post[i].kind in ("affine", "bias"))
            sc = p.scale if p.scale is not None else np.ones_like(p.bias)
            sc = np.where(np.abs(sc) < 1e-12, 1e-12, sc)
            ops16, a = _shifted(p.bias / (u1 * sc))
            m, n = _shared_shift(u1 * sc / target)
            return XStage("sum", ops16, a, "mul", m.astype(np.int64), n, st.relu), np.full_like(units, target)
        raise NvdlaSimError(f"SDP stage {st.name}: nothing to quantise")

    def pdp(self, layer: HwLayer) -> PdpLayer:
        p = layer.pdp
        return PdpLayer(p.method, p.kernel, p.stride, p.pad, 0, layer.name, self.dtype)

    def cdp(self, layer: HwLayer) -> CdpLayer:
        c = layer.cdp
        s_x = self.scale(self.plan.network.op(layer.ops[0]).inputs[0])
        return lrn_layer(c.size, c.alpha, c.beta, c.k, s_x, self.scale(layer.ops[-1]), layer.name,
                         self.dtype)

    def sdp_layer(self, layer: HwLayer) -> SdpLayer:
        src = self._input_tensor(layer)
        return self.sdp(layer, self.scale(src), conv_out=src)[0]


class _FloatLayers:
    """FP16 parameters: the float network itself, converted to FP16 (no scales, no shifts);
    sigmoid / tanh through an SDP LUT fitted in FP16 (nvdla_sim.lut.fit) over the calibrated
    range of the LUT's input (at least +-LUT_MIN_RANGE, where both functions have flattened)."""

    LUT_MIN_RANGE = 8.0

    def __init__(self, plan: HwPlan, cal: Calibration):
        self.plan, self.cal = plan, cal

    def conv(self, layer: HwLayer) -> ConvQuant:
        c = layer.conv
        k = c.weight.shape[0]
        sdp = self.sdp(layer)
        return ConvQuant(expand(to_fp16(compact(c.weight)), c.weight.shape), np.ones(k), 1.0, 0,
                         sdp, [])

    @staticmethod
    def _operand(values: np.ndarray):
        """Per-kernel FP16 operand array, or one register value when all kernels share it."""
        v = to_fp16(values)
        return float(v[0]) if np.all(v == v[0]) else v

    def sdp(self, layer: HwLayer) -> SdpLayer:
        spec = layer.sdp
        post = spec.post_ops
        out: dict[str, object] = {}
        for st in spec.stages:
            kinds = {post[i].kind for i in st.post_ops}
            if "clip" in kinds:
                raise UnsupportedError(f"'{layer.name}': a clipped ReLU in FP16 is not modelled by "
                                       "the compiler (its ceiling is the INT8 saturation point)")
            if st.name == "y":
                out["y"] = YStage(lut=self._lut(st.lut, post[st.post_ops[0]].op))
            elif st.name == "x1":
                alu = None
                operand = 0.0
                if st.alu == "bias":
                    alu, operand = "sum", self._operand(next(p for p in post if p.kind == "bias").bias)
                out["x1"] = XStage(alu, operand, 0, None, 1.0, 0, st.relu)
            elif isinstance(st.alu, tuple):                 # element-wise add / max / min
                alu = {"add": "sum", "max": "max", "min": "min"}[st.alu[0]]
                out["x2"] = XStage(alu, post[st.alu[1]].operand, 0, None, 1.0, 0, st.relu)
            elif st.mul == "prelu":
                p = next(post[i] for i in st.post_ops if post[i].kind == "prelu")
                out["x2"] = XStage(mul="prelu", mul_operand=self._operand(p.slope), relu=st.relu)
            elif isinstance(st.mul, tuple):                 # element-wise product
                out["x2"] = XStage(mul="mul", mul_operand=post[st.mul[1]].operand, relu=st.relu)
            elif st.alu == "bias":                          # affine: (x + b / sc) * sc
                p = next(post[i] for i in st.post_ops if post[i].kind in ("affine", "bias"))
                sc = p.scale if p.scale is not None else np.ones_like(p.bias)
                sc = np.where(np.abs(sc) < 1e-12, 1e-12, sc)
                out["x2"] = XStage("sum", self._operand(p.bias / sc), 0, "mul",
                                   self._operand(sc), 0, st.relu)
            else:
                raise NvdlaSimError(f"SDP stage {st.name} of '{layer.name}': nothing to convert")
        return SdpLayer(out.get("x1"), out.get("x2"), out.get("y"), IDENTITY, layer.name, FP16)

    def _lut(self, function: str, op_name: str):
        from ..lut.fit import fit
        x = self.plan.network.op(op_name).inputs[0]
        a = max(self.cal.amax.get(x, 0.0), self.LUT_MIN_RANGE)
        return fit(function, (-a, a), FP16, self.plan.hw).lut

    def pdp(self, layer: HwLayer) -> PdpLayer:
        p = layer.pdp
        return PdpLayer(p.method, p.kernel, p.stride, p.pad, 0, layer.name, FP16)

    def cdp(self, layer: HwLayer) -> CdpLayer:
        """LRN: the FP16 table over the square sums of the calibrated input range."""
        c = layer.cdp
        x = self.plan.network.op(layer.ops[0]).inputs[0]
        return lrn_layer(c.size, c.alpha, c.beta, c.k, 1.0, 1.0, layer.name, FP16,
                         max_abs_input=self.cal.amax.get(x, 0.0))

    def sdp_layer(self, layer: HwLayer) -> SdpLayer:
        return self.sdp(layer)


@contextmanager
def _naming(layer) -> Iterator[None]:
    """A quantisation error of one layer says which layer (a multiplier ratio out of range, a
    LUT function not finite over the layer's range)."""
    try:
        yield
    except NvdlaSimError as exc:
        if type(exc) is not NvdlaSimError or layer.name in str(exc):
            raise
        raise NvdlaSimError(f"layer '{layer.name}': {exc}") from None


def quantize_plan(plan: HwPlan, values: dict[str, np.ndarray], cfg: QuantConfig | None = None
                  ) -> Calibration:
    """Calibrate scales on `values` (the float reference) and fill every layer's `quant` in the
    plan's precision."""
    cfg = cfg or QuantConfig()
    if cfg.lowbit and plan.dtype != INT8:
        raise NvdlaSimError(f"quantization: weight_bits / activation_bits below 8 need precision "
                            f"int8 (the N-bit codes live in the INT8 container), not "
                            f"{plan.dtype.name.lower()}")
    cal = calibrate(plan, values, cfg)
    from ..compiler.ext_ops import is_sdpfn, quantize_sdpfn
    for name, t in plan.tensors.items():
        t.scale = cal.scales.get(name)
        if t.scale is not None and not plan.dtype.is_float and plan.tensor_dtype(name).is_float:
            t.scale = 1.0                       # an FP16 buffer of an INT8 plan: real values
    lq = _FloatLayers(plan, cal) if plan.dtype.is_float else _LayerQuantizer(plan, cal, cfg)
    fl = _FloatLayers(plan, cal)                # FP16 layers of an INT8 plan (compiler/reformat.py)
    for layer in plan.layers:
        with _naming(layer):
            if is_reformat(layer):
                layer.quant = reformat_quant(layer, plan, cal.scales)
                continue
            if layer.kind == "rubik":           # a copy: its RubikSpec (compiler/deconv.py)
                continue
            if layer.on_dla and plan.layer_dtype(layer).is_float and not plan.dtype.is_float:
                layer.quant = getattr(fl, {"conv": "conv", "sdp": "sdp_layer"}.get(layer.kind,
                                                                                 layer.kind))(layer)
                continue
            if hasattr(lq, "begin"):
                lq.begin(layer)
            if layer.kind == "conv":
                layer.quant = lq.conv(layer)
            elif is_sdpfn(layer):              # an SDP pass of compiler/ext_ops.py
                layer.quant = quantize_sdpfn(plan, layer, cal, values, plan.layer_dtype(layer),
                                             plan.out_dtype(layer))
            elif layer.kind == "sdp":
                layer.quant = lq.sdp_layer(layer)
            elif layer.kind == "pdp":
                layer.quant = lq.pdp(layer)
            elif layer.kind == "cdp":
                layer.quant = lq.cdp(layer)
    return cal
