"""ONNX import of ConvTranspose, Resize / Upsample, Slice and 4-D Transpose (onnx_import.py calls
`import_node` / `transpose`).  What the network IR cannot express is refused with a one-line
error naming the node; what it can but the DLA cannot run is placed by the rules of
compiler/dla_rules.py (deconv.*, resize.*, slice.*, shuffle.*)."""
from __future__ import annotations

import numpy as np

INT_LIMIT = 2 ** 31          # ONNX Slice: starts/ends beyond the dimension are clamped


def import_node(imp, node, op: str, a: dict, ins: list[str], out: str) -> None:
    if op == "ConvTranspose":
        conv_transpose(imp, node, a, ins, out)
    elif op in ("Resize", "Upsample"):
        resize(imp, node, op, a, ins, out)
    else:
        slice_(imp, node, a, ins, out)


def _text(v, default: str) -> str:
    v = default if v is None else v
    return v.decode() if isinstance(v, bytes) else str(v)


def conv_transpose(imp, node, a: dict, ins: list[str], out: str) -> None:
    w = imp.const(ins[1]) if len(ins) > 1 else None
    if w is None or w.ndim != 4:
        raise imp.fail(node, "weights must be a 4-D constant (2-D transposed convolution)")
    b = imp.const(ins[2]) if len(ins) > 2 else None
    if len(ins) > 2 and b is None:
        raise imp.fail(node, "the bias must be a constant")
    c, kg, r, s = w.shape
    x = imp.net.shapes[ins[0]]
    group = int(a.get("group", 1))
    if group < 1 or c != x.c or c % group:
        raise imp.fail(node, f"weights {list(w.shape)} with group {group} do not fit a "
                             f"{x.c}-channel input")
    k = kg * group
    if b is not None and b.size != k:
        raise imp.fail(node, f"bias of {b.size} values for {k} output channels")
    if "kernel_shape" in a and tuple(a["kernel_shape"]) != (r, s):
        raise imp.fail(node, f"kernel_shape {list(a['kernel_shape'])} differs from the weights' {[r, s]}")
    stride = imp.ints(node, a, "strides", (1, 1), 1)
    dil = imp.ints(node, a, "dilations", (1, 1), 1)
    if any(int(v) for v in a.get("output_padding", ())):
        raise imp.fail(node, f"output_padding {list(a['output_padding'])} is not modelled (DLA "
                             "deconvolution: padding 0)")
    if "output_shape" in a:
        raise imp.fail(node, "output_shape is not modelled (give pads)")
    auto = _text(a.get("auto_pad"), "NOTSET")
    if auto not in ("NOTSET", "VALID"):
        raise imp.fail(node, f"auto_pad {auto} is not modelled (NOTSET or VALID)")
    pads = imp.ints(node, a, "pads", (0, 0, 0, 0), 0) if auto == "NOTSET" else (0, 0, 0, 0)
    imp.net.add("deconv", out, ins[0], out_channels=int(k), kernel=(int(r), int(s)),
                stride=stride, pad=tuple(int(p) for p in pads), dilation=dil, groups=group,
                bias=b is not None)
    imp.weights[out] = {"weight": w.astype(np.float32),
                        "bias": (b.reshape(-1) if b is not None else np.zeros(k)).astype(np.float32)}


# Coordinate modes that give output pixel o the input pixel o // s for an integer scale s.
NEAREST_EXACT = {("half_pixel", "round_prefer_floor"), ("half_pixel", "round_prefer_ceil"),
                 ("pytorch_half_pixel", "round_prefer_floor"),
                 ("pytorch_half_pixel", "round_prefer_ceil"), ("asymmetric", "floor"),
                 ("tf_half_pixel_for_nn", "floor")}
LINEAR_MODES = ("half_pixel", "pytorch_half_pixel")     # reference_resample.resize_bilinear


def resize(imp, node, op: str, a: dict, ins: list[str], out: str) -> None:
    x = imp.net.shapes[ins[0]]
    names = list(node.input)
    in_dims = (1, x.c, x.h, x.w)
    if op == "Upsample":                         # opset 7: attribute; 9: the second input
        scales = a.get("scales")
        if scales is None:
            scales = imp.const(imp.src(names[1])) if len(names) > 1 and names[1] else None
        coord, nearest = "asymmetric", "floor"
    else:
        scales = imp.const(imp.src(names[2])) if len(names) > 2 and names[2] else None
        if scales is not None and np.asarray(scales).size == 0:
            scales = None
        if scales is None and len(names) > 3 and names[3]:
            sizes = imp.const(imp.src(names[3]))
            if sizes is not None and np.asarray(sizes).size == 4:
                scales = np.asarray(sizes, np.float64).reshape(-1) / np.asarray(in_dims)
        if a.get("axes") is not None or int(a.get("antialias", 0)) or \
                _text(a.get("keep_aspect_ratio_policy"), "stretch") != "stretch":
            raise imp.fail(node, "axes / antialias / keep_aspect_ratio_policy are not modelled")
        if int(a.get("exclude_outside", 0)):
            raise imp.fail(node, "exclude_outside=1 is not modelled")
        coord = _text(a.get("coordinate_transformation_mode"), "half_pixel")
        nearest = _text(a.get("nearest_mode"), "round_prefer_floor")
    if scales is None:
        raise imp.fail(node, "the scales (or sizes) must be constants")
    scales = [float(v) for v in np.asarray(scales).reshape(-1)]
    if len(scales) != 4 or scales[0] != 1 or scales[1] != 1:
        raise imp.fail(node, f"scales {scales}: the DLA resizes with exactly 4 scales, the first "
                             "two 1 (TensorRT's Resize rule)")
    if any(v != int(v) or v < 1 for v in scales[2:]):
        raise imp.fail(node, f"scales {scales[2:]}: only integer up-sampling scales are modelled")
    mode = _text(a.get("mode"), "nearest")
    if mode == "nearest":
        if (coord, nearest) not in NEAREST_EXACT:
            raise imp.fail(node, f"nearest with coordinate_transformation_mode {coord} and "
                                 f"nearest_mode {nearest} is not modelled (output o reads input "
                                 "o // scale only with half_pixel + round_prefer_*, asymmetric + floor)")
    elif mode in ("linear", "bilinear"):
        if coord not in LINEAR_MODES:
            raise imp.fail(node, f"linear with coordinate_transformation_mode {coord} is not "
                                 f"modelled ({' or '.join(LINEAR_MODES)})")
        mode = "bilinear"
    else:
        raise imp.fail(node, f"mode {mode} is not modelled (nearest, linear)")
    imp.net.add("resize", out, ins[0], scale=(int(scales[2]), int(scales[3])), mode=mode)


