"""ONNX ConvTranspose, Resize / Upsample, Slice, Transpose and Reshape (issue 11): small models run
end to end on a DLA preset, placed by the rules (DLA or GPU and why), the float reference checked
against onnx's own reference evaluator and the DLA values against the float reference within the
INT8 / FP16 SQNR floors (25 / 40 dB)."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the optional 'onnx' package is not installed "
                                          "(pip install 'nvdla-sim[onnx]')")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import nvdla_sim  # noqa: E402
from nvdla_sim.errors import NvdlaSimError  # noqa: E402
from nvdla_sim.scenario.onnx_import import import_model  # noqa: E402
from onnx_helpers import f32, i64  # noqa: E402

RNG = np.random.default_rng(11)




def save(nodes, inits, in_shape, out_shape, path, opset=13):
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, in_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
                          initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    onnx.save(m, str(path))
    return m


def run_model(m, path, tmp_path, hardware, precision="int8"):
    x = RNG.standard_normal(tuple(d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim))
    x = x.astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    r = nvdla_sim.run(path, hardware=hardware, precision=precision, input=tmp_path / "x.npy",
                      out_dir=tmp_path / "o")
    (theirs,) = ReferenceEvaluator(m).run(None, {"x": x})
    np.testing.assert_allclose(r.outputs["y"]["reference"].reshape(theirs.shape), theirs,
                               rtol=1e-4, atol=1e-4)
    return r


def segmentation_head(path):
    """conv -> ConvTranspose 2x2/2 -> Relu -> Slice (channels 32..63) -> Resize nearest x2 ->
    conv: a decoder's up-sampling path."""
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("ConvTranspose", ["c1", "wt", "bt"], ["up"], strides=[2, 2]),
             helper.make_node("Relu", ["up"], ["r"]),
             helper.make_node("Slice", ["r", "st", "en", "ax"], ["part"]),
             helper.make_node("Resize", ["part", "", "sc"], ["big"], mode="nearest"),
             helper.make_node("Conv", ["big", "w2"], ["y"])]
    inits = [f32("w1", RNG.standard_normal((16, 4, 3, 3)) * 0.3), f32("b1", RNG.standard_normal(16) * 0.1),
             f32("wt", RNG.standard_normal((16, 64, 2, 2)) * 0.3), f32("bt", RNG.standard_normal(64) * 0.1),
             i64("st", [32]), i64("en", [64]), i64("ax", [1]), f32("sc", [1, 1, 2, 2]),
             f32("w2", RNG.standard_normal((8, 32, 1, 1)) * 0.3)]
    return save(nodes, inits, [1, 4, 6, 5], [1, 8, 24, 20], path)


@pytest.mark.parametrize("hardware, precision", [("xavier_dla", "int8"), ("orin_dla", "fp16")])
def test_decoder_runs_on_the_dla(hardware, precision, tmp_path):
    path = tmp_path / "seg.onnx"
    r = run_model(segmentation_head(path), path, tmp_path, hardware, precision)
    assert r.gpu_fallback == {}
    assert r.output_sqnr["y"] > (25 if precision == "int8" else 40)


def test_decoder_falls_back_on_nv_small(tmp_path):
    """nv_small has no RUBIK: the strided ConvTranspose and the resize go to the GPU naming the
    rule; the slice stays a view of the DLA tensors."""
    path = tmp_path / "seg.onnx"
    r = run_model(segmentation_head(path), path, tmp_path, "nv_small")
    assert set(r.gpu_fallback) == {"up", "big"}
    assert "[rule deconv.rubik]" in r.gpu_fallback["up"]
    assert "[rule resize.rubik]" in r.gpu_fallback["big"]
    assert r.output_sqnr["y"] > 25


