"""Running sweeps: feasibility, rows, resume, errors, the engine-measured CBUF curve, progress,
plots and the CLI.  The injected runners here are real (`run_conv_chain`: register programs on the
engine) or test doubles that say so (`fake_runner`: cycles from the parameters, to test the
bookkeeping only)."""
from __future__ import annotations

import io
import json

import pytest
import yaml

from nvdla_sim.cli import main
from nvdla_sim.sweep.backends import LocalBackend, make_backend
from nvdla_sim.sweep.conv_chain import run_conv_chain
from nvdla_sim.sweep.driver import run_sweep
from nvdla_sim.sweep.plots import pareto_front, plot_all
from nvdla_sim.sweep.point import evaluate_point
from nvdla_sim.sweep.progress import Progress, format_duration
from nvdla_sim.sweep.results import CSV_NAME, JSON_NAME
from nvdla_sim.sweep.spec import parse_sweep

# One 3x3 convolution, 32 -> 64 channels at 24x24, on nv_small (atom 8 B, banks of 512 x 8 B):
# a kernel group (8 kernels x 32 x 3 x 3 = 2304 B = 288 entries) takes 1 bank; one input line is
# 4 atoms x 24 = 96 entries, 3 lines 288 entries: 1 bank.  It needs 2 banks.
ONE_CONV = {"name": "one_conv", "input": [32, 24, 24],
            "layers": [{"name": "c1", "type": "conv", "out_channels": 64, "kernel": 3, "pad": 1}]}
# Weights 32x9x64 + 64x9x64 B (54 KiB) and 18 KiB of input: nv_small's 128 KiB CBUF holds a
# layer whole only from 16 banks up; below, kernel groups are streamed or the input split.
TWO_CONV = {"name": "two_conv", "input": [32, 24, 24],
            "layers": [{"name": "c1", "type": "conv", "out_channels": 64, "kernel": 3, "pad": 1},
                       {"name": "c2", "type": "conv", "out_channels": 64, "kernel": 3, "pad": 1}]}


def base(network=ONE_CONV, **extra) -> dict:
    return {"hardware": "nv_small", "mode": "timing", "network": network, **extra}


