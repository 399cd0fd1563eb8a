"""nvdla_sim.run() and `nvdla-sim run MODEL.onnx`: a small ONNX model (conv, BN as Mul + Add, Pad,
n-ary Sum, channel shuffle, softmax) end to end on nv_large in INT8; outputs saved and compared with
onnxruntime; the saved scenario runs again to the same cycles; bad flags are one-line errors."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the optional 'onnx' package is not installed "
                                          "(pip install 'nvdla-sim[onnx]')")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import nvdla_sim  # noqa: E402
from nvdla_sim.cli import main  # noqa: E402
from nvdla_sim.errors import NvdlaSimError  # noqa: E402
from nvdla_sim.scenario.onnx_import import import_model  # noqa: E402
from onnx_helpers import f32, i64  # noqa: E402
from nvdla_sim.scenario.reference import sqnr_db  # noqa: E402

RNG = np.random.default_rng(11)




def small_model(opset: int = 13):
    """3x8x8 input; every pattern the importer maps, no weight to randomise away."""
    nodes = [
        helper.make_node("Pad", ["x", "pads"], ["xp"], mode="constant"),
        helper.make_node("Conv", ["xp", "w1", "b1"], ["c1"]),                 # pad folded in
        helper.make_node("Mul", ["c1", "s1"], ["m1"]),                         # BN as Mul + Add
        helper.make_node("Add", ["m1", "t1"], ["a1"]),
        helper.make_node("Relu", ["a1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Sum", ["r1", "c2", "r1"], ["s"]),                    # n-ary Sum
        helper.make_node("Reshape", ["s", "g5"], ["v5"]),                      # channel shuffle
        helper.make_node("Transpose", ["v5"], ["t5"], perm=[0, 2, 1, 3, 4]),
        helper.make_node("Reshape", ["t5", "g4"], ["sh"]),
        helper.make_node("Conv", ["sh", "w3"], ["c3"]),
        helper.make_node("GlobalAveragePool", ["c3"], ["gp"]),
        helper.make_node("Flatten", ["gp"], ["fl"]),
        helper.make_node("Softmax", ["fl"], ["prob"], axis=1)]
    inits = [i64("pads", [0, 0, 1, 1, 0, 0, 1, 1]),
             f32("w1", RNG.standard_normal((8, 3, 3, 3)) * 0.3), f32("b1", RNG.standard_normal(8) * 0.1),
             f32("s1", RNG.uniform(0.5, 1.5, (1, 8, 1, 1))), f32("t1", RNG.standard_normal((8, 1, 1)) * 0.1),
             f32("w2", RNG.standard_normal((8, 8, 3, 3)) * 0.2),
             i64("g5", [1, 2, 4, 8, 8]), i64("g4", [1, 8, 8, 8]),
             f32("w3", RNG.standard_normal((10, 8, 1, 1)) * 0.5)]
    g = helper.make_graph(nodes, "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("prob", TensorProto.FLOAT, [1, 10])],
                          initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


@pytest.fixture
def model_path(tmp_path):
    path = tmp_path / "small.onnx"
    onnx.save(small_model(), str(path))
    return path


def test_import_maps_every_pattern():
    net, _ = import_model(small_model(), "small.onnx")
    kinds = [op.kind for op in net.ops]
    assert kinds == ["conv", "batchnorm", "relu", "conv", "add", "add", "shuffle", "conv", "pool",
                     "softmax"]
    assert net.op("c1").attrs["pad"] == (1, 1, 1, 1)          # the Pad, folded
    assert net.op("s/sum1").inputs == ["r1", "c2"] and net.op("s").inputs == ["s/sum1", "r1"]


def test_run_returns_a_report_and_outputs(model_path, tmp_path):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime (a test dependency) is not installed")
    x = RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    r = nvdla_sim.run(model_path, hardware="nv_large", precision="int8", input=tmp_path / "x.npy",
                      out_dir=tmp_path / "out")
    assert r.total_cycles > 0 and r.hardware_layers >= 3 and r.gpu_layers == 2
    assert set(r.gpu_fallback) == {"sh", "prob"}
    assert "shuffle" in r.gpu_fallback["sh"] and "softmax" in r.gpu_fallback["prob"]
    (theirs,) = ort.InferenceSession(model_path.read_bytes(), providers=["CPUExecutionProvider"]) \
        .run(None, {"x": x})
    out = r.outputs["prob"]
    assert out["reference"].shape == (1, 10) and out["dla"].shape == (1, 10)
    np.testing.assert_allclose(out["reference"], theirs, rtol=1e-3, atol=1e-5)
    assert r.output_sqnr["prob"] > 20            # the INT8 result against the float reference
    rows = r.layers
    assert {row["device"] for row in rows} == {"DLA", "GPU"}
    assert sum(row["device"] == "DLA" for row in rows) + r.gpu_layers == len(rows)
    files = r.save_outputs(tmp_path / "npy")
    assert sorted(f.name for f in files) == ["prob.dla.npy", "prob.reference.npy"]
    np.testing.assert_array_equal(np.load(tmp_path / "npy" / "prob.reference.npy"), out["reference"])


def test_to_pandas(model_path, tmp_path):
    pd = pytest.importorskip("pandas")
    r = nvdla_sim.run(model_path, mode="timing", out_dir=tmp_path / "out")
    frame = r.to_pandas()
    assert isinstance(frame, pd.DataFrame) and len(frame) == len(r.layers)
    assert frame["cycles"].dropna().sum() > 0


def test_cli_model_run_saves_outputs_and_a_scenario_that_round_trips(model_path, tmp_path, capsys):
    rc = main(["run", str(model_path), "--hardware", "nv_large", "--int8", "--out", str(tmp_path / "o1"),
               "--save-outputs", str(tmp_path / "npy"), "--save-scenario", str(tmp_path / "s.yaml")])
    assert rc == 0
    first = capsys.readouterr().out
    assert "total:" in first and (tmp_path / "npy" / "prob.dla.npy").exists()
    assert main(["run", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "o2")]) == 0
    second = capsys.readouterr().out
    total = [line for line in first.splitlines() if line.startswith("total:")]
    assert total and total == [line for line in second.splitlines() if line.startswith("total:")]


@pytest.mark.parametrize("argv, message", [
    (["--fp16", "--hardware", "nv_large"], "fp16"),
    (["--batch", "4", "--hardware", "nv_small"], "batch: nv_small has no batch feature"),
    (["--batch", "33", "--hardware", "nv_full"], "batch: must be <= 32"),
    (["--no-gpu-fallback"], "layer 'sh' (shuffle) cannot run on the DLA"),
])
def test_cli_errors_are_one_line(model_path, tmp_path, capsys, argv, message):
    assert main(["run", str(model_path), "--out", str(tmp_path / "o")] + argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and message in err


def test_unsupported_pad_mode_names_the_node():
    m = small_model()
    m.graph.node[0].attribute[0].s = b"wrap"
    with pytest.raises(NvdlaSimError, match=r"node 'xp' \(Pad\): 'wrap' padding"):
        import_model(m, "small.onnx")


def pad_split_model(mode: str):
    """Reflect/edge Pad -> conv -> Split into 3 channel parts -> a conv on one part, the parts
    concatenated back: the Pad and the Split run on the GPU, the rest on the DLA."""
    nodes = [
        helper.make_node("Pad", ["x", "pads"], ["xp"], mode=mode),
        helper.make_node("Conv", ["xp", "w1"], ["c1"]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Split", ["r1", "sizes"], ["p0", "p1", "p2"], axis=1),
        helper.make_node("Conv", ["p1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Concat", ["p0", "c2", "p2"], ["cat"], axis=1),
        helper.make_node("Conv", ["cat", "w3"], ["y"])]
    inits = [i64("pads", [0, 0, 2, 1, 0, 0, 1, 2]), i64("sizes", [16, 40, 8]),
             f32("w1", RNG.standard_normal((64, 3, 3, 3)) * 0.3),
             f32("w2", RNG.standard_normal((24, 40, 3, 3)) * 0.1),
             f32("w3", RNG.standard_normal((10, 48, 1, 1)) * 0.3)]
    g = helper.make_graph(nodes, "padsplit", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 9, 9])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10, 10, 10])],
                          initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("mode", ["reflect", "edge"])
def test_reflect_edge_pad_and_split_run_on_the_gpu_and_match_onnxruntime(mode, tmp_path):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime (a test dependency) is not installed")
    path = tmp_path / "m.onnx"
    onnx.save(pad_split_model(mode), str(path))
    x = RNG.standard_normal((1, 3, 9, 9)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    r = nvdla_sim.run(path, hardware="nv_large", input=tmp_path / "x.npy", out_dir=tmp_path / "o")
    assert set(r.gpu_fallback) == {"xp", "p0", "p1", "p2"}
    assert f"{mode} padding: the DLA pads with a constant only" in r.gpu_fallback["xp"]
    assert all("channel split" in r.gpu_fallback[p] for p in ("p0", "p1", "p2"))
    (theirs,) = ort.InferenceSession(path.read_bytes(), providers=["CPUExecutionProvider"]) \
        .run(None, {"x": x})
    np.testing.assert_allclose(r.outputs["y"]["reference"], theirs, rtol=1e-3, atol=1e-5)
    assert r.output_sqnr["y"] > 25


def test_split_off_the_channel_axis_is_a_one_line_error():
    m = pad_split_model("edge")
    m.graph.node[3].attribute[0].i = 2
    with pytest.raises(NvdlaSimError, match=r"node '.*' \(Split\): split along axis 2 \(only channels"):
        import_model(m, "m.onnx")


def test_opset_conversion_keeps_the_network():
    """Opset 9 (Pad's pads an attribute) goes through onnx's version converter: same network."""
    m = small_model(opset=13)
    old = small_model(opset=13)
    # an opset-10 spelling of the same model: Pad with attributes, Reshape unchanged
    old.graph.node[0].CopyFrom(helper.make_node("Pad", ["x"], ["xp"], mode="constant",
                                                pads=[0, 0, 1, 1, 0, 0, 1, 1]))
    old.opset_import[0].version = 10
    a, _ = import_model(m, "m13.onnx")
    b, _ = import_model(old, "m10.onnx")
    assert [(op.kind, op.attrs) for op in a.ops] == [(op.kind, op.attrs) for op in b.ops]


def test_import_is_lazy():
    code = "import sys, nvdla_sim; assert 'nvdla_sim.api' not in sys.modules; " \
           "assert 'onnx' not in sys.modules; assert callable(nvdla_sim.run)"
    subprocess.run([sys.executable, "-c", code], check=True)


def _mutants(seed: int, count: int):
    """Seeded hostile variants of the small model: nodes dropped, integer constants and attributes
    changed, inputs rewired."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        m = small_model()
        g = m.graph
        what = rng.integers(4)
        if what == 0:
            del g.node[int(rng.integers(len(g.node)))]
        elif what == 1:
            ints = [k for k, t in enumerate(g.initializer) if t.data_type == TensorProto.INT64]
            k = ints[int(rng.integers(len(ints)))]
            arr = numpy_helper.to_array(g.initializer[k]).copy()
            arr[int(rng.integers(arr.size))] = int(rng.choice([-3, -1, 0, 2, 5, 1 << 40]))
            g.initializer[k].CopyFrom(numpy_helper.from_array(arr, g.initializer[k].name))
        elif what == 2:
            nodes = [n for n in g.node if any(a.type == onnx.AttributeProto.INTS for a in n.attribute)]
            node = nodes[int(rng.integers(len(nodes)))]
            a = next(a for a in node.attribute if a.type == onnx.AttributeProto.INTS)
            a.ints[int(rng.integers(len(a.ints)))] = int(rng.choice([-2, 0, 7, 99]))
        else:
            node = g.node[int(rng.integers(len(g.node)))]
            names = [t.name for t in g.initializer] + [n.output[0] for n in g.node]
            node.input[int(rng.integers(len(node.input)))] = str(rng.choice(names))
        yield m


def test_hostile_models_fail_in_one_line_or_match_onnxruntime():
    """Every mutant fails with one NvdlaSimError line, or imports and then computes what
    onnxruntime computes (never a silently different network)."""
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime (a test dependency) is not installed")
    from nvdla_sim.scenario.reference import run_reference
    options = ort.SessionOptions()
    options.log_severity_level = 4
    x = RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)
    failures = compared = 0
    for m in _mutants(5, 80):
        try:
            net, w = import_model(m, "mutant.onnx")
            ours = run_reference(net, w, x[0])
        except NvdlaSimError as exc:
            failures += 1
            assert "\n" not in str(exc) and str(exc).startswith("mutant.onnx: ")
            continue
        try:
            sess = ort.InferenceSession(m.SerializeToString(), options, providers=["CPUExecutionProvider"])
            (theirs,) = sess.run(None, {"x": x})
        except Exception:          # onnxruntime refuses it too: nothing to compare
            continue
        got = ours[net.onnx_outputs[m.graph.output[0].name]]
        np.testing.assert_allclose(got.reshape(theirs.shape), theirs, rtol=1e-3, atol=1e-5)
        compared += 1
    assert failures > 10 and compared > 5


