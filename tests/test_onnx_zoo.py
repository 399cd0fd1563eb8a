"""The ONNX model zoo's light models (shipped inside the onnx package) as an import corpus.

Each model imports as shipped (ConstantOfShape weights folded, IR-3 weight inputs ignored), and the
project's float32 reference is checked against onnxruntime, an independent runtime, with random
weights listed both as initializers and as graph inputs (IR 3 style), on the test runner's input
(arange / n).  The default suite checks the three cheapest models against onnxruntime; set
NVDLA_SIM_ZOO_FULL=1 for all nine (about 2 minutes and 3 GB: VGG-19's weights are 560 MB).
End-to-end runs of all nine are in benchmarks/bench_onnx_zoo.py.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the optional 'onnx' package is not installed "
                                          "(pip install 'nvdla-sim[onnx]')")
from onnx import helper, numpy_helper  # noqa: E402

from nvdla_sim.scenario.onnx_import import import_model  # noqa: E402
from nvdla_sim.scenario.reference import run_reference  # noqa: E402

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
MODELS = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet",
          "squeezenet", "vgg19", "zfnet512"]
CHEAP = {"resnet50", "shufflenet", "squeezenet"}
FULL = os.environ.get("NVDLA_SIM_ZOO_FULL") == "1"


def light(name: str):
    path = LIGHT / f"light_{name}.onnx"
    if not path.exists():
        pytest.skip(f"{path} not found: this onnx package does not ship the light model-zoo models")
    return onnx.load(str(path))


def runner_input(net) -> np.ndarray:
    """The input onnx's backend test runner feeds light models: arange(n) / n."""
    s = net.input_shape
    n = s.c * s.h * s.w
    return (np.arange(n, dtype=np.float64).reshape(1, s.c, s.h, s.w) / n).astype(np.float32)


def with_random_weights(model, seed: int = 0):
    """The model with every ConstantOfShape weight replaced by random values in [0.01, 0.03]
    (around the shipped 0.02, so activations keep their range), each weight an initializer AND a
    graph input (IR 3 style)."""
    rng = np.random.default_rng(seed)
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    nodes, new_inits, new_inputs = [], [], []
    for node in g.node:
        if node.op_type == "ConstantOfShape":
            shape = numpy_helper.to_array(inits[node.input[0]]).astype(np.int64)
            value = rng.uniform(0.01, 0.03, tuple(shape)).astype(np.float32)
            new_inits.append(numpy_helper.from_array(value, node.output[0]))
            new_inputs.append(helper.make_tensor_value_info(node.output[0], onnx.TensorProto.FLOAT,
                                                            [int(v) for v in shape]))
        else:
            nodes.append(node)
    used = {i for n in nodes for i in n.input}
    keep = [t for t in g.initializer if t.name in used]
    inputs = [i for i in g.input if i.name in used or i.name not in inits] + new_inputs
    graph = helper.make_graph(nodes, g.name, inputs, list(g.output), initializer=keep + new_inits)
    out = helper.make_model(graph, opset_imports=list(model.opset_import))
    out.ir_version = 3
    return out


def logits_name(model) -> str | None:
    """The tensor a final Softmax reads (compared before the softmax flattens the differences)."""
    for node in model.graph.node:
        if node.op_type == "Softmax" and node.output[0] in {o.name for o in model.graph.output}:
            return node.input[0]
    return None


@pytest.mark.parametrize("name", MODELS)
def test_light_model_imports_as_shipped(name):
    model = light(name)
    net, weights = import_model(model, f"light_{name}.onnx")
    kinds = {op.kind for op in net.ops}
    assert "conv" in kinds and len(net.onnx_outputs) == 1
    assert (net.input_shape.c, net.input_shape.h, net.input_shape.w) == (3, 224, 224)
    if name == "shufflenet":           # 16 channel shuffles, each one op
        assert sum(op.kind == "shuffle" for op in net.ops) == 16
    if name in ("densenet121", "inception_v2"):    # BN + Mul + Add: one affine per batch norm
        onnx_bn = sum(n.op_type == "BatchNormalization" for n in model.graph.node)
        assert sum(op.kind == "batchnorm" for op in net.ops) <= onnx_bn
    if name == "resnet50":
        assert sum(op.kind == "add" for op in net.ops) == 16


@pytest.mark.parametrize("name", MODELS)
def test_light_model_reference_matches_onnxruntime(name):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime (a test dependency) is not installed")
    if name not in CHEAP and not FULL:
        pytest.skip("slow zoo model: set NVDLA_SIM_ZOO_FULL=1 (or run benchmarks/bench_onnx_zoo.py)")
    model = with_random_weights(light(name))
    net, weights = import_model(model, f"light_{name}.onnx")
    x = runner_input(net)
    ours = run_reference(net, weights, x[0])
    logits = logits_name(model)
    ort_model = onnx.ModelProto()
    ort_model.CopyFrom(model)
    if logits:
        ort_model.graph.output.append(helper.make_tensor_value_info(logits, onnx.TensorProto.FLOAT, None))
    options = ort.SessionOptions()
    options.log_severity_level = 3
    sess = ort.InferenceSession(ort_model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    theirs = sess.run(None, {net.input_name: x})
    out_name = model.graph.output[0].name
    got = ours[net.onnx_outputs[out_name]]
    np.testing.assert_allclose(got.reshape(theirs[0].shape), theirs[0], rtol=1e-3, atol=1e-5)
    if logits:
        tensor = net.onnx_outputs[out_name]
        src = net.op(tensor).inputs[0]        # our softmax's input is the logits tensor
        ref = theirs[1]
        assert np.ptp(ref) > 0                # the random weights make the logits differ
        np.testing.assert_allclose(ours[src].reshape(ref.shape), ref, rtol=1e-3,
                                   atol=1e-5 * float(np.abs(ref).max()))


def test_shipped_output_of_the_reference_evaluator():
    """SqueezeNet as shipped against the output file onnx ships beside it."""
    model = light("squeezenet")
    net, weights = import_model(model, "light_squeezenet.onnx")
    x = runner_input(net)
    expect = numpy_helper.to_array(onnx.load_tensor(str(LIGHT / "light_squeezenet_output_0.pb")))
    got = run_reference(net, weights, x[0])[net.onnx_outputs[model.graph.output[0].name]]
    np.testing.assert_allclose(got.reshape(expect.shape), expect, rtol=1e-3, atol=1e-5)
