"""Test helper: an approximate INT8 model of a quantised hardware-layer plan (float64 integer maths).

Only for checking the quantisation design before the register-program lowering exists: it follows
the formulas documented in nvdla_sim/scenario/quantize.py (rounding half away from zero through
numpy), approximates the LUTs by their function, and is NOT the bit-exact datapath (that is the
engine's units)."""
from __future__ import annotations

import numpy as np

from nvdla_sim.compiler.hwlayers import HwPlan, TensorRef
from nvdla_sim.scenario.quantize import quantize_tensor, round_away
from nvdla_sim.scenario.reference import conv2d, pool2d, run_op


def _shift(v, n):
    return round_away(v / 2.0 ** n).astype(np.float64) if n else v


def _lo_lookup(lut, x):
    """The LO table of `lut` interpolated at x, clamped at its ends (slopes 0)."""
    pts = lut.lo_start + np.arange(len(lut.lo_table)) * 2.0 ** lut.lo_index_select
    return round_away(np.interp(x, pts, np.asarray(lut.lo_table, np.float64))).astype(np.float64)


def _sdp(x, layer, read):
    v = x.astype(np.float64)
    for st in (layer.x1, layer.x2):
        if st is None:
            continue
        if st.alu:
            op = st.alu_operand
            if isinstance(op, TensorRef):
                op = read(op).astype(np.float64)
            elif isinstance(op, np.ndarray):
                op = op.astype(np.float64)[:, None, None]
            v = {"sum": np.add, "max": np.maximum, "min": np.minimum}[st.alu](v, op * 2.0 ** st.alu_shift)
        m = st.mul_operand
        if isinstance(m, TensorRef):
            m = read(m).astype(np.float64)
        elif isinstance(m, np.ndarray):
            m = m.astype(np.float64)[:, None, None]
        if st.mul == "prelu":
            v = np.where(v >= 0, v, _shift(v * m, st.mul_shift))
        elif st.mul:
            v = _shift(v * m, st.mul_shift)
        else:
            v = _shift(v, st.mul_shift)
        v = np.clip(v, -2.0 ** 31, 2.0 ** 31 - 1)
        if st.relu:
            v = np.maximum(v, 0)
    if layer.y is not None and layer.y.lut is not None:
        v = _lo_lookup(layer.y.lut, v)
    c = layer.out_cvt
    v = _shift((v - c.offset) * c.scale, c.shift)
    v = np.clip(v, -65536, 65535)
    return np.clip(v, -128, 127).astype(np.int8)


def run_int8_plan(plan: HwPlan, x: np.ndarray, weights, buffers: bool = False) -> dict[str, np.ndarray]:
    """Dequantised value of every materialised logical tensor (`buffers`: the int8 root buffers)."""
    bufs: dict[str, np.ndarray] = {}

    def buf(name, c, h, w):
        if name not in bufs:
            bufs[name] = np.zeros((c, h, w), np.int8)
        return bufs[name]

    def write(ref, arr):
        b = buf(ref.tensor, plan.tensors[ref.tensor].stored_channels, arr.shape[1], arr.shape[2])
        b[ref.channel_offset:ref.channel_offset + ref.channels] = arr

    def read(ref):
        return bufs[ref.tensor][ref.channel_offset:ref.channel_offset + ref.channels]

    def logical(name):
        t = plan.tensors[name]
        root, off = plan.root(name)
        return t.from_stored(bufs[root][off:off + t.stored_channels])

    net = plan.network
    tin = plan.tensors[net.input_name]
    write(plan.ref(net.input_name), tin.to_stored(quantize_tensor(x, tin.scale)))
    stream = None
    for layer in plan.layers:
        q = layer.quant
        if layer.kind == "conv":
            c = layer.conv
            acc = conv2d(read(layer.inputs[0]).astype(np.float64), q.weight.astype(np.float64), None,
                         c.stride, c.pad, c.dilation)
            acc = _shift(acc, q.clip_truncate)
            out = _sdp(acc, q.sdp, read)
        elif layer.kind == "sdp":
            out = _sdp(read(layer.inputs[0]), q, read)
        elif layer.kind == "pdp":
            p = layer.pdp
            src = stream if p.on_the_fly else read(layer.inputs[0])
            y = pool2d(src.astype(np.float64), p.method, p.kernel, p.stride, p.pad)
            if p.method == "avg":
                s = y * p.kernel[0] * p.kernel[1]
                rw, rh = (1 << 16) // p.kernel[1], (1 << 16) // p.kernel[0]
                y = _shift(_shift(s * rw, 16) * rh, 16)
            out = y[:, :p.out_h, :p.out_w].astype(np.int8)
        elif layer.kind == "cdp":
            c = layer.cdp
            xq = read(layer.inputs[0]).astype(np.float64)
            lo, hi = (c.size - 1) // 2, c.size // 2
            sq = np.pad(xq ** 2, ((lo, hi), (0, 0), (0, 0)))
            ss = sum(sq[j:j + xq.shape[0]] for j in range(c.size))
            g = _lo_lookup(q.lut, ss)
            oc = q.out_cvt
            v = _shift((g * xq - oc.offset) * oc.scale, oc.shift)
            out = np.clip(v, -128, 127).astype(np.int8)
        else:  # gpu
            op = net.op(layer.ops[0])
            ins = [logical(i).astype(np.float32) * np.float32(plan.tensors[i].scale) for i in op.inputs]
            y = run_op(op, ins, weights)
            t = plan.tensors[op.name]
            out = t.to_stored(quantize_tensor(y, t.scale))
        if layer.output is None:
            stream = out
        else:
            write(layer.output, out)
    if buffers:
        return bufs
    result = {}
    for name, t in plan.tensors.items():
        if t.materialised and t.scale is not None:
            root, _ = plan.root(name)
            if root in bufs:
                result[name] = logical(name).astype(np.float32) * np.float32(t.scale)
    return result
