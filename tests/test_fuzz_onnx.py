"""Hostile ONNX models: hand-written contradictions and seeded mutations of a small valid model's
attributes and initializers.  Every one is imported, or refused with one NvdlaSimError line naming
the node and its op type (or the model-level rule: checker, opset, initializer); nothing else
escapes.  A valid change (a stride, a kernel count) changes the imported shapes where it must.
NVDLA_FUZZ_SEED / NVDLA_FUZZ_ROUNDS vary and lengthen the mutation run."""
from __future__ import annotations

import contextlib
import io
import math
import os
import random

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the optional 'onnx' package is not installed "
                                          "(pip install 'nvdla-sim[onnx]')")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from nvdla_sim.cli import main  # noqa: E402
from nvdla_sim.errors import NvdlaSimError  # noqa: E402
from nvdla_sim.scenario.onnx_import import import_model  # noqa: E402
from nvdla_sim.scenario.reference import run_reference  # noqa: E402
from nvdla_sim.scenario.schema import MAX_DIM  # noqa: E402

SEED = int(os.environ.get("NVDLA_FUZZ_SEED", "13"))
ROUNDS = int(os.environ.get("NVDLA_FUZZ_ROUNDS", "1"))


def const(name, arr):
    return numpy_helper.from_array(np.asarray(arr, np.float32), name)


def model(nodes, inits, in_shape=(1, 2, 8, 8), out="y", opset=15):
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                     list(in_shape))],
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)],
                          initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


W = np.ones((4, 2, 3, 3), np.float32)


def conv(**attrs):
    return model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv0", **attrs)], [const("w", W)])


def node(op, inputs=("x",), inits=(), **attrs):
    return model([helper.make_node(op, list(inputs), ["y"], name="n0", **attrs)], list(inits))


def corrupt(m, dims=None, raw=None):
    t = m.graph.initializer[0]
    if dims is not None:
        t.dims[:] = dims
    if raw is not None:
        t.ClearField("float_data")
        t.raw_data = raw
    return m


BN = [const(n, np.ones(2)) for n in "sbm"]
HOSTILE = [
    (conv(pads=[-1, -1, -1, -1]), "node 'conv0' (Conv): pads [-1, -1, -1, -1]"),
    (conv(strides=[0, 0]), "node 'conv0' (Conv): strides [0, 0]"),
    (conv(strides=[1]), "node 'conv0' (Conv): strides [1]: expected 2 values"),
    (conv(dilations=[0, 1]), "node 'conv0' (Conv): dilations [0, 1]"),
    (conv(group=0), "node 'conv0' (Conv)"),
    (conv(group=3), "node 'conv0' (Conv)"),
    (conv(kernel_shape=[5, 5]), "node 'conv0' (Conv): kernel_shape [5, 5] differs"),
    (conv(auto_pad="SAME_MIDDLE"), "node 'conv0' (Conv): auto_pad"),
    (conv(foo=3), "Unrecognized attribute: foo"),                         # onnx.checker
    (node("MaxPool", kernel_shape=[2, 2], dilations=[2, 2]), "node 'n0' (MaxPool): pooling dilations"),
    (node("MaxPool", kernel_shape=[2, 2], strides=[0, 1]), "node 'n0' (MaxPool): strides [0, 1]"),
    (node("MaxPool", kernel_shape=[0, 0]), "node 'n0' (MaxPool): kernel_shape [0, 0]"),
    (node("MaxPool", kernel_shape=[2, 2], pads=[-1, 0, 0, 0]), "node 'n0' (MaxPool): pads"),
    (node("MaxPool", kernel_shape=[2, 2], storage_order=1), "node 'n0' (MaxPool): storage_order"),
    (node("MaxPool", kernel_shape=[20, 20]), "node 'n0' (MaxPool): output"),
    (node("AveragePool", kernel_shape=[2, 2, 2]), "node 'n0' (AveragePool): 3-D pooling"),
    (node("LRN", size=5, alpha=float("nan")), "node 'n0' (LRN): attribute alpha=nan"),
    (node("LRN", size=0), "node 'n0' (LRN): size 0"),
    (node("LRN", size=5, bias=-1.0), "node 'n0' (LRN): bias must be > 0"),
    (node("LeakyRelu", alpha=float("inf")), "node 'n0' (LeakyRelu): attribute alpha=inf"),
    (node("Clip", ["x", "lo", "hi"], [const("lo", 5.0), const("hi", 1.0)]),
     "node 'n0' (Clip): min 5 exceeds max 1"),
    (node("Clip", ["x", "lo", "hi"], [const("lo", 0.0), const("hi", 1e30)]),
     "node 'n0' (Clip): bound 1e+30 is not a number within FP16's +-65504"),
    (node("Clip", ["x", "lo", "hi"], [const("lo", np.nan), const("hi", 1.0)]),
     "node 'n0' (Clip): bound nan"),
    (node("BatchNormalization", ["x", "s", "b", "m", "v"], BN + [const("v", -10 * np.ones(2))]),
     "node 'n0' (BatchNormalization): variance + epsilon must be > 0"),
    (node("BatchNormalization", ["x", "s", "b", "m", "v"], BN + [const("v", np.ones(2))],
          training_mode=1), "node 'n0' (BatchNormalization): training-mode"),
    (node("BatchNormalization", ["x", "s", "b", "m", "v"], [const(n, np.ones(3)) for n in "sbmv"]),
     "node 'n0' (BatchNormalization): scale, bias, mean and variance of [3, 3, 3, 3] values for "
     "2 channels"),
    (model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv0")],
           [const("w", np.full((4, 2, 3, 3), np.nan))]), "node 'conv0' (Conv): its weight holds NaN"),
    (model([helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv0")],
           [const("w", W), const("b", [0, np.inf, 0, 0])]), "node 'conv0' (Conv): its bias holds"),
    (corrupt(conv(), dims=[4, 2, 5, 5]), "ONNX checker"),
    (corrupt(conv(), raw=b"\0" * 10), "ONNX checker"),
    (model([helper.make_node("Relu", ["x"], ["y"])], [], opset=99), "opset 99"),
    (model([helper.make_node("Relu", ["x"], ["y"])], [], opset=1), "opset 1"),
    (model([helper.make_node("Relu", ["x"], ["y"])], [], in_shape=(1, 3, 100000, 100000)),
     "input 'x' has shape [1, 3, 100000, 100000]: above 8192"),
    (model([helper.make_node("Relu", ["x"], ["y"])], [], in_shape=(1, 3, -4, 8)), "input 'x'"),
    (node("Softmax", axis=7), "node 'n0' (Softmax)"),
    (node("Resize"), "node 'n0' (Resize): the scales (or sizes) must be constants"),
]


