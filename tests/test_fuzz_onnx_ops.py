"""Hostile ONNX models with the ops imported for issue 11: ConvTranspose, Resize / Upsample, Slice,
Reshape / Transpose, Sub / Div / Pow / Equal / Greater / Less (+ Cast), Abs / Sin / Cos / Atan,
ReduceMax (and the other reductions), Softmax, element-wise constants (Scale).

Hand-written contradictions (negative / zero / NaN / infinite scales, axes out of range, slice
bounds that are not constants, NaN constants, opsets outside the range) are refused with one
NvdlaSimError line naming the node and its op; seeded mutations of a valid model that chains the
new ops import (and then keep what the importer promises) or fail the same way; models that
import but that the DLA cannot program fail `nvdla-sim run` with one line; a valid change of an
attribute changes the imported shapes.  NVDLA_FUZZ_SEED / NVDLA_FUZZ_ROUNDS vary the run."""
from __future__ import annotations

import math
import os
import random

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the optional 'onnx' package is not installed "
                                          "(pip install 'nvdla-sim[onnx]')")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from nvdla_sim.errors import NvdlaSimError  # noqa: E402
from nvdla_sim.scenario.onnx_import import import_model  # noqa: E402
from nvdla_sim.scenario.reference import run_reference  # noqa: E402
from nvdla_sim.scenario.schema import MAX_DIM  # noqa: E402
from tests.test_fuzz_onnx import check_promises, import_or_refusal  # noqa: E402
from tests.test_fuzz_scenarios import run_cli  # noqa: E402

SEED = int(os.environ.get("NVDLA_FUZZ_SEED", "13"))
ROUNDS = int(os.environ.get("NVDLA_FUZZ_ROUNDS", "1"))
NAN, INF = float("nan"), float("inf")
I64 = np.int64


def const(name, arr, dtype=np.float32):
    return numpy_helper.from_array(np.asarray(arr, dtype), name)


