"""Scale, element-wise Sub/Div/Pow/Equal/Greater/Less, Unary, Reduce MAX, Softmax and PReLU's slope
(compiler/ext_ops.py): each rule with a network just inside and one just outside it, and the
values of every DLA-placed kind, run as NVDLA register programs on the engine, against the float
reference of the original op (INT8 above 25 dB, FP16 above 40 dB; comparisons exact against the
DLA's own inputs)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from nvdla_sim.compiler.lower import lower, run_lowered
from nvdla_sim.compiler.network import Network, Shape
from nvdla_sim.compiler.support import check_support
from nvdla_sim.config import load_hardware
from nvdla_sim.datatype import FP16, INT8
from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.scenario.reference import run_reference, sqnr_db
from nvdla_sim.scenario.runner import batch_reference, batch_values, context, prepare
from nvdla_sim.scenario.schema import parse_scenario

XAVIER, ORIN = load_hardware("xavier_dla"), load_hardware("orin_dla")
NV_FULL, NV_SMALL = load_hardware("nv_full"), load_hardware("nv_small")
FLOOR = {"int8": 25.0, "fp16": 40.0}


def rules_of(net: Network, hw=XAVIER, dtype=INT8, op="x") -> set[str]:
    reason = check_support(net, hw, dtype).reason(op)
    return {r.split("[rule ")[1].rstrip("]") for r in reason.split("; ") if "[rule " in r}


def net_of(c, h, w, build) -> Network:
    n = Network("t", "data", Shape(c, h, w))
    build(n)
    return n


def col(n, name="col"):          # a C x H x 1 tensor (a broadcast the DLA does not have)
    s = n.shapes["data"]
    return n.pool(name, "data", "max", (1, s.w), (1, s.w))


def chan(n, name="chan"):        # C x 1 x 1
    return n.global_avg_pool(name, "data")


# (rule, hardware, precision inside, precision outside, build inside, build outside)
CASES = [
    ("scale.power", XAVIER, INT8, INT8,
     lambda n: n.add("scale", "x", "data", scale=np.full(1, 2.0), shift=np.zeros(1), power=1.0),
     lambda n: n.add("scale", "x", "data", scale=np.full(1, 2.0), shift=np.zeros(1), power=2.0)),
    ("eltwise.broadcast", XAVIER, INT8, INT8,
     lambda n: [chan(n), n.add("sub", "x", ["data", "chan"])],
     lambda n: [col(n), n.add("sub", "x", ["data", "col"])]),
    ("eltwise.inputs", XAVIER, INT8, INT8,
     lambda n: n.add("sub", "x", ["data", "data"]),
     lambda n: n.add("sub", "x", ["data"])),
    ("eltwise.constant_uniform", XAVIER, INT8, INT8,
     lambda n: n.add("div", "x", "data", constant=np.full(8, 2.0)),
     lambda n: n.add("div", "x", "data", constant=np.linspace(1, 2, 8))),
    ("eltwise.div_operands", XAVIER, FP16, FP16,
     lambda n: n.add("div", "x", "data", constant=4.0),
     lambda n: [chan(n), n.add("div", "x", ["data", "chan"])]),
    ("eltwise.pow_operands", XAVIER, INT8, FP16,
     lambda n: n.add("pow", "x", "data", constant=2.0),
     lambda n: n.add("pow", "x", "data", constant=2.0)),
    ("eltwise.compare_int8", XAVIER, INT8, FP16,
     lambda n: [chan(n), n.add("greater", "x", ["data", "chan"])],
     lambda n: [chan(n), n.add("greater", "x", ["data", "chan"])]),
    ("eltwise.compare_cast", XAVIER, INT8, INT8,
     lambda n: [chan(n), n.add("less", "x", ["data", "chan"], cast=True)],
     lambda n: [chan(n), n.add("less", "x", ["data", "chan"], cast=False)]),
    ("unary.int8", XAVIER, INT8, FP16,
     lambda n: n.add("sin", "x", "data"), lambda n: n.add("atan", "x", "data")),
    ("sdp.lut", NV_FULL, INT8, None,
     lambda n: n.add("cos", "x", "data"), lambda n: n.add("cos", "x", "data")),
    ("reduce.op", XAVIER, INT8, INT8,
     lambda n: n.add("reduce", "x", "data", op="max", axes=("h", "w")),
     lambda n: n.add("reduce", "x", "data", op="min", axes=("h", "w"))),
    ("reduce.axes", XAVIER, INT8, INT8,
     lambda n: n.add("reduce", "x", "data", op="max", axes=("c",)),
     lambda n: n.add("reduce", "x", "data", op="max", axes=())),
    ("softmax.axis", ORIN, INT8, INT8,
     lambda n: [n.pool("p", "data", "max", (1, 1), (1, 1), pad=(0, 0, 28, 0)),    # 8x32x4
                n.add("softmax", "x", "p", axis="h")],
     lambda n: [n.pool("p", "data", "max", (1, 1), (1, 1), pad=(0, 0, 29, 0)),    # 8x33x4
                n.add("softmax", "x", "p", axis="h")]),
    ("softmax.orin_only", ORIN, INT8, INT8,
     lambda n: n.add("softmax", "x", "data"), lambda n: n.add("softmax", "x", "data")),
    ("prelu.slope_constant", XAVIER, INT8, INT8,
     lambda n: n.add("prelu", "x", "data", slope=0.1),
     lambda n: [chan(n), n.add("prelu", "x", ["data", "chan"])]),
]


@pytest.mark.parametrize("rule, hw, inside_dtype, outside_dtype, inside, outside", CASES,
                         ids=[c[0] for c in CASES])
def test_rule_inside_and_outside(rule, hw, inside_dtype, outside_dtype, inside, outside):
    assert rules_of(net_of(8, 4, 4, inside), hw, inside_dtype) == set()
    out_hw = {"sdp.lut": NV_SMALL, "softmax.orin_only": XAVIER}.get(rule, hw)
    out_dtype = outside_dtype or inside_dtype
    assert rule in rules_of(net_of(8, 4, 4, outside), out_hw, out_dtype)


def test_softmax_optimized_mode_axis_limit():
    inside = net_of(1024, 2, 2, lambda n: n.add("softmax", "x", "data"))
    outside = net_of(1025, 2, 2, lambda n: n.add("softmax", "x", "data"))
    accurate = net_of(2048, 1, 1, lambda n: n.add("softmax", "x", "data"))
    assert rules_of(inside, ORIN) == set() and rules_of(accurate, ORIN) == set()
    assert rules_of(outside, ORIN) == {"softmax.optimized_axis"}
    assert rules_of(inside, NV_FULL) == {"softmax.engine"}      # no Orin: no softmax engine


def test_channel_max_size_limit():
    for kind, attrs in (("reduce", {"op": "max", "axes": ("c",)}), ("softmax", {})):
        inside = net_of(2048, 1, 1, lambda n: n.add(kind, "x", "data", **attrs))
        outside = net_of(2049, 1, 1, lambda n: n.add(kind, "x", "data", **attrs))
        assert rules_of(inside, ORIN) == set()
        assert rules_of(outside, ORIN) == {"reduce.channel_max"}


def test_abs_runs_in_fp16_but_sin_does_not():
    assert rules_of(net_of(8, 4, 4, lambda n: n.add("abs", "x", "data")), XAVIER, FP16) == set()
    assert rules_of(net_of(8, 4, 4, lambda n: n.add("sin", "x", "data")), XAVIER, FP16) \
        == {"unary.int8"}


# -- values ---------------------------------------------------------------------------------------
C1 = {"name": "c1", "type": "conv", "out_channels": 16, "kernel": 3, "pad": 1}
C2 = {"name": "c2", "type": "conv", "out_channels": 16, "kernel": 1, "input": "data"}
GAP = {"name": "gap", "type": "pool", "global": True, "method": "avg", "input": "c1"}
C_ONE = {"name": "one", "type": "conv", "out_channels": 1, "kernel": 6, "input": "c1"}


def scenario(layers, hw="nv_full", precision="int8", shape=(16, 6, 6), mode="values+timing",
             network: Network | None = None):
    data = {"name": "lb", "hardware": hw, "precision": precision, "mode": mode,
            "network": {"input": list(shape), "layers": layers}, "input": {"seed": 5},
            "weights": {"seed": 4}, "outputs": {"plots": False}, "gpu_fallback": False}
    scn = parse_scenario(data, ".")
    if network is not None:
        scn = replace(scn, network=replace(scn.network, network=network))
    return scn


def run(scn):
    prep = prepare(scn)
    ctx = context(prep)
    lowered = lower(prep.plan, ctx)
    result = run_lowered(lowered, ctx)
    values = batch_values(prep.plan, result) if scn.values else None
    return prep, lowered, result, values


def independent(prep) -> dict[str, np.ndarray]:
    """The float reference of the network as written (before compiler/ext_ops.py expands it)."""
    return run_reference(prep.network, prep.weights, prep.input)


VALUE_CASES = {  # name: (layers, hardware, precision)
    "scale_uniform": ([C1, {"name": "y", "type": "scale", "scale": -0.5, "shift": 0.25}], "nv_full", "int8"),
    "scale_channel": ([C1, {"name": "y", "type": "scale", "scale": list(np.linspace(-1, 2, 16)),
                            "shift": list(np.linspace(0, 1, 16))}], "nv_full", "int8"),
    "scale_channel_fp16": ([C1, {"name": "y", "type": "scale", "scale": list(np.linspace(-1, 2, 16)),
                                 "shift": 0.5}], "nv_full", "fp16"),
    "sub_tensors": ([C1, C2, {"name": "y", "type": "sub", "input": ["c1", "c2"]}], "nv_full", "int8"),
    "sub_tensors_fp16": ([C1, C2, {"name": "y", "type": "sub", "input": ["c1", "c2"]}], "nv_full", "fp16"),
    "sub_nc11": ([C1, GAP, {"name": "y", "type": "sub", "input": ["c1", "gap"]}], "nv_full", "int8"),
    "sub_nc11_first": ([C1, GAP, {"name": "y", "type": "sub", "input": ["gap", "c1"]}], "nv_full", "int8"),
    "sub_n111": ([C1, C_ONE, {"name": "y", "type": "sub", "input": ["c1", "one"]}], "nv_full", "int8"),
    "sub_constant": ([C1, {"name": "y", "type": "sub", "constant": 0.3}], "nv_full", "int8"),
    "sub_from_constant": ([C1, {"name": "y", "type": "sub", "constant": 0.3, "constant_first": True}],
                          "nv_full", "int8"),
    "div_constant": ([C1, {"name": "y", "type": "div", "constant": 3.0}], "nv_full", "int8"),
    "div_constant_fp16": ([C1, {"name": "y", "type": "div", "constant": 3.0}], "nv_full", "fp16"),
    "constant_div": ([C1, {"name": "s", "type": "sigmoid"},
                      {"name": "y", "type": "div", "constant": 2.0, "constant_first": True}],
                     "nv_full", "int8"),
    "pow": ([C1, {"name": "y", "type": "pow", "constant": 2.0}], "nv_full", "int8"),
    "abs": ([C1, {"name": "y", "type": "abs"}], "nv_full", "int8"),
    "abs_fp16": ([C1, {"name": "y", "type": "abs"}], "nv_full", "fp16"),
    "sin": ([C1, {"name": "y", "type": "sin"}], "nv_full", "int8"),
    "cos": ([C1, {"name": "y", "type": "cos"}], "nv_full", "int8"),
    "atan": ([C1, {"name": "y", "type": "atan"}], "nv_full", "int8"),
    "reduce_hw": ([C1, {"name": "y", "type": "reduce", "axes": "hw"}], "nv_full", "int8"),
    "reduce_c": ([C1, {"name": "y", "type": "reduce", "axes": "c"}], "nv_full", "int8"),
    "reduce_chw_fp16": ([C1, {"name": "y", "type": "reduce", "axes": "chw"}], "nv_full", "fp16"),
    "softmax_accurate": ([C1, GAP, {"name": "y", "type": "softmax", "input": "gap"}], "orin_dla", "int8"),
    "softmax_optimized": ([C1, {"name": "y", "type": "softmax"}], "orin_dla", "int8"),
    "softmax_fp16": ([C1, GAP, {"name": "y", "type": "softmax", "input": "gap"}], "orin_dla", "fp16"),
    "softmax_w": ([C1, {"name": "y", "type": "softmax", "axis": "w"}], "orin_dla", "int8"),
    "softmax_h_fp16": ([C1, {"name": "y", "type": "softmax", "axis": "h"}], "orin_dla", "fp16"),
}


@pytest.mark.parametrize("name", VALUE_CASES)
def test_values_against_the_float_reference(name):
    layers, hw, precision = VALUE_CASES[name]
    prep, lowered, result, values = run(scenario(layers, hw, precision))
    assert all(layer.on_dla for layer in prep.plan.layers)
    assert {layer.kind for layer in prep.plan.layers} <= {"conv", "sdp", "pdp", "rubik"}
    ref = independent(prep)["y"]
    assert sqnr_db(ref, values["y"]) > FLOOR[precision], sqnr_db(ref, values["y"])
    # the op's hardware layers end the last report row (a pooling may fuse into the conv's)
    assert prep.plan.layers_of_row(prep.plan.rows[-1])[-1].ops[-1] == "y"


def test_element_wise_scale_is_two_per_element_operands():
    net = Network("t", "data", Shape(16, 6, 6))
    net.conv("c1", "data", 16, 3, pad=1)
    rng = np.random.default_rng(3)
    net.add("scale", "y", "c1", scale=rng.uniform(-2, 2, (16, 6, 6)), shift=rng.uniform(-1, 1, (16, 6, 6)))
    prep, lowered, result, values = run(scenario([C1], network=net))
    q = prep.plan.layers[-1].quant
    assert q.x1.mul_operand.shape == (16, 6, 6) and q.x2.alu_operand.shape == (16, 6, 6)
    assert sqnr_db(independent(prep)["y"], values["y"]) > 25


@pytest.mark.parametrize("precision", ["int8", "fp16"])
def test_prelu_with_per_element_slopes_is_one_sdp_pass(precision):
    net = Network("t", "data", Shape(16, 6, 6))
    net.conv("c1", "data", 16, 3, pad=1)
    slope = np.random.default_rng(2).uniform(-0.5, 0.5, (16, 6, 6)).astype(np.float32)
    net.add("prelu", "y", "c1", slope_cube=slope)
    prep, lowered, result, values = run(scenario([C1], precision=precision, network=net))
    assert [layer.kind for layer in prep.plan.layers_of_row("y")] == ["sdp"]
    assert prep.plan.layers[-1].quant.x1.mul == "prelu"
    assert sqnr_db(independent(prep)["y"], values["y"]) > FLOOR[precision]


def own_inputs(prep, values, op_name):
    """The op's inputs as the DLA stored them (dequantised), for checks exact to the hardware."""
    op = prep.network.op(op_name)
    return [values[i] for i in op.inputs]


