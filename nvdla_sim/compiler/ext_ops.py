"""Scale, element-wise Sub / Div / Pow / Equal / Greater / Less, Unary ABS / SIN / COS / ATAN,
Reduce MAX and Softmax (TensorRT "DLA supported layers and restrictions") as NVDLA operations.

Three parts:

- `violations`: the document's rules for these kinds (names in compiler/dla_rules.RULES);
- `expand`: before the hardware-layer plan, every such op the DLA runs is rewritten into ops the
  compiler lowers to register programs, named `<op>.<part>`, the last one keeping the op's name
  (its report row, `attrs["row"]`, is the op's):
    sdpfn  ONE SDP pass reading memory (emitted by `emit_sdpfn`, quantised by `quantize_sdpfn`):
           z = a x + c,  z = b ((a / b) x + t)  or  z = k x t  (t: the second input, per element
           or, broadcast NC11, per channel: SDP_RDMA reads a C x 1 x 1 cube PER_KERNEL), then
           optionally |z| (X stage PReLU with slope -1: exact), f(z) through the LUT (fitted by
           `nvdla_sim.lut.fit` over z's calibrated range) or a comparison step (a LUT whose LO
           nodes are the integers around 0, so it is exact);
    conv   1x1 convolutions with constant 0/1 weights (exact in INT8: weight 1 is 127 x 1/127):
           a channel rotation (channel k takes channel k + 2^i), a channel sum (all ones), a
           channel selection, a channel broadcast (an N111 tensor operand);
    max    element-wise max, fused into the rotation's SDP: after ceil(log2 C) rounds of
           m = max(m, rotate(m, 2^i)) every channel holds the max over all channels;
    pool   max pooling, windows up to 8, several passes for a larger H or W.
- the SDP pass itself: compiler/sdpfn.py (`emit_sdpfn`, `quantize_sdpfn`).

What each kind becomes:
  Scale          sdpfn a = scale, c = shift (uniform: register operands, per channel: per-kernel,
                 element-wise: per-element operand arrays)
  Sub            sdpfn b = -1 (x - t = -((-1) x + t)); with a constant: c = -constant
  Div            by a tensor: r = sdpfn(t, LUT 1/z), then sdpfn product x r; by a constant: a =
                 1/constant; a constant dividend: sdpfn(t, LUT constant/z)
  Pow            sdpfn LUT z^p
  Equal/Greater/Less  sdpfn z = x - t (or x - constant) then the step LUT; output 0 / 1 (the
                 document's cast is implied: the output is INT8)
  ABS            sdpfn PReLU slope -1;  SIN / COS / ATAN: sdpfn LUT
  Reduce MAX     H / W: max pooling passes; C: rotation rounds, then a selection of channel 0
  Softmax (C)    m = rotation rounds; e = sdpfn(x - m, LUT exp); s = conv(e, ones) (every channel
                 the sum); r = sdpfn(s, LUT 1/z); y = sdpfn product e r
  Softmax (H/W)  m = max pooling passes along the axis, resized back (nearest, RUBIK); e as above;
                 s = a depthwise convolution of ones along the axis; r = 1/s resized back; e r
"""
from __future__ import annotations

import math
import numpy as np

from ..config import HardwareConfig
from ..datatype import INT8, DataType
from ..errors import NvdlaSimError
from .network import Network, Op, Shape
from .sdpfn import emit_sdpfn, is_sdpfn, quantize_sdpfn   # noqa: F401 (hwlayers / quantize hooks)

USER_KINDS = ("scale", "sub", "div", "pow", "equal", "greater", "less", "abs", "sin", "cos",
              "atan", "reduce", "softmax")
COMPARISONS = {"equal": "step_eq", "greater": "step_gt", "less": "step_lt"}
UNARY_LUT = {"sin": "sin(x)", "cos": "cos(x)", "atan": "arctan(x)"}
SOFTMAX_OPTIMIZED_AXIS = 1024       # TensorRT: the optimized mode restricts the axis to 1024
CHANNEL_MAX_LIMIT = 2048            # a max over channels: ceil(log2 C) C x C rotations (model)
SPATIAL_AXIS_LIMIT = 32             # softmax over H / W: resize scale and kernel at most 32


