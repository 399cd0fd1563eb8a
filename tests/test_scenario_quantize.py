"""INT8 quantisation: hand-computed scales and SDP parameters, the scale-sharing rules, and the
accuracy of the quantised plan (through tests/int8_plan_model.py, an approximate model of the
documented formulas -- the bit-exact values come from the engine once lowering exists)."""
from __future__ import annotations

import numpy as np
import pytest

from int8_plan_model import run_int8_plan
from nvdla_sim.compiler.emit import IDENTITY
from nvdla_sim.compiler.hwlayers import TensorRef, build_plan
from nvdla_sim.compiler.network import Network, Shape
from nvdla_sim.compiler.support import check_support
from nvdla_sim.compiler.zoo import BUILTIN
from nvdla_sim.config import load_hardware
from nvdla_sim import precision
from nvdla_sim.scenario.quantize import QuantConfig, quantize_plan, quantize_tensor, round_away
from nvdla_sim.scenario.reference import run_reference, sqnr_db
from nvdla_sim.scenario.weights import random_weights

NV_SMALL, NV_LARGE = load_hardware("nv_small"), load_hardware("nv_large")


def test_round_away_and_quantize_tensor():
    assert round_away([0.5, 1.5, -0.5, -2.5, 2.4]).tolist() == [1, 2, -1, -3, 2]
    q = quantize_tensor(np.array([1.0, -1.0, 0.25, 3.0, -3.0]), 1 / 127)
    assert q.tolist() == [127, -127, 32, 127, -128]          # 31.75 -> 32; saturation both ways


def test_multiplier_and_operand_encodings():
    m, s = precision.shared_multiplier(0.75)         # 0.75 * 2^15 = 24576 fits int16, 2^16 does not
    assert (m.tolist(), s.shift) == ([24576], 15)
    m, s = precision.shared_multiplier([0.5, 0.125])  # 0.5 * 2^16 = 32768 overflows: shift 15
    assert (m.tolist(), s.shift) == ([16384, 4096], 15)
    ops, s = precision.shifted_operand([100000.0, -3.0])  # 100000 / 4 = 25000 fits int16
    assert (ops.tolist(), s.shift) == ([25000, -1], 2)     # -0.75 rounds away from zero


def _tiny_conv():
    n = Network("t", "data", Shape(1, 1, 2))
    n.conv("c", "data", 2, 1)
    w = {"c": {"weight": np.array([2.0, -1.0], np.float32).reshape(2, 1, 1, 1),
               "bias": np.array([0.5, 0.0], np.float32)}}
    return n, w


def test_conv_parameters_hand_computed():
    n, w = _tiny_conv()
    plan = build_plan(n, w, NV_SMALL, check_support(n, NV_SMALL))
    x = np.array([[[1.0, -0.5]]], np.float32)
    cal = quantize_plan(plan, run_reference(n, w, x))
    # y: kernel 0 = 2x + 0.5 = [2.5, -0.5]; kernel 1 = -x = [-1, 0.5]; amax 2.5
    assert cal.scales["data"] == pytest.approx(1 / 127) and cal.scales["c"] == pytest.approx(2.5 / 127)
    q = plan.layers[0].quant
    assert q.weight.ravel().tolist() == [127, -127]           # per-kernel scales 2/127 and 1/127
    assert q.weight_scale.tolist() == pytest.approx([2 / 127, 1 / 127])
    assert q.clip_truncate == 0
    x1 = q.sdp.x1
    # bias in accumulator units: 0.5 / (1/127 * 2/127) = 4032.25 -> 4032, no shift needed
    assert (x1.alu, x1.alu_operand.tolist(), x1.alu_shift) == ("sum", [4032, 0], 0)
    # multipliers u0/s_out = [2/(127*2.5), 1/(127*2.5)] at the largest shift that fits, 22:
    # 2^23/317.5 = 26420.8 -> 26421, 2^22/317.5 = 13210.4 -> 13210
    assert (x1.mul, x1.mul_operand.tolist(), x1.mul_shift) == ("mul", [26421, 13210], 22)
    assert q.sdp.x2 is None and q.sdp.y is None and q.sdp.out_cvt == IDENTITY
    # int8 path by hand: x -> [127, -64]; k0: (16129 + 4032) * 26421 >> 22 = 127.0 -> 127,
    # (-8128 + 4032) * 26421 >> 22 = -25.8 -> -26; k1: -16129 * 13210 >> 22 = -50.8 -> -51,
    # 8128 * 13210 >> 22 = 25.6 -> 26
    got = run_int8_plan(plan, x, w)["c"] / np.float32(cal.scales["c"])
    assert np.rint(got).astype(int).tolist() == [[[127, -26]], [[-51, 26]]]