def _clamped(start: int, end: int, dim: int) -> tuple[int, int]:
    """ONNX Slice's clamping of one axis (step 1): negative values count from the end."""
    start = start + dim if start < 0 else start
    end = end + dim if end < 0 else end
    return min(max(start, 0), dim), min(max(end, 0), dim)


def slice_(imp, node, a: dict, ins: list[str], out: str) -> None:
    x = imp.net.shapes[ins[0]]
    names = list(node.input)
    if imp.opset < 10:
        starts, ends, axes, steps = a.get("starts"), a.get("ends"), a.get("axes"), None
    else:
        def const_at(i):
            return imp.const(imp.src(names[i])) if len(names) > i and names[i] else None
        starts, ends, axes, steps = const_at(1), const_at(2), const_at(3), const_at(4)
        if starts is None or ends is None or (len(names) > 3 and names[3] and axes is None) \
                or (len(names) > 4 and names[4] and steps is None):
            raise imp.fail(node, "starts / ends / axes / steps must be constants (static slicing)")
    rank = len(imp.dims.get(node.input[0]) or (1, x.c, x.h, x.w))
    if rank != 4:
        raise imp.fail(node, f"slice of a rank-{rank} tensor (the DLA slices 4-D NCHW tensors)")
    for what, v in (("starts", starts), ("ends", ends), ("axes", axes), ("steps", steps)):
        if v is not None and not np.issubdtype(np.asarray(v).dtype, np.integer):
            raise imp.fail(node, f"{what} must be integers, got {np.asarray(v).dtype}")
    starts = [int(v) for v in np.asarray(starts).reshape(-1)]
    ends = [int(v) for v in np.asarray(ends).reshape(-1)]
    axes = list(range(len(starts))) if axes is None else [int(v) for v in np.asarray(axes).reshape(-1)]
    if len({a + 4 if a < 0 else a for a in axes}) != len(axes):
        raise imp.fail(node, f"axes {axes} repeat an axis (ONNX: each axis at most once)")
    if steps is not None and any(int(v) != 1 for v in np.asarray(steps).reshape(-1)):
        raise imp.fail(node, f"steps {np.asarray(steps).reshape(-1).tolist()} (only 1 is modelled)")
    if not len(starts) == len(ends) == len(axes):
        raise imp.fail(node, "starts, ends and axes differ in length")
    dims = [1, x.c, x.h, x.w]
    ranges = [(0, d) for d in dims]
    for axis, st, en in zip(axes, starts, ends):
        axis = axis + 4 if axis < 0 else axis
        if not 0 <= axis < 4:
            raise imp.fail(node, f"axis {axis} of a 4-D tensor")
        lo, hi = _clamped(max(min(st, INT_LIMIT), -INT_LIMIT), max(min(en, INT_LIMIT), -INT_LIMIT),
                          dims[axis])
        if hi <= lo:
            raise imp.fail(node, f"empty slice [{st}, {en}) of axis {axis}")
        ranges[axis] = (lo, hi)
    if ranges[0] != (0, 1):
        raise imp.fail(node, "slicing the batch axis (the DLA slices C, H and W)")
    (c0, c1), (r0, r1), (w0, w1) = ranges[1:]
    extra = {}
    if (r0, r1) != (0, x.h):
        extra["rows"] = (r0, r1 - r0)
    if (w0, w1) != (0, x.w):
        extra["cols"] = (w0, w1 - w0)
    imp.net.add("slice", out, ins[0], start=c0, channels=c1 - c0, **extra)


def transpose(imp, node, perm: list[int], ins: list[str], out: str) -> None:
    """A transpose of a 4-D activation: the identity is a view, others move data (a GPU
    layer: rule shuffle.transpose); the batch axis never moves (TensorRT's Shuffle rule)."""
    if sorted(perm) != [0, 1, 2, 3]:
        raise imp.fail(node, f"perm {perm} is not a permutation of 4 axes")
    if perm[0] != 0:
        raise imp.fail(node, f"transpose {perm} moves the batch axis (the DLA's shuffles never "
                             "involve the batch)")
    if perm == [0, 1, 2, 3]:
        imp.alias[out] = ins[0]
        return
    imp.net.add("transpose", out, ins[0], perm=tuple(p - 1 for p in perm[1:]))