# --------------------------------------------------------------------------------------------------
# Shapes

def _broadcast_kind(s: Shape, full: Shape) -> str | None:
    """NCHW (equal), NC11 (per channel), N111 (one value), or None."""
    if s == full:
        return "NCHW"
    if (s.c, s.h, s.w) == (full.c, 1, 1):
        return "NC11"
    if (s.c, s.h, s.w) == (1, 1, 1):
        return "N111"
    return None


def _bigger(ins: list[Shape]) -> Shape:
    return max(ins, key=lambda s: (s.elements, s.c))


def infer_ext_shape(op: Op, ins: list[Shape]) -> Shape:
    k = op.kind
    if k == "reduce":
        axes = op.attrs["axes"]
        x = ins[0]
        return Shape(1 if "c" in axes else x.c, 1 if "h" in axes else x.h,
                     1 if "w" in axes else x.w)
    if k == "scale":
        x = ins[0]
        for key in ("scale", "shift"):
            v = np.asarray(op.attrs.get(key, 1.0 if key == "scale" else 0.0))
            if v.size > 1 and _array_kind(v, x) is None:
                raise ValueError(f"layer '{op.name}': {key} of shape {v.shape} is none of "
                                 f"uniform, per channel ({x.c}) or element-wise "
                                 f"({x.c}x{x.h}x{x.w})")
        return x
    if len(ins) == 2:                 # numpy broadcasting; the DLA's subset: eltwise.broadcast
        dims = []
        for p, q in zip((ins[0].c, ins[0].h, ins[0].w), (ins[1].c, ins[1].h, ins[1].w)):
            if p != q and 1 not in (p, q):
                raise ValueError(f"layer '{op.name}': operands {ins[0].c}x{ins[0].h}x{ins[0].w} "
                                 f"and {ins[1].c}x{ins[1].h}x{ins[1].w} do not broadcast")
            dims.append(max(p, q))
        return Shape(*dims)
    return ins[0]


def _array_kind(v: np.ndarray, x: Shape) -> str | None:
    """An operand array's mode against tensor shape x: uniform / channel / element, or None."""
    v = np.asarray(v)
    if v.size == 1:
        return "uniform"
    if v.size == x.c and (v.ndim == 1 or v.shape == (x.c, 1, 1)):
        return "channel"
    if v.shape == (x.c, x.h, x.w):
        return "element"
    return None


def as_cube(v, x: Shape) -> np.ndarray:
    """An operand as a float64 array broadcastable to (C, H, W): (1,1,1), (C,1,1) or (C,H,W)."""
    v = np.asarray(v, np.float64)
    kind = _array_kind(v, x)
    if kind == "uniform":
        return v.reshape(1, 1, 1)
    if kind == "channel":
        return v.reshape(x.c, 1, 1)
    return v.reshape(x.c, x.h, x.w)


# --------------------------------------------------------------------------------------------------
# Placement rules

def _constant(op: Op):
    return op.attrs.get("constant")


def _uniform(v) -> bool:
    a = np.asarray(v, np.float64)
    return a.size >= 1 and bool(np.all(a == a.reshape(-1)[0]))


