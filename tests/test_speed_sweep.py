"""Sweep speed-ups give the same rows as doing the work again (issue 20).

Points that differ only in the memory or the clock share one compilation (sweep/point.py
RUN_ONLY_FIELDS); each point must still run with its own memory profile and clock.  The
reference is the same point compiled afresh in a clean cache.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from nvdla_sim.sweep import point as sweep_point
from nvdla_sim.sweep.spec import load_sweep

ROOT = Path(__file__).resolve().parent.parent
TWO_CONV = {"name": "two_conv", "input": [32, 24, 24],
            "layers": [{"name": "c1", "type": "conv", "out_channels": 64, "kernel": 3, "pad": 1},
                       {"name": "c2", "type": "conv", "out_channels": 64, "kernel": 3, "pad": 1}]}


def scenario(dram_gbps: float, clock_mhz: float = 1000, banks: int = 32) -> dict:
    return {"hardware": {"preset": "nv_small", "cbuf": {"banks": banks}}, "mode": "timing",
            "network": TWO_CONV, "clock_mhz": clock_mhz,
            "memory": {"dram_gbps": dram_gbps, "dram_latency_ns": 100}}


def fresh(scn: dict) -> dict:
    sweep_point._compiled = None
    return sweep_point.run_scenario_point(scn, ".")


def test_points_differing_in_memory_share_the_compilation_and_keep_their_memory():
    a, b, c = scenario(1), scenario(40), scenario(40, clock_mhz=500)
    sweep_point._compiled = None
    pa = sweep_point.compile_point(a, ".")
    pb = sweep_point.compile_point(b, ".")
    pc = sweep_point.compile_point(c, ".")
    assert pa.plan is pb.plan is pc.plan                       # compiled once
    assert (pa.scenario.memory.dram_gbps, pb.scenario.memory.dram_gbps) == (1, 40)
    assert pc.scenario.clock_mhz == 500
    shared = [sweep_point.run_scenario_point(s, ".") for s in (a, b, c)]
    own = [fresh(s) for s in (a, b, c)]
    assert [r["cycles"] for r in shared] == [r["cycles"] for r in own]
    assert [r["dram_bytes"] for r in shared] == [r["dram_bytes"] for r in own]
    # the memory matters here: 1 GB/s is slower than 40 GB/s
    assert shared[0]["cycles"] > shared[1]["cycles"]


def test_a_hardware_change_compiles_again():
    sweep_point._compiled = None
    p16 = sweep_point.compile_point(scenario(10, banks=16), ".")
    p32 = sweep_point.compile_point(scenario(10, banks=32), ".")
    assert p16.plan is not p32.plan
    assert p16.scenario.hardware.cbuf.banks == 16 and p32.scenario.hardware.cbuf.banks == 32


@pytest.mark.parametrize("name", ["array_sweep_resnet50"])
def test_the_array_sweep_has_a_thousand_points_over_arrays_cbufs_and_bandwidths(name):
    spec = load_sweep(ROOT / "scenarios" / f"{name}.yaml")
    assert len(spec.points) >= 1000
    macs, cbufs, bandwidths = set(), set(), set()
    for p in spec.points:
        hw = p.scenario["hardware"]
        assert hw["atomic_k"] <= hw["atomic_c"] and hw["cbuf"]["bank_width_bytes"] == hw["atomic_c"]
        macs.add(hw["atomic_c"] * hw["atomic_k"])
        cbufs.add(hw["cbuf"]["banks"] * hw["cbuf"]["bank_depth"] * hw["atomic_c"])
        bandwidths.add(p.scenario["memory"]["dram_gbps"])
    assert min(macs) == 64 and max(macs) == 2048
    assert len(cbufs) > 4 and len(bandwidths) > 4
    assert all(p.scenario.get("mode") == "timing" for p in spec.points)
