"""The DLA report's model figures (issue 11): the structured-sparsity model's cycles per layer
and in total (compiler/sparsity.attach_sparse_cycles), written from the engine's cycles and the
MAC-cycle model written out here."""
from __future__ import annotations

from nvdla_sim.compiler.lower import lower_and_run
from nvdla_sim.report.tables import build_report, format_console
from nvdla_sim.scenario.runner import context, prepare
from nvdla_sim.scenario.schema import parse_scenario
from tests.test_dla_deployment import chain

LAYERS = [{"name": "a", "type": "conv", "out_channels": 64, "kernel": 3, "pad": 1},
          {"name": "b", "type": "conv", "out_channels": 67, "kernel": 1}]


def sparse_scenario(sparse=True):
    data = {"name": "ss", "hardware": "orin_dla", "precision": "int8",
            "network": {"input": [256, 28, 28], "layers": LAYERS},
            "weights": {"seed": 1, "pattern": "2:4"}, "mode": "timing-only",
            "outputs": {"plots": False}, "sparse_weights": sparse, "winograd": "off"}
    return parse_scenario(data, ".")


def test_sparse_model_cycles_in_the_layer_table():
    scn = sparse_scenario()
    prep = prepare(scn)
    result = lower_and_run(prep.plan, context(prep))
    rep = build_report(prep, result)
    rows = {r.layer: r for r in rep.rows}
    timing = {t.name: t for t in result.layers}
    a = timing["a"]
    hw = scn.hardware
    # MAC cycles written out: ceil(C/ATOMIC_C) x ceil(K/ATOMIC_K) x R x S x out_H x out_W
    dense = -(-256 // hw.atomic_c) * -(-64 // hw.atomic_k) * 9 * 28 * 28
    sparse = -(-256 // (2 * hw.atomic_c)) * -(-64 // hw.atomic_k) * 9 * 28 * 28
    assert a.bound == "MAC"
    cycles = a.end_cycle - a.start_cycle
    assert rows["a"].sparse_cycles == max(cycles - (dense - sparse), sparse) < rows["a"].cycles
    assert rows["a"].note.startswith(f"2:4 model: {rows['a'].sparse_cycles:.0f} cycles")
    assert rows["b"].sparse_cycles is None                    # K=67: [rule sparsity.kernels]
    assert rep.sparse_total_cycles == rep.total_cycles - (rows["a"].cycles - rows["a"].sparse_cycles)
    assert "structured sparsity 2:4 (model" in format_console(rep)
    assert rep.to_json()["rows"][0]["sparse_cycles"] == rows["a"].sparse_cycles
    # without sparse_weights: no model figures
    prep = prepare(sparse_scenario(False))
    rep = build_report(prep, lower_and_run(prep.plan, context(prep)))
    assert rep.sparse_total_cycles is None and all(r.sparse_cycles is None for r in rep.rows)


# -- the Jetson example (scenarios/resnet50_softmax_jetson_orin_dla.yaml) ---------------------

def test_jetson_example_runs_timing_only(tmp_path):
    import contextlib
    import io
    from pathlib import Path

    import yaml

    from nvdla_sim.scenario.runner import execute
    path = Path(__file__).parent.parent / "scenarios" / "resnet50_softmax_jetson_orin_dla.yaml"
    d = yaml.safe_load(path.read_text())
    assert d["hardware"] == "orin_dla" and d["precision"] == ["int8", "fp16"]
    assert d["input_format"] == "chw16" and d["network"] == "resnet50_softmax"
    d["outputs"] = {"directory": str(tmp_path / "out"), "formats": ["json"], "plots": False}
    with contextlib.redirect_stdout(io.StringIO()):
        rep = execute(prepare(parse_scenario(d, path.parent)))
    rows = {r.layer: r for r in rep.rows}
    assert rep.mode.startswith("timing") and rep.total_cycles > 0
    # the FP16 kCHW16 input reaches the INT8 conv1 through the two reformat passes
    assert rows["conv1"].precision == "INT8" and "reformat FP16 -> INT8" in rows["conv1"].note
    assert rows["conv1"].hw_layers[:2] == ["reformat_data@int16", "reformat_data@int8"]
    dep = rep.deployment
    assert dep["target"] == "orin_dla" and len(dep["subnetworks"]) >= 1
    for sub in dep["subnetworks"]:
        for pool, used in sub["pools"].items():
            assert used <= dep["pool_limits"][pool]
    assert {p for p, _ in dep["precisions"].values()} <= {"int8", "fp16", "gpu"}
    assert "prob" in rows                                  # the softmax head: DLA or GPU, with why
    text = format_console(rep)
    assert "fps" in text and "DLA deployment on orin_dla" in text and "precision int8:" in text
    # two cores sharing the DRAM: each at least as slow as alone, the aggregate images/s
    cores = rep.cores
    assert d["dla_cores"] == 2 and cores["images"] == 2
    for core in cores["cores"]:
        assert core["latency_cycles"] >= core["alone_cycles"]
    makespan_s = cores["makespan_cycles"] / (1600 * 1e6)
    assert abs(cores["images_per_s"] - 2 / makespan_s) < 1e-6 * cores["images_per_s"]
    assert "aggregate:" in text and "images/s" in text


# -- broken configurations: one-line errors from the CLI ---------------------------------------

def _yaml(tmp_path, **fields):
    import yaml
    d = {"name": "bad", "hardware": "orin_dla", "mode": "timing",
         "network": {"input": [5, 8, 8], "layers": [
             {"name": "c", "type": "conv", "out_channels": 16, "kernel": 3, "pad": 1}]},
         "outputs": {"directory": str(tmp_path / "o"), "plots": False}}
    d.update(fields)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(d))
    return path


def test_broken_configurations_are_one_line_errors(tmp_path, capsys):
    from nvdla_sim.cli import main
    cases = [
        ({"memory_pools": {"managed_sram": 3000}}, "power of two"),
        ({"input_format": "dla_hwc4", "precision": "int8"}, "io.hwc4_channels"),
        ({"network": {"input": [8, 4, 4], "layers": chain(17)}}, "[rule general.loadables]"),
    ]
    for fields, message in cases:
        rc = main(["run", str(_yaml(tmp_path, **fields))])
        err = capsys.readouterr().err.strip()
        assert rc != 0, fields
        assert message in err and len(err.splitlines()) == 1, err
        assert "Traceback" not in err