def violations(op: Op, net: Network, hw: HardwareConfig, dtype: DataType, dla: bool,
               tag) -> list[str]:
    """Reasons (`tag(rule, text)`) why the DLA cannot run `op` (a kind of USER_KINDS)."""
    k = op.kind
    r: list[str] = []
    lut = bool(hw.sdp.lut and hw.sdp.ew)
    if k == "prelu":
        if len(op.inputs) > 1:
            r.append(tag("prelu.slope_constant", f"PReLU slope '{op.inputs[1]}' is a tensor, not "
                                                 "a build-time constant"))
        return r
    if k == "scale":
        if float(op.attrs.get("power", 1.0)) != 1.0:
            r.append(tag("scale.power", f"scale with power {op.attrs['power']} (DLA: scale and "
                                        "shift only)"))
        return r
    if k in ("sub", "div", "pow", "equal", "greater", "less"):
        shapes = [net.shapes[i] for i in op.inputs]
        const = _constant(op)
        if len(shapes) + (const is not None) != 2:
            r.append(tag("eltwise.inputs", f"element-wise {k} of {len(shapes)} input(s)"
                                           + (" and a constant" if const is not None else "")))
            return r
        if len(shapes) == 2:
            full = _bigger(shapes)
            kinds = [_broadcast_kind(s, full) for s in shapes]
            if None in kinds or full != net.shapes[op.name]:
                r.append(tag("eltwise.broadcast", "operand shapes "
                              + " and ".join(f"{s.c}x{s.h}x{s.w}" for s in shapes)
                              + " (DLA broadcasts NCHW, NC11, N111)"))
        if const is not None and not _uniform(const) and k != "sub":
            r.append(tag("eltwise.constant_uniform", f"{k} with a constant that is not filled "
                                                      "with one value"))
        if k in ("equal", "greater", "less"):
            if op.attrs.get("cast") is False:
                r.append(tag("eltwise.compare_cast", f"{k} read by something other than a Cast "
                                                     "(DLA: the comparison feeds one Cast only)"))
            if dtype != INT8:
                r.append(tag("eltwise.compare_int8", f"{k} in {dtype.name} (DLA: INT8 only)"))
            if not lut:
                r.append(tag("sdp.lut", f"{k} needs the SDP lookup table"))
        if k == "div":
            divisor_const = const is not None and not op.attrs.get("constant_first", False)
            if not divisor_const and dtype != INT8:
                r.append(tag("eltwise.div_operands", f"division by an {dtype.name} tensor (DLA: "
                                                     "the divisor is INT8 or an FP32 constant)"))
            if not divisor_const and not lut:
                r.append(tag("sdp.lut", "division by a tensor needs the SDP lookup table"))
        if k == "pow":
            if const is None or not op.attrs.get("constant_exponent", True):
                r.append(tag("eltwise.pow_operands", "pow: the exponent must be a constant and "
                                                     "the base a tensor"))
            if dtype != INT8:
                r.append(tag("eltwise.pow_operands", f"pow of an {dtype.name} tensor (DLA: INT8)"))
            if not lut:
                r.append(tag("sdp.lut", "pow needs the SDP lookup table"))
        return r
    if k in ("abs", "sin", "cos", "atan"):
        if k != "abs":
            if dtype != INT8:
                r.append(tag("unary.int8", f"{k.upper()} in {dtype.name} (DLA: INT8 only)"))
            if not lut:
                r.append(tag("sdp.lut", f"{k.upper()} needs the SDP lookup table"))
        return r
    if k == "reduce":
        axes = op.attrs.get("axes", ())
        if op.attrs.get("op", "max") != "max":
            r.append(tag("reduce.op", f"reduce {op.attrs['op']} (DLA: MAX only)"))
        if not axes or any(a not in ("c", "h", "w") for a in axes):
            r.append(tag("reduce.axes", f"reduce over {axes!r} (DLA: any combination of C, H, W)"))
        r += _channel_max(net.shapes[op.inputs[0]].c if "c" in axes else 1, tag)
        return r
    if k == "softmax":
        x = net.shapes[op.inputs[0]]
        axis = op.attrs.get("axis", "c")
        if axis != "c":
            r += _spatial_softmax(op, x, axis, hw, dtype, dla, tag)
        elif x.h * x.w > 1 and x.c > SOFTMAX_OPTIMIZED_AXIS:
            r.append(tag("softmax.optimized_axis", f"softmax over {x.c} channels at {x.h}x{x.w} "
                                                   f"positions (optimized mode: axis at most "
                                                   f"{SOFTMAX_OPTIMIZED_AXIS})"))
        if not lut:
            r.append(tag("sdp.lut", "softmax needs the SDP lookup table"))
        return r + _channel_max(x.c, tag)
    return r