def fake_runner(scenario: dict, base_dir: str) -> dict:
    """Test double: cycles from the parameters (not a simulation)."""
    hw = scenario["hardware"]
    banks = hw.get("cbuf", {}).get("banks", 32) if isinstance(hw, dict) else 32
    gbps = scenario.get("memory", {}).get("dram_gbps", 10)
    return {"cycles": 1000.0 * (64 / banks) + 10000.0 / gbps, "dram_bytes": 4096 * (64 // banks)}


CALLS: list[dict] = []


def counting_runner(scenario: dict, base_dir: str) -> dict:
    CALLS.append(scenario)
    if scenario.get("clock_mhz") == 666:
        raise RuntimeError("boom")
    return fake_runner(scenario, base_dir)


def quiet():
    return io.StringIO()


# -- feasibility ---------------------------------------------------------------------------------

def test_cbuf_below_one_kernel_group_plus_data_banks_is_infeasible(tmp_path):
    spec = parse_sweep({"base": base(), "grid": {"cbuf_banks": [1, 2]}}, tmp_path)
    rows = [evaluate_point(p, fake_runner, 256) for p in spec.points]
    assert rows[0]["status"] == "infeasible"
    assert rows[0]["reason"] == ("CBUF of 1 banks (4 KiB) is too small: layer c1 needs 2 banks, one "
                                 "kernel group of weights (1) and 3 input lines (1)")
    assert rows[0]["min_cbuf_banks"] == 2 and rows[0]["cycles"] is None
    assert rows[1]["status"] == "ok" and rows[1]["min_cbuf_banks"] == 2


def test_values_the_hardware_cannot_take_are_infeasible_with_the_reason(tmp_path):
    spec = parse_sweep({"base": base(), "points": [
        {"cbuf_banks": 12}, {"cbuf_banks": 64}, {"cvsram_bytes": 65536}, {"atomic_c": 4}]}, tmp_path)
    rows = [evaluate_point(p, fake_runner, 256) for p in spec.points]
    assert [r["status"] for r in rows] == ["infeasible"] * 4
    assert "hardware.cbuf.banks: must be a power of two, got 12" in rows[0]["reason"]
    assert "hardware.cbuf.banks: at most 32" in rows[1]["reason"]
    assert "memory.cvsram_bytes: nv_small has no secondary memory interface" in rows[2]["reason"]
    assert "memory_atomic_bytes: must not exceed atomic_c (4)" in rows[3]["reason"]
    # The parameters are in the row even when the configuration could not be built.
    assert rows[0]["cbuf_banks"] == 12 and rows[3]["atomic_c"] == 4


def test_row_columns_and_area_proxy(tmp_path):
    spec = parse_sweep({"base": base(clock_mhz=500), "grid": {"cbuf_banks": [32]}}, tmp_path)
    row = evaluate_point(spec.points[0], fake_runner, 256)
    assert row["status"] == "ok"
    assert row["cycles"] == 2000.0 + 1000.0
    assert row["ms"] == pytest.approx(3000 / 500e3)              # cycles / (MHz * 1e3)
    assert row["fps"] == pytest.approx(500e6 / 3000)
    assert row["macs"] == 64 and row["cbuf_kib"] == 128.0
    assert row["sram_bytes"] == 131072
    assert row["area_proxy"] == 64 + 131072 / 256               # MACs + SRAM bytes / 256
    assert row["network_macs"] == 64 * 24 * 24 * 32 * 9
    assert row["mac_util"] == pytest.approx(row["network_macs"] / (3000 * 64))
    assert row["network"] == "one_conv" and row["preset"] == "nv_small" and row["dram_gbps"] == 10


# -- results, resume, errors ---------------------------------------------------------------------

def test_results_are_written_and_a_rerun_skips_finished_points(tmp_path):
    CALLS.clear()
    data = {"base": base(), "grid": {"cbuf_banks": [1, 8, 32], "clock_mhz": [666, 1000]}}
    spec = parse_sweep(data, tmp_path)
    out = tmp_path / "out"
    s1 = run_sweep(spec, LocalBackend(1), counting_runner, out, stream=quiet(), plots=False)
    # 1 bank: infeasible, never run; 666 MHz: the runner raises; the sweep goes on.
    assert s1.counts == {"ok": 2, "infeasible": 2, "error": 2}
    assert len(CALLS) == 4
    rows = json.loads((out / JSON_NAME).read_text())["rows"]
    assert [r["status"] for r in rows] == ["infeasible", "infeasible", "error", "ok", "error", "ok"]
    assert rows[2]["reason"].startswith("RuntimeError: boom (test_sweep_run.py:")
    csv_lines = (out / CSV_NAME).read_text().splitlines()
    assert len(csv_lines) == 7 and csv_lines[0].startswith("key,index,status,reason,params,network")

    # Re-run: only the error points run again.
    CALLS.clear()
    s2 = run_sweep(spec, LocalBackend(1), counting_runner, out, stream=quiet(), plots=False)
    assert s2.skipped == 4 and s2.ran == 2 and len(CALLS) == 2
    assert all(c["clock_mhz"] == 666 for c in CALLS)
    # A wider sweep in the same folder runs only its new points; old rows keep their keys.
    CALLS.clear()
    wider = parse_sweep({**data, "grid": {"cbuf_banks": [1, 8, 32], "clock_mhz": [666, 1000, 2000]}},
                        tmp_path)
    s3 = run_sweep(wider, LocalBackend(1), counting_runner, out, stream=quiet(), plots=False)
    assert s3.skipped == 4 and s3.ran == 5 and len(CALLS) == 4     # 3 new (1 infeasible) + 2 errors
    assert len(json.loads((out / JSON_NAME).read_text())["rows"]) == 9


def test_rows_of_points_no_longer_in_the_sweep_are_kept(tmp_path):
    out = tmp_path / "out"
    a = parse_sweep({"base": base(), "grid": {"cbuf_banks": [8, 16]}}, tmp_path)
    run_sweep(a, LocalBackend(1), fake_runner, out, stream=quiet(), plots=False)
    b = parse_sweep({"base": base(), "grid": {"cbuf_banks": [16]}}, tmp_path)
    s = run_sweep(b, LocalBackend(1), fake_runner, out, stream=quiet(), plots=False)
    assert s.skipped == 1 and len(s.rows) == 1
    rows = json.loads((out / JSON_NAME).read_text())["rows"]
    assert [r["cbuf_banks"] for r in rows] == [16, 8]           # the sweep's rows first


def test_process_pool_gives_the_rows_of_a_sequential_run(tmp_path):
    spec = parse_sweep({"base": base(), "grid": {"cbuf_banks": [1, 4, 8, 16], "dram_gbps": [5, 10]}},
                       tmp_path)
    one = run_sweep(spec, LocalBackend(1), fake_runner, tmp_path / "a", stream=quiet(), plots=False)
    two = run_sweep(spec, LocalBackend(2), fake_runner, tmp_path / "b", stream=quiet(), plots=False)

    def strip(rows):
        return [{k: v for k, v in r.items() if k != "wall_s"} for r in rows]
    assert strip(one.rows) == strip(two.rows)
    assert [r["index"] for r in two.rows] == list(range(8))


def test_backend_choice():
    assert make_backend("local", 3).jobs == 3
    assert make_backend("local").jobs >= 1
    with pytest.raises(Exception, match="--jobs: must be >= 1"):
        make_backend("local", -1)


# -- the engine-measured CBUF curve --------------------------------------------------------------

def test_latency_is_non_increasing_with_cbuf_on_a_small_network(tmp_path):
    """Engine-measured.  Where more CBUF banks remove refetches (kernel groups streamed again per
    input band, partial heights) the DRAM bytes fall and the cycles must not grow.  Where the
    bytes stay the same, the model does not promise monotone time: from 16 to 32 banks the
    compiler keeps all of c2's weights resident instead of ping-ponging two kernel groups, and
    fetching them all at once shares the DRAM port with the first input lines (a few % later
    start); that step is only bounded here."""
    spec = parse_sweep({"base": base(TWO_CONV), "grid": {"dram_gbps": [1, 4],
                                                        "cbuf_banks": [2, 4, 8, 16, 32]}}, tmp_path)
    s = run_sweep(spec, LocalBackend(2), run_conv_chain, tmp_path / "out", stream=quiet(), plots=False)
    # c2's kernel group (8 x 64 x 3 x 3 B) and 3 input lines take 2 banks each: 2 banks is too few.
    assert s.counts == {"ok": 8, "infeasible": 2, "error": 0}
    assert {r["cbuf_banks"] for r in s.rows if r["status"] == "infeasible"} == {2}
    assert all(r["min_cbuf_banks"] == 4 for r in s.rows)
    for gbps in (1, 4):
        rows = sorted((r for r in s.rows if r["dram_gbps"] == gbps and r["status"] == "ok"),
                      key=lambda r: r["cbuf_banks"])
        dram = [r["dram_bytes"] for r in rows]
        assert all(a >= b for a, b in zip(dram, dram[1:])), dram
        assert dram[0] > dram[-1]
        # The output is written once whatever the CBUF: at least 2 x 64 x 24 x 24 bytes.
        assert dram[-1] >= 2 * 64 * 24 * 24
        falling = 0
        for a, b in zip(rows, rows[1:]):
            if b["dram_bytes"] < a["dram_bytes"]:
                assert b["cycles"] <= a["cycles"], (a["cbuf_banks"], b["cbuf_banks"], a["cycles"], b["cycles"])
                falling += 1
            else:
                assert b["cycles"] <= 1.05 * a["cycles"]
        assert falling >= 2
        assert rows[0]["cycles"] > rows[-1]["cycles"]
    # Less bandwidth is never faster.
    by = {(r["dram_gbps"], r["cbuf_banks"]): r["cycles"] for r in s.rows}
    assert all(by[(1, b)] >= by[(4, b)] for b in (4, 8, 16, 32))


def test_conv_chain_runner_refuses_other_layers(tmp_path):
    net = {"name": "pooled", "input": [8, 8, 8],
           "layers": [{"name": "c1", "type": "conv", "out_channels": 8, "kernel": 1},
                      {"name": "p1", "type": "pool", "method": "max", "kernel": 2}]}
    spec = parse_sweep({"base": base(net), "grid": {"cbuf_banks": [32]}}, tmp_path)
    row = evaluate_point(spec.points[0], run_conv_chain, 256)
    assert row["status"] == "error"
    assert "this runner lowers" in row["reason"]


def test_default_runner_runs_the_scenario(tmp_path):
    """The default runner is the full scenario run (lowering to a register program, the engine)."""
    spec = parse_sweep({"base": {"hardware": "nv_small", "network": "lenet5", "mode": "timing"},
                        "grid": {"cbuf_banks": [16, 32]}}, tmp_path)
    s = run_sweep(spec, LocalBackend(1), out_dir=tmp_path / "out", stream=quiet(), plots=False)
    assert s.counts["ok"] == 2 and all(r["cycles"] > 0 and r["dram_bytes"] > 0 for r in s.rows)


# -- progress, plots, CLI ------------------------------------------------------------------------

def test_progress_bar_counts_and_eta():
    now = [100.0]
    out = io.StringIO()
    bar = Progress(4, out, width=8, clock=lambda: now[0], tty=False)
    now[0] = 110.0
    bar.advance("ok", "p0")
    now[0] = 120.0
    bar.advance("infeasible", "p1")
    lines = out.getvalue().splitlines()
    assert lines[0] == "[##......] 1/4  25%  ok 1  elapsed 0:10  ETA 0:30  p0"
    assert lines[1] == "[####....] 2/4  50%  ok 1 infeasible 1  elapsed 0:20  ETA 0:20  p1"
    tty = io.StringIO()
    bar = Progress(2, tty, width=4, clock=lambda: now[0], tty=True)
    bar.advance("ok")
    bar.close()
    assert tty.getvalue().startswith("\r[##..] 1/2  50%") and tty.getvalue().endswith("\n")
    assert format_duration(3725) == "1:02:05" and format_duration(None) == "--:--"


def test_pareto_front():
    rows = [{"area_proxy": a, "ms": m, "id": i} for i, (a, m) in
            enumerate([(100, 5.0), (200, 3.0), (200, 4.0), (300, 3.0), (400, 1.0), (150, 6.0)])]
    assert [r["id"] for r in pareto_front(rows)] == [0, 1, 4]


def test_plots_are_written(tmp_path):
    spec = parse_sweep({"base": base(), "grid": {"cbuf_banks": [1, 8, 32], "dram_gbps": [5, 10]}},
                       tmp_path)
    s = run_sweep(spec, LocalBackend(1), fake_runner, tmp_path / "out", stream=quiet())
    names = [f.name for f in s.files]
    assert names == [JSON_NAME, CSV_NAME, "latency_vs_cbuf.png", "pareto_latency_area.png",
                     "dram_vs_cvsram.png"]
    for f in s.files[2:]:
        assert f.stat().st_size > 10_000
    assert plot_all(s.rows, tmp_path, "again")[0].exists()


def test_cli_sweep(tmp_path, capsys):
    sweep = tmp_path / "s.yaml"
    sweep.write_text(yaml.safe_dump({"name": "cli", "base": base(),
                                     "grid": {"cbuf_banks": [1, 4, 32]}}))
    out = tmp_path / "out"
    rc = main(["sweep", str(sweep), "--jobs", "1", "--runner", "conv-chain", "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0
    assert "cli: 3 points, backend local, 1 jobs" in text
    assert "3 points: 0 already done, 3 run" in text and "ok 2, infeasible 1, error 0" in text
    assert (out / "latency_vs_cbuf.png").exists()
    rc = main(["sweep", str(sweep), "--jobs", "1", "--runner", "conv-chain", "--out", str(out),
               "--no-plots"])
    assert rc == 0 and "3 points: 3 already done, 0 run" in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"base": base(), "grid": {"dram_gbps": [-1]}}))
    assert main(["sweep", str(bad)]) == 2
    assert f"{bad}: grid.dram_gbps[0]: must be > 0, got -1" in capsys.readouterr().err


def test_cli_sweep_error_points_give_exit_status_1(tmp_path, capsys):
    sweep = tmp_path / "s.yaml"
    sweep.write_text(yaml.safe_dump({"base": base({"name": "p", "input": [8, 8, 8], "layers": [
        {"name": "p1", "type": "pool", "method": "max", "kernel": 2}]}), "grid": {"cbuf_banks": [32]}}))
    assert main(["sweep", str(sweep), "--jobs", "1", "--runner", "conv-chain",
                 "--out", str(tmp_path / "o")]) == 1
    assert "first error (point 0): conv-chain runner: layer p1" in capsys.readouterr().out


def test_ray_backend_without_ray_says_how_to_install(monkeypatch):
    import builtins
    real = builtins.__import__

    def no_ray(name, *a, **k):
        if name == "ray":
            raise ImportError("no ray")
        return real(name, *a, **k)
    monkeypatch.setattr(builtins, "__import__", no_ray)
    with pytest.raises(Exception, match=r"pip install 'nvdla-sim\[ray\]'"):
        list(make_backend("ray", 1).run([object()], fake_runner, 256))