@pytest.mark.parametrize("m, expect", HOSTILE, ids=[f"case{i}" for i in range(len(HOSTILE))])
def test_hostile_model_is_one_line(m, expect):
    with pytest.raises(NvdlaSimError) as exc:
        import_model(m, "test.onnx")
    msg = str(exc.value)
    assert msg.startswith("test.onnx: ") and "\n" not in msg, msg
    assert expect in msg, msg


def test_hostile_model_through_the_cli(tmp_path):
    path = tmp_path / "bad.onnx"
    onnx.save(conv(strides=[0, 0]), str(path))
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        rc = main(["run", str(path), "--hardware", "nv_small", "--mode", "timing",
                   "--out", str(tmp_path / "o")])
    lines = err.getvalue().splitlines()
    assert rc == 2 and len(lines) == 1, err.getvalue()
    assert "node 'conv0' (Conv): strides [0, 0]" in lines[0] and str(path) in lines[0]


# -- seeded mutations of a valid model ---------------------------------------------------------

def small_net():
    """conv 3x3 -> relu -> maxpool 2 -> lrn -> conv 1x1 (2 -> 4 -> 4 channels, 8x8)."""
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="c1", pads=[1, 1, 1, 1],
                              strides=[1, 1], kernel_shape=[3, 3]),
             helper.make_node("Relu", ["c1"], ["r1"], name="r1"),
             helper.make_node("MaxPool", ["r1"], ["p1"], name="p1", kernel_shape=[2, 2],
                              strides=[2, 2]),
             helper.make_node("LRN", ["p1"], ["l1"], name="l1", size=3, alpha=1e-4, beta=0.75,
                              bias=1.0),
             helper.make_node("Conv", ["l1", "w2"], ["y"], name="c2", kernel_shape=[1, 1])]
    rng = np.random.default_rng(0)
    inits = [const("w1", rng.standard_normal((4, 2, 3, 3))), const("b1", np.zeros(4)),
             const("w2", rng.standard_normal((4, 4, 1, 1)))]
    return model(nodes, inits)