def _spatial_softmax(op: Op, x: Shape, axis: str, hw: HardwareConfig, dtype: DataType,
                     dla: bool, tag) -> list[str]:
    """Softmax over H or W: its max and sum over at most SPATIAL_AXIS_LIMIT positions (pooling
    passes, a depthwise convolution of ones) broadcast back by a nearest resize (RUBIK)."""
    size = x.h if axis == "h" else x.w
    if size > SPATIAL_AXIS_LIMIT or not (hw.features.rubik and hw.memory_atomic_bytes == 32):
        return [tag("softmax.axis", f"softmax over {axis.upper()} of {size} positions on "
                                    f"{hw.name} (modelled: at most {SPATIAL_AXIS_LIMIT}, "
                                    "broadcast back by RUBIK)")]
    from .dla_rules import _resize
    small = Shape(x.c, 1, x.w) if axis == "h" else Shape(x.c, x.h, 1)
    view = Network("softmax_broadcast", "m", small)
    view.add("resize", "b", "m", scale=(size, 1) if axis == "h" else (1, size), mode="nearest")
    return _resize(view.ops[0], view, hw, dtype, dla)


def _channel_max(c: int, tag) -> list[str]:
    if c <= CHANNEL_MAX_LIMIT:
        return []
    return [tag("reduce.channel_max", f"a max over {c} channels (modelled up to "
                                      f"{CHANNEL_MAX_LIMIT}: rotation convolutions of C x C "
                                      "weights)")]


def softmax_mode(net: Network, op: Op) -> str:
    """TensorRT's mode for a softmax: accurate when every non-axis dimension is 1."""
    x = net.shapes[op.inputs[0]]
    return "accurate" if x.h * x.w == 1 else "optimized"


# --------------------------------------------------------------------------------------------------
# Expansion into ops the compiler lowers