def model(nodes, inits, in_shape=(1, 4, 6, 6), opset=15):
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                     list(in_shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def one(op, inputs, inits=(), opset=15, **attrs):
    """A model of one node 'n0' reading x (and constants) and writing y."""
    return model([helper.make_node(op, list(inputs), ["y"], name="n0", **attrs)], list(inits),
                 opset=opset)


def cast_after(op, inputs, inits):
    """A comparison 'n0' and the Cast of its boolean to float."""
    return model([helper.make_node(op, list(inputs), ["b"], name="n0"),
                  helper.make_node("Cast", ["b"], ["y"], name="cast", to=TensorProto.FLOAT)],
                 list(inits))


W = np.ones((4, 2, 3, 3), np.float32)
SCALES = [const("s", [1, 1, 2, 2])]


def slice_model(starts, ends, axes, steps=None, dtype=I64):
    inits = [const("a", starts, dtype), const("b", ends, dtype), const("c", axes, dtype)]
    names = ["x", "a", "b", "c"]
    if steps is not None:
        inits.append(const("d", steps, dtype))
        names.append("d")
    return one("Slice", names, inits)


HOSTILE = [
    # ConvTranspose
    (one("ConvTranspose", ["x", "w"], [const("w", W)], strides=[0, 2]), "(ConvTranspose): strides [0, 2]"),
    (one("ConvTranspose", ["x", "w"], [const("w", W)], pads=[-1, 0, 0, 0]), "(ConvTranspose): pads"),
    (one("ConvTranspose", ["x", "w"], [const("w", W)], pads=[9, 9, 9, 9]), "(ConvTranspose)"),
    (one("ConvTranspose", ["x", "w"], [const("w", W)], group=0), "(ConvTranspose): weights"),
    (one("ConvTranspose", ["x", "w"], [const("w", W)], group=3), "(ConvTranspose): weights"),
    (one("ConvTranspose", ["x", "w"], [const("w", W)], strides=[8192, 8192]),
     "(ConvTranspose): output"),
    (one("ConvTranspose", ["x", "w"], [const("w", np.full_like(W, NAN))]), "weight holds NaN"),
    (one("ConvTranspose", ["x", "w", "b"], [const("w", W), const("b", [0, INF])]), "bias holds NaN"),
    (one("ConvTranspose", ["x", "w", "b"], [const("w", W), const("b", [0, 1, 2])]), "bias of 3"),
    (one("ConvTranspose", ["x", "w"], [const("w", W)], output_padding=[1, 1], strides=[2, 2]),
     "output_padding"),
    (one("ConvTranspose", ["x", "w"], [const("w", W)], output_shape=[12, 12]), "output_shape"),
    (one("ConvTranspose", ["x", "w"], [const("w", W)], auto_pad="SAME_UPPER"), "auto_pad"),
    (one("ConvTranspose", ["x", "w"], [const("w", W)], kernel_shape=[2, 2]), "kernel_shape [2, 2]"),
    (model([helper.make_node("Relu", ["x"], ["r"], name="r"),
            helper.make_node("ConvTranspose", ["x", "r"], ["y"], name="n0")], []),
     "(ConvTranspose): weights must be a 4-D constant"),
    # Resize / Upsample: scales and sizes
    (one("Resize", ["x", "", "s"], [const("s", [1, 1, -2, 2])]),
     "(Resize): scales [1.0, 1.0, -2.0, 2.0]: every value must be a number in 0..8192"),
    (one("Resize", ["x", "", "s"], [const("s", [1, 1, 0, 0])]), "(Resize): scales [0.0, 0.0]"),
    (one("Resize", ["x", "", "s"], [const("s", [1, 1, NAN, 2])]), "(Resize)"),
    (one("Resize", ["x", "", "s"], [const("s", [1, 1, INF, 2])]), "(Resize)"),
    (one("Resize", ["x", "", "s"], [const("s", [1, 1, 1.5, 2])]), "(Resize): scales [1.5, 2.0]"),
    (one("Resize", ["x", "", "s"], [const("s", [1, 1, 1e30, 2])]), "(Resize): scales"),
    (one("Resize", ["x", "", "s"], [const("s", [1, 1, 4096, 2])]), "(Resize): output 4x24576x12"),
    (one("Resize", ["x", "", "s"], [const("s", [1, 2, 2])]), "(Resize): scales [1.0, 2.0, 2.0]"),
    (one("Resize", ["x", "", "s"], [const("s", [1, 2, 2, 2])]), "the first two 1"),
    (one("Resize", ["x", "", "", "z"], [const("z", [1, 4, -12, 12], I64)]), "(Resize): sizes"),
    (one("Resize", ["x", "", "", "z"], [const("z", [1, 4, 13, 12], I64)]), "integer up-sampling"),
    (one("Resize", ["x", "", "", "z"], [const("z", [1, 4, 2 ** 62, 12], I64)]), "(Resize): sizes"),
    (one("Resize", ["x", "", "", "z"], [const("z", [1, 4, 12000, 12], I64)]), "(Resize): output"),
    (model([helper.make_node("Resize", ["x", "", "s"], ["r"], name="n0"),      # aborted onnx's
            helper.make_node("Slice", ["r", "a", "b", "c"], ["y"], name="sl")],  # inference
           [const("s", [1e30] * 4), const("a", [0], I64), const("b", [2], I64),
            const("c", [1], I64)]), "node 'n0' (Resize): scales"),
    (model([helper.make_node("Relu", ["x"], ["r"], name="r"),
            helper.make_node("Resize", ["x", "", "r"], ["y"], name="n0")], []),
     "(Resize): the scales (or sizes) must be constants"),
    (one("Resize", ["x", "", "s"], SCALES, mode="cubic"), "(Resize): mode cubic"),
    (one("Resize", ["x", "", "s"], SCALES, mode="linear",
         coordinate_transformation_mode="align_corners"), "align_corners"),
    (one("Resize", ["x", "", "s"], SCALES, opset=18, antialias=1), "antialias"),
    (one("Resize", ["x", "", "s"], [const("s", [2, 2])], opset=18, axes=[2, 3]), "axes"),
    (one("Resize", ["x", "", "s"], SCALES, exclude_outside=1), "exclude_outside"),
    (one("Upsample", ["x", "s"], [const("s", [1, 1, NAN, 2])], opset=9), "(Upsample): scales"),
    (one("Upsample", ["x", "s"], [const("s", [1, 1, INF, 2])], opset=9), "(Upsample): scales"),
    (one("Upsample", ["x"], opset=7, scales=[1.0, 1.0, -2.0, 2.0]), "(Upsample): scales"),
    (one("Upsample", ["x", "s"], [const("s", [1, 1, 2.5, 2])], opset=9), "integer up-sampling"),
    # Slice
    (slice_model([1], [3], [9]), "(Slice): axis 9"),
    (slice_model([1], [3], [-9]), "(Slice): axis -5"),
    (slice_model([3], [1], [1]), "(Slice): empty slice [3, 1)"),
    (slice_model([1], [3], [0]), "(Slice)"),                      # the batch axis
    (slice_model([1, 2], [3], [1]), "differ in length"),
    (slice_model([0], [4], [1], [2]), "(Slice): steps [2]"),
    (slice_model([0], [4], [1], [0]), "(Slice): steps [0]"),
    (slice_model([3], [0], [1], [-1]), "(Slice): steps [-1]"),
    (model([helper.make_node("ReduceMax", ["x"], ["m"], name="m", axes=[2, 3]),
            helper.make_node("Cast", ["m"], ["mi"], name="mi", to=TensorProto.INT64),
            helper.make_node("Slice", ["x", "a", "mi"], ["y"], name="n0")],
           [const("a", [0, 0, 0, 0], I64)]), "node"),             # ends computed from data
    (one("Slice", ["x"], opset=9, starts=[1], ends=[3], axes=[7]), "(Slice): axis 7"),
    # Transpose / Reshape
    (one("Transpose", ["x"], perm=[0, 1, 1, 2]), "(Transpose): perm [0, 1, 1, 2]"),
    (one("Transpose", ["x"], perm=[1, 0, 2, 3]), "moves the batch axis"),
    (one("Transpose", ["x"], perm=[0, -1, 2, 3]), "(Transpose): perm [0, -1, 2, 3]"),
    (one("Reshape", ["x", "s"], [const("s", [1, 4, 5, 12], I64)]), "(Reshape): cannot reshape"),
    (one("Reshape", ["x", "s"], [const("s", [1, -1, -1, 12], I64)]), "at most one -1"),
    (one("Reshape", ["x", "s"], [const("s", [1, -2, 3, 12], I64)]), "no other negatives"),
    (one("Reshape", ["x", "s"], [const("s", [1, 2 ** 40, 1, -1], I64)]), "(Reshape): cannot"),
    (one("Reshape", ["x", "s"], [const("s", [1, 0, 36, 4], I64)], opset=14, allowzero=1),
     "(Reshape): cannot reshape"),
    # element-wise constants, unary
    (one("Sub", ["x", "k"], [const("k", NAN)]), "(Sub): its bias holds NaN"),
    (one("Sub", ["k", "x"], [const("k", np.full((1, 4, 6, 6), NAN))]), "(Sub): its shift holds NaN"),
    (one("Add", ["x", "k"], [const("k", np.full((1, 4, 6, 6), INF))]), "(Add): its shift holds"),
    (one("Mul", ["x", "k"], [const("k", np.full((1, 4, 6, 6), -INF))]), "(Mul): its scale holds"),
    (one("Div", ["x", "k"], [const("k", NAN)]), "(Div): its constant holds NaN"),
    (one("Div", ["x", "k"], [const("k", [1, 2, 3])]), "(Div): a constant of shape [3]"),
    (one("Pow", ["x", "k"], [const("k", NAN)]), "(Pow): its constant holds NaN"),
    (one("Pow", ["x", "k"], [const("k", INF)]), "(Pow): its constant holds"),
    (one("Pow", ["x", "k"], [const("k", np.ones((2, 1, 4, 6, 6)))]), "(Pow): a constant of shape"),
    (cast_after("Equal", ["x", "k"], [const("k", NAN)]), "node 'n0' (Equal): its constant holds"),
    (cast_after("Greater", ["x", "k"], [const("k", -INF)]), "node 'n0' (Greater)"),
    (cast_after("Less", ["k", "q"], [const("k", 1.0), const("q", 2.0)]), "not produced by"),
    (model([helper.make_node("Relu", ["x"], ["r"], name="r"),
            helper.make_node("Cast", ["r"], ["y"], name="n0", to=TensorProto.STRING)], []),
     "(Cast): cast to 8"),
    (one("Atan", ["x", "x"]), "ONNX checker"),
    (one("Sin", ["x"], foo=1), "ONNX checker"),
    # reductions, softmax
    (one("ReduceMax", ["x"], axes=[9]), "(ReduceMax): reduce over axes [9]"),
    (one("ReduceMax", ["x"], axes=[-9]), "(ReduceMax)"),
    (one("ReduceMax", ["x"], axes=[0]), "the batch axis cannot be reduced"),
    (one("ReduceMax", ["x"], axes=[2 ** 62]), "(ReduceMax)"),
    (one("ReduceMax", ["x"], axes=[1], keepdims=0), "(ReduceMax): keepdims=0"),
    (one("ReduceMax", ["x", "a"], [const("a", [7], I64)], opset=18), "(ReduceMax): reduce over axes [7]"),
    (model([helper.make_node("Relu", ["x"], ["r"], name="r"),
            helper.make_node("Cast", ["r"], ["ri"], name="ri", to=TensorProto.INT64),
            helper.make_node("ReduceMax", ["x", "ri"], ["y"], name="n0")], [], opset=18),
     "(Cast)"),                                                 # axes from data
    (one("Softmax", ["x"], axis=9), "(Softmax): softmax over axis 9"),
    (one("Softmax", ["x"], axis=-9), "(Softmax)"),
    (one("Softmax", ["x"], axis=0), "(Softmax): softmax over axis 0"),
    (one("Softmax", ["x"], axis=1, opset=11), "(Softmax): softmax over axis 1"),
    (one("PRelu", ["x", "s"], [const("s", [NAN, 0, 0, 0])]), "(PRelu): its slope holds NaN"),
    (one("PRelu", ["x", "s"], [const("s", [1, 0, 0])]), "(PRelu): slope of 3 values"),
    # opsets outside the range
    (one("Abs", ["x"], opset=6), "opset 6"),
    (one("Abs", ["x"], opset=0), "opset 0"),
    (one("Abs", ["x"], opset=-1), "opset -1"),
    (one("Abs", ["x"], opset=2 ** 40), "opset 1099511627776"),
]


@pytest.mark.parametrize("m, expect", HOSTILE, ids=[f"case{i}" for i in range(len(HOSTILE))])
def test_hostile_new_op_model_is_one_line(m, expect):
    with pytest.raises(NvdlaSimError) as exc:
        import_model(m, "t.onnx")
    msg = str(exc.value)
    assert msg.startswith("t.onnx: ") and "\n" not in msg, msg
    assert expect in msg, msg


# models the importer takes but whose constants no DLA register can hold: `run` says so in one
# line, naming the layer or the value
UNPROGRAMMABLE = [
    (one("Div", ["x", "k"], [const("k", 0.0)]), "a division by the constant 0"),
    (one("Pow", ["x", "k"], [const("k", 1e6)]), "x ** 1000000.0"),
    (one("Mul", ["x", "k"], [const("k", np.full((1, 4, 6, 6), 1e38))]), "ratio"),
]


@pytest.mark.parametrize("m, expect", UNPROGRAMMABLE, ids=["div0", "pow1e6", "mul1e38"])
def test_unprogrammable_constant_fails_the_run_in_one_line(tmp_path, m, expect):
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    rc, out, err = run_cli(["run", str(path), "--hardware", "orin_dla", "--mode", "timing",
                            "--out", str(tmp_path / "o"), "--no-progress"])
    lines = [line for line in err.splitlines() if line]
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("nvdla-sim: error: "), err
    assert expect in lines[0], err


# -- seeded mutations of a valid model chaining the new ops --------------------------------------

def chain():
    """ConvTranspose 2x -> Resize 2x -> Slice channels 0..2 -> Sub c -> Div c -> Pow 2 -> Abs ->
    ReduceMax over C -> Softmax over W (4 -> 4 -> 4 -> 2 -> 1 channels, 3x3 -> 6x6 -> 12x12)."""
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("ConvTranspose", ["x", "w", "b"], ["d"], name="d", strides=[2, 2],
                         kernel_shape=[2, 2], pads=[0, 0, 0, 0]),
        helper.make_node("Resize", ["d", "", "s"], ["r"], name="r", mode="nearest"),
        helper.make_node("Slice", ["r", "st", "en", "ax"], ["sl"], name="sl"),
        helper.make_node("Sub", ["sl", "k1"], ["sb"], name="sb"),
        helper.make_node("Div", ["sb", "k2"], ["dv"], name="dv"),
        helper.make_node("Pow", ["dv", "k3"], ["pw"], name="pw"),
        helper.make_node("Abs", ["pw"], ["ab"], name="ab"),
        helper.make_node("ReduceMax", ["ab"], ["rm"], name="rm", axes=[1], keepdims=1),
        helper.make_node("Softmax", ["rm"], ["y"], name="sm", axis=3),
    ]
    inits = [const("w", rng.standard_normal((4, 4, 2, 2))), const("b", np.zeros(4)),
             const("s", [1, 1, 2, 2]), const("st", [0], I64), const("en", [2], I64),
             const("ax", [1], I64), const("k1", 0.5), const("k2", 4.0), const("k3", 2.0)]
    return model(nodes, inits, in_shape=(1, 4, 3, 3))


