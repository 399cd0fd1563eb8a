"""The one-pass SDP op `sdpfn` that compiler/ext_ops.py lowers Scale, Sub, Div, Pow, the
comparisons, the unary functions and softmax's steps to: its hardware layer (`emit_sdpfn`, an SDP
pass reading memory) and its parameters (`quantize_sdpfn`, INT8 / INT16 integers or FP16).

Per element, with x the first input (scale s_x), t the second (s_t), y the output (s_y):
  lin   z = a x + c           X1 MUL by a s_x / u (register / per-kernel / per-element operand),
                              X2 ALU SUM of c / u (int16 << shift), MUL 1
        z = b ((a / b) x + t) X1 MUL by (a / b) s_x / u1 with u1 = s_t / 2^F, X2 ALU SUM of t << F
                              (per element, or a C x 1 x 1 tensor PER_KERNEL), MUL by b u1 / u2
  prod  z = k x t             X1 MUL by k s_x / u1, X2 MUL by t (memory operand)
then `fn`: None (the C converter to s_y), "abs" (X1 PReLU slope -1, exact), "prelu" (X1 PReLU
with the constant `slope`, per element from memory), a numpy expression
through the Y LUT (fitted by `nvdla_sim.lut.fit` over z's calibrated range, input units
max|z| / 2^14), or step_gt / step_lt / step_eq (z in integer units, a LUT whose LO nodes are the
integers -128..128: exact 0 / 1).  FP16: the same stages in float (no shifts, no converter).
"""
from __future__ import annotations

import numpy as np

from ..datatype import DataType
from ..errors import NvdlaSimError, UnsupportedError
from .network import Op

STEP_HALF = 128                     # comparison LUT: LO nodes at the integers -128..128


# --------------------------------------------------------------------------------------------------
# The SDP pass: hardware layer

def emit_sdpfn(builder, op: Op) -> None:
    """The hardware layer of an sdpfn op (hwlayers._Builder): SDP from memory, the second input
    (if any) a per-element or per-channel operand."""
    from .hwlayers import HwLayer, PostOp, SdpSpec, SdpStage
    for name in op.inputs:
        if builder.tensors[name].has_holes:
            raise UnsupportedError(f"layer '{op.name}': input '{name}' has zero channels left by "
                                   "a concatenation off the atom (not modelled for this kind)")
    row = builder._row(op.attrs.get("row", op.name))
    src = builder.ref(op.inputs[0])
    shape = builder.net.shapes[op.inputs[0]]
    post = PostOp("sdpfn", op.name, out_tensor=op.name)
    if len(op.inputs) > 1:
        post.operand_tensor = op.inputs[1]
        post.operand = builder.ref(op.inputs[1])
    fn = op.attrs.get("fn")
    stages = [SdpStage("x1", mul="prelu" if fn in ("abs", "prelu") else "rescale", post_ops=[0])]
    if len(op.inputs) > 1 or op.attrs.get("c") is not None:
        stages.append(SdpStage("x2", alu=("sum", 0) if op.attrs.get("mode") == "lin" else None,
                               mul=("product", 0) if op.attrs.get("mode") == "prod" else "rescale"))
    if fn not in (None, "abs", "prelu"):
        stages.append(SdpStage("y", lut=fn))
    sdp = SdpSpec("memory", [post], stages, src.channels, shape.h, shape.w)
    layer = HwLayer(op.name, "sdp", row, [op.name], [src], builder.ref(op.name), sdp=sdp)
    layer.lowering["sdpfn"] = True
    if op.attrs.get("note"):
        layer.notes.append(op.attrs["note"])
    builder.layers.append(layer)


def is_sdpfn(layer) -> bool:
    return layer.kind == "sdp" and bool(layer.lowering.get("sdpfn"))


# --------------------------------------------------------------------------------------------------
# The SDP pass: parameters