def test_transpose_reshape_on_the_gpu_bilinear_on_the_dla(tmp_path):
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Transpose", ["c1"], ["t"], perm=[0, 1, 3, 2]),
             helper.make_node("Reshape", ["t", "shape"], ["rs"]),
             helper.make_node("Resize", ["rs", "", "sc"], ["big"], mode="linear"),
             helper.make_node("Conv", ["big", "w2"], ["y"])]
    inits = [f32("w1", RNG.standard_normal((8, 3, 3, 3)) * 0.3), i64("shape", [1, 16, 5, 3]),
             f32("sc", [1, 1, 2, 2]), f32("w2", RNG.standard_normal((4, 16, 1, 1)) * 0.3)]
    path = tmp_path / "m.onnx"
    m = save(nodes, inits, [1, 3, 6, 5], [1, 4, 10, 6], path)
    r = run_model(m, path, tmp_path, "xavier_dla")
    assert set(r.gpu_fallback) == {"t", "rs"}          # the bilinear resize runs on the DLA
    assert "[rule shuffle.transpose]" in r.gpu_fallback["t"]
    assert "[rule shuffle.reshape]" in r.gpu_fallback["rs"]
    assert r.output_sqnr["y"] > 25


@pytest.mark.parametrize("node, inits, expect", [
    (helper.make_node("ConvTranspose", ["x", "w"], ["y"], output_padding=[1, 1], strides=[2, 2]),
     [f32("w", np.ones((3, 4, 2, 2)))], "(ConvTranspose): output_padding [1, 1] is not modelled"),
    (helper.make_node("ConvTranspose", ["x", "w"], ["y"], auto_pad="SAME_UPPER"),
     [f32("w", np.ones((3, 4, 2, 2)))], "(ConvTranspose): auto_pad SAME_UPPER"),
    (helper.make_node("Resize", ["x", "", "sc"], ["y"]), [f32("sc", [1, 2, 2, 2])],
     "the first two 1 (TensorRT's Resize rule)"),
    (helper.make_node("Resize", ["x", "", "sc"], ["y"]), [f32("sc", [1, 1, 1.5, 2])],
     "only integer up-sampling scales"),
    (helper.make_node("Resize", ["x", "", "sc"], ["y"], coordinate_transformation_mode="align_corners"),
     [f32("sc", [1, 1, 2, 2])], "nearest with coordinate_transformation_mode align_corners"),
    (helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["y"]),
     [i64("st", [0]), i64("en", [2]), i64("ax", [1]), i64("sp", [2])], "steps [2]"),
    (helper.make_node("Slice", ["x", "st", "en", "ax"], ["y"]),
     [i64("st", [1]), i64("en", [2]), i64("ax", [0])], "empty slice [1, 2) of axis 0"),
    (helper.make_node("Transpose", ["x"], ["y"], perm=[1, 0, 2, 3]), [], "moves the batch axis"),
    (helper.make_node("Slice", ["x", "st", "en", "ax"], ["y"]),
     [i64("st", [0, 1]), i64("en", [2, 3]), i64("ax", [2, -2])], "repeat an axis"),
    (helper.make_node("Slice", ["x", "st", "en", "ax"], ["y"]),
     [f32("st", [0.5]), i64("en", [2]), i64("ax", [2])], "starts must be integers"),
])
def test_unmodelled_attributes_are_one_line_errors_naming_the_node(node, inits, expect):
    g = helper.make_graph([node], "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(NvdlaSimError) as exc:
        import_model(m, "t.onnx")
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith("t.onnx: node 'y' (") and expect in msg, msg


def test_upsample_opset9_is_nearest(tmp_path):
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"]),
             helper.make_node("Upsample", ["c1", "sc"], ["y"], mode="nearest")]
    inits = [f32("w1", RNG.standard_normal((8, 3, 1, 1))), f32("sc", [1, 1, 3, 2])]
    path = tmp_path / "u.onnx"
    m = save(nodes, inits, [1, 3, 4, 4], [1, 8, 12, 8], path, opset=9)
    net, _ = import_model(m, "u.onnx")
    assert net.op("y").kind == "resize" and net.op("y").attrs == {"scale": (3, 2), "mode": "nearest"}
