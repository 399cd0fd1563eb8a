"""Reports: per-layer rows from a plan and per-layer timing (MAC utilisation, DRAM bytes, bound),
totals, console / JSON / CSV / plot files, and the whole `run` path."""
from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
import yaml

from nvdla_sim.cli import main
from nvdla_sim.compiler.hwlayers import LayerTiming, PlanResult, build_plan
from nvdla_sim.compiler.support import check_support
from nvdla_sim.compiler.zoo import BUILTIN
from nvdla_sim.config import load_hardware
from nvdla_sim.report.tables import build_rows, classify_bound, format_console
from nvdla_sim.scenario import runner
from nvdla_sim.scenario.weights import random_weights


def test_bound_classification():
    t = LayerTiming("l", 0, 1000, dram_read_bytes=6000, dram_write_bytes=4000)
    # 64000 MACs on 64 MACs/cycle = 1000 MAC cycles; 10000 bytes at 10 B/cycle = 1000 memory cycles
    assert classify_bound(t, 64000, 64, 10.0) == "MAC"
    assert classify_bound(t, 63000, 64, 10.0) == "memory"
    t.cbuf_refetch = True
    assert classify_bound(t, 63000, 64, 10.0) == "CBUF"
    t.bound = "MAC"                                         # lowering's own verdict wins
    assert classify_bound(t, 63000, 64, 10.0) == "MAC"


def test_rows_from_timing():
    hw = load_hardware("nv_small")
    net = BUILTIN["lenet5"]()
    plan = build_plan(net, random_weights(net, 0), hw, check_support(net, hw))
    timing = [LayerTiming("conv1", 0, 6000, 1000, 0), LayerTiming("pool1", 100, 6500, 0, 3000),
              LayerTiming("conv2", 6500, 40000, 2000, 0), LayerTiming("pool2", 6600, 41000, 0, 1000),
              LayerTiming("ip1", 41000, 50000, 400000, 500), LayerTiming("ip2", 50000, 50100, 5000, 10)]
    rows = build_rows(plan, 1000, 10.0, PlanResult(timing, 50100))
    conv1 = rows[0]
    assert conv1.hw_layers == ["conv1", "pool1"] and conv1.kinds == "conv+pdp"
    assert conv1.cycles == 6500                              # first start to last end
    assert conv1.dram_bytes == 4000
    assert conv1.mac_util == pytest.approx(288000 / (6500 * 64))
    assert conv1.bound == "MAC"                              # 4500 MAC cycles vs 100 memory cycles
    ip1 = rows[2]
    assert ip1.bound == "memory"                             # 400 KB of weights at 10 B/cycle
    assert all(r.sqnr_db is None for r in rows)


def _scenario(tmp_path: Path, **extra) -> Path:
    data = {"name": "lenet_test", "hardware": "nv_small", "network": "lenet5",
            "input": {"seed": 3}, "weights": {"seed": 3},
            "outputs": {"directory": str(tmp_path / "out")}, **extra}
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def test_run_writes_reports(tmp_path, capsys):
    assert main(["run", str(_scenario(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert "lenet_test: lenet5 on nv_small (64 MACs)" in out
    assert re.search(r"total: \d+\.\d{3} MMAC on the DLA", out) and " ms at 1000 MHz" in out and "fps" in out
    assert "lowest layer SQNR" in out
    folder = tmp_path / "out"
    rep = json.loads((folder / "report.json").read_text())
    assert [r["layer"] for r in rep["rows"]] == ["conv1", "conv2", "ip1", "ip2"]
    assert rep["total_cycles"] == pytest.approx(sum(r["cycles"] for r in rep["rows"]))
    assert rep["ms"] == pytest.approx(rep["total_cycles"] / 1e6)
    # the values came back through the root buffers: the INT8 output is close to float32
    assert all(r["sqnr_db"] > 20 for r in rep["rows"])
    assert rep["lowest_sqnr"][1] == min(r["sqnr_db"] for r in rep["rows"])
    rows = list(csv.DictReader(open(folder / "report.csv")))
    assert rows[0]["layer"] == "conv1" and rows[0]["hw_layers"] == "conv1 pool1"
    png = (folder / "layer_cycles.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_timing_only_mode_has_no_values(tmp_path, capsys):
    out_dir = tmp_path / "elsewhere"
    assert main(["run", str(_scenario(tmp_path, mode="timing", outputs={"formats": ["json"],
                                                                        "plots": False})),
                 "--out", str(out_dir)]) == 0
    assert capsys.readouterr().out == ""                      # no console format asked for
    rep = json.loads((out_dir / "report.json").read_text())
    assert rep["mode"] == "timing" and all(r["sqnr_db"] is None for r in rep["rows"])
    assert not (out_dir / "layer_cycles.png").exists()


def test_console_shows_gpu_fallback_and_estimator(tmp_path):
    from nvdla_sim.report.tables import build_report
    from nvdla_sim.scenario.schema import parse_scenario
    scn = parse_scenario({"hardware": "nv_large", "network": "alexnet", "mode": "timing"}, tmp_path, "a")
    prep = runner.prepare(scn)
    text = format_console(build_report(prep, None))
    assert "conv2" in text and "2conv" in text               # two groups
    assert "estimator" in text and "0.895 ms" in text


def test_network_that_runs_wholly_on_the_gpu_reports_no_dla_time(tmp_path, capsys):
    scn = tmp_path / "gpu.yaml"
    scn.write_text(yaml.safe_dump({
        "hardware": "nv_small", "mode": "timing",
        "network": {"input": [3, 40, 40],
                    "layers": [{"name": "c", "type": "conv", "out_channels": 8, "kernel": 33}]}}))
    assert main(["run", str(scn), "--out", str(tmp_path / "out")]) == 0
    text = capsys.readouterr().out
    assert "no hardware layer ran on the DLA" in text and "1 GPU-fallback layer" in text