FINE_BITS = 14          # z in units of max|z| / 2^14 where the pass keeps full precision
LUT_FIT_HW = "nv_full"  # any preset with the SDP LUT: the tables do not depend on it


def _z_values(op: Op, values: dict) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """Float x, t (or None) and z = the pass's value before abs / LUT / step, from `values`
    (a timing-only run's values are ones)."""
    a = op.attrs
    x = np.asarray(values[op.inputs[0]], np.float64)
    t = np.asarray(values[op.inputs[1]], np.float64) if len(op.inputs) > 1 else None
    if a.get("mode") == "prod":
        z = x * t * float(a.get("k", 1.0))
    else:
        z = x * np.asarray(a.get("a", 1.0), np.float64)
        if t is not None:
            z = z + float(a.get("b", 1.0)) * t
        elif a.get("c") is not None:
            z = z + np.asarray(a["c"], np.float64)
    return x, t, z


def _lut_range(z: np.ndarray, fn: str) -> tuple[float, float]:
    lo, hi = float(np.min(z)), float(np.max(z))
    if hi - lo < 1e-6 * max(abs(lo), abs(hi), 1e-30) or hi <= lo:
        mid = 0.5 * (lo + hi)
        half = 0.5 * abs(mid) if mid != 0 else 1.0
        lo, hi = mid - half, mid + half
    from ..lut.functions import parse_function
    if not np.all(np.isfinite(parse_function(fn)(np.linspace(lo, hi, 4097)))) \
            or "/ x" in fn and lo <= 0 <= hi:
        raise NvdlaSimError(f"'{fn}' is not finite over its input's calibrated range "
                            f"[{lo:.6g}, {hi:.6g}] (a divisor reaching 0, a fractional power "
                            "of negative values): no LUT can hold it")
    # a margin of 1/256 of the span, so the range's own ends (softmax's x - max = 0) are LUT
    # hits rather than overflows in the statistics registers (never across 0 for 1/x)
    margin = (hi - lo) / 256
    if "/ x" in fn:
        return (lo - min(margin, lo / 2), hi + margin) if lo > 0 else \
            (lo - margin, hi + min(margin, -hi / 2))
    return lo - margin, hi + margin


def _operand_form(values: np.ndarray, per: str):
    """An operand array as the SDP takes it: one int / float (register), per channel (1-D) or
    per element (3-D)."""
    v = np.asarray(values)
    if per == "uniform":
        return v.reshape(-1)[0].item()
    if per == "channel":
        return v.reshape(-1)
    return v


def _per(arr: np.ndarray) -> str:
    arr = np.asarray(arr)
    if arr.size == 1:
        return "uniform"
    return "channel" if arr.shape[-2:] == (1, 1) else "element"


def step_lut(fn: str, true_entry: int):
    """The comparison table: LO nodes at the integers -128..128 (INDEX_SELECT 0), LE at every
    fourth; both end entries continue with slope 0, so an integer z maps exactly to
    [z > 0] / [z < 0] / [z == 0] times `true_entry`."""
    from .lut import LE_ENTRIES, LO_ENTRIES, Lut
    test = {"step_gt": lambda z: z > 0, "step_lt": lambda z: z < 0, "step_eq": lambda z: z == 0}[fn]
    lo = np.arange(LO_ENTRIES) - STEP_HALF
    le = np.arange(LE_ENTRIES) * 4 - STEP_HALF
    return Lut(tuple(int(true_entry) if test(v) else 0 for v in le),
               tuple(int(true_entry) if test(v) else 0 for v in lo),
               le_function="LINEAR", le_index_select=2, lo_index_select=0,
               le_start=-STEP_HALF, le_end=STEP_HALF, lo_start=-STEP_HALF, lo_end=STEP_HALF,
               uflow_priority="LO", oflow_priority="LO", hybrid_priority="LO")