@pytest.mark.parametrize("kind, inputs", [("greater", ["c1", "c2"]), ("less", ["c1", "gap"]),
                                          ("equal", ["r", "z"])])
def test_comparisons_are_exact_on_the_dla_inputs(kind, inputs):
    layers = [C1, C2, GAP, {"name": "r", "type": "relu", "input": "c1"},
              {"name": "z", "type": "relu", "input": "c2"},
              {"name": "y", "type": kind, "input": inputs}]
    prep, lowered, result, values = run(scenario(layers))
    x, t = own_inputs(prep, values, "y")
    want = {"greater": np.greater, "less": np.less, "equal": np.equal}[kind](x, t)
    np.testing.assert_array_equal(values["y"], want.astype(np.float32))
    assert 0 < want.mean() < 1 or kind == "equal"


def test_abs_is_exact():
    prep, lowered, result, values = run(scenario(VALUE_CASES["abs"][0]))
    np.testing.assert_array_equal(values["y"], np.abs(values["c1"]))


def test_comparison_with_a_constant():
    layers = [C1, {"name": "r", "type": "relu"}, {"name": "y", "type": "equal", "constant": 0.0}]
    prep, lowered, result, values = run(scenario(layers))
    np.testing.assert_array_equal(values["y"], (values["r"] == 0).astype(np.float32))
    assert 0 < values["y"].mean() < 1


