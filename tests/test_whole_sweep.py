"""A large sweep starts at once and streams (issue 13): the grid is checked value by value (each
axis value once, with progress), its points are made as the workers take them, and a
combination of valid values that the schema refuses is that point's `error` row."""
from __future__ import annotations

import io
import itertools

import pytest

from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.sweep.backends import LocalBackend
from nvdla_sim.sweep.driver import run_sweep
from nvdla_sim.sweep.spec import GridPoints, parse_sweep

BASE = {"hardware": "nv_small", "mode": "timing", "network": "lenet5"}
MILLION = {"clock_mhz": list(range(100, 200)), "dram_gbps": list(range(1, 101)),
           "memory.dram_latency_ns": list(range(1, 101))}


def test_a_million_point_grid_is_checked_per_value_with_progress(tmp_path):
    seen = []
    spec = parse_sweep({"base": BASE, "grid": MILLION}, tmp_path,
                       progress=lambda i, n: seen.append((i, n)))
    assert len(spec.points) == 1_000_000 and isinstance(spec.points, GridPoints)
    # 1 + 99 + 99 + 99 checks (each axis value once), not a million; every one announced
    assert seen == [(i, 298) for i in range(298)]


def test_grid_points_are_made_in_product_order(tmp_path):
    grid = {"clock_mhz": [100, 200, 300], "dram_gbps": [5, 10], "cbuf_banks": [8, 16, 32, 4]}
    spec = parse_sweep({"base": BASE, "grid": grid}, tmp_path)
    combos = list(itertools.product(*grid.values()))
    assert len(spec.points) == len(combos) == 24
    for i in (0, 1, 7, 13, 23, -1):
        p = spec.points[i]
        assert tuple(p.params.values()) == combos[i] and p.index == i % 24
    assert [p.key for p in spec.points] == spec.points.keys()
    assert [p.params for p in spec.points[2:5]] == [dict(zip(grid, c)) for c in combos[2:5]]
    with pytest.raises(IndexError):
        spec.points[24]


def test_a_bad_axis_value_is_refused_before_the_sweep_starts(tmp_path):
    # batch 2 is valid, nv_small has no batch: the value's check (other axes at their first
    # value: nv_small) names the field that set it
    with pytest.raises(NvdlaSimError, match=r"grid.batch: point 1 \(batch=2\)"):
        parse_sweep({"base": BASE, "grid": {"batch": [1, 2]}}, tmp_path)


@pytest.mark.parametrize("jobs", [1, 2])
def test_an_invalid_combination_is_an_error_row_and_the_sweep_goes_on(tmp_path, jobs):
    """preset nv_full x batch 2 runs; nv_small x batch 2 is refused by the schema only in
    that combination: its row says why, every other point runs."""
    calls = []
    spec = parse_sweep({"base": BASE, "grid": {"preset": ["nv_full", "nv_small"],
                                               "batch": [1, 2]}}, tmp_path)
    summary = run_sweep(spec, LocalBackend(jobs), _runner if jobs > 1 else _recording(calls),
                        tmp_path / "out", stream=io.StringIO(), plots=False)
    status = {(r["params"]["preset"], r["params"]["batch"]): r for r in summary.rows}
    bad = status[("nv_small", 2)]
    assert bad["status"] == "error" and "batch" in bad["reason"] and "nv_small" in bad["reason"]
    assert all(r["status"] == "ok" for k, r in status.items() if k != ("nv_small", 2))
    assert summary.counts == {"ok": 3, "infeasible": 0, "error": 1}
    if jobs == 1:
        assert len(calls) == 3                   # the refused point never reached the runner


def _runner(scenario: dict, base_dir: str) -> dict:
    """Test double (bookkeeping only): cycles from the batch."""
    return {"cycles": 1000.0 * scenario.get("batch", 1), "dram_bytes": 64}


def _recording(calls: list):
    def run(scenario: dict, base_dir: str) -> dict:
        calls.append(scenario)
        return _runner(scenario, base_dir)
    return run


def test_workers_take_points_from_a_stream(tmp_path):
    """The pool never asks for more points than its window: a sweep of a million points does
    not build them before the first one runs."""
    spec = parse_sweep({"base": BASE, "grid": MILLION}, tmp_path)
    taken = []

    def stream():
        for p in spec.points:
            taken.append(p.index)
            yield p
    rows = LocalBackend(2).run(stream(), _runner, 256)
    first = next(rows)
    assert first["status"] == "ok"
    assert len(taken) <= 2 * 4 + 2              # WINDOW_PER_JOB points per worker
    rows.close()
