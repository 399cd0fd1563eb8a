"""ONNX import: small models built with onnx.helper, run by our float reference and checked against
onnx's own reference evaluator; unsupported nodes fail with one line naming the node."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the optional 'onnx' package is not installed "
                                          "(pip install 'nvdla-sim[onnx]')")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from nvdla_sim.cli import main  # noqa: E402
from nvdla_sim.compiler.hwlayers import build_plan  # noqa: E402
from nvdla_sim.compiler.support import check_support  # noqa: E402
from nvdla_sim.config import load_hardware  # noqa: E402
from nvdla_sim.errors import NvdlaSimError  # noqa: E402
from nvdla_sim.scenario.onnx_import import import_model, load_onnx  # noqa: E402
from nvdla_sim.scenario.reference import run_reference  # noqa: E402

RNG = np.random.default_rng(7)


def const(name, arr):
    return numpy_helper.from_array(np.asarray(arr, np.float32), name)


def model(nodes, inits, in_shape, out_name, out_shape=None):
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, in_shape)],
                          [helper.make_tensor_value_info(out_name, TensorProto.FLOAT, out_shape)],
                          initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)])


def check_against_onnx(m, in_shape):
    net, w = import_model(m, "test.onnx")
    x = RNG.standard_normal(in_shape[1:]).astype(np.float32)
    ours = run_reference(net, w, x)
    (theirs,) = ReferenceEvaluator(m).run(None, {"x": x[None]})
    out = m.graph.output[0].name
    got = ours[net.outputs[0]] if out not in ours else ours[out]
    np.testing.assert_allclose(got.reshape(theirs.shape), theirs, rtol=1e-4, atol=1e-5)
    return net, w


def test_cnn_conv_bn_relu_pool_gemm_softmax():
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], strides=[1, 1]),
        helper.make_node("BatchNormalization", ["c1", "g", "be", "mu", "var"], ["bn"], epsilon=1e-3,
                         training_mode=0),
        helper.make_node("Relu", ["bn"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p1"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["fc"], transB=1, alpha=0.5),
        helper.make_node("Softmax", ["fc"], ["prob"], axis=1)]
    inits = [const("w1", RNG.standard_normal((8, 3, 3, 3))), const("b1", RNG.standard_normal(8)),
             const("g", RNG.uniform(0.5, 1.5, 8)), const("be", RNG.standard_normal(8)),
             const("mu", RNG.standard_normal(8)), const("var", RNG.uniform(0.5, 2, 8)),
             const("wf", RNG.standard_normal((10, 8 * 4 * 4))), const("bf", RNG.standard_normal(10))]
    m = model(nodes, inits, [1, 3, 8, 8], "prob", [1, 10])
    net, _ = check_against_onnx(m, [1, 3, 8, 8])
    assert [op.kind for op in net.ops] == ["conv", "batchnorm", "relu", "pool", "flatten", "fc", "softmax"]
    hw = load_hardware("nv_small")
    support = check_support(net, hw)
    assert support.fallback_ops == ["prob"]
    plan = build_plan(net, import_model(m)[1], hw, support)
    # batch norm folded into the conv, relu fused, pool on the fly, FC as a 4x4 convolution
    assert [(l.name, l.kind) for l in plan.layers] == [("c1", "conv"), ("p1", "pdp"), ("fc", "conv"),
                                                       ("prob", "gpu")]
    assert plan.layers[0].ops == ["c1", "bn", "r1"] and plan.layers[2].conv.kernel == (4, 4)


def test_activations_and_elementwise():
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a"], pads=[0, 0, 0, 0]),
        helper.make_node("Conv", ["x", "w2"], ["b"], auto_pad="SAME_UPPER", kernel_shape=[3, 3]),
        helper.make_node("PRelu", ["a", "slope"], ["pa"]),
        helper.make_node("LeakyRelu", ["b"], ["lb"], alpha=0.2),
        helper.make_node("Add", ["pa", "lb"], ["s"]),
        helper.make_node("Mul", ["s", "chscale"], ["ms"]),
        helper.make_node("Clip", ["ms", "lo", "hi"], ["cl"]),
        helper.make_node("Sigmoid", ["cl"], ["sg"]),
        helper.make_node("Tanh", ["b"], ["tb"]),
        helper.make_node("Mul", ["sg", "tb"], ["prod"]),
        helper.make_node("Concat", ["prod", "s"], ["cat"], axis=1),
        helper.make_node("AveragePool", ["cat"], ["ap"], kernel_shape=[3, 3], strides=[1, 1],
                         pads=[1, 1, 1, 1], count_include_pad=1),
        helper.make_node("GlobalAveragePool", ["ap"], ["gap"]),
        helper.make_node("Reshape", ["gap", "shape"], ["flat"]),
        helper.make_node("MatMul", ["flat", "wm"], ["out"])]
    inits = [const("w1", RNG.standard_normal((4, 2, 1, 1))), const("w2", RNG.standard_normal((4, 2, 3, 3))),
             const("slope", RNG.uniform(0, 0.3, (4, 1, 1))), const("chscale", RNG.uniform(0.5, 2, (1, 4, 1, 1))),
             const("lo", 0.0), const("hi", 6.0), const("wm", RNG.standard_normal((8, 3))),
             numpy_helper.from_array(np.array([1, -1], np.int64), "shape")]
    net, w = check_against_onnx(model(nodes, inits, [1, 2, 6, 6], "out", [1, 3]), [1, 2, 6, 6])
    kinds = {op.name: op.kind for op in net.ops}
    assert (kinds["pa"], kinds["lb"], kinds["ms"], kinds["cl"], kinds["prod"]) == \
        ("prelu", "prelu", "batchnorm", "clip", "mul")
    assert net.op("lb").attrs["slope"] == pytest.approx(0.2)
    assert net.op("cl").attrs == {"min": 0.0, "max": 6.0}
    assert net.op("ap").attrs["count_include_pad"] is True
    assert w["ms"]["scale"].shape == (4,)
    assert "flat" not in net.shapes                      # a reshape of a 1x1 tensor is a no-op


def test_lrn_attributes():
    # (onnx's own reference LRN sums over the batch axis, so it cannot be the yardstick here; the
    # formula is checked by hand in test_reference.py)
    m = model([helper.make_node("LRN", ["x"], ["n"], size=5, alpha=1e-2, beta=0.6, bias=2.0)], [],
              [1, 6, 3, 3], "n")
    net, _ = import_model(m)
    assert net.op("n").kind == "lrn"
    assert net.op("n").attrs == {"size": 5, "alpha": pytest.approx(1e-2), "beta": pytest.approx(0.6),
                                 "k": 2.0}


def test_avgpool_excluding_padding_is_a_fallback():
    nodes = [helper.make_node("AveragePool", ["x"], ["ap"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])]
    net, _ = check_against_onnx(model(nodes, [], [1, 4, 5, 5], "ap"), [1, 4, 5, 5])
    assert "excludes padding" in check_support(net, load_hardware("nv_small")).reason("ap")


@pytest.mark.parametrize("node, inits, expect", [
    (helper.make_node("Resize", ["x", "", "sc"], ["y"], mode="cubic"), [const("sc", [1, 1, 2, 2])],
     "node 'y' (Resize): mode cubic is not modelled (nearest, linear)"),
    (helper.make_node("Concat", ["x", "x"], ["y"], axis=2), [],
     "node 'y' (Concat): concatenation along axis 2 (only channels, axis 1)"),
    (helper.make_node("Conv", ["x", "w3"], ["y"]), [const("w3", np.ones((2, 2, 3)))],
     "node 'y' (Conv): weights must be a 4-D constant (2-D convolution)"),
    (helper.make_node("Reshape", ["x", "shape"], ["y"]),
     [numpy_helper.from_array(np.array([1, 8, 4], np.int64), "shape")],
     "node 'y' (Reshape): reshape of a [1, 2, 4, 4] activation to [1, 8, 4] (supported: "
     "layout-preserving views, flattening, and the channel shuffle)"),
])
def test_unsupported_nodes(node, inits, expect):
    with pytest.raises(NvdlaSimError) as exc:
        import_model(model([node], inits, [1, 2, 4, 4], "y"), "test.onnx")
    assert str(exc.value) == f"test.onnx: {expect}"


def test_model_with_two_inputs():
    g = helper.make_graph([helper.make_node("Add", ["x", "z"], ["y"])], "m",
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 2, 4, 4]) for n in "xz"],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    with pytest.raises(NvdlaSimError, match="test.onnx: the model has 2 inputs; one image input expected"):
        import_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)]), "test.onnx")


def test_scenario_with_an_onnx_file(tmp_path, capsys):
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Softmax", ["r"], ["prob"], axis=1)]
    m = model(nodes, [const("w", RNG.standard_normal((4, 3, 3, 3)))], [1, 3, 8, 8], "prob")
    onnx.save(m, str(tmp_path / "net.onnx"))
    assert load_onnx(tmp_path / "net.onnx")[0].input_shape.c == 3
    (tmp_path / "s.yaml").write_text("hardware: nv_small\nnetwork: {onnx: net.onnx}\ngpu_fallback: false\n")
    assert main(["run", str(tmp_path / "s.yaml")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("gpu_fallback: false, but layer 'prob' (softmax) cannot run on the DLA: "
                        "softmax: NVDLA has no engine for it [rule softmax.engine]")
    (tmp_path / "bad.onnx").write_bytes(b"not a model")
    (tmp_path / "s2.yaml").write_text("hardware: nv_small\nnetwork: {onnx: bad.onnx}\n")
    assert main(["run", str(tmp_path / "s2.yaml")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "s2.yaml: network.onnx: " in err and "not a readable ONNX model" in err