def test_shipped_zoo_scenario_names_the_model_without_a_path():
    from nvdla_sim.scenario.schema import load_scenario, parse_scenario
    path = Path(__file__).resolve().parents[1] / "scenarios" / "squeezenet_zoo_nv_large.yaml"
    scn = load_scenario(path)
    assert scn.network.source == "onnx" and scn.network.path.name == "light_squeezenet.onnx"
    assert scn.network.path.is_file()
    with pytest.raises(NvdlaSimError, match=r"network.onnx_zoo: unknown model 'lenet' \(this onnx "
                                            r"package ships: .*squeezenet"):
        parse_scenario({"hardware": "nv_large", "network": {"onnx_zoo": "lenet"}}, Path("."))


def test_batch_through_the_api_with_a_gpu_layer_between_dla_layers(model_path, tmp_path):
    """batch=2 on nv_full: the channel shuffle runs on the GPU between DLA layers for each image;
    each image's reference equals onnxruntime's and its DLA result is within the INT8 floor."""
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime (a test dependency) is not installed")
    x = RNG.standard_normal((2, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    r = nvdla_sim.run(model_path, hardware="nv_full", input=tmp_path / "x.npy", batch=2,
                      out_dir=tmp_path / "out")
    assert r.batch == 2 and r.fps == pytest.approx(2000.0 / r.ms)
    out = r.outputs["prob"]
    assert out["reference"].shape == (2, 10) and out["dla"].shape == (2, 10)
    sess = ort.InferenceSession(model_path.read_bytes(), providers=["CPUExecutionProvider"])
    for i in range(2):
        (theirs,) = sess.run(None, {"x": x[i:i + 1]})
        np.testing.assert_allclose(out["reference"][i:i + 1], theirs, rtol=1e-3, atol=1e-5)
        assert sqnr_db(out["reference"][i], out["dla"][i]) > 20


def test_ir3_zoo_model_through_the_cli_saves_outputs_and_round_trips(tmp_path, capsys):
    """SqueezeNet from the onnx package with its weights also listed as graph inputs (IR 3),
    `nvdla-sim run MODEL.onnx --int8` on nv_large: the saved float reference equals onnxruntime
    on the same input, the saved DLA output is within the INT8 floor, and the saved scenario
    runs again to the same totals."""
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime (a test dependency) is not installed")
    from test_onnx_zoo import light, runner_input, with_random_weights
    model = with_random_weights(light("squeezenet"), seed=3)
    path = tmp_path / "squeezenet_ir3.onnx"
    onnx.save(model, str(path))
    net, _ = import_model(model, path.name)
    x = runner_input(net)
    np.save(tmp_path / "x.npy", x)
    assert main(["run", str(path), "--hardware", "nv_large", "--int8", "--input", str(tmp_path / "x.npy"),
                 "--out", str(tmp_path / "o1"), "--save-outputs", str(tmp_path / "npy"),
                 "--save-scenario", str(tmp_path / "s.yaml")]) == 0
    first = [line for line in capsys.readouterr().out.splitlines() if line.startswith("total:")]
    name = model.graph.output[0].name
    (theirs,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]) \
        .run(None, {net.input_name: x})
    ref = np.load(tmp_path / "npy" / f"{name}.reference.npy")
    dla = np.load(tmp_path / "npy" / f"{name}.dla.npy")
    np.testing.assert_allclose(ref.reshape(theirs.shape), theirs, rtol=1e-3, atol=1e-5)
    assert sqnr_db(ref, dla) > 20
    assert main(["run", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "o2")]) == 0
    again = [line for line in capsys.readouterr().out.splitlines() if line.startswith("total:")]
    assert first and first == again