def test_per_tensor_weights_use_one_register_multiplier():
    n, w = _tiny_conv()
    plan = build_plan(n, w, NV_SMALL, check_support(n, NV_SMALL))
    quantize_plan(plan, run_reference(n, w, np.array([[[1.0, -0.5]]], np.float32)),
                  QuantConfig(weights="per_tensor"))
    q = plan.layers[0].quant
    assert q.weight.ravel().tolist() == [127, -64]            # -63.5 rounds away from zero
    assert isinstance(q.sdp.x1.mul_operand, int)


def test_scale_sharing_rules():
    n = Network("t", "data", Shape(8, 4, 4))
    a = n.conv("a", "data", 8, 1, relu=True)
    b = n.conv("b", "data", 8, 1)
    n.add("concat", "cat", [a, b])
    n.pool("p", "cat", "max", 2, 2)
    n.add("clip", "r6", "p", min=0.0, max=6.0)
    w = random_weights(n, 0)
    plan = build_plan(n, w, NV_SMALL, check_support(n, NV_SMALL))
    vals = run_reference(n, w, np.random.default_rng(0).standard_normal((8, 4, 4)).astype(np.float32))
    cal = quantize_plan(plan, vals)
    shared = {cal.scales[t] for t in ("a", "b", "cat", "p")}
    assert len(shared) == 1                                   # concat and pooling cannot rescale
    top = max(np.abs(vals[t]).max() for t in ("a", "b"))
    assert shared.pop() == pytest.approx(top / 127)
    assert cal.scales["r6"] == pytest.approx(6 / 127)          # the clip ceiling is the saturation


def _estimate(net, hw, seed=1, **kw):
    w = random_weights(net, seed)
    s = net.input_shape
    x = np.random.default_rng(0).standard_normal((s.c, s.h, s.w)).astype(np.float32)
    plan = build_plan(net, w, hw, check_support(net, hw))
    vals = run_reference(net, w, x)
    quantize_plan(plan, vals, QuantConfig(**kw))
    got = run_int8_plan(plan, x, w)
    return plan, {t: sqnr_db(vals[t], v) for t, v in got.items()}


def test_lenet5_int8_estimate_above_20db():
    net = BUILTIN["lenet5"]()
    _, s = _estimate(net, NV_SMALL)
    assert s[net.output] > 20


def test_resnet50_every_layer_above_20db():
    net = BUILTIN["resnet50"]()
    _, s = _estimate(net, NV_SMALL)
    assert len(s) >= 54 and min(s.values()) > 20


def test_googlenet_with_concat_holes_matches_nv_small():
    net = BUILTIN["googlenet"]()
    _, small = _estimate(net, NV_SMALL)
    _, large = _estimate(net, NV_LARGE)
    assert large[net.output] == pytest.approx(small[net.output], abs=1e-6)
    assert min(large.values()) > 20


def _activations_net():
    n = Network("t", "data", Shape(16, 10, 10))
    a = n.conv("a", "data", 16, 3, pad=1)
    n.add("prelu", "pa", a)
    b = n.conv("b", "data", 16, 1)
    n.add("tanh", "tb", b)
    n.add("mul", "m", ["pa", "tb"])
    c = n.conv("c", "m", 16, 3, pad=1)
    n.add("sigmoid", "sc", c)
    n.add("batchnorm", "bn", "sc")
    n.add("lrn", "norm", "bn", size=5, alpha=1e-2, beta=0.75, k=1.0)
    n.pool("avg", "norm", "avg", 2, 2)
    return n


def test_prelu_lut_product_affine_lrn_avgpool_on_nv_large():
    net = _activations_net()
    plan, s = _estimate(net, NV_LARGE)
    kinds = {l.name: (l.kind, [st.name for st in l.sdp.stages]) for l in plan.layers if l.sdp}
    assert kinds["a"] == ("conv", ["x1", "x2"])                # PReLU in BN's multiplier
    assert kinds["b"] == ("conv", ["x1", "y"])                 # tanh through the LUT
    # the product can follow neither (X2 taken, nothing after Y): an SDP pass reading pa and tb
    assert kinds["m"] == ("sdp", ["x1", "x2"])
    assert kinds["bn"] == ("sdp", ["x1", "x2"])                # batch norm after a LUT: not foldable
    layers = {l.name: l for l in plan.layers}
    prelu = layers["a"].quant.sdp.x2
    assert prelu.mul == "prelu" and isinstance(prelu.mul_operand, np.ndarray)
    product = layers["m"].quant.x2
    assert product.mul == "mul" and product.mul_operand == TensorRef("tb", 0, 16)
    assert layers["b"].quant.sdp.y.lut is not None and layers["norm"].kind == "cdp"
    assert min(s.values()) > 20, s
