"""ONNX import (optional dependency `onnx`, extra `[onnx]`): an ONNX model -> Network + weights.

Supported nodes: Conv, Gemm, MatMul (with a constant weight), Relu, LeakyRelu, PRelu, Clip,
Sigmoid, Tanh, MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool, BatchNormalization, Add,
Mul (two tensors, or a tensor and a per-channel / scalar constant), Concat (channels), LRN,
Flatten, Reshape (to [N, -1]), Softmax (which the DLA cannot run: GPU fallback), and Dropout /
Identity (pass-through).  One image: the batch dimension must be 1 (or symbolic).
Tensor names become op names.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..compiler.network import Network, Shape
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


class _Importer:
    def __init__(self, model, where: str):
        self.onnx, self.nh = _onnx()
        self.model = model
        self.where = where
        self.graph = model.graph
        self.consts: dict[str, np.ndarray] = {t.name: self.nh.to_array(t) for t in self.graph.initializer}
        self.alias: dict[str, str] = {}          # pass-through tensor -> its source
        self.weights: Weights = {}
        self.net: Network | None = None

    def fail(self, node, message: str) -> NvdlaSimError:
        label = node.name or (node.output[0] if node.output else "?")
        return NvdlaSimError(f"{self.where}: node '{label}' ({node.op_type}): {message}")

    def attrs(self, node) -> dict:
        return {a.name: self.onnx.helper.get_attribute_value(a) for a in node.attribute}

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
        if len(dims) == 4 and dims[0] in (None, 1) and all(dims[1:]):
            shape = Shape(*dims[1:])
        elif len(dims) == 2 and dims[0] in (None, 1) and dims[1]:
            shape = Shape(dims[1], 1, 1)
        else:
            raise NvdlaSimError(f"{self.where}: input '{inp.name}' has shape {dims}; expected "
                                "[1, C, H, W] (or [1, N])")
        name = self.graph.name or "onnx"
        self.net = Network(name, inp.name, shape)
        for node in self.graph.node:
            self.node(node)
        outs = [self.src(o.name) for o in self.graph.output]
        missing = [o for o in outs if o not in self.net.shapes]
        if missing:
            raise NvdlaSimError(f"{self.where}: graph output(s) {missing} not produced by supported nodes")
        return self.net, self.weights

    def node(self, node) -> None:
        op = node.op_type
        a = self.attrs(node)
        net = self.net
        ins = [self.src(i) for i in node.input if i]
        out = node.output[0]
        try:
            if op == "Constant":
                self.consts[out] = self.nh.to_array(a["value"])
            elif op in ("Dropout", "Identity"):
                self.alias[out] = ins[0]
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
                if slope is None:
                    raise self.fail(node, "the slope must be a constant")
                c = net.shapes[ins[0]].c
                if slope.size not in (1, c):
                    raise self.fail(node, f"slope of {slope.size} values for {c} channels")
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
                net.add("clip", out, ins[0], min=lo, max=hi)
            elif op in ("Sigmoid", "Tanh", "Softmax"):
                net.add(op.lower(), out, ins[0])
            elif op in ("MaxPool", "AveragePool"):
                self.pool(node, a, ins, out, "max" if op == "MaxPool" else "avg")
            elif op in ("GlobalAveragePool", "GlobalMaxPool"):
                s = net.shapes[ins[0]]
                net.pool(out, ins[0], "avg" if "Average" in op else "max", (s.h, s.w), (s.h, s.w))
            elif op == "BatchNormalization":
                gamma, beta, mean, var = (self.const(i) for i in ins[1:5])
                if any(v is None for v in (gamma, beta, mean, var)):
                    raise self.fail(node, "scale, bias, mean and variance must be constants")
                scale, bias = batchnorm_affine(gamma, beta, mean, var, float(a.get("epsilon", 1e-5)))
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
                net.add("lrn", out, ins[0], size=int(a["size"]), alpha=float(a.get("alpha", 1e-4)),
                        beta=float(a.get("beta", 0.75)), k=float(a.get("bias", 1.0)))
            elif op in ("Flatten", "Reshape"):
                self.flatten(node, op, a, ins, out)
            else:
                raise self.fail(node, "not supported by the importer")
        except ValueError as exc:
            raise self.fail(node, str(exc)) from None
        except KeyError as exc:
            raise self.fail(node, f"missing {exc}") from None

    def conv(self, node, a, ins, out) -> None:
        w = self.const(ins[1])
        if w is None or w.ndim != 4:
            raise self.fail(node, "weights must be a 4-D constant (2-D convolution)")
        b = self.const(ins[2]) if len(ins) > 2 else None
        x = self.net.shapes[ins[0]]
        k, _, r, s = w.shape
        stride = tuple(a.get("strides", (1, 1)))
        dil = tuple(a.get("dilations", (1, 1)))
        pads = self._pads(node, a, x, (r, s), stride, dil)
        self.net.conv(out, ins[0], int(k), (int(r), int(s)), stride, pads, dil, int(a.get("group", 1)),
                      bias=b is not None)
        self.weights[out] = {"weight": w.astype(np.float32),
                             "bias": (b if b is not None else np.zeros(k)).astype(np.float32)}

    def _pads(self, node, a, x: Shape, kernel, stride, dil) -> tuple[int, int, int, int]:
        auto = a.get("auto_pad", b"NOTSET")
        auto = auto.decode() if isinstance(auto, bytes) else auto
        if auto in ("NOTSET", "VALID"):
            p = list(a.get("pads", (0, 0, 0, 0))) if auto == "NOTSET" else [0, 0, 0, 0]
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
        stride = tuple(int(v) for v in a.get("strides", (1, 1)))
        x = self.net.shapes[ins[0]]
        pads = self._pads(node, a, x, kernel, stride, (1, 1))
        self.net.add("pool", out, ins[0], method=method, kernel=kernel, stride=stride, pad=pads,
                     ceil_mode=bool(a.get("ceil_mode", 0)),
                     count_include_pad=bool(a.get("count_include_pad", 0)) if method == "avg" else True)

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

    def binary(self, node, op, ins, out) -> None:
        consts = [i for i in ins if i in self.consts]
        if not consts:
            kind = {"Add": "add", "Mul": "mul", "Max": "max", "Min": "min"}.get(op)
            if kind is None:
                raise self.fail(node, "subtraction of two tensors is not supported")
            self.net.add(kind, out, ins)
            return
        if len(consts) == 2 or op in ("Max", "Min"):
            raise self.fail(node, "a constant operand is supported only in Add, Sub and Mul")
        x = next(i for i in ins if i not in self.consts)
        v = self.consts[consts[0]].astype(np.float32)
        c = self.net.shapes[x].c
        if v.size == 1:
            v = np.full(c, float(v.reshape(-1)[0]), np.float32)
        elif v.size == c and (v.ndim == 1 or v.shape[-2:] == (1, 1) or v.ndim == 4 and v.shape[1] == c):
            v = v.reshape(-1)
        else:
            raise self.fail(node, f"a constant of shape {v.shape} (per-channel or scalar only)")
        if op == "Sub":
            if ins[0] in self.consts:
                raise self.fail(node, "constant minus tensor is not supported")
            v = -v
        scale, bias = (v, np.zeros(c, np.float32)) if op == "Mul" else (np.ones(c, np.float32), v)
        self.net.add("batchnorm", out, x)
        self.weights[out] = {"scale": scale, "bias": bias}

    def flatten(self, node, op, a, ins, out) -> None:
        x = self.net.shapes[ins[0]]
        if op == "Flatten" and a.get("axis", 1) != 1:
            raise self.fail(node, f"flatten at axis {a.get('axis')} (only axis 1)")
        if op == "Reshape":
            shape = self.const(ins[1])
            if shape is None or len(shape) != 2 or int(shape[0]) not in (0, 1, -1) \
                    or int(shape[1]) not in (-1, x.elements):
                raise self.fail(node, "only a reshape to [N, -1] (a flatten) is supported")
        if x.h == 1 and x.w == 1:
            self.alias[out] = ins[0]             # already flat
        else:
            self.net.add("flatten", out, ins[0])


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
