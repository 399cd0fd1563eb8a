"""`batch: N` in a scenario: N images through one compiled register program on nv_full.

Each image's every buffer equals a batch-1 run of the same plan on that image (bit-exact: same
parameters, same program per image); the network output equals the float32 reference within
the INT8 floor; a batched fully connected layer reads its weights once (DRAM bytes of the batch
against the batch-1 run); layers the hardware cannot batch read theirs once per image; the
report's images/s is N over the batch latency; bad `batch` values are one-line errors."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import yaml

from nvdla_sim.compiler.lower import lower_and_run
from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.scenario.reference import sqnr_db
from nvdla_sim.scenario.runner import context, prepare
from nvdla_sim.scenario.schema import MAX_BATCH, TOP_FIELDS, parse_scenario

# conv (image input) -> pool -> conv -> pool -> fc -> relu -> fc: conv layers repeated per
# image (image input / PDP on the fly), fc layers batched.
LAYERS = [
    {"name": "c1", "type": "conv", "out_channels": 8, "kernel": 3, "pad": 1, "relu": True},
    {"name": "p1", "type": "pool", "kernel": 2},
    {"name": "c2", "type": "conv", "out_channels": 40, "kernel": 3, "pad": 1, "relu": True},
    {"name": "p2", "type": "pool", "kernel": 2},
    {"name": "f1", "type": "fc", "out_features": 70, "relu": True},
    {"name": "f2", "type": "fc", "out_features": 10}]


# Direct, uncompressed convolution everywhere: batch and single runs make the same choices.
PLAIN = {"winograd": "off", "weight_compression": "off"} if "winograd" in TOP_FIELDS else {}


def scenario(batch: int, precision: str = "int8", mode: str = "values+timing", **more):
    data = {"name": f"b{batch}", "hardware": "nv_full", "precision": precision, "batch": batch,
            "network": {"input": [3, 12, 12], "layers": LAYERS}, "input": {"seed": 3},
            "weights": {"seed": 2}, "mode": mode, "outputs": {"plots": False}, **PLAIN, **more}
    return parse_scenario(data, ".")


@pytest.mark.parametrize("precision, n", [("int8", 3), ("int16", 2), ("fp16", 2)])
def test_each_image_equals_its_own_run_and_the_float_reference(precision, n):
    prep = prepare(scenario(n, precision))
    ctx = context(prep)
    batch = lower_and_run(prep.plan, ctx)
    assert len(batch.batch_outputs) == n
    out = prep.plan.root(prep.network.outputs[0])[0]
    for i in range(n):
        one = lower_and_run(prep.plan, replace(ctx, batch=1, input_int8=ctx.input_int8[i]))
        assert one.outputs.keys() == batch.batch_outputs[i].keys()
        for name, cube in one.outputs.items():
            np.testing.assert_array_equal(batch.batch_outputs[i][name], cube, err_msg=name)
        # against the float32 reference of image i (independent numpy float network)
        t = prep.plan.tensors[prep.network.outputs[0]]
        got = t.from_stored(batch.batch_outputs[i][out]).astype(np.float64) * t.scale
        ref = prep.reference[prep.network.outputs[0]][i]
        assert sqnr_db(ref, got) > (25 if precision == "int8" else 40)
    # the images differ, so a mix-up of batch strides would show
    assert not np.array_equal(batch.batch_outputs[0][out], batch.batch_outputs[1][out])


def test_notes_say_which_layers_run_as_one_batched_layer():
    prep = prepare(scenario(4, mode="timing-only"))
    lower_and_run(prep.plan, context(prep))
    notes = {layer.name: " ".join(layer.notes) for layer in prep.plan.layers}
    fc = [name for name in notes if "BATCH_NUMBER" in notes[name]]
    repeated = [name for name in notes if "repeated per image" in notes[name]]
    assert set(fc) == {"f1", "f2"} and set(repeated) == {"c1", "c2"}


def _bytes(n: int) -> dict[str, int]:
    prep = prepare(scenario(n, mode="timing-only"))
    result = lower_and_run(prep.plan, context(prep))
    return {t.name: t.dram_read_bytes for t in result.layers}, prep


def test_batched_layers_read_weights_once_repeated_layers_per_image():
    one, prep = _bytes(1)
    four, _ = _bytes(4)
    for layer in prep.plan.layers:
        if layer.kind != "conv":
            continue
        if prep.plan.network.op(layer.ops[0]).kind == "fc":
            # one weight read; 3 more input cubes (the FC input: stored channels x H x W, whole atoms)
            src = prep.plan.tensors[layer.inputs[0].tensor]
            atoms = -(-src.stored_channels // 32)
            assert four[layer.name] - one[layer.name] == 3 * atoms * 32 * src.shape.h * src.shape.w
        else:
            assert four[layer.name] == 4 * one[layer.name]


def test_report_gives_images_per_second_and_batch_macs(tmp_path):
    from nvdla_sim.scenario.runner import execute
    one = execute(prepare(scenario(1, mode="timing-only")), tmp_path / "one")
    eight = execute(prepare(scenario(8, mode="timing-only")), tmp_path / "eight")
    assert eight.batch == 8 and eight.total_macs == 8 * one.total_macs
    assert eight.fps == pytest.approx(8 * 1000.0 / eight.ms)
    assert eight.total_cycles < 8 * one.total_cycles         # the FC weights serve 8 images


@pytest.mark.parametrize("value, hardware, message", [
    (2, "nv_small", "batch: nv_small has no batch feature"),
    (MAX_BATCH + 1, "nv_full", "batch: must be <= 32"),
    (0, "nv_full", "batch: must be >= 1"),
    ("4", "nv_full", "batch: must be an integer"),
    (2.0, "nv_full", "batch: must be an integer"),
])
def test_bad_batch_is_a_one_line_error(value, hardware, message):
    data = {"hardware": hardware, "network": "lenet5", "batch": value}
    with pytest.raises(NvdlaSimError, match=message) as exc:
        parse_scenario(data, ".")
    assert "\n" not in str(exc.value)


def test_npy_input_holds_the_batch(tmp_path):
    x = np.random.default_rng(0).standard_normal((2, 3, 12, 12)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    prep = prepare(scenario(2, input={"npy": str(tmp_path / "x.npy")}))
    np.testing.assert_array_equal(prep.input, x)
    np.save(tmp_path / "bad.npy", x[:1])
    with pytest.raises(NvdlaSimError, match=r"batch 2 .* expects \(2, 3, 12, 12\)"):
        prepare(scenario(2, input={"npy": str(tmp_path / "bad.npy")}))


def test_cli_batch_flag_round_trips_through_save_scenario(tmp_path):
    from nvdla_sim.cli import main
    path = tmp_path / "s.yaml"
    data = {"name": "s", "hardware": "nv_full", "network": {"input": [3, 12, 12], "layers": LAYERS},
            "mode": "timing-only", "outputs": {"plots": False}, **PLAIN}
    path.write_text(yaml.safe_dump(data))
    saved = tmp_path / "saved.yaml"
    assert main(["run", str(path), "--batch", "3", "--out", str(tmp_path / "a"),
                 "--save-scenario", str(saved)]) == 0
    assert yaml.safe_load(saved.read_text())["batch"] == 3
    import json
    first = json.loads((tmp_path / "a" / "report.json").read_text())
    assert main(["run", str(saved), "--out", str(tmp_path / "b")]) == 0
    again = json.loads((tmp_path / "b" / "report.json").read_text())
    assert again["batch"] == 3 and again["total_cycles"] == first["total_cycles"]


def test_batch_is_a_sweep_axis(tmp_path, capsys):
    """`batch` in a sweep grid: each point's cycles are its batch's, fps its images per second,
    the values-mode SQNR taken over every image of the batch."""
    import csv

    from nvdla_sim.cli import main
    sweep = {"name": "b", "base": {"hardware": "nv_full", "precision": "int8",
                                   "network": {"input": [3, 12, 12], "layers": LAYERS},
                                   "input": {"seed": 3}, "weights": {"seed": 2}, **PLAIN},
             "grid": {"batch": [1, 4]}, "outputs": {"directory": str(tmp_path / "out"),
                                                    "plots": False}}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(sweep))
    assert main(["sweep", str(tmp_path / "s.yaml"), "--jobs", "1"]) == 0
    rows = {int(r["batch"]): r for r in csv.DictReader(open(tmp_path / "out" / "results.csv"))}
    one, four = rows[1], rows[4]
    for r, n in ((one, 1), (four, 4)):
        assert float(r["fps"]) == pytest.approx(1000.0 * n / float(r["ms"]))
        assert float(r["lowest_sqnr_db"]) > 20
    assert float(four["cycles"]) < 4 * float(one["cycles"])
    sweep["grid"] = {"batch": [0]}
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(sweep))
    capsys.readouterr()
    assert main(["sweep", str(tmp_path / "bad.yaml")]) == 2
    assert "grid.batch[0]: must be an image count in 1..32, got 0" in capsys.readouterr().err


def test_only_fully_connected_and_1x1_layers_run_batched():
    """A 3x3 convolution whose batch fits the CBUF still repeats per image (its short batched
    stripes cost more than the weight traffic they save); a 1x1 convolution and an FC layer run
    as one batched hardware layer, and their values equal single-image runs."""
    net = {"input": [64, 6, 6], "layers": [
        {"name": "k3", "type": "conv", "out_channels": 32, "kernel": 3, "pad": 1, "relu": True},
        {"name": "k1", "type": "conv", "out_channels": 48, "kernel": 1, "relu": True},
        {"name": "fc", "type": "fc", "out_features": 10}]}
    prep = prepare(scenario(4, network=net))
    ctx = context(prep)
    batch = lower_and_run(prep.plan, ctx)
    notes = {layer.name: " ".join(layer.notes) for layer in prep.plan.layers}
    assert "repeated per image (a KxK kernel over an output map" in notes["k3"]
    assert "BATCH_NUMBER" in notes["k1"] and "BATCH_NUMBER" in notes["fc"]
    for i in range(4):
        one = lower_and_run(prep.plan, replace(ctx, batch=1, input_int8=ctx.input_int8[i]))
        for name, cube in one.outputs.items():
            np.testing.assert_array_equal(batch.batch_outputs[i][name], cube, err_msg=name)