def quantize_sdpfn(plan, layer, cal, values: dict, dtype: DataType, out_dtype: DataType | None):
    """The SdpLayer of an sdpfn hardware layer in `dtype` (INT8 / INT16 integers, or FP16)."""
    from ..scenario.quantize import _converter, _shared_shift, _shifted
    from .emit_sdp import SdpLayer, XStage, YStage
    op = plan.network.op(layer.ops[0])
    a = op.attrs
    mode, fn = a.get("mode", "lin"), a.get("fn")
    x_name = op.inputs[0]
    operand = layer.sdp.post_ops[0].operand            # TensorRef of t (lowering places it)
    xv, tv, z = _z_values(op, values)
    a_arr = np.asarray(a.get("a", np.ones((1, 1, 1))), np.float64)
    c_arr = a.get("c")
    two = len(op.inputs) > 1
    if dtype.is_float:
        return _quantize_fp16(op, layer, operand, a_arr, c_arr, z, two, mode, fn)
    s_x = cal.scales[x_name]
    s_y = cal.scales[op.name]
    widen = out_dtype if out_dtype not in (None, dtype) else None
    x1 = x2 = y = None
    z_amax = float(np.max(np.abs(z))) if z.size else 0.0
    z_amax = z_amax if z_amax > 0 else 1.0
    fine = z_amax / 2.0 ** FINE_BITS                 # units of z before the LUT / converter
    step = fn is not None and fn.startswith("step")
    if mode == "prod":
        s_t = cal.scales[op.inputs[1]]
        k = float(a.get("k", 1.0))
        x_amax = float(np.max(np.abs(xv))) or 1.0
        u1 = x_amax * abs(k) / 2.0 ** FINE_BITS if k else 1.0
        m, n = _shared_shift(np.array([k * s_x / u1]))
        x1 = XStage(mul="mul", mul_operand=int(m[0]), mul_shift=n)
        x2 = XStage(mul="mul", mul_operand=operand, mul_shift=0)
        units = u1 * s_t
    elif fn == "abs":
        x1 = XStage(mul="prelu", mul_operand=-1, mul_shift=0)     # |x|: negatives times -1
        units = s_x
    elif fn == "prelu":                  # constant slopes per element: negatives times m / 2^n
        slope = np.asarray(a["slope"], np.float64)
        m, n = _shared_shift(slope.reshape(-1))
        x1 = XStage(mul="prelu", mul_operand=_operand_form(m.reshape(slope.shape), _per(slope)),
                    mul_shift=n)
        units = s_x
    elif two:
        s_t = cal.scales[op.inputs[1]]
        b = float(a.get("b", 1.0))
        ratio_a = a_arr / b                                        # z = b ((a / b) x + t)
        inner = float(np.max(np.abs(ratio_a))) * (float(np.max(np.abs(xv))) if xv.size else 0.0)
        inner += float(np.max(np.abs(tv))) if tv is not None and tv.size else 0.0
        f = 8
        while f > 0 and (inner / (s_t / 2.0 ** f) >= 2.0 ** 30 or
                         float(np.max(np.abs(ratio_a))) * s_x * 2.0 ** f / s_t >= 2.0 ** 14):
            f -= 1
        u1 = s_t / 2.0 ** f
        m1, n1 = _shared_shift((ratio_a * s_x / u1).reshape(-1))
        x1 = XStage(mul="mul", mul_operand=_operand_form(m1.reshape(ratio_a.shape), _per(ratio_a)),
                    mul_shift=n1)
        target = u1 * abs(b) if step or fn is None else fine
        m2, n2 = _shared_shift(np.array([b * u1 / target]))
        x2 = XStage(alu="sum", alu_operand=operand, alu_shift=f, mul="mul",
                    mul_operand=int(m2[0]), mul_shift=n2)
        units = target
    else:
        c = np.asarray(c_arr, np.float64) if c_arr is not None else None
        has_c = c is not None and bool(np.any(c != 0))
        ax = float(np.max(np.abs(a_arr))) * (float(np.max(np.abs(xv))) if xv.size else 0.0)
        if step:
            target = s_x / 2.0 ** 8                                 # x - constant, integers
        else:
            target = max(ax, z_amax, float(np.max(np.abs(c))) if has_c else 0.0) / 2.0 ** FINE_BITS
            target = target if target > 0 else 1.0
        m1, n1 = _shared_shift((a_arr * s_x / target).reshape(-1))
        x1 = XStage(mul="mul", mul_operand=_operand_form(m1.reshape(a_arr.shape), _per(a_arr)),
                    mul_shift=n1)
        if has_c:
            ops16, shift = _shifted((c / target).reshape(-1))
            x2 = XStage(alu="sum", alu_operand=_operand_form(ops16.reshape(c.shape), _per(c)),
                        alu_shift=shift, mul="mul", mul_operand=1, mul_shift=0)
        units = target
    if step:
        y = YStage(lut=step_lut(fn, 32767))
        units = 1.0 / 32767
    elif fn not in (None, "abs", "prelu"):
        from ..lut.functions import parse_function
        lo, hi = _lut_range(z, fn)
        f_max = float(np.max(np.abs(parse_function(fn)(np.linspace(lo, hi, 1025))))) or 1.0
        fitted = _fit_cached(fn, lo, hi, dtype.name, units, f_max / 32767)
        y = YStage(lut=fitted)
        units = f_max / 32767
    return SdpLayer(x1, x2, y, _converter(units / s_y), layer.name, dtype, widen)


