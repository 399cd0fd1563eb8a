"""Hostile sweeps: a point that fails in any way (an exception, MemoryError, a worker killed by a
signal as the kernel's OOM killer does) is an `error` row with its reason and the sweep goes on;
sweep files with nonsense are one line naming the field; a huge grid is refused before it is
expanded; mutated sweep files never end in a traceback.  The runners here are test doubles that
say so (cycles from the parameters), to test the bookkeeping; NVDLA_FUZZ_SEED varies the seed."""
from __future__ import annotations

import contextlib
import copy
import io
import os
import random
import signal
from pathlib import Path

import pytest
import yaml

from nvdla_sim.cli import main
from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.sweep.backends import LocalBackend
from nvdla_sim.sweep.driver import run_sweep
from nvdla_sim.sweep.spec import MAX_POINTS, parse_sweep

SEED = int(os.environ.get("NVDLA_FUZZ_SEED", "13"))
NET = {"name": "one_conv", "input": [32, 24, 24],
       "layers": [{"name": "c1", "type": "conv", "out_channels": 64, "kernel": 3, "pad": 1}]}
BASE = {"hardware": "nv_small", "mode": "timing", "network": NET}


def hostile_runner(scenario: dict, base_dir: str) -> dict:
    """Test double: fails per clock (a bug, memory, a killed worker); else cycles from the clock."""
    clock = scenario.get("clock_mhz", 1000)
    if clock == 111:
        raise RuntimeError("boom")
    if clock == 222:
        raise MemoryError()
    if clock == 333:
        raise RecursionError("maximum recursion depth exceeded")
    if clock == 444:
        os.kill(os.getpid(), signal.SIGKILL)       # what the OOM killer does to a worker
    return {"cycles": 1e6 / clock, "dram_bytes": 1024}


def sweep(tmp_path: Path, clocks: list[int]):
    spec = parse_sweep({"base": BASE, "grid": {"clock_mhz": clocks}, "outputs": {"plots": False}},
                       tmp_path)
    return spec


@pytest.mark.parametrize("jobs", [1, 2])
def test_failing_points_are_error_rows_and_the_sweep_goes_on(tmp_path, jobs):
    clocks = [100, 111, 222, 333, 500, 700] + ([444] if jobs > 1 else [])
    summary = run_sweep(sweep(tmp_path, clocks), LocalBackend(jobs), hostile_runner, tmp_path / "o",
                        stream=io.StringIO(), plots=False)
    rows = {r["params"]["clock_mhz"]: r for r in summary.rows}
    assert set(rows) == set(clocks)
    for ok in (100, 500, 700):
        assert rows[ok]["status"] == "ok" and rows[ok]["cycles"] == pytest.approx(1e6 / ok)
    assert "RuntimeError: boom" in rows[111]["reason"]
    assert "out of memory" in rows[222]["reason"]
    assert "RecursionError" in rows[333]["reason"]
    if jobs > 1:
        assert rows[444]["status"] == "error" and "worker process died" in rows[444]["reason"]
    assert summary.errors == len(clocks) - 3
    assert all("\n" not in r.get("reason", "") for r in summary.rows)


def test_cli_sweep_with_error_points_exits_1_without_a_traceback(tmp_path):
    # The default runner on a network whose point fails to compile: an infeasible/error row.
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump({"base": BASE, "grid": {"cbuf_banks": [1, 32]},
                                 "outputs": {"directory": str(tmp_path / "o"), "plots": False}}))
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        rc = main(["sweep", str(f), "--jobs", "1"])
    assert rc in (0, 1) and "Traceback" not in err.getvalue()


BAD_SWEEPS = [
    ({"grid": {"clock_mhz": [float("inf")]}}, "clock_mhz"),
    ({"grid": {"clock_mhz": [float("nan")]}}, "clock_mhz"),
    ({"grid": {"dram_gbps": [-1]}}, "dram_gbps"),
    ({"grid": {"cbuf_banks": ["8"]}}, "cbuf_banks"),
    ({"grid": {"clock_mhz": []}}, "clock_mhz"),
    ({"grid": {"nonsense": [1]}}, "nonsense"),
    ({"grid": {"clock_mhz": [100, 100]}}, "listed twice"),
    ({"name": "../escape", "grid": {"clock_mhz": [100]}}, "name"),
    ({"name": "a\0b", "grid": {"clock_mhz": [100]}}, "name"),
    ({"grid": {"clock_mhz": [100]}, "points": [{"clock_mhz": 100}]}, "grid"),
    ({"grid": {"clock_mhz": [100]}, "area": {"bytes_per_mac": float("nan")}}, "bytes_per_mac"),
    ({"grid": {"memory.dram_latency_ns": [float("inf")]}}, "dram_latency_ns"),
    ({"grid": {"hardware.sdp.bs_throughput": [1, 2],
               "clock_mhz": list(range(1, 101)), "dram_gbps": list(range(1, 101)),
               "memory.dram_latency_ns": list(range(1, 101))}}, f"above {MAX_POINTS:,}"),
]


@pytest.mark.parametrize("extra, needle", BAD_SWEEPS, ids=[f"case{i}" for i in range(len(BAD_SWEEPS))])
def test_bad_sweep_files_are_one_line(tmp_path, extra, needle):
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump({"base": BASE, **extra}, allow_unicode=True))
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        rc = main(["sweep", str(f), "--jobs", "1", "--out", str(tmp_path / "o")])
    lines = err.getvalue().splitlines()
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("nvdla-sim: error: "), err.getvalue()
    assert needle in lines[0] and str(f) in lines[0]


def test_huge_grid_is_refused_before_expansion(tmp_path):
    axes = {"hardware.sdp.bs_throughput": list(range(1, 11)),
            "clock_mhz": list(range(1, 1001)), "dram_gbps": list(range(1, 1001))}
    with pytest.raises(NvdlaSimError, match="10,000,000 points"):
        parse_sweep({"base": BASE, "grid": axes}, tmp_path)


def test_validation_reports_progress(tmp_path):
    seen = []
    parse_sweep({"base": BASE, "grid": {"clock_mhz": [100, 200, 300]}}, tmp_path,
                progress=lambda i, n: seen.append((i, n)))
    assert seen == [(0, 3), (1, 3), (2, 3)]


def test_mutated_sweep_files_never_trace_back(tmp_path):
    rng = random.Random(SEED)
    values = [None, True, 0, -1, 2 ** 64, float("inf"), float("nan"), "", "x", [], {}, [1, 1],
              {"a": 1}, "../x", 1e308]
    good = {"name": "fz", "base": BASE, "grid": {"clock_mhz": [500, 1000], "dram_gbps": [5, 10]},
            "area": {"bytes_per_mac": 256}, "outputs": {"plots": False}}
    for i in range(40):
        doc = copy.deepcopy(good)
        node, key = doc, rng.choice(list(doc))
        while isinstance(node[key], dict) and node[key] and rng.random() < 0.6:
            node, key = node[key], rng.choice(list(node[key]))
        node[key] = copy.deepcopy(rng.choice(values))
        try:
            spec = parse_sweep(doc, tmp_path)
        except NvdlaSimError as exc:
            assert "\n" not in str(exc), (doc, exc)
            continue
        assert spec.points and all(p.key for p in spec.points)