INTS = [-(2 ** 40), -3, -1, 0, 1, 2, 3, 7, 9, 64, MAX_DIM + 1, 2 ** 31]
FLOATS = [float("nan"), float("inf"), -float("inf"), -1.0, 0.0, 1e-30, 0.5, 1e30]


def _mutate(m, rng: random.Random):
    m = m.__class__.FromString(m.SerializeToString())
    n = rng.choice(list(m.graph.node))
    roll = rng.random()
    if roll < 0.6 and n.attribute:
        a = rng.choice(list(n.attribute))
        if a.type == onnx.AttributeProto.INTS:
            a.ints[:] = [rng.choice(INTS) for _ in range(rng.choice([len(a.ints), 1, 3, 5]))]
        elif a.type == onnx.AttributeProto.INT:
            a.i = rng.choice(INTS)
        elif a.type == onnx.AttributeProto.FLOAT:
            a.f = rng.choice(FLOATS)
    elif roll < 0.8:
        t = rng.choice(list(m.graph.initializer))
        arr = numpy_helper.to_array(t).copy()
        if rng.random() < 0.5 and arr.size:
            arr.reshape(-1)[rng.randrange(arr.size)] = rng.choice(FLOATS)
            t.CopyFrom(numpy_helper.from_array(arr, t.name))
        elif rng.random() < 0.5:
            t.dims[:] = [rng.choice([1, 2, 3, 4]) for _ in range(rng.choice([1, 2, 4]))]
        else:                                  # a consistent tensor of another shape
            shape = [rng.choice([1, 2, 3, 4]) for _ in range(rng.choice([1, 2, 4]))]
            t.CopyFrom(numpy_helper.from_array(np.ones(shape, np.float32), t.name))
    else:
        n.attribute.append(helper.make_attribute(rng.choice(["foo", "dilations", "ceil_mode"]),
                                                 rng.choice([1, [2, 2]])))
    return m


def import_or_refusal(m, i: int):
    """Import mutant `i` as "m.onnx": (network, weights), or None when refused, the refusal
    being one line that names the file."""
    try:
        return import_model(m, "m.onnx")
    except NvdlaSimError as exc:
        msg = str(exc)
        assert msg.startswith("m.onnx: ") and "\n" not in msg, (i, msg)
        return None


def check_promises(net, w, i: int) -> None:
    """What the importer promises of an accepted model: shapes within bounds, finite weights."""
    for s in net.shapes.values():
        assert 1 <= s.h <= MAX_DIM and 1 <= s.w <= MAX_DIM and s.c >= 1, (i, s)
    for params in w.values():
        for v in params.values():
            assert np.all(np.isfinite(v)), i


def test_mutated_models_import_or_fail_cleanly():
    rng = random.Random(SEED)
    base = small_net()
    net, w = import_model(base, "base.onnx")
    accepted = refused = 0
    for i in range(200 * ROUNDS):
        imported = import_or_refusal(_mutate(base, rng), i)
        if imported is None:
            refused += 1
            continue
        accepted += 1
        net, w = imported
        x = np.ones((net.input_shape.c, net.input_shape.h, net.input_shape.w), np.float32)
        try:                                          # an accepted model runs
            run_reference(net, w, x)
        except NvdlaSimError:
            pass
        check_promises(net, w, i)
        for op in net.ops:
            for key in ("alpha", "beta", "k", "slope", "min", "max"):
                v = op.attrs.get(key)
                assert v is None or math.isfinite(v), (i, op)
    assert accepted and refused


def test_a_valid_change_changes_the_shapes():
    base, _ = import_model(small_net(), "a.onnx")
    m = small_net()
    next(a for a in m.graph.node[2].attribute if a.name == "strides").ints[:] = [1, 1]
    changed, _ = import_model(m, "b.onnx")
    assert base.shapes["p1"].h == 4 and changed.shapes["p1"].h == 7
    assert changed.shapes["c1"] == base.shapes["c1"]


@pytest.mark.parametrize("hi", [np.inf, np.finfo(np.float32).max])
def test_clip_without_an_upper_bound(hi):
    """+inf and FLT_MAX are how exporters write "no bound": a clip with a floor only."""
    net, _ = import_model(node("Clip", ["x", "lo", "hi"], [const("lo", 0.0), const("hi", hi)]),
                          "c.onnx")
    assert net.op("y").attrs["min"] == 0.0 and net.op("y").attrs["max"] is None