def test_division_by_a_tensor_on_the_dla_inputs():
    layers = [C1, C2, {"name": "s", "type": "sigmoid", "input": "c2"},     # divisor 0.5..1.5
              {"name": "t", "type": "scale", "scale": 1.0, "shift": 0.5},
              {"name": "y", "type": "div", "input": ["c1", "t"]}]
    prep, lowered, result, values = run(scenario(layers))
    x, t = own_inputs(prep, values, "y")
    kinds = [layer.kind for layer in prep.plan.layers_of_row("y")]
    assert kinds == ["sdp", "sdp"]                  # 1/t through the LUT, then the product
    assert sqnr_db(x / t, values["y"]) > 30
    assert sqnr_db(independent(prep)["y"], values["y"]) > 25


def test_softmax_layers_and_mode_note():
    layers, hw, precision = VALUE_CASES["softmax_accurate"]
    prep = prepare(scenario(layers, hw, precision))
    row = prep.plan.layers_of_row("y")
    # 4 rotation rounds (16 channels) with the max fused, exp, channel sum, reciprocal, product
    assert [layer.kind for layer in row] == ["conv"] * 4 + ["sdp", "conv", "sdp", "sdp"]
    assert any("accurate mode" in n for n in row[-1].notes)


def test_timing_only_runs_every_kind():
    layers = [C1, C2, GAP, {"name": "a", "type": "scale", "scale": 2.0, "shift": 0.1, "input": "c1"},
              {"name": "b", "type": "sub", "input": ["a", "gap"]},
              {"name": "d", "type": "div", "input": ["b", "c2"]}, {"name": "e", "type": "sin"},
              {"name": "f", "type": "greater", "input": ["e", "c2"]},
              {"name": "g", "type": "reduce", "axes": "chw", "input": "e"},
              {"name": "y", "type": "softmax", "input": "gap"}]
    prep, lowered, result, _ = run(scenario(layers, "orin_dla", mode="timing-only"))
    assert result.total_cycles > 0
    assert all(layer.on_dla for layer in prep.plan.layers)