INTS = [-(2 ** 40), -9, -3, -1, 0, 1, 2, 3, 7, 9, 64, MAX_DIM + 1, 2 ** 31]
FLOATS = [NAN, INF, -INF, -1.0, 0.0, 1e-30, 0.5, 1.5, 2.0, 3.0, 1e30]


def _mutate(m, rng: random.Random):
    m = m.__class__.FromString(m.SerializeToString())
    roll = rng.random()
    if roll < 0.45:
        n = rng.choice([n for n in m.graph.node if n.attribute])
        a = rng.choice(list(n.attribute))
        if a.type == onnx.AttributeProto.INTS:
            a.ints[:] = [rng.choice(INTS) for _ in range(rng.choice([len(a.ints), 1, 3, 4]))]
        elif a.type == onnx.AttributeProto.INT:
            a.i = rng.choice(INTS)
        elif a.type == onnx.AttributeProto.STRING:
            a.s = rng.choice([b"nearest", b"linear", b"cubic", b"", b"NOTSET", b"VALID"])
    elif roll < 0.9:
        t = rng.choice(list(m.graph.initializer))
        arr = numpy_helper.to_array(t).copy()
        if arr.dtype == np.int64:
            arr.reshape(-1)[rng.randrange(arr.size)] = rng.choice(INTS)
        elif rng.random() < 0.6 and arr.size:
            arr.reshape(-1)[rng.randrange(arr.size)] = rng.choice(FLOATS)
        else:                                  # a consistent tensor of another shape
            arr = np.full([rng.choice([1, 2, 3, 4]) for _ in range(rng.choice([1, 2, 4]))],
                          rng.choice(FLOATS[3:]), np.float32)
        t.CopyFrom(numpy_helper.from_array(arr, t.name))
    else:
        n = rng.choice(list(m.graph.node))
        n.attribute.append(helper.make_attribute(
            rng.choice(["axes", "axis", "keepdims", "dilations", "group"]),
            rng.choice([1, -1, 0, [2, 2], [1]])))
    return m


