"""Network IR: tensors in NCHW terms (one image), operations in topological order.

This is what frontends (built-in networks, explicit layer lists, ONNX) produce and what the
compiler lowers to NVDLA hardware layers.  Shapes are inferred here once, for every consumer.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Shape:
    c: int
    h: int
    w: int

    @property
    def elements(self) -> int:
        return self.c * self.h * self.w


@dataclass
class Op:
    name: str
    kind: str                     # conv, fc, pool, lrn, add, mul, max, min, concat, relu, prelu,
                                  # clip, sigmoid, tanh, batchnorm (per-channel affine), softmax,
                                  # flatten
    inputs: list[str]
    attrs: dict = field(default_factory=dict)

    def attr(self, key: str, default=None):
        return self.attrs.get(key, default)


@dataclass
class Network:
    name: str
    input_name: str
    input_shape: Shape
    ops: list[Op] = field(default_factory=list)
    shapes: dict[str, Shape] = field(default_factory=dict)

    def __post_init__(self):
        self.shapes.setdefault(self.input_name, self.input_shape)

    @property
    def output(self) -> str:
        return self.ops[-1].name if self.ops else self.input_name

    @property
    def outputs(self) -> list[str]:
        """Tensors nothing consumes (the network's results), in op order."""
        used = {i for op in self.ops for i in op.inputs}
        return [op.name for op in self.ops if op.name not in used] or [self.input_name]

    def op(self, name: str) -> Op:
        for o in self.ops:
            if o.name == name:
                return o
        raise KeyError(name)

    def consumers(self) -> dict[str, list[Op]]:
        """Tensor name -> the ops reading it, in op order."""
        out: dict[str, list[Op]] = {self.input_name: []}
        for o in self.ops:
            out.setdefault(o.name, [])
            for i in o.inputs:
                out[i].append(o)
        return out

    def add(self, kind: str, name: str, inputs: list[str] | str, **attrs) -> str:
        inputs = [inputs] if isinstance(inputs, str) else list(inputs)
        for i in inputs:
            if i not in self.shapes:
                raise ValueError(f"layer '{name}': unknown input '{i}'")
        if name in self.shapes:
            raise ValueError(f"layer '{name}': name used twice")
        op = Op(name, kind, inputs, attrs)
        self.shapes[name] = infer_shape(op, [self.shapes[i] for i in inputs])
        self.ops.append(op)
        return name

    # Convenience builders (return the output tensor name) ---------------------------------------
    def conv(self, name, x, out_channels, kernel, stride=1, pad=0, dilation=1, groups=1,
             bias=True, relu=False, batchnorm=False):
        return self.add("conv", name, x, out_channels=out_channels, kernel=_pair(kernel),
                        stride=_pair(stride), pad=_quad(pad), dilation=_pair(dilation),
                        groups=groups, bias=bias, relu=relu, batchnorm=batchnorm)

    def fc(self, name, x, out_features, relu=False, bias=True):
        return self.add("fc", name, x, out_features=out_features, relu=relu, bias=bias)

    def pool(self, name, x, method, kernel, stride, pad=0, ceil_mode=False):
        return self.add("pool", name, x, method=method, kernel=_pair(kernel), stride=_pair(stride),
                        pad=_quad(pad), ceil_mode=ceil_mode)

    def global_avg_pool(self, name, x):
        s = self.shapes[x]
        return self.pool(name, x, "avg", (s.h, s.w), (s.h, s.w))


# Scale, element-wise Sub/Div/Pow/Equal/Greater/Less, Unary, Reduce MAX and the SDP pass they
# lower to (`sdpfn`): compiler/ext_ops.py
EXT_KINDS = frozenset(("scale", "sub", "div", "pow", "equal", "greater", "less", "abs", "sin",
                       "cos", "atan", "reduce", "sdpfn"))


def _pair(v) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))


def _quad(v) -> tuple[int, int, int, int]:
    """Padding as (top, left, bottom, right)."""
    if isinstance(v, int):
        return (v, v, v, v)
    v = tuple(int(x) for x in v)
    return (v[0], v[1], v[0], v[1]) if len(v) == 2 else v