def test_a_batch_runs_image_by_image():
    layers = [C1, GAP, {"name": "d", "type": "sub", "input": ["c1", "gap"]}, {"name": "e", "type": "sin"},
              {"name": "y", "type": "softmax", "input": "gap"}]
    scn = replace(scenario(layers, "orin_dla"), batch=2)
    prep, lowered, result, values = run(scn)
    ref = batch_reference(prep.network, prep.weights, prep.input)
    for name in ("d", "e", "y"):
        assert values[name].shape[0] == 2
        assert sqnr_db(ref[name], values[name]) > 25


def test_a_function_not_finite_on_the_calibrated_range_is_a_one_line_error():
    layers = [C1, {"name": "y", "type": "pow", "constant": 0.5}]      # sqrt of negative values
    with pytest.raises(NvdlaSimError, match=r"x \*\* 0.5' is not finite .*no LUT can hold it"):
        run(scenario(layers))


def test_yaml_errors_are_one_line():
    with pytest.raises(NvdlaSimError, match=r"layers\[1\]"):
        scenario([C1, {"name": "y", "type": "scale", "scale": [1.0, 2.0]}])
    with pytest.raises(NvdlaSimError, match=r"layers\[1\].axes"):
        scenario([C1, {"name": "y", "type": "reduce", "axes": "cx"}])
    with pytest.raises(NvdlaSimError, match=r"layers\[1\].input"):
        scenario([C1, {"name": "y", "type": "sub"}])
    with pytest.raises(NvdlaSimError, match=r"layers\[1\].constant: a division by 0"):
        scenario([C1, {"name": "y", "type": "div", "constant": 0}])
    with pytest.raises(NvdlaSimError, match=r"layers\[1\].constant"):
        scenario([C1, {"name": "y", "type": "sub", "constant": "one"}])