_FITS: dict = {}


def _fit_cached(fn: str, lo: float, hi: float, precision: str, in_scale: float | None,
                out_scale: float | None):
    key = (fn, lo, hi, precision, in_scale, out_scale)
    if key not in _FITS:
        from ..lut.fit import fit
        from ..lut.functions import parse_function
        _FITS[key] = fit(parse_function(fn), (lo, hi), precision, LUT_FIT_HW, in_scale=in_scale,
                         out_scale=out_scale).lut
    return _FITS[key]


def _quantize_fp16(op, layer, operand, a_arr, c_arr, z, two, mode, fn):
    from ..datatype import FP16
    from ..scenario.quantize import to_fp16
    from .emit import IDENTITY
    from .emit_sdp import SdpLayer, XStage, YStage

    def form(v):
        v = np.asarray(v, np.float64)
        per = _per(v)
        f = to_fp16(v)
        return float(f.reshape(-1)[0]) if per == "uniform" else \
            (f.reshape(-1) if per == "channel" else f)
    x1 = x2 = y = None
    if mode == "prod":
        x1 = XStage(mul="mul", mul_operand=form(float(op.attrs.get("k", 1.0))))
        x2 = XStage(mul="mul", mul_operand=operand)
    elif fn == "abs":
        x1 = XStage(mul="prelu", mul_operand=-1.0)
    elif fn == "prelu":
        x1 = XStage(mul="prelu", mul_operand=form(op.attrs["slope"]))
    elif two:
        b = float(op.attrs.get("b", 1.0))
        x1 = XStage(mul="mul", mul_operand=form(a_arr / b))
        x2 = XStage(alu="sum", alu_operand=operand, mul="mul", mul_operand=form(b))
    else:
        x1 = XStage(mul="mul", mul_operand=form(a_arr))
        if c_arr is not None and np.any(np.asarray(c_arr) != 0):
            x2 = XStage(alu="sum", alu_operand=form(c_arr))
    if fn is not None and fn.startswith("step"):
        raise UnsupportedError(f"'{op.name}': comparisons run in INT8 only "
                               "[rule eltwise.compare_int8]")
    if fn not in (None, "abs", "prelu"):
        lo, hi = _lut_range(z, fn)
        y = YStage(lut=_fit_cached(fn, lo, hi, "fp16", None, None))
    return SdpLayer(x1, x2, y, IDENTITY, layer.name, FP16)
