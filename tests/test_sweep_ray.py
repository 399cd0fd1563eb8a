"""The Ray backend runs the same points as the local one and gives the same rows (engine-measured,
with the conv-chain runner).  Skipped when ray is not installed (it is an optional extra)."""
from __future__ import annotations

import io

import pytest

from nvdla_sim.sweep.backends import LocalBackend, RayBackend
from nvdla_sim.sweep.conv_chain import run_conv_chain
from nvdla_sim.sweep.driver import run_sweep
from nvdla_sim.sweep.spec import parse_sweep

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'nvdla-sim[ray]')")

NET = {"name": "ray_net", "input": [32, 24, 24],
       "layers": [{"name": "c1", "type": "conv", "out_channels": 64, "kernel": 3, "pad": 1}]}


def test_three_point_ray_sweep_equals_local(tmp_path):
    spec = parse_sweep({"base": {"hardware": "nv_small", "mode": "timing", "network": NET},
                        "grid": {"cbuf_banks": [1, 4, 32]}, "fixed": {"dram_gbps": 2}}, tmp_path)
    local = run_sweep(spec, LocalBackend(1), run_conv_chain, tmp_path / "local",
                      stream=io.StringIO(), plots=False)
    remote = run_sweep(spec, RayBackend(jobs=2), run_conv_chain, tmp_path / "ray",
                       stream=io.StringIO(), plots=False)
    assert not ray.is_initialized()             # the local instance it started is stopped

    def strip(rows):                            # wall time is the only column that may differ
        return [{k: v for k, v in r.items() if k != "wall_s"} for r in rows]
    assert len(remote.rows) == 3
    assert strip(remote.rows) == strip(local.rows)
    assert [r["status"] for r in remote.rows] == ["infeasible", "ok", "ok"]
    assert remote.rows[1]["cycles"] > remote.rows[2]["cycles"] > 0
