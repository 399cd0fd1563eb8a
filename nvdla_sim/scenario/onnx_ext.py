"""ONNX import of Sub (two tensors), Div, Pow, Equal / Greater / Less (+ Cast), Abs, Sin, Cos,
Atan, ReduceMax, Softmax over H / W and a PRelu whose slope is a tensor (onnx_import.py calls
`import_node`; element-wise constants of Add / Sub / Mul come through `elementwise_scale`).

What the network IR cannot express is refused with a one-line error naming the node; what it can
but the DLA cannot run is placed by the rules of compiler/dla_rules.py (scale.*, eltwise.*,
unary.*, reduce.*, softmax.*, prelu.*; compiler/ext_ops.py).
"""
from __future__ import annotations

import numpy as np

KINDS = {"Sub": "sub", "Div": "div", "Pow": "pow", "Equal": "equal", "Greater": "greater",
         "Less": "less", "Abs": "abs", "Sin": "sin", "Cos": "cos", "Atan": "atan"}
REDUCE = {"ReduceMax": "max", "ReduceMin": "min", "ReduceSum": "sum", "ReduceMean": "mean"}
OPS = tuple(KINDS) + tuple(REDUCE) + ("Cast",)
KNOWN_ATTRS = {**{op: set() for op in KINDS},
               **{op: {"axes", "keepdims", "noop_with_empty_axes"} for op in REDUCE},
               "Cast": {"to", "saturate"}}
CAST_TO = {1: "float", 3: "int8", 10: "float16", 6: "int32", 7: "int64", 11: "double"}


def _rank(imp, onnx_name: str, name: str) -> int:
    s = imp.net.shapes[name]
    return len(imp.dims.get(onnx_name) or ((1, s.c, s.h, s.w) if s.h * s.w > 1 else (1, s.c)))


def _constant_cube(imp, node, v: np.ndarray, x: str, x_onnx: str) -> np.ndarray:
    """A constant operand as uniform (1,), per-channel (C,) or element-wise (C, H, W) values,
    ONNX broadcasting aligned on the right against the [1, C, H, W] (or [1, C]) tensor."""
    s = imp.net.shapes[x]
    rank = _rank(imp, x_onnx, x)
    v = np.asarray(v, np.float64)
    if v.size == 1:
        return v.reshape(1)
    if v.ndim > rank:
        raise imp.fail(node, f"a constant of shape {list(v.shape)} against a rank-{rank} tensor")
    shape = (1,) * (rank - v.ndim) + tuple(v.shape)
    full = (1, s.c, s.h, s.w) if rank == 4 else (1, s.c)
    if shape[0] == 1 and shape[1] == s.c and all(d == 1 for d in shape[2:]):
        return v.reshape(s.c)
    if rank == 4 and shape[0] == 1 and tuple(shape[1:]) == full[1:]:
        return v.reshape(s.c, s.h, s.w)
    raise imp.fail(node, f"a constant of shape {list(v.shape)} against a {list(full)} tensor "
                         "(uniform, per channel or element-wise only)")


def elementwise_scale(imp, node, op: str, ins: list[str], out: str) -> bool:
    """Add / Sub / Mul with an element-wise constant, or constant minus tensor: a `scale` op
    (TensorRT's Scale, element-wise mode).  False when the constant is not one of those."""
    consts = [i for i in ins if i in imp.consts]
    if len(consts) != 1 or op not in ("Add", "Sub", "Mul"):
        return False
    x = next(i for i in ins if i not in imp.consts)
    x_onnx = next(i for i in node.input if i and imp.src(i) == x)
    v = _constant_cube(imp, node, imp.consts[consts[0]], x, x_onnx)
    first = ins[0] in imp.consts
    if v.ndim != 3 and not (op == "Sub" and first):
        return False                       # scalar / per channel: the batchnorm path
    if op == "Mul":
        imp.net.add("scale", out, x, scale=v, shift=np.zeros(1))
    elif op == "Add":
        imp.net.add("scale", out, x, scale=np.ones(1), shift=v)
    else:                                  # x - v, or v - x
        imp.net.add("scale", out, x, scale=-np.ones(1) if first else np.ones(1),
                    shift=v if first else -v)
    return True


def import_node(imp, node, op: str, a: dict, ins: list[str], out: str) -> None:
    net = imp.net
    if op == "Cast":
        to = int(a.get("to", 0))
        if to not in (1, 3, 10):
            raise imp.fail(node, f"cast to {CAST_TO.get(to, to)} (only to float, float16 or int8, "
                                 "after a comparison or as an identity)")
        imp.alias[out] = ins[0]
        return
    if op in REDUCE:
        reduce(imp, node, REDUCE[op], a, ins, out)
        return
    kind = KINDS[op]
    if kind in ("abs", "sin", "cos", "atan"):
        net.add(kind, out, ins[0])
        return
    consts = [i for i in ins if i in imp.consts]
    attrs: dict = {}
    if kind in ("equal", "greater", "less"):
        readers = [n.op_type for n in imp.graph.node if out in n.input]
        attrs["cast"] = bool(readers) and all(r == "Cast" for r in readers)
    if len(consts) == 2:
        raise imp.fail(node, "both operands are constants (fold them before import)")
    if consts:
        x = next(i for i in ins if i not in imp.consts)
        x_onnx = next(i for i in node.input if i and imp.src(i) == x)
        v = _constant_cube(imp, node, imp.consts[consts[0]], x, x_onnx)
        first = ins[0] in imp.consts
        if kind == "pow" and first:
            attrs["constant_exponent"] = False
        net.add(kind, out, x, constant=v, constant_first=first, **attrs)
        return
    net.add(kind, out, ins, **attrs)


def reduce(imp, node, how: str, a: dict, ins: list[str], out: str) -> None:
    x = imp.net.shapes[ins[0]]
    rank = _rank(imp, node.input[0], ins[0])
    axes = a.get("axes")
    if len(ins) > 1:
        axes = imp.const(ins[1])
        if axes is None:
            raise imp.fail(node, "the axes must be a constant")
    if axes is None or np.asarray(axes).size == 0:
        if a.get("noop_with_empty_axes", 0):
            imp.alias[out] = ins[0]
            return
        axes = list(range(1, rank))
    axes = sorted({int(v) + rank if int(v) < 0 else int(v) for v in np.asarray(axes).reshape(-1)})
    if min(axes) < 1 or max(axes) >= rank:
        raise imp.fail(node, f"reduce over axes {axes} of a rank-{rank} tensor (the batch axis "
                             "cannot be reduced)")
    names = "chw" if rank == 4 else "c"
    picked = "".join(names[i - 1] for i in axes)
    keep = int(a.get("keepdims", 1))
    if not keep and not (rank == 4 and picked == "hw") and not (rank == 2 and picked == "c"):
        raise imp.fail(node, f"keepdims=0 over axes {axes} (a rank change the [1, C, H, W] "
                             "tensors cannot hold; only H and W of a 4-D tensor)")
    if not keep and rank == 2:
        raise imp.fail(node, "keepdims=0 over the channels of a [1, C] tensor")
    imp.net.add("reduce", out, ins[0], op=how, axes=tuple(picked))