class _Expander:
    def __init__(self, net: Network, out: Network, weights: dict):
        self.net, self.out, self.weights = net, out, weights

    def shape(self, name: str) -> Shape:
        return self.out.shapes[name]

    def add(self, row: str, kind: str, name: str, inputs, **attrs) -> str:
        return self.out.add(kind, name, inputs, row=row, **attrs)

    def sdpfn(self, row: str, name: str, inputs, **attrs) -> str:
        return self.add(row, "sdpfn", name, inputs, **attrs)

    def conv1x1(self, row: str, name: str, x: str, weight: np.ndarray) -> str:
        k = weight.shape[0]
        self.weights[name] = {"weight": weight.reshape(k, -1, 1, 1).astype(np.float32),
                              "bias": np.zeros(k, np.float32)}
        return self.add(row, "conv", name, x, out_channels=k, kernel=(1, 1), stride=(1, 1),
                        pad=(0, 0, 0, 0), dilation=(1, 1), groups=1, bias=False, relu=False,
                        batchnorm=False)

    def channel_max(self, row: str, x: str) -> str:
        """Every channel the max over all channels: rounds of m = max(m, rotate(m, 2^i))."""
        c = self.shape(x).c
        m, shift = x, 1
        while shift < c:
            rot = np.zeros((c, c), np.float32)
            rot[np.arange(c), (np.arange(c) + shift) % c] = 1.0
            p = self.conv1x1(row, f"{row}.rot{shift}", m, rot)
            m = self.add(row, "max", f"{row}.max{shift}", [m, p])
            shift *= 2
        return m

    def broadcast_channels(self, row: str, t: str, c: int) -> str:
        """A 1x1x1 tensor on c channels (a convolution with c kernels of weight 1)."""
        return self.conv1x1(row, f"{row}.bcast", t, np.ones((c, 1), np.float32))

    def operands(self, op: Op) -> tuple[str, str, bool]:
        """(full, other, swapped): the full-shape input first; an N111 tensor is broadcast to
        C x 1 x 1 first (the SDP reads it PER_KERNEL)."""
        x, t = op.inputs
        sx, st = self.shape(x), self.shape(t)
        swapped = sx.elements < st.elements
        if swapped:
            x, t, sx, st = t, x, st, sx
        if st != sx and (st.c, st.h, st.w) == (1, 1, 1) and sx.c > 1:
            t = self.broadcast_channels(op.name, t, sx.c)
        return x, t, swapped

    def expand(self, op: Op) -> None:
        k, n, a = op.kind, op.name, op.attrs
        const = a.get("constant")
        if k == "scale":
            x = self.shape(op.inputs[0])
            self.sdpfn(n, n, op.inputs[0], mode="lin", a=as_cube(a.get("scale", 1.0), x),
                       c=as_cube(a.get("shift", 0.0), x))
        elif k in ("sub", "equal", "greater", "less"):
            fn = COMPARISONS.get(k)
            if const is not None:
                x = self.shape(op.inputs[0])
                sign = -1.0 if a.get("constant_first") else 1.0     # c - x or x - c
                self.sdpfn(n, n, op.inputs[0], mode="lin", a=np.full((1, 1, 1), sign),
                           c=-sign * as_cube(const, x), fn=fn)
            else:
                x, t, swapped = self.operands(op)
                # x - t, or t - x when the broadcast operand came first
                self.sdpfn(n, n, [x, t], mode="lin", a=np.full((1, 1, 1), -1.0 if swapped else 1.0),
                           b=1.0 if swapped else -1.0, fn=fn)
        elif k == "div":
            if const is not None and not a.get("constant_first"):
                divisor = float(np.asarray(const).reshape(-1)[0])
                if divisor == 0:
                    raise NvdlaSimError(f"layer '{n}': a division by the constant 0")
                self.sdpfn(n, n, op.inputs[0], mode="lin", a=np.full((1, 1, 1), 1.0 / divisor))
            elif const is not None:
                v = float(np.asarray(const).reshape(-1)[0])
                self.sdpfn(n, n, op.inputs[0], mode="lin", fn=f"{v!r} / x")
            else:
                x, t = op.inputs
                r = self.sdpfn(n, f"{n}.recip", t, mode="lin", fn="1 / x")
                tmp = Op(n, "div", [x, r])
                full, other, _ = self.operands(tmp)
                self.sdpfn(n, n, [full, other], mode="prod")
        elif k == "pow":
            p = float(np.asarray(const).reshape(-1)[0])
            self.sdpfn(n, n, op.inputs[0], mode="lin", fn=f"x ** {p!r}")
        elif k == "abs":
            self.sdpfn(n, n, op.inputs[0], mode="lin", fn="abs")
        elif k == "prelu":                            # per-element constant slopes
            self.sdpfn(n, n, op.inputs[0], mode="lin", fn="prelu", slope=a["slope_cube"])
        elif k in UNARY_LUT:
            self.sdpfn(n, n, op.inputs[0], mode="lin", fn=UNARY_LUT[k])
        elif k == "reduce":
            self.reduce_max(op)
        elif k == "softmax":
            self.softmax(op)
        else:
            raise NvdlaSimError(f"layer '{n}': no expansion for '{k}'")

    def reduce_max(self, op: Op) -> None:
        n, axes = op.name, op.attrs["axes"]
        x = op.inputs[0]
        s = self.shape(x)
        h, w = (s.h if "h" in axes else 1), (s.w if "w" in axes else 1)
        last_spatial = "c" not in axes or s.c == 1
        i = 0
        while h > 1 or w > 1:
            kh, kw = min(h, 8), min(w, 8)
            h, w = -(-h // kh), -(-w // kw)
            done = h == 1 and w == 1 and last_spatial
            x = self.out.add("pool", n if done else f"{n}.pool{i}", x, method="max",
                             kernel=(kh, kw), stride=(kh, kw), pad=(0, 0, 0, 0), ceil_mode=True,
                             row=n)
            i += 1
        if "c" in axes and s.c > 1:
            m = self.channel_max(n, x)
            pick = np.zeros((1, s.c), np.float32)
            pick[0, 0] = 1.0
            self.conv1x1(n, n, m, pick)
        elif x != n:                                  # nothing reduced (all axes of size 1)
            self.sdpfn(n, n, x, mode="lin")

    def softmax(self, op: Op) -> None:
        n, x = op.name, op.inputs[0]
        c = self.shape(x).c
        if op.attrs.get("axis", "c") != "c":
            return self.softmax_spatial(op, op.attrs["axis"])
        if c == 1:                                    # exp(x - x) / 1
            self.sdpfn(n, n, x, mode="lin", a=np.zeros((1, 1, 1)), c=np.ones((1, 1, 1)))
            return
        m = self.channel_max(n, x)
        e = self.sdpfn(n, f"{n}.exp", [x, m], mode="lin", a=np.ones((1, 1, 1)), b=-1.0,
                       fn="exp(x)")
        s = self.conv1x1(n, f"{n}.sum", e, np.ones((c, c), np.float32))
        r = self.sdpfn(n, f"{n}.recip", s, mode="lin", fn="1 / x")
        mode = softmax_mode(self.net, op)
        rounds = math.ceil(math.log2(c))
        self.sdpfn(n, n, [e, r], mode="prod",
                   note=f"softmax {mode} mode: max by {rounds} rotation rounds, exp and 1/sum "
                        "through the SDP LUT, sum by a convolution of ones")


    def softmax_spatial(self, op: Op, axis: str) -> None:
        """Over H or W: max pooling passes along the axis, a nearest resize back (RUBIK), exp(x -
        max), the sum by a depthwise convolution of ones, 1/sum, resized back, the product."""
        n, x = op.name, op.inputs[0]
        s = self.shape(x)
        size = s.h if axis == "h" else s.w
        if size == 1:                                 # exp(x - x) / 1
            self.sdpfn(n, n, x, mode="lin", a=np.zeros((1, 1, 1)), c=np.ones((1, 1, 1)))
            return
        along = (lambda k: (k, 1)) if axis == "h" else (lambda k: (1, k))
        m, rest, i = x, size, 0
        while rest > 1:
            k = min(rest, 8)
            rest = -(-rest // k)
            m = self.add(n, "pool", f"{n}.pool{i}", m, method="max", kernel=along(k),
                         stride=along(k), pad=(0, 0, 0, 0), ceil_mode=True)
            i += 1
        back = along(size)
        mb = self.add(n, "resize", f"{n}.maxb", m, scale=back, mode="nearest")
        e = self.sdpfn(n, f"{n}.exp", [x, mb], mode="lin", a=np.ones((1, 1, 1)), b=-1.0,
                       fn="exp(x)")
        name = f"{n}.sum"
        self.weights[name] = {"weight": np.ones((s.c, 1) + back, np.float32),
                              "bias": np.zeros(s.c, np.float32)}
        total = self.add(n, "conv", name, e, out_channels=s.c, kernel=back, stride=(1, 1),
                         pad=(0, 0, 0, 0), dilation=(1, 1), groups=s.c, bias=False, relu=False,
                         batchnorm=False)
        r = self.sdpfn(n, f"{n}.recip", total, mode="lin", fn="1 / x")
        rb = self.add(n, "resize", f"{n}.recipb", r, scale=back, mode="nearest")
        self.sdpfn(n, n, [e, rb], mode="prod",
                   note=f"softmax over {axis.upper()}: max by pooling, exp and 1/sum through the "
                        "SDP LUT, sum by a depthwise convolution of ones, broadcast back by "
                        "RUBIK (nearest resize)")


def _expands(op: Op) -> bool:
    """Whether `expand` rewrites `op`: USER_KINDS, and a PReLU with per-element slopes."""
    return op.kind in USER_KINDS or op.kind == "prelu" and "slope_cube" in op.attrs


def expand(net: Network, weights: dict, on_dla) -> Network:
    """`net` with every op of USER_KINDS that `on_dla(name)` accepts rewritten as sdpfn / conv /
    max / pool ops (module doc); the constant convolution weights are added to `weights`.
    Returns `net` itself when there is nothing to rewrite."""
    if not any(_expands(op) and on_dla(op.name) for op in net.ops):
        return net
    out = Network(net.name, net.input_name, net.input_shape)
    ex = _Expander(net, out, weights)
    for op in net.ops:
        if _expands(op) and on_dla(op.name):
            ex.expand(op)
            if out.shapes[op.name] != net.shapes[op.name]:
                raise NvdlaSimError(f"layer '{op.name}': expansion produced the wrong shape")
        else:
            out.ops.append(op)
            out.shapes[op.name] = net.shapes[op.name]
    return out
