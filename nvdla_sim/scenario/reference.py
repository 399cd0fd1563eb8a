"""Float32 reference execution of a Network: what the INT8 values on the DLA are compared with.

Tensors are (C, H, W) float32 arrays (one image).  Convolutions run as one matrix product per kernel
position (K x C times C x OH*OW, i.e. im2col split by position so no R*S-times copy of the input is
ever held; float32 BLAS on one thread, about 27 GMAC per CPU second here); everything else is
whole-array numpy.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..compiler.network import Network, Op
from ..errors import NvdlaSimError
from ..kernels.blas import single_thread
from .weights import Weights


def conv2d(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None, stride=(1, 1),
           pad=(0, 0, 0, 0), dilation=(1, 1), groups: int = 1) -> np.ndarray:
    """Cross-correlation of x (C, H, W) with weight (K, C/groups, R, S); pad is (top, left, bottom, right)."""
    c, h, w = x.shape
    k, cg, r, s = weight.shape
    (sh, sw), (dh, dw) = stride, dilation
    pt, pl, pb, pr = pad
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr))) if any(pad) else x
    oh = (h + pt + pb - dh * (r - 1) - 1) // sh + 1
    ow = (w + pl + pr - dw * (s - 1) - 1) // sw + 1
    kg = k // groups
    dtype = np.result_type(x.dtype, weight.dtype, np.float32)   # float64 in: exact integer sums
    out = np.zeros((k, oh * ow), dtype)
    with single_thread():          # one BLAS thread: kernels/blas.py says why
        for g in range(groups):
            xg = xp[g * cg:(g + 1) * cg]
            wg = weight[g * kg:(g + 1) * kg].astype(dtype, copy=False)
            acc = out[g * kg:(g + 1) * kg]
            for i in range(r):
                for j in range(s):
                    y0, x0 = i * dh, j * dw
                    patch = xg[:, y0:y0 + sh * (oh - 1) + 1:sh, x0:x0 + sw * (ow - 1) + 1:sw]
                    acc += wg[:, :, i, j] @ patch.reshape(cg, oh * ow)
    if bias is not None:
        out += bias.astype(dtype)[:, None]
    return out.reshape(k, oh, ow)


def pool2d(x: np.ndarray, method: str, kernel, stride, pad=(0, 0, 0, 0), ceil_mode: bool = False,
           count_include_pad: bool = True) -> np.ndarray:
    """Max or average pooling.  Max ignores padding; average divides by the window area when
    `count_include_pad` (what NVDLA PDP does with zero pad values), else by the in-range count."""
    c, h, w = x.shape
    (kh, kw), (sh, sw), (pt, pl, pb, pr) = kernel, stride, pad

    def out_size(n, k, st, a, b):
        span = n + a + b - k
        return (-(-span // st) if ceil_mode else span // st) + 1

    oh, ow = out_size(h, kh, sh, pt, pb), out_size(w, kw, sw, pl, pr)
    # Pad far enough that every window (ceil-mode overhang included) lies inside the array.
    eb = max(pb, (oh - 1) * sh + kh - h - pt)
    er = max(pr, (ow - 1) * sw + kw - w - pl)
    fill = -np.inf if method == "max" else 0.0
    xp = np.pad(x.astype(np.float32), ((0, 0), (pt, eb), (pl, er)), constant_values=fill)
    win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(1, 2))
    win = win[:, ::sh, ::sw][:, :oh, :ow]
    if method == "max":
        return win.max(axis=(3, 4)).astype(np.float32)
    if method != "avg":
        raise NvdlaSimError(f"pooling method '{method}' unknown")
    total = win.sum(axis=(3, 4), dtype=np.float64)
    if count_include_pad:
        return (total / (kh * kw)).astype(np.float32)
    ones = np.pad(np.ones((1, h, w)), ((0, 0), (pt, eb), (pl, er)))
    cnt = np.lib.stride_tricks.sliding_window_view(ones, (kh, kw), axis=(1, 2))[:, ::sh, ::sw]
    cnt = cnt[:, :oh, :ow].sum(axis=(3, 4))
    return (total / cnt).astype(np.float32)


def lrn(x: np.ndarray, size: int, alpha: float, beta: float, k: float) -> np.ndarray:
    """Across-channel LRN: x / (k + alpha/size * sum of x^2 over `size` neighbouring channels)^beta."""
    c = x.shape[0]
    lo, hi = (size - 1) // 2, size // 2
    sq = np.pad(x.astype(np.float64) ** 2, ((lo + 1, hi), (0, 0), (0, 0)))
    csum = np.cumsum(sq, axis=0)
    window = csum[lo + 1 + hi:lo + 1 + hi + c] - csum[:c]
    return (x / (k + alpha / size * window) ** beta).astype(np.float32)


def _relu(v: np.ndarray) -> np.ndarray:
    return np.maximum(v, 0.0)


def run_op(op: Op, ins: list[np.ndarray], weights: Weights) -> np.ndarray:
    """One op on float32 inputs."""
    a = op.attrs
    x = ins[0]
    kind = op.kind
    if kind == "conv":
        p = weights[op.name]
        y = conv2d(x, p["weight"], p.get("bias"), a["stride"], a["pad"], a["dilation"], a["groups"])
        return _relu(y) if a.get("relu") else y
    if kind == "fc":
        p = weights[op.name]
        y = p["weight"] @ x.reshape(-1).astype(np.float32)
        if p.get("bias") is not None:
            y = y + p["bias"]
        y = y.reshape(-1, 1, 1).astype(np.float32)
        return _relu(y) if a.get("relu") else y
    if kind == "pool":
        return pool2d(x, a["method"], a["kernel"], a["stride"], a["pad"], a.get("ceil_mode", False),
                      a.get("count_include_pad", True))
    if kind == "lrn":
        return lrn(x, a["size"], a["alpha"], a["beta"], a.get("k", 1.0))
    if kind in ("add", "mul", "max", "min"):
        fn: Callable = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}[kind]
        y = ins[0]
        for other in ins[1:]:
            y = fn(y, other)
        return _relu(y) if a.get("relu") else y.astype(np.float32)
    if kind == "concat":
        return np.concatenate(ins, axis=0)
    if kind == "relu":
        return _relu(x)
    if kind == "prelu":
        slope = np.full(x.shape[0], a["slope"], np.float32) if "slope" in a else weights[op.name]["slope"]
        slope = ins[1] if len(ins) > 1 else slope[:, None, None]    # a slope tensor (GPU)
        slope = a["slope_cube"] if "slope_cube" in a else slope     # per element (ext_ops)
        return np.where(x >= 0, x, x * slope).astype(np.float32)
    if kind == "clip":
        return np.clip(x, a.get("min", -np.inf), a.get("max", np.inf)).astype(np.float32)
    if kind == "sigmoid":
        return (1.0 / (1.0 + np.exp(-x.astype(np.float64)))).astype(np.float32)
    if kind == "tanh":
        return np.tanh(x)
    if kind == "batchnorm":
        p = weights[op.name]
        return (x * p["scale"][:, None, None] + p["bias"][:, None, None]).astype(np.float32)
    if kind == "softmax":
        axis = "chw".index(a.get("axis", "c"))
        e = np.exp(x.astype(np.float64) - x.max(axis=axis, keepdims=True))
        return (e / e.sum(axis=axis, keepdims=True)).astype(np.float32)
    if kind == "flatten":
        return x.reshape(-1, 1, 1)
    if kind == "pad":            # ONNX reflect (mirror without the edge) / edge (repeat the edge)
        pt, pl, pb, pr = a["pads"]
        return np.pad(x, ((0, 0), (pt, pb), (pl, pr)), mode=a["mode"])
    if kind in ("deconv", "resize"):
        from . import reference_resample as rr
        if kind == "deconv":
            p = weights[op.name]
            return rr.deconv2d(x, p["weight"], p.get("bias"), a["stride"], a["pad"],
                               a["dilation"], a.get("groups", 1))
        return (rr.resize_nearest if a["mode"] == "nearest" else rr.resize_bilinear)(x, a["scale"])
    if kind == "transpose":
        return np.ascontiguousarray(x.transpose(a["perm"]))
    if kind == "reshape":
        return np.ascontiguousarray(x.reshape(a["shape"]))
    if kind == "slice":
        (r0, rn), (c0, cn) = a.get("rows", (0, x.shape[1])), a.get("cols", (0, x.shape[2]))
        return np.ascontiguousarray(x[a["start"]:a["start"] + a["channels"], r0:r0 + rn, c0:c0 + cn])
    if kind == "shuffle":        # channel shuffle: (groups, C/groups) channels read as (C/groups, groups)
        c, h, w = x.shape
        return np.ascontiguousarray(x.reshape(a["groups"], c // a["groups"], h, w).swapaxes(0, 1)
                                    .reshape(c, h, w))
    if kind in EXT_REFERENCE or kind == "sdpfn":
        return _ext_op(op, ins).astype(np.float32)
    raise NvdlaSimError(f"layer '{op.name}': no reference for op kind '{kind}'")


# Scale, element-wise Sub/Div/Pow/comparisons, Unary, Reduce MAX (compiler/ext_ops.py), in
# float64 from their definitions; `sdpfn` is the SDP pass they are lowered to.
EXT_REFERENCE = {"sub": np.subtract, "div": np.divide, "pow": np.power, "equal": np.equal,
                 "greater": np.greater, "less": np.less}
EXT_REFERENCE.update({"abs": np.abs, "sin": np.sin, "cos": np.cos, "atan": np.arctan,
                      "scale": None, "reduce": None})


def _cube(v, c: int, h: int, w: int) -> np.ndarray:
    """A uniform / per-channel / element-wise constant broadcastable to (C, H, W)."""
    v = np.asarray(v, np.float64)
    return v.reshape(1, 1, 1) if v.size == 1 else v.reshape(c, 1, 1) if v.size == c \
        else v.reshape(c, h, w)


def _ext_op(op: Op, ins: list[np.ndarray]) -> np.ndarray:
    a = op.attrs
    x = ins[0].astype(np.float64)
    kind = op.kind
    c, h, w = x.shape
    if kind == "scale":
        return x * _cube(a.get("scale", 1.0), c, h, w) + _cube(a.get("shift", 0.0), c, h, w)
    if kind == "reduce":
        fn = {"max": np.max, "min": np.min, "sum": np.sum, "mean": np.mean}[a.get("op", "max")]
        return fn(x, axis=tuple("chw".index(ax) for ax in a["axes"]), keepdims=True)
    if kind in ("abs", "sin", "cos", "atan"):
        return EXT_REFERENCE[kind](x)
    if kind == "sdpfn":
        if a.get("mode") == "prod":
            z = x * ins[1].astype(np.float64) * float(a.get("k", 1.0))
        else:
            z = x * np.asarray(a.get("a", 1.0), np.float64)
            if len(ins) > 1:
                z = z + float(a.get("b", 1.0)) * ins[1].astype(np.float64)
            elif a.get("c") is not None:
                z = z + np.asarray(a["c"], np.float64)
        fn = a.get("fn")
        if fn is None:
            return z
        if fn == "abs":
            return np.abs(z)
        if fn == "prelu":
            return np.where(z >= 0, z, z * np.asarray(a["slope"], np.float64))
        steps = {"step_gt": np.greater, "step_lt": np.less, "step_eq": np.equal}
        if fn in steps:
            return steps[fn](z, 0).astype(np.float64)
        from ..lut.functions import parse_function
        return parse_function(fn)(z)
    if a.get("constant") is not None:
        k = _cube(a["constant"], c, h, w)
        operands = (k, x) if a.get("constant_first") else (x, k)
    else:
        operands = (x, ins[1].astype(np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        return EXT_REFERENCE[kind](*operands).astype(np.float64)


def run_reference(network: Network, weights: Weights, x: np.ndarray) -> dict[str, np.ndarray]:
    """Every tensor of the network (input included) for input x (C, H, W), as float32."""
    s = network.input_shape
    if tuple(x.shape) != (s.c, s.h, s.w):
        raise NvdlaSimError(f"input has shape {tuple(x.shape)}, network '{network.name}' expects "
                            f"{(s.c, s.h, s.w)} (C, H, W)")
    values = {network.input_name: np.ascontiguousarray(x, np.float32)}
    for op in network.ops:
        # a value beyond float32 is refused later with the layer named (quantisation, LUT
        # fitting); numpy's warnings would only print lines before that one-line error
        with np.errstate(over="ignore", invalid="ignore"):
            y = run_op(op, [values[i] for i in op.inputs], weights)
        want = network.shapes[op.name]
        if y.shape != (want.c, want.h, want.w):
            raise NvdlaSimError(f"layer '{op.name}': reference produced {y.shape}, shape inference "
                                f"says {(want.c, want.h, want.w)}")
        values[op.name] = y
    return values


def sqnr_db(reference: np.ndarray, test: np.ndarray) -> float:
    """Signal-to-quantisation-noise ratio of `test` against `reference`, in dB (inf when equal)."""
    ref = reference.astype(np.float64).ravel()
    err = ref - test.astype(np.float64).ravel()
    with single_thread():          # BLAS dot products: one thread (kernels/blas.py)
        noise = float(np.dot(err, err))
        signal = float(np.dot(ref, ref))
    if noise == 0.0:
        return float("inf")
    if signal == 0.0:
        return float("-inf")
    return 10.0 * np.log10(signal / noise)
