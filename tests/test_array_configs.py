"""Every accepted array configuration runs (issue 20).

A kernel group (ATOMIC_K kernels) narrower or wider than the memory atom used to deadlock in the
timing model: CACC counted its output to SDP in stripe slots (one per output position and group)
while SDP counts memory atoms, so an SDP reading element-wise operands beside CACC's output (the
bottleneck's add) or a PDP on the fly waited for atoms that never came (nv_small with atomic_k 4:
half an atom per group; nv_large with atomic_k 64: two atoms per group).  With groups wider than
the atom a stripe also outgrew the SDP output buffer sized for one atom per position.

Each configuration the validator accepts runs a small ResNet-50 bottleneck (1x1 -> 3x3 -> 1x1 with
the shortcut add fused on the fly, then a pool) timing-only; every convolution takes at least its
MACs at the array's MACs per cycle (the bound the MAC array cannot beat)."""
from __future__ import annotations

import itertools

import pytest

from nvdla_sim.compiler.lower import lower_and_run
from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.scenario.runner import context, prepare
from nvdla_sim.scenario.schema import parse_scenario

C, H, W, MID = 64, 14, 14, 32
BOTTLENECK = {"name": "bottleneck", "input": [C, H, W],
              "layers": [{"name": "a", "type": "conv", "out_channels": MID, "kernel": 1,
                          "relu": True},
                         {"name": "b", "type": "conv", "out_channels": MID, "kernel": 3, "pad": 1,
                          "relu": True},
                         {"name": "c", "type": "conv", "out_channels": C, "kernel": 1},
                         {"name": "add", "type": "add", "input": ["c", "data"], "relu": True},
                         {"name": "pool", "type": "pool", "method": "max", "kernel": 2,
                          "stride": 2}]}
CONV_MACS = {"a": C * MID * H * W, "b": MID * MID * 9 * H * W, "c": MID * C * H * W}


def _scenario(hardware: dict):
    return parse_scenario({"hardware": hardware, "mode": "timing-only", "network": BOTTLENECK,
                           "memory": {"dram_gbps": 10, "dram_latency_ns": 100}}, None)


def _run_and_check(hardware: dict) -> None:
    scn = _scenario(hardware)
    prep = prepare(scn)
    result = lower_and_run(prep.plan, context(prep))
    hw = scn.hardware
    cycles = {t.name: t.end_cycle - t.start_cycle for t in result.layers}
    for name, macs in CONV_MACS.items():
        assert cycles[name] >= macs / (hw.atomic_c * hw.atomic_k), (hardware, name)
    assert result.total_cycles >= sum(cycles[n] for n in CONV_MACS) > 0


@pytest.mark.parametrize("hardware", [
    {"preset": "nv_small", "atomic_k": 4},           # 32 MACs: half an 8-byte atom per group
    {"preset": "nv_large", "atomic_k": 64},          # two 32-byte atoms per group
    {"preset": "nv_large", "atomic_c": 128, "atomic_k": 64, "cbuf": {"bank_width_bytes": 128}},
    {"preset": "nv_small", "atomic_k": 64},          # eight atoms per group: a stripe of 1024
])
def test_issue_configurations_complete(hardware):
    _run_and_check(hardware)


GRID = [(preset, ac, ak, atom)
        for preset, ac, ak, atom in itertools.product(("nv_small", "nv_large"), (8, 16, 32, 64, 128),
                                                      (4, 8, 16, 32, 64), (8, 32))]


def test_array_grid_every_accepted_shape_runs():
    accepted = 0
    for preset, ac, ak, atom in GRID:
        hardware = {"preset": preset, "atomic_c": ac, "atomic_k": ak,
                    "memory_atomic_bytes": atom, "cbuf": {"bank_width_bytes": ac}}
        try:
            _scenario(hardware)
        except NvdlaSimError as err:             # refused before the run, with the reason
            assert "memory_atomic_bytes" in str(err), (hardware, str(err))
            continue
        accepted += 1
        _run_and_check(hardware)
    # atoms wider than ATOMIC_C are the only refusals in this grid
    assert accepted == len([g for g in GRID if g[3] <= g[1]])


@pytest.mark.parametrize("precision,atomic_k", [("int8", 4), ("int16", 64), ("fp16", 64)])
def test_nv_full_groups_other_than_the_atom_run_in_both_modes(precision, atomic_k):
    """16-bit groups hold ATOMIC_K / 2 kernels of 2-byte elements (the same atoms per group);
    values+timing runs the same register program, so the same cycles as timing-only."""
    totals = []
    for mode in ("timing-only", "values+timing"):
        scn = parse_scenario({"hardware": {"preset": "nv_full", "atomic_k": atomic_k},
                              "mode": mode, "network": BOTTLENECK, "precision": precision,
                              "memory": {"dram_gbps": 10, "dram_latency_ns": 100}}, None)
        prep = prepare(scn)
        totals.append(lower_and_run(prep.plan, context(prep)).total_cycles)
    assert totals[0] == totals[1] > sum(CONV_MACS.values()) / (64 * atomic_k)