def _out(size: int, k: int, s: int, pad_a: int, pad_b: int, d: int = 1, ceil: bool = False) -> int:
    span = size + pad_a + pad_b - d * (k - 1) - 1
    return (-(-span // s) if ceil else span // s) + 1


def infer_shape(op: Op, ins: list[Shape]) -> Shape:
    x = ins[0]
    k = op.kind
    if k == "conv":
        (kh, kw), (sh, sw), (pt, pl, pb, pr), (dh, dw) = (op.attrs["kernel"], op.attrs["stride"],
                                                          op.attrs["pad"], op.attrs["dilation"])
        if x.c % op.attrs["groups"]:
            raise ValueError(f"layer '{op.name}': {x.c} channels not divisible by groups")
        oh, ow = _out(x.h, kh, sh, pt, pb, dh), _out(x.w, kw, sw, pl, pr, dw)
        if oh <= 0 or ow <= 0:
            raise ValueError(f"layer '{op.name}': kernel larger than its padded input")
        return Shape(op.attrs["out_channels"], oh, ow)
    if k == "fc":
        return Shape(op.attrs["out_features"], 1, 1)
    if k == "pool":
        (kh, kw), (sh, sw), (pt, pl, pb, pr) = op.attrs["kernel"], op.attrs["stride"], op.attrs["pad"]
        ceil = op.attrs.get("ceil_mode", False)
        return Shape(x.c, _out(x.h, kh, sh, pt, pb, 1, ceil), _out(x.w, kw, sw, pl, pr, 1, ceil))
    if k == "concat":
        if any((s.h, s.w) != (x.h, x.w) for s in ins):
            raise ValueError(f"layer '{op.name}': concat inputs differ in height/width")
        return Shape(sum(s.c for s in ins), x.h, x.w)
    if k in ("add", "mul", "max", "min"):
        if any(s != x for s in ins):
            raise ValueError(f"layer '{op.name}': element-wise inputs differ in shape")
        return x
    if k == "flatten":
        return Shape(x.elements, 1, 1)
    if k == "pad":               # reflect / edge padding of H and W: (top, left, bottom, right)
        pt, pl, pb, pr = op.attrs["pads"]
        return Shape(x.c, x.h + pt + pb, x.w + pl + pr)
    if k == "deconv":            # transposed convolution (compiler/deconv.py)
        (kh, kw), (sh, sw), (pt, pl, pb, pr), (dh, dw) = (op.attrs["kernel"], op.attrs["stride"],
                                                          op.attrs["pad"], op.attrs["dilation"])
        oh = (x.h - 1) * sh + dh * (kh - 1) + 1 - pt - pb
        ow = (x.w - 1) * sw + dw * (kw - 1) + 1 - pl - pr
        if oh <= 0 or ow <= 0 or x.c % op.attrs.get("groups", 1):
            raise ValueError(f"layer '{op.name}': deconvolution padding larger than its output "
                             "or channels not divisible by groups")
        return Shape(op.attrs["out_channels"], oh, ow)
    if k == "resize":            # integer scales (sh, sw), nearest or bilinear
        sh, sw = op.attrs["scale"]
        return Shape(x.c, x.h * sh, x.w * sw)
    if k == "transpose":         # a permutation of (C, H, W)
        dims = (x.c, x.h, x.w)
        return Shape(*(dims[i] for i in op.attrs["perm"]))
    if k == "reshape":           # the C*H*W elements in row-major order, another (C, H, W)
        c, h, w = op.attrs["shape"]
        if c * h * w != x.elements:
            raise ValueError(f"layer '{op.name}': reshape of {x.elements} elements to {c}x{h}x{w}")
        return Shape(c, h, w)
    if k in EXT_KINDS:           # layers_b's kinds (compiler/ext_ops.py): broadcast, reduce
        from .ext_ops import infer_ext_shape
        return infer_ext_shape(op, ins)
    if k == "slice":             # channels [start, start + channels) (an ONNX Split output);
        if op.attrs["start"] + op.attrs["channels"] > x.c:   # rows / cols: (first, count)
            raise ValueError(f"layer '{op.name}': channels beyond its input's {x.c}")
        (r0, rn), (c0, cn) = op.attrs.get("rows", (0, x.h)), op.attrs.get("cols", (0, x.w))
        if min(r0, c0) < 0 or min(rn, cn) < 1 or r0 + rn > x.h or c0 + cn > x.w:
            raise ValueError(f"layer '{op.name}': rows/columns beyond its input's {x.h}x{x.w}")
        return Shape(op.attrs["channels"], rn, cn)
    return x      # relu, prelu, sigmoid, tanh, batchnorm, lrn, softmax, clip: shape-preserving
