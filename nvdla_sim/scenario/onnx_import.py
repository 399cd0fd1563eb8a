"""ONNX import (optional dependency `onnx`, extra `[onnx]`): an ONNX model -> Network + weights.

Supported nodes: Conv, Gemm, MatMul (with a constant weight), Relu, LeakyRelu, PRelu, Clip,
Sigmoid, Tanh, MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool, BatchNormalization, Add,
Mul (two tensors, or a tensor and a per-channel / scalar constant), Concat (channels), LRN,
Flatten, Reshape / Squeeze / Unsqueeze that keep the C, H, W layout or flatten, Softmax (which the
DLA cannot run: GPU fallback), Dropout / Identity (pass-through), n-ary Sum (a chain of two-input
additions), the channel shuffle Reshape [1,g,C/g,H,W] - Transpose (0,2,1,3,4) - Reshape [1,C,H,W]
(a `shuffle` op: a channel permutation, GPU fallback), a zero-constant Pad of H and W folded
into the padding of the convolution (or average pooling) it feeds, a reflect / edge Pad of H and W
(a `pad` op, GPU fallback: the DLA pads with a constant only), and Split along channels (one
`slice` op per output, GPU fallback).  A per-channel Mul/Add/Sub on
the output of another per-channel affine (batch norm written as Mul + Add) merges into one
`batchnorm` op, which the compiler folds into a convolution before it.
The model is normalised first (`onnx_normalize`: version conversion, constant folding with onnx's
reference evaluator, weight inputs dropped).  One image: the batch dimension must be 1 (or
symbolic).  Tensor names become op names.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..compiler.network import Network, Shape
from ..compiler.support import MAX_DIM

FLT_MAX = float(np.finfo(np.float32).max)
FP16_MAX = 65504.0
from ..errors import NvdlaSimError
from .weights import Weights, batchnorm_affine


def _onnx():
    try:
        import onnx
        from onnx import numpy_helper
    except ImportError:
        raise NvdlaSimError("ONNX import needs the 'onnx' package: pip install 'nvdla-sim[onnx]' "
                            "(or pip install onnx)") from None
    return onnx, numpy_helper


# The attributes each supported node may carry: any other is refused rather than ignored (a
# silently ignored attribute would compute something else than the model says).
_POOL_ATTRS = {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "strides"}
from .onnx_ext import KNOWN_ATTRS as ONNX_EXT_ATTRS, OPS as ONNX_EXT_OPS    # noqa: E402

KNOWN_ATTRS: dict[str, set[str]] = {
    "Constant": {"value"}, "Dropout": {"ratio", "seed", "is_test"}, "Identity": set(), "Sum": set(),
    "Pad": {"mode", "pads", "value"}, "Transpose": {"perm"}, "Split": {"axis", "split", "num_outputs"},
    "Conv": {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"},
    "Gemm": {"alpha", "beta", "transA", "transB"}, "MatMul": set(),
    "Relu": set(), "LeakyRelu": {"alpha"}, "PRelu": set(), "Clip": {"min", "max"},
    "Sigmoid": set(), "Tanh": set(), "Softmax": {"axis"},
    "MaxPool": _POOL_ATTRS | {"storage_order"}, "AveragePool": _POOL_ATTRS | {"count_include_pad"},
    "GlobalAveragePool": set(), "GlobalMaxPool": set(),
    "BatchNormalization": {"epsilon", "momentum", "training_mode", "spatial", "is_test"},
    "Add": set(), "Mul": set(), "Sub": set(), "Max": set(), "Min": set(), "Concat": {"axis"},
    "LRN": {"alpha", "beta", "bias", "size"},
    **ONNX_EXT_ATTRS,         # Div, Pow, comparisons, unary, Reduce*, Cast (onnx_ext.py)
    "Flatten": {"axis"}, "Reshape": {"allowzero"}, "Squeeze": {"axes"}, "Unsqueeze": {"axes"},
    # deconvolution, resize, slice (onnx_resample.py)
    "ConvTranspose": {"auto_pad", "dilations", "group", "kernel_shape", "output_padding",
                      "output_shape", "pads", "strides"},
    "Resize": {"coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside",
               "extrapolation_value", "mode", "nearest_mode", "antialias", "axes",
               "keep_aspect_ratio_policy"},
    "Upsample": {"mode", "scales"}, "Slice": {"starts", "ends", "axes"},
}


class _Importer:
    def __init__(self, model, where: str):
        from .onnx_normalize import normalize
        self.onnx, self.nh = _onnx()
        self.where = where
        norm = normalize(model, where)
        self.model = norm.model
        self.graph = norm.model.graph
        self.opset = next(int(i.version) for i in self.model.opset_import if i.domain in ("", "ai.onnx"))
        self.consts: dict[str, np.ndarray] = dict(norm.consts)
        self.dims: dict[str, tuple[int, ...]] = norm.shapes      # ONNX shapes, batch included
        self.alias: dict[str, str] = {}          # pass-through tensor -> its source
        self.weights: Weights = {}
        self.net: Network | None = None
        self.uses: dict[str, int] = {}           # ONNX tensor -> how many node inputs read it
        for node in self.graph.node:
            for i in node.input:
                self.uses[i] = self.uses.get(i, 0) + 1
        for o in self.graph.output:
            self.uses[o.name] = self.uses.get(o.name, 0) + 1
        self.checked: set[str] = set()            # ops whose weights were checked finite
        self.padded: dict[str, tuple[str, tuple[int, int, int, int]]] = {}   # Pad output -> (src, pads)
        self.grouped: dict[str, tuple[str, int, bool]] = {}   # 5-D view -> (src, groups, transposed)

    def fail(self, node, message: str) -> NvdlaSimError:
        label = node.name or (node.output[0] if node.output else "?")
        return NvdlaSimError(f"{self.where}: node '{label}' ({node.op_type}): {message}")

    def attrs(self, node) -> dict:
        a = {x.name: self.onnx.helper.get_attribute_value(x) for x in node.attribute}
        known = KNOWN_ATTRS.get(node.op_type)
        if known is not None:
            for name in sorted(set(a) - known):
                raise self.fail(node, f"attribute '{name}' is not modelled (the importer reads "
                                      f"{', '.join(sorted(known)) or 'none'})")
        for name, v in a.items():
            if isinstance(v, float) and not math.isfinite(v):
                raise self.fail(node, f"attribute {name}={v} is not a finite number")
        return a

    def ints(self, node, a: dict, key: str, default: tuple[int, ...], minimum: int) -> tuple[int, ...]:
        """A 2-D window attribute (kernel_shape, strides, dilations: 2 values; pads: 4), checked."""
        v = tuple(int(x) for x in a.get(key, default))
        if len(v) != len(default):
            raise self.fail(node, f"{key} {list(v)}: expected {len(default)} values (2-D only)")
        if min(v) < minimum or max(v) > MAX_DIM:
            raise self.fail(node, f"{key} {list(v)}: every value must be in {minimum}..{MAX_DIM}")
        return v

    def src(self, name: str) -> str:
        while name in self.alias:
            name = self.alias[name]
        return name

    def const(self, name: str) -> np.ndarray | None:
        return self.consts.get(name)

    # -- graph -----------------------------------------------------------------------------------
    def run(self) -> tuple[Network, Weights]:
        inputs = [i for i in self.graph.input if i.name not in self.consts]
        if len(inputs) != 1:
            raise NvdlaSimError(f"{self.where}: the model has {len(inputs)} inputs; one image input expected")
        inp = inputs[0]
        dims = [d.dim_value if d.HasField("dim_value") else None
                for d in inp.type.tensor_type.shape.dim]
        if len(dims) == 4 and dims[0] in (None, 1) and all(d and d > 0 for d in dims[1:]):
            shape = Shape(*dims[1:])
            if max(dims[1:]) > MAX_DIM:
                raise NvdlaSimError(f"{self.where}: input '{inp.name}' has shape {dims}: above "
                                    f"{MAX_DIM}, NVDLA's largest cube dimension")
        elif len(dims) == 2 and dims[0] in (None, 1) and dims[1] and 0 < dims[1] <= MAX_DIM ** 2:
            shape = Shape(dims[1], 1, 1)
        else:
            raise NvdlaSimError(f"{self.where}: input '{inp.name}' has shape {dims}; expected "
                                "[1, C, H, W] (or [1, N])")
        name = self.graph.name or "onnx"
        self.net = Network(name, inp.name, shape)
        for node in self.graph.node:
            self.node(node)
            for name, params in self.weights.items():
                if name not in self.checked:
                    self.checked.add(name)
                    for key, v in params.items():
                        if not np.all(np.isfinite(v)):
                            raise self.fail(node, f"its {key} holds NaN or infinite values")
        outs = [self.src(o.name) for o in self.graph.output]
        missing = [o for o in outs if o not in self.net.shapes]
        if missing:
            raise NvdlaSimError(f"{self.where}: graph output(s) {missing} not produced by supported nodes")
        # ONNX output name -> the network tensor holding it (the API names saved outputs after it)
        self.net.onnx_outputs = dict(zip((o.name for o in self.graph.output), outs))
        self.net.onnx_output_dims = {o.name: self.dims[o.name] for o in self.graph.output
                                     if o.name in self.dims}
        return self.net, self.weights

    def node(self, node) -> None:
        op = node.op_type
        a = self.attrs(node)
        net = self.net
        ins = [self.src(i) for i in node.input if i]
        out = node.output[0]
        ops_before = len(net.ops)
        for i in ins:
            if i in self.grouped and op not in ("Transpose", "Reshape"):
                raise self.fail(node, f"reads the 5-D grouped view '{i}' (only the channel shuffle "
                                      "Reshape-Transpose-Reshape is supported)")
            if i in self.padded and op not in ("Conv", "AveragePool"):
                raise self.fail(node, f"reads the padded tensor '{i}' (an explicit Pad is supported "
                                      "only in front of a convolution or average pooling)")
        try:
            if op == "Constant":
                self.consts[out] = self.nh.to_array(a["value"])
            elif op in ("Dropout", "Identity"):
                self.alias[out] = ins[0]
            elif op == "Sum":
                self.sum(node, ins, out)
            elif op == "Pad":
                self.pad(node, a, ins, out)
            elif op == "Split":
                self.split(node, a, ins)
            elif op == "Transpose":
                self.transpose(node, a, ins, out)
            elif op == "Conv":
                self.conv(node, a, ins, out)
            elif op in ("Gemm", "MatMul"):
                self.fc(node, a, ins, out)
            elif op == "Relu":
                net.add("relu", out, ins[0])
            elif op == "LeakyRelu":
                net.add("prelu", out, ins[0], slope=float(a.get("alpha", 0.01)))
            elif op == "PRelu":
                slope = self.const(ins[1])
                c = net.shapes[ins[0]].c
                if slope is None:               # a tensor: GPU (rule prelu.slope_constant)
                    net.add("prelu", out, ins)
                    self.weights[out] = {"slope": np.zeros(c, np.float32)}     # unused
                elif slope.size == net.shapes[ins[0]].elements and slope.size != c:
                    s = net.shapes[ins[0]]          # per element: one SDP PReLU pass (ext_ops)
                    net.add("prelu", out, ins[0], slope_cube=slope.reshape(s.c, s.h, s.w)
                            .astype(np.float32))
                    self.weights[out] = {"slope": np.zeros(c, np.float32)}     # unused
                elif slope.size not in (1, c):
                    raise self.fail(node, f"slope of {slope.size} values for {c} channels")
                else:
                    net.add("prelu", out, ins[0])
                    self.weights[out] = {"slope": np.broadcast_to(slope.reshape(-1), (c,))
                                         .astype(np.float32).copy()}
            elif op == "Clip":
                lo = a.get("min")
                hi = a.get("max")
                if len(ins) > 1 and ins[1] in self.consts:
                    lo = float(self.consts[ins[1]])
                if len(ins) > 2 and ins[2] in self.consts:
                    hi = float(self.consts[ins[2]])
                # +-inf and +-FLT_MAX are exporters' "no bound"; NaN and other bounds beyond
                # FP16's range (which no precision's scale can hold) are refused
                lo = None if lo is not None and lo <= -FLT_MAX else lo
                hi = None if hi is not None and hi >= FLT_MAX else hi
                for bound in (lo, hi):
                    if bound is not None and not abs(bound) <= FP16_MAX:
                        raise self.fail(node, f"bound {bound:g} is not a number within FP16's "
                                              f"+-{FP16_MAX:g} (nor +-inf: no bound)")
                if lo is not None and hi is not None and lo > hi:
                    raise self.fail(node, f"min {lo:g} exceeds max {hi:g}")
                net.add("clip", out, ins[0], min=lo, max=hi)
            elif op in ("Sigmoid", "Tanh"):
                net.add(op.lower(), out, ins[0])
            elif op == "Softmax":
                self.softmax(node, a, ins, out)
            elif op in ("MaxPool", "AveragePool"):
                self.pool(node, a, ins, out, "max" if op == "MaxPool" else "avg")
            elif op in ("GlobalAveragePool", "GlobalMaxPool"):
                s = net.shapes[ins[0]]
                net.pool(out, ins[0], "avg" if "Average" in op else "max", (s.h, s.w), (s.h, s.w))
            elif op == "BatchNormalization":
                if any(o for o in node.output[1:]) or a.get("training_mode", 0):
                    raise self.fail(node, "training-mode outputs (running mean/variance) are not supported")
                gamma, beta, mean, var = (self.const(i) for i in ins[1:5])
                if any(v is None for v in (gamma, beta, mean, var)):
                    raise self.fail(node, "scale, bias, mean and variance must be constants")
                c = net.shapes[ins[0]].c
                sizes = [int(np.asarray(v).size) for v in (gamma, beta, mean, var)]
                if any(n != c for n in sizes):
                    raise self.fail(node, f"scale, bias, mean and variance of {sizes} values for "
                                          f"{c} channels")
                eps = float(a.get("epsilon", 1e-5))
                if np.any(np.asarray(var, np.float64) + eps <= 0):
                    raise self.fail(node, "variance + epsilon must be > 0 (a negative variance "
                                          "has no square root)")
                scale, bias = batchnorm_affine(gamma, beta, mean, var, eps)
                net.add("batchnorm", out, ins[0])
                self.weights[out] = {"scale": scale, "bias": bias}
            elif op in ("Add", "Mul", "Sub", "Max", "Min"):
                self.binary(node, op, ins, out)
            elif op == "Concat":
                axis = a.get("axis", 1)
                if axis not in (1, -3):
                    raise self.fail(node, f"concatenation along axis {axis} (only channels, axis 1)")
                net.add("concat", out, ins)
            elif op == "LRN":
                if not 1 <= int(a["size"]) <= MAX_DIM:
                    raise self.fail(node, f"size {a['size']}: must be in 1..{MAX_DIM}")
                if not float(a.get("bias", 1.0)) > 0 or float(a.get("alpha", 1e-4)) < 0:
                    raise self.fail(node, "bias must be > 0 and alpha >= 0 (the base of the "
                                          "power must stay positive)")
                net.add("lrn", out, ins[0], size=int(a["size"]), alpha=float(a.get("alpha", 1e-4)),
                        beta=float(a.get("beta", 0.75)), k=float(a.get("bias", 1.0)))
            elif op in ("Flatten", "Reshape", "Squeeze", "Unsqueeze"):
                self.view(node, op, a, ins, out)
            elif op in ONNX_EXT_OPS:
                from .onnx_ext import import_node as import_ext
                import_ext(self, node, op, a, ins, out)
            elif op in ("ConvTranspose", "Resize", "Upsample", "Slice"):
                from .onnx_resample import import_node
                import_node(self, node, op, a, ins, out)
            else:
                raise self.fail(node, "not supported by the importer")
        except (ValueError, ZeroDivisionError, OverflowError) as exc:   # (int(inf): Overflow)
            raise self.fail(node, str(exc)) from None
        except KeyError as exc:
            raise self.fail(node, f"missing {exc}") from None
        for name in node.output:
            s = net.shapes.get(name)
            if s is not None and (min(s.c, s.h, s.w) <= 0 or max(s.h, s.w) > MAX_DIM):
                raise self.fail(node, f"output {s.c}x{s.h}x{s.w} (every tensor needs a height "
                                      f"and width in 1..{MAX_DIM}, NVDLA's largest cube dimension)")
        # constants the new ops carry in their attributes (Sub/Div/Pow/comparison operands,
        # Scale's element-wise values) program the hardware: finite numbers only
        for new in net.ops[ops_before:]:
            for key, v in new.attrs.items():
                if isinstance(v, (float, np.ndarray)) and np.asarray(v).dtype.kind == "f" \
                        and not np.all(np.isfinite(v)):
                    raise self.fail(node, f"its {key} holds NaN or infinite values")

    def conv(self, node, a, ins, out) -> None:
        w = self.const(ins[1])
        if w is None or w.ndim != 4:
            raise self.fail(node, "weights must be a 4-D constant (2-D convolution)")
        b = self.const(ins[2]) if len(ins) > 2 else None
        k, _, r, s = w.shape
        stride = self.ints(node, a, "strides", (1, 1), 1)
        dil = self.ints(node, a, "dilations", (1, 1), 1)
        src, extra = self.unpad(ins[0])
        x = self.net.shapes[src]
        group = int(a.get("group", 1))
        if group < 1 or w.shape[1] * group != x.c or k % group:
            raise self.fail(node, f"weights {list(w.shape)} with group {group} do not fit a "
                                  f"{x.c}-channel input")
        if b is not None and b.size != k:
            raise self.fail(node, f"bias of {b.size} values for {k} output channels")
        if "kernel_shape" in a and tuple(a["kernel_shape"]) != (r, s):
            raise self.fail(node, f"kernel_shape {list(a['kernel_shape'])} differs from the weights' {[r, s]}")
        pads = self._pads(node, a, self._padded_shape(x, extra), (r, s), stride, dil)
        pads = tuple(p + e for p, e in zip(pads, extra))
        self.net.conv(out, src, int(k), (int(r), int(s)), stride, pads, dil, group,
                      bias=b is not None)
        self.weights[out] = {"weight": w.astype(np.float32),
                             "bias": (b.reshape(-1) if b is not None else np.zeros(k)).astype(np.float32)}

    def _pads(self, node, a, x: Shape, kernel, stride, dil) -> tuple[int, int, int, int]:
        auto = a.get("auto_pad", b"NOTSET")
        auto = auto.decode() if isinstance(auto, bytes) else auto
        if auto not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
            raise self.fail(node, f"auto_pad {auto!r} (NOTSET, VALID, SAME_UPPER or SAME_LOWER)")
        if auto in ("NOTSET", "VALID"):
            p = self.ints(node, a, "pads", (0, 0, 0, 0), 0) if auto == "NOTSET" else [0, 0, 0, 0]
            return (int(p[0]), int(p[1]), int(p[2]), int(p[3]))
        pads = []
        for size, k, st, d in ((x.h, kernel[0], stride[0], dil[0]), (x.w, kernel[1], stride[1], dil[1])):
            out = -(-size // st)
            total = max(0, (out - 1) * st + d * (k - 1) + 1 - size)
            small, big = total // 2, total - total // 2
            pads.append((small, big) if auto == "SAME_UPPER" else (big, small))
        return (pads[0][0], pads[1][0], pads[0][1], pads[1][1])

    def pool(self, node, a, ins, out, method) -> None:
        kernel = tuple(int(v) for v in a["kernel_shape"])
        if len(kernel) != 2:
            raise self.fail(node, f"{len(kernel)}-D pooling (only 2-D)")
        kernel = self.ints(node, a, "kernel_shape", (1, 1), 1)
        stride = self.ints(node, a, "strides", (1, 1), 1)
        if any(int(d) != 1 for d in a.get("dilations", (1, 1))):
            raise self.fail(node, f"pooling dilations {list(a['dilations'])} (only 1)")
        if a.get("storage_order", 0):
            raise self.fail(node, "storage_order=1 (column-major argmax) is not supported")
        if len(node.output) > 1 and node.output[1]:
            raise self.fail(node, "the Indices output is not supported")
        src, extra = self.unpad(ins[0])
        x = self.net.shapes[src]
        pads = self._pads(node, a, self._padded_shape(x, extra), kernel, stride, (1, 1))
        include = bool(a.get("count_include_pad", 0)) if method == "avg" else True
        if any(extra):
            if any(pads) and not include:
                raise self.fail(node, "an explicit Pad in front of average pooling that also pads "
                                      "and excludes its padding (two padding rules in one window)")
            pads, include = tuple(p + e for p, e in zip(pads, extra)), True
        self.net.add("pool", out, src, method=method, kernel=kernel, stride=stride, pad=pads,
                     ceil_mode=bool(a.get("ceil_mode", 0)), count_include_pad=include)

    @staticmethod
    def _padded_shape(x: Shape, extra) -> Shape:
        return Shape(x.c, x.h + extra[0] + extra[2], x.w + extra[1] + extra[3])

    def unpad(self, name: str) -> tuple[str, tuple[int, int, int, int]]:
        """(source, extra pads top/left/bottom/right) of a tensor that may be an explicit Pad's output."""
        return self.padded.get(name, (name, (0, 0, 0, 0)))

    def pad(self, node, a, ins, out) -> None:
        mode = a.get("mode", b"constant")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        if mode not in ("constant", "reflect", "edge"):
            raise self.fail(node, f"'{mode}' padding (modelled: constant, reflect, edge)")
        pads = self.const(ins[1]) if len(ins) > 1 else np.asarray(a.get("pads", []))
        value = self.const(ins[2]) if len(ins) > 2 else np.asarray(a.get("value", 0.0))
        if pads is None or value is None:
            raise self.fail(node, "pads and value must be constants")
        if len(ins) > 3:
            raise self.fail(node, "the axes input is not supported")
        pads = [int(v) for v in np.asarray(pads).reshape(-1)]
        if len(pads) != 8 or any(pads[i] for i in (0, 1, 4, 5)) or min(pads) < 0:
            raise self.fail(node, f"pads {pads} (only non-negative H and W padding of an NCHW tensor)")
        if mode != "constant":          # a real tensor, computed on the GPU (compiler/support.py)
            x = self.net.shapes[ins[0]]
            top, left, bottom, right = pads[2], pads[3], pads[6], pads[7]
            if mode == "reflect" and (max(top, bottom) >= x.h or max(left, right) >= x.w):
                raise self.fail(node, f"reflect padding {pads} of a {x.h}x{x.w} tensor (each pad "
                                      "must be smaller than the dimension it mirrors)")
            self.net.add("pad", out, ins[0], mode=mode, pads=(top, left, bottom, right))
            return
        if float(np.asarray(value).reshape(-1)[0] if np.asarray(value).size else 0.0) != 0.0:
            raise self.fail(node, "a non-zero pad value (the convolution pads with zeros)")
        if ins[0] in self.padded:
            raise self.fail(node, "two Pads in a row")
        self.padded[out] = (ins[0], (pads[2], pads[3], pads[6], pads[7]))

    def split(self, node, a, ins) -> None:
        """Split along channels: one `slice` op (channels [start, start + n)) per output."""
        x = self.net.shapes[ins[0]]
        rank = len(self.dims.get(node.input[0], (1, x.c, x.h, x.w)))
        axis = int(a.get("axis", 0))
        axis = axis + rank if axis < 0 else axis
        if axis != 1:
            raise self.fail(node, f"split along axis {axis} (only channels, axis 1)")
        outs = list(node.output)
        sizes = self.const(ins[1]) if len(ins) > 1 else a.get("split")
        if sizes is None:                               # equal parts (the last one smaller)
            part = -(-x.c // len(outs))
            sizes = [min(part, x.c - k * part) for k in range(len(outs))]
        sizes = [int(v) for v in np.asarray(sizes).reshape(-1)]
        if len(sizes) != len(outs) or min(sizes) <= 0 or sum(sizes) != x.c:
            raise self.fail(node, f"split sizes {sizes} of {x.c} channels into {len(outs)} outputs")
        start = 0
        for name, n in zip(outs, sizes):
            self.net.add("slice", name, ins[0], start=start, channels=n)
            start += n

    def fc(self, node, a, ins, out) -> None:
        x = self.net.shapes[ins[0]]
        w = self.const(ins[1])
        if w is None or w.ndim != 2:
            raise self.fail(node, "the weight must be a 2-D constant")
        if node.op_type == "Gemm":
            if a.get("transA", 0):
                raise self.fail(node, "transA=1 is not supported")
            w = w * float(a.get("alpha", 1.0))
            w = w if a.get("transB", 0) else w.T
        else:
            w = w.T
        if w.shape[1] != x.elements:
            raise self.fail(node, f"weight of {w.shape[1]} inputs for a {x.c}x{x.h}x{x.w} input")
        bias = np.zeros(w.shape[0], np.float32)
        if node.op_type == "Gemm" and len(ins) > 2:
            c = self.const(ins[2])
            if c is None or c.size not in (1, w.shape[0]):
                raise self.fail(node, "the bias must be a constant of one value per output")
            bias = np.broadcast_to(c.reshape(-1) * float(a.get("beta", 1.0)), (w.shape[0],))
        self.net.fc(out, ins[0], int(w.shape[0]))
        self.weights[out] = {"weight": np.ascontiguousarray(w, np.float32),
                             "bias": np.asarray(bias, np.float32).copy()}

    def sum(self, node, ins, out) -> None:
        if len(ins) == 1:
            self.alias[out] = ins[0]
            return
        acc = ins[0]
        for k, other in enumerate(ins[1:], 1):     # n inputs: a chain of two-input additions
            name = out if k == len(ins) - 1 else f"{out}/sum{k}"
            self.net.add("add", name, [acc, other])
            acc = name

    def softmax(self, node, a, ins, out) -> None:
        x = self.net.shapes[ins[0]]
        rank = len(self.dims.get(node.input[0], (1, x.c, x.h, x.w) if x.h * x.w > 1 else (1, x.c)))
        axis = int(a.get("axis", 1 if self.opset < 13 else -1))
        axis = axis + rank if axis < 0 else axis
        # Ours normalises over channels: right when the axis is the channel axis of a flat tensor,
        # or the channel axis of a 4-D one from opset 13 (before 13, axis 1 meant C*H*W).
        if rank == 4 and axis in (2, 3) and self.opset >= 13:     # GPU (rule softmax.axis)
            return self.net.add("softmax", out, ins[0], axis="chw"[axis - 1])
        if not (axis == 1 and (x.h * x.w == 1 or self.opset >= 13)):
            raise self.fail(node, f"softmax over axis {axis} of a rank-{rank} tensor (only over channels)")
        self.net.add("softmax", out, ins[0])

    def transpose(self, node, a, ins, out) -> None:
        perm = [int(v) for v in a.get("perm", [])]
        view = self.grouped.get(ins[0])
        if view is None and len(perm) == 4 and ins[0] in self.net.shapes:
            from .onnx_resample import transpose
            return transpose(self, node, perm, ins, out)
        if view is None or view[2] or perm != [0, 2, 1, 3, 4]:
            raise self.fail(node, f"transpose {perm} of an activation (only the channel shuffle "
                                  "Reshape [1,g,C/g,H,W] - Transpose (0,2,1,3,4) - Reshape [1,C,H,W])")
        self.grouped[out] = (view[0], view[1], True)

    def binary(self, node, op, ins, out) -> None:
        consts = [i for i in ins if i in self.consts]
        from .onnx_ext import elementwise_scale, import_node as import_ext
        if op == "Sub" and not consts:
            return import_ext(self, node, op, {}, ins, out)
        if elementwise_scale(self, node, op, ins, out):     # TensorRT Scale, element-wise
            return
        if not consts:
            kind = {"Add": "add", "Mul": "mul", "Max": "max", "Min": "min"}.get(op)
            if kind is None:
                raise self.fail(node, "subtraction of two tensors is not supported")
            self.net.add(kind, out, ins)
            return
        if len(consts) == 2 or op in ("Max", "Min"):
            raise self.fail(node, "a constant operand is supported only in Add, Sub and Mul")
        x = next(i for i in ins if i not in self.consts)
        x_onnx = next(i for i in node.input if i and self.src(i) == x)
        v = self.consts[consts[0]].astype(np.float32)
        xs = self.net.shapes[x]
        c = xs.c
        # ONNX broadcasting aligns shapes on the right: per-channel only if every axis but the
        # channel axis (1 of [1, C, H, W], or the last of a flat [1, C]) is 1.
        rank = len(self.dims.get(x_onnx) or ((1, c, xs.h, xs.w) if xs.h * xs.w > 1 else (1, c)))
        vshape = (1,) * (rank - v.ndim) + tuple(v.shape) if v.ndim <= rank else None
        if v.size == 1 and vshape is not None:
            v = np.full(c, float(v.reshape(-1)[0]), np.float32)
        elif vshape is not None and vshape[1] == c and all(d == 1 for k, d in enumerate(vshape) if k != 1):
            v = v.reshape(-1)
        else:
            raise self.fail(node, f"a constant of shape {list(v.shape)} against a rank-{rank} "
                                  f"{c}-channel tensor (per-channel or scalar only)")
        if op == "Sub":
            if ins[0] in self.consts:
                raise self.fail(node, "constant minus tensor is not supported")
            v = -v
        scale, bias = (v, np.zeros(c, np.float32)) if op == "Mul" else (np.ones(c, np.float32), v)
        prev = self._affine_before(x_onnx)
        if prev is not None:           # batch norm spelled Mul + Add: one affine, composed in float64
            p = self.weights[prev]
            s0, b0 = p["scale"].astype(np.float64), p["bias"].astype(np.float64)
            p["scale"] = (s0 * scale).astype(np.float32)
            p["bias"] = (b0 * scale + bias).astype(np.float32)
            self.alias[out] = prev
            return
        self.net.add("batchnorm", out, x)
        self.weights[out] = {"scale": scale, "bias": bias}

    def _affine_before(self, onnx_input: str) -> str | None:
        """The batchnorm op behind `onnx_input` when nothing else reads it (so it can absorb this
        node): every tensor from the op's output to this input has this one reader."""
        outputs = {o.name for o in self.graph.output}
        name = onnx_input
        while True:
            if self.uses.get(name, 0) != 1 or name in outputs:
                return None
            if name not in self.alias:
                break
            name = self.alias[name]
        x = name
        try:
            op = self.net.op(x)
        except KeyError:
            return None
        return x if op.kind == "batchnorm" else None

    def _chw(self, dims) -> tuple[int, int, int] | None:
        """The (C, H, W) an ONNX shape of one image maps to: [1, C, H, W] or [1, C] (flat)."""
        if dims is None or dims[0] not in (1,):
            return None
        if len(dims) == 4:
            return tuple(int(d) for d in dims[1:])
        if len(dims) == 2:
            return (int(dims[1]), 1, 1)
        return None

    def _target_dims(self, node, op, a, ins, in_dims) -> tuple[int, ...]:
        """The output shape of a Reshape/Flatten/Squeeze/Unsqueeze of an activation."""
        if op == "Flatten":
            axis = int(a.get("axis", 1))
            axis += len(in_dims) if axis < 0 else 0
            return (int(np.prod(in_dims[:axis])), int(np.prod(in_dims[axis:])))
        if op == "Reshape":
            shape = self.const(ins[1]) if len(ins) > 1 else None
            if shape is None:
                raise self.fail(node, "the target shape must be a constant (or foldable to one)")
            shape = [int(v) for v in np.asarray(shape).reshape(-1)]
            if not a.get("allowzero", 0):
                shape = [in_dims[k] if v == 0 and k < len(in_dims) else v for k, v in enumerate(shape)]
            return self._reshaped(node, in_dims, shape)
        axes = self.const(ins[1]) if len(ins) > 1 else np.asarray(a.get("axes", []), np.int64)
        if axes is None:
            raise self.fail(node, "the axes must be a constant")
        axes = [int(v) for v in np.asarray(axes).reshape(-1)]
        if op == "Squeeze":
            axes = [v + len(in_dims) if v < 0 else v for v in axes] or \
                [k for k, d in enumerate(in_dims) if d == 1]
            return tuple(d for k, d in enumerate(in_dims) if k not in axes)
        rank = len(in_dims) + len(axes)
        axes = sorted(v + rank if v < 0 else v for v in axes)
        dims = list(in_dims)
        for v in axes:
            dims.insert(v, 1)
        return tuple(dims)

    def _reshaped(self, node, in_dims, shape: list[int]) -> tuple[int, ...]:
        """ONNX Reshape's output shape (one -1 inferred), checked without allocating anything."""
        total = math.prod(in_dims)
        if shape.count(-1) > 1 or any(v < -1 for v in shape):
            raise self.fail(node, f"target shape {shape} (at most one -1, no other negatives)")
        known = math.prod(v for v in shape if v != -1)
        if -1 in shape:
            if known == 0 or total % known:
                raise self.fail(node, f"cannot reshape {list(in_dims)} to {shape}")
            shape = [total // known if v == -1 else v for v in shape]
        if math.prod(shape) != total:
            raise self.fail(node, f"cannot reshape {list(in_dims)} ({total} elements) to {shape}")
        return tuple(shape)

    def view(self, node, op, a, ins, out) -> None:
        """Reshape-like nodes on activations: layout-preserving views, flattens, channel shuffles."""
        group = self.grouped.get(ins[0])
        if group is not None:
            src, g, transposed = group
            x = self.net.shapes[src]
            dims = self._target_dims(node, op, a, ins, (1, g, x.c // g, x.h, x.w))
            if op != "Reshape" or not transposed or self._chw(dims) != (x.c, x.h, x.w):
                raise self.fail(node, f"reshape of a 5-D grouped view to {list(dims)} (only the channel "
                                      "shuffle Reshape-Transpose-Reshape back to [1, C, H, W])")
            self.net.add("shuffle", out, src, groups=g)
            return
        x = self.net.shapes[ins[0]]
        src_dims = self.dims.get(node.input[0]) or ((1, x.c, x.h, x.w) if x.h * x.w > 1 else (1, x.c))
        dims = self._target_dims(node, op, a, ins, src_dims)
        if self._chw(dims) == (x.c, x.h, x.w):
            self.alias[out] = ins[0]                  # same C, H, W order: nothing moves
        elif dims == (1, x.elements) or (op == "Flatten" and dims[0] == 1):
            if x.h == 1 and x.w == 1:
                self.alias[out] = ins[0]              # already flat
            else:
                self.net.add("flatten", out, ins[0])
        elif op == "Reshape" and len(dims) == 5 and dims[0] == 1 and dims[1] * dims[2] == x.c \
                and dims[3:] == (x.h, x.w):
            self.grouped[out] = (ins[0], int(dims[1]), False)
        elif op == "Reshape" and len(dims) == 4 and dims[0] == 1:     # moves data: a GPU layer
            self.net.add("reshape", out, ins[0], shape=tuple(int(d) for d in dims[1:]))
        else:
            raise self.fail(node, f"{op.lower()} of a [1, {x.c}, {x.h}, {x.w}] activation to "
                                  f"{list(dims)} (supported: layout-preserving views, flattening, "
                                  "and the channel shuffle)")


def load_onnx(path: str | Path) -> tuple[Network, Weights]:
    """Read an ONNX model file."""
    onnx, _ = _onnx()
    path = Path(path)
    try:
        model = onnx.load(str(path))
    except FileNotFoundError:
        raise NvdlaSimError(f"{path}: file not found") from None
    except Exception as exc:   # protobuf decode errors have no common base class
        raise NvdlaSimError(f"{path}: not a readable ONNX model ({type(exc).__name__}: {exc})") from None
    return import_model(model, str(path))


def import_model(model, where: str = "onnx model") -> tuple[Network, Weights]:
    """An in-memory onnx.ModelProto -> Network + weights."""
    return _Importer(model, where).run()
