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
- the SDP pass itself (`emit_sdpfn`, `quantize_sdpfn`).

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
"""
from __future__ import annotations

import math
import numpy as np

from ..config import HardwareConfig
from ..datatype import INT8, DataType
from ..errors import NvdlaSimError, UnsupportedError
from .network import Network, Op, Shape

USER_KINDS = ("scale", "sub", "div", "pow", "equal", "greater", "less", "abs", "sin", "cos",
              "atan", "reduce", "softmax")
COMPARISONS = {"equal": "step_eq", "greater": "step_gt", "less": "step_lt"}
UNARY_LUT = {"sin": "sin(x)", "cos": "cos(x)", "atan": "arctan(x)"}
SOFTMAX_OPTIMIZED_AXIS = 1024       # TensorRT: the optimized mode restricts the axis to 1024
CHANNEL_MAX_LIMIT = 2048            # a max over channels: ceil(log2 C) C x C rotations (model)
SPATIAL_AXIS_LIMIT = 32             # softmax over H / W: resize scale and kernel at most 32
STEP_HALF = 128                     # comparison LUT: LO nodes at the integers -128..128


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


def expand(net: Network, weights: dict, on_dla) -> Network:
    """`net` with every op of USER_KINDS that `on_dla(name)` accepts rewritten as sdpfn / conv /
    max / pool ops (module doc); the constant convolution weights are added to `weights`.
    Returns `net` itself when there is nothing to rewrite."""
    if not any(op.kind in USER_KINDS and on_dla(op.name) for op in net.ops):
        return net
    out = Network(net.name, net.input_name, net.input_shape)
    ex = _Expander(net, out, weights)
    for op in net.ops:
        if op.kind in USER_KINDS and on_dla(op.name):
            ex.expand(op)
            if out.shapes[op.name] != net.shapes[op.name]:
                raise NvdlaSimError(f"layer '{op.name}': expansion produced the wrong shape")
        else:
            out.ops.append(op)
            out.shapes[op.name] = net.shapes[op.name]
    return out


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
    stages = [SdpStage("x1", mul="prelu" if fn == "abs" else "rescale", post_ops=[0])]
    if len(op.inputs) > 1 or op.attrs.get("c") is not None:
        stages.append(SdpStage("x2", alu=("sum", 0) if op.attrs.get("mode") == "lin" else None,
                               mul=("product", 0) if op.attrs.get("mode") == "prod" else "rescale"))
    if fn not in (None, "abs"):
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
    elif fn not in (None, "abs"):
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
    if fn not in (None, "abs"):
        lo, hi = _lut_range(z, fn)
        y = YStage(lut=_fit_cached(fn, lo, hi, "fp16", None, None))
    return SdpLayer(x1, x2, y, IDENTITY, layer.name, FP16)
