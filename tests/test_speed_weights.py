"""Timing-only runs compile with stand-in weights (scenario/weights.py stand_in_weights: right
shapes, no ResNet-sized random tensors).  The reference is the same scenario compiled with the
seeded random weights `random_weights` builds for values runs: the register program must have the
same writes (register by register; only values may differ) and every layer the same cycles."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from nvdla_sim.compiler.hwlayers import build_plan
from nvdla_sim.compiler.lower import lower, run_lowered
from nvdla_sim.program import RegWrite
from nvdla_sim.scenario.runner import context, prepare
from nvdla_sim.scenario.schema import load_scenario, parse_scenario
from nvdla_sim.scenario.weights import random_weights, stand_in_weights

ROOT = Path(__file__).resolve().parent.parent
# PReLU, a standalone batch norm, an fc without bias, a grouped conv: every kind with parameters.
MIXED = {"name": "mixed", "input": [16, 20, 20],
         "layers": [{"name": "c1", "type": "conv", "out_channels": 32, "kernel": 3, "pad": 1,
                     "bias": False},
                    {"name": "bn", "type": "batchnorm"},
                    {"name": "pr", "type": "prelu"},
                    {"name": "c2", "type": "conv", "out_channels": 32, "kernel": 3, "pad": 1,
                     "groups": 4, "batchnorm": True, "relu": True},
                    {"name": "fc", "type": "fc", "out_features": 10, "bias": False}]}


def _scenarios():
    yield "tinymix_nv_large", load_scenario(ROOT / "scenarios" / "tinymix_nv_large.yaml")
    yield "lenet5_nv_small", load_scenario(ROOT / "scenarios" / "lenet5_nv_small.yaml")
    for hw in ("nv_small", "nv_large"):
        yield f"mixed_{hw}", parse_scenario({"hardware": hw, "network": MIXED, "mode": "timing"}, None)


@pytest.mark.parametrize("name,scn", list(_scenarios()), ids=lambda v: v if isinstance(v, str) else "")
def test_stand_in_weights_give_the_program_and_cycles_of_random_weights(name, scn):
    scn = replace(scn, mode="timing-only") if hasattr(scn, "mode") else scn
    prep = prepare(scn)
    assert not prep.scenario.values
    real = random_weights(prep.network, scn.weights.seed)
    for op, roles in real.items():           # the stand-ins have the same shapes
        assert {r: a.shape for r, a in roles.items()} == \
            {r: a.shape for r, a in prep.weights[op].items()}, op
    ref = replace(prep, weights=real,
                  plan=build_plan(prep.network, real, scn.hardware, prep.support, scn.dtype,
                                  scn.layer_dtypes))
    ctx = context(prep)
    runs = []
    for p in (prep, ref):
        lowered = lower(p.plan, ctx)
        writes = [c.name for c in lowered.program.commands if isinstance(c, RegWrite)]
        runs.append((writes, run_lowered(lowered, ctx)))
    (writes, mine), (writes_ref, theirs) = runs
    assert writes == writes_ref
    assert [(t.name, t.start_cycle, t.end_cycle) for t in mine.layers] == \
        [(t.name, t.start_cycle, t.end_cycle) for t in theirs.layers]
    assert mine.total_cycles == theirs.total_cycles


def test_stand_ins_take_no_memory_for_the_big_tensors():
    from nvdla_sim.compiler.zoo import BUILTIN
    w = stand_in_weights(BUILTIN["resnet50"](), 1)
    big = w["res5a_branch2b"]["weight"]
    assert big.shape == (512, 512, 3, 3) and not big.flags.writeable
    assert np.shares_memory(big, big[:, :1, :1, :1])       # one value per kernel, broadcast
