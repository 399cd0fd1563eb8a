"""ONNX import of Sub, Div, Pow, Equal/Greater/Less (+ Cast), Abs, Sin, Cos, Atan, ReduceMax,
Softmax, PRelu and element-wise Mul/Add/Sub constants as Scale (scenario/onnx_ext.py): our float
reference against onnx's reference evaluator, placement and DLA values of a small model on
orin_dla, and one-line errors naming the node."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the optional 'onnx' package is not installed "
                                          "(pip install 'nvdla-sim[onnx]')")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from nvdla_sim.compiler.lower import lower, run_lowered  # noqa: E402
from nvdla_sim.compiler.support import check_support  # noqa: E402
from nvdla_sim.config import load_hardware  # noqa: E402
from nvdla_sim.errors import NvdlaSimError  # noqa: E402
from nvdla_sim.scenario.onnx_import import import_model  # noqa: E402
from nvdla_sim.scenario.reference import run_reference, sqnr_db  # noqa: E402
from nvdla_sim.scenario.runner import batch_values, context, prepare  # noqa: E402
from nvdla_sim.scenario.schema import parse_scenario  # noqa: E402

RNG = np.random.default_rng(11)
SHAPE = [1, 4, 5, 5]


def const(name, arr):
    return numpy_helper.from_array(np.asarray(arr, np.float32), name)


def model(nodes, inits, out_name="y", in_shape=SHAPE, opset=15):
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                     in_shape)],
                          [helper.make_tensor_value_info(out_name, TensorProto.FLOAT, None)],
                          initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def node(op, ins, out="y", **attrs):
    return helper.make_node(op, ins, [out], **attrs)


def cast(src, out="y"):
    return helper.make_node("Cast", [src], [out], to=TensorProto.FLOAT)


GAP = node("GlobalAveragePool", ["x"], "g")
MODELS = {
    "sub_tensors": ([GAP, node("Sub", ["x", "g"])], []),
    "sub_constant_first": ([node("Sub", ["k", "x"])], [const("k", 0.5)]),
    "div_constant": ([node("Div", ["x", "k"])], [const("k", 4.0)]),
    "div_tensor": ([node("Sigmoid", ["x"], "s"), node("Div", ["x", "s"])], []),
    "pow": ([node("Pow", ["x", "k"])], [const("k", 2.0)]),
    "greater_cast": ([GAP, node("Greater", ["x", "g"], "b"), cast("b")], []),
    "less_constant": ([node("Less", ["x", "k"], "b"), cast("b")], [const("k", 0.1)]),
    "equal_cast": ([node("Relu", ["x"], "r"), node("Equal", ["r", "k"], "b"), cast("b")],
                   [const("k", 0.0)]),
    "abs": ([node("Abs", ["x"])], []),
    "sin": ([node("Sin", ["x"])], []),
    "cos": ([node("Cos", ["x"])], []),
    "atan": ([node("Atan", ["x"])], []),
    "reduce_hw": ([node("ReduceMax", ["x"], axes=[2, 3])], []),
    "reduce_c": ([node("ReduceMax", ["x"], axes=[1])], []),
    "reduce_all": ([node("ReduceMax", ["x"])], []),
    "softmax": ([node("Softmax", ["x"], axis=1)], []),
    "softmax_h": ([node("Softmax", ["x"], axis=2)], []),
    "scale_elementwise": ([node("Mul", ["x", "k"])], [const("k", RNG.uniform(-2, 2, SHAPE))]),
    "shift_elementwise": ([node("Add", ["x", "k"])], [const("k", RNG.uniform(-2, 2, SHAPE[1:]))]),
    "prelu_tensor": ([GAP, node("PRelu", ["x", "g"])], []),
    "prelu_elementwise": ([node("PRelu", ["x", "k"])], [const("k", RNG.uniform(0, 0.5, SHAPE[1:]))]),
}


@pytest.mark.parametrize("name", MODELS)
def test_reference_matches_onnx(name):
    nodes, inits = MODELS[name]
    m = model(nodes, inits, opset=13)
    net, w = import_model(m, "test.onnx")
    x = RNG.standard_normal(SHAPE[1:]).astype(np.float32)
    ours = run_reference(net, w, x)
    (theirs,) = ReferenceEvaluator(m).run(None, {"x": x[None]})
    got = ours[net.onnx_outputs["y"]]
    np.testing.assert_allclose(got.reshape(theirs.shape), np.asarray(theirs, np.float32),
                               rtol=1e-5, atol=1e-5)


def run_onnx(tmp_path, nodes, inits, hardware="orin_dla", precision="int8", fallback=False):
    conv = [node("Conv", ["x", "w"], "c", pads=[1, 1, 1, 1])]
    inits = inits + [const("w", RNG.standard_normal((4, 4, 3, 3)) * 0.3)]
    renamed = [helper.make_node(n.op_type, ["c" if i == "x" else i for i in n.input],
                                list(n.output), **{a.name: helper.get_attribute_value(a)
                                                   for a in n.attribute}) for n in nodes]
    path = tmp_path / "m.onnx"
    onnx.save(model(conv + renamed, inits, opset=13), path)
    data = {"name": "o", "hardware": hardware, "precision": precision,
            "network": {"onnx": str(path)}, "input": {"seed": 2},
            "outputs": {"plots": False}, "gpu_fallback": fallback}
    prep = prepare(parse_scenario(data, "."))
    ctx = context(prep)
    result = run_lowered(lower(prep.plan, ctx), ctx)
    return prep, batch_values(prep.plan, result)


@pytest.mark.parametrize("name", ["sub_tensors", "div_constant", "pow", "abs", "sin", "reduce_hw",
                                  "reduce_all", "softmax", "scale_elementwise",
                                  "prelu_elementwise"])
def test_onnx_models_run_on_the_dla(tmp_path, name):
    prep, values = run_onnx(tmp_path, *MODELS[name])
    assert all(layer.on_dla for layer in prep.plan.layers)
    out = prep.network.onnx_outputs["y"]
    ref = run_reference(prep.network, prep.weights, prep.input)[out]
    assert sqnr_db(ref, values[out]) > 25


def test_comparison_with_cast_runs_exactly(tmp_path):
    prep, values = run_onnx(tmp_path, *MODELS["greater_cast"])
    out = prep.network.onnx_outputs["y"]
    x, g = (values[i] for i in prep.network.op(out).inputs)
    np.testing.assert_array_equal(values[out], (x > g).astype(np.float32))


def test_prelu_slope_tensor_goes_to_the_gpu(tmp_path):
    prep, values = run_onnx(tmp_path, *MODELS["prelu_tensor"], fallback=True)
    gpu = [layer for layer in prep.plan.layers if not layer.on_dla]
    assert len(gpu) == 1 and "[rule prelu.slope_constant]" in gpu[0].reason


def test_comparison_without_cast_goes_to_the_gpu():
    m = model([GAP, node("Greater", ["x", "g"])], [], opset=13)
    m.graph.output[0].type.tensor_type.elem_type = TensorProto.BOOL     # no Cast after it
    net, _ = import_model(m, "t.onnx")
    reason = check_support(net, load_hardware("xavier_dla")).reason("y")
    assert "[rule eltwise.compare_cast]" in reason


def test_softmax_over_h_runs_on_orin_and_on_the_gpu_elsewhere(tmp_path):
    prep, values = run_onnx(tmp_path, *MODELS["softmax_h"])
    assert all(layer.on_dla for layer in prep.plan.layers)
    out = prep.network.onnx_outputs["y"]
    ref = run_reference(prep.network, prep.weights, prep.input)[out]
    assert sqnr_db(ref, values[out]) > 25
    prep, values = run_onnx(tmp_path, *MODELS["softmax_h"], hardware="xavier_dla", fallback=True)
    gpu = [layer for layer in prep.plan.layers if not layer.on_dla]
    assert len(gpu) == 1 and "[rule softmax.orin_only]" in gpu[0].reason


@pytest.mark.parametrize("nodes, inits, expect", [
    ([node("Relu", ["x"], "r"), helper.make_node("Cast", ["r"], ["y"], to=TensorProto.INT32)], [],
     "node 'y' (Cast): cast to int32"),
    ([node("ReduceMax", ["x"], axes=[1], keepdims=0)], [], "node 'y' (ReduceMax): keepdims=0"),
    ([node("ReduceMax", ["x"], axes=[0])], [], "node 'y' (ReduceMax): reduce over axes [0]"),
    ([node("Div", ["k", "j"])], [const("k", 1.0), const("j", 2.0)],
     "node 'y' (Div): both operands are constants"),
    ([node("Sub", ["x", "k"])], [const("k", np.ones((3, 5)))], "node 'y' (Sub): a constant of shape"),
])
def test_unsupported_is_one_line_naming_the_node(nodes, inits, expect):
    with pytest.raises(NvdlaSimError) as exc:
        import_model(model(nodes, inits, opset=13), "test.onnx")
    assert expect in str(exc.value) and "\n" not in str(exc.value)