def test_mutated_new_op_models_import_or_fail_cleanly():
    rng = random.Random(SEED)
    base = chain()
    net, _ = import_model(base, "base.onnx")
    assert [op.kind for op in net.ops] == ["deconv", "resize", "slice", "batchnorm", "div", "pow",
                                           "abs", "reduce", "softmax"]
    accepted = refused = 0
    for i in range(250 * ROUNDS):
        imported = import_or_refusal(_mutate(base, rng), i)
        if imported is None:
            refused += 1
            continue
        accepted += 1
        net, w = imported
        check_promises(net, w, i)
        for op in net.ops:
            for key, v in op.attrs.items():
                if isinstance(v, (float, np.ndarray)) and np.asarray(v).dtype.kind == "f":
                    assert np.all(np.isfinite(v)), (i, op)
        x = np.linspace(-1, 1, net.input_shape.elements, dtype=np.float32).reshape(
            net.input_shape.c, net.input_shape.h, net.input_shape.w)
        try:                                          # an accepted model runs in float
            run_reference(net, w, x)
        except NvdlaSimError:
            pass
    assert accepted > 20 and refused > 20, (accepted, refused)


def test_a_sample_of_mutations_through_the_cli(tmp_path):
    """A few mutations run by `nvdla-sim run` on Orin (timing): exit 0 with a report or exit 2 with
    one line naming the file."""
    rng = random.Random(SEED + 1)
    for i in range(5 * ROUNDS):
        path = tmp_path / f"m{i}.onnx"
        onnx.save(_mutate(chain(), rng), str(path))
        rc, out, err = run_cli(["run", str(path), "--hardware", "orin_dla", "--mode", "timing",
                                "--out", str(tmp_path / f"o{i}"), "--no-progress"])
        lines = [line for line in err.splitlines() if line]
        assert rc in (0, 2), err
        if rc == 2:
            assert len(lines) == 1 and str(path) in lines[0] or "layer" in lines[0], err
        else:
            assert (tmp_path / f"o{i}" / "report.json").is_file()


def _set(m, node: str, attr: str, value):
    n = next(n for n in m.graph.node if n.name == node)
    a = next(a for a in n.attribute if a.name == attr)
    if isinstance(value, list):
        a.ints[:] = value
    else:
        a.i = value
    return m


def _set_init(m, name: str, arr, dtype=np.float32):
    t = next(t for t in m.graph.initializer if t.name == name)
    t.CopyFrom(numpy_helper.from_array(np.asarray(arr, dtype), name))
    return m


def test_a_valid_change_changes_the_new_ops():
    base, _ = import_model(chain(), "a.onnx")
    assert (base.shapes["d"].h, base.shapes["r"].h, base.shapes["sl"].c) == (6, 12, 2)
    stride3, _ = import_model(_set(chain(), "d", "strides", [3, 3]), "b.onnx")
    assert stride3.shapes["d"].h == 8 and stride3.shapes["r"].h == 16
    scale3, _ = import_model(_set_init(chain(), "s", [1, 1, 3, 1]), "c.onnx")
    assert (scale3.shapes["r"].h, scale3.shapes["r"].w) == (18, 6)
    wider, _ = import_model(_set_init(chain(), "en", [3], I64), "d.onnx")
    assert wider.shapes["sl"].c == 3 and wider.op("sl").attrs["start"] == 0
    later, _ = import_model(_set_init(chain(), "st", [1], I64), "e.onnx")
    assert later.shapes["sl"].c == 1 and later.op("sl").attrs["start"] == 1
    pw, _ = import_model(_set_init(chain(), "k3", 3.0), "f.onnx")
    assert float(np.asarray(pw.op("pw").attrs["constant"]).reshape(-1)[0]) == 3.0
    hw, _ = import_model(_set(chain(), "rm", "axes", [2, 3]), "g.onnx")
    assert (hw.shapes["rm"].c, hw.shapes["rm"].h) == (2, 1) and math.isclose(
        base.shapes["rm"].h, 12)
