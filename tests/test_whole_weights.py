"""Timing-only plans hold no weight arrays (issue 13): the stand-in weights stay broadcast views
through the hardware-layer plan and the quantisation (compiler/weight_views.py).  The reference
is the same plan built from the same stand-ins materialised as ordinary arrays: the register
program must be identical, command by command (addresses, values, names), and the plan's
weights must equal the materialised ones element by element."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from nvdla_sim.compiler.hwlayers import build_plan
from nvdla_sim.compiler.lower import lower, structural_quantization
from nvdla_sim.compiler.weight_views import compact
from nvdla_sim.scenario.runner import context, prepare
from nvdla_sim.scenario.schema import load_scenario, parse_scenario

ROOT = Path(__file__).resolve().parent.parent

# holes: a concatenation of 12 + 20 channels is off the 32-channel atom of nv_large, so the conv
# reading it has zero columns and a conv added to it zero kernels; grouped convs both ways
# (atom-aligned groups split, unaligned ones block-diagonal); bias-free fc, batch norm folded
HOLES = {"name": "holes", "input": [8, 16, 16], "layers": [
    {"name": "a", "type": "conv", "out_channels": 12, "kernel": 3, "pad": 1, "batchnorm": True},
    {"name": "b", "type": "conv", "input": "data", "out_channels": 20, "kernel": 1},
    {"name": "cat", "type": "concat", "input": ["a", "b"]},
    # added to the concatenation: d's output takes its holes (zero kernels between its groups)
    {"name": "d", "type": "conv", "input": "data", "out_channels": 32, "kernel": 1},
    {"name": "s", "type": "add", "input": ["d", "cat"]},
    {"name": "c", "type": "conv", "out_channels": 64, "kernel": 3, "pad": 1, "relu": True},
    {"name": "g", "type": "conv", "out_channels": 64, "kernel": 3, "pad": 1, "groups": 2},
    {"name": "h", "type": "conv", "out_channels": 24, "kernel": 1, "groups": 4},
    {"name": "fc", "type": "fc", "out_features": 10, "bias": False}]}


def _scenarios():
    for name in ("tinymix_nv_large", "lenet5_nv_small", "lenet5_nv_full_fp16",
                 "lenet5_nv_full_int16", "googlenet_nv_small"):
        yield name, load_scenario(ROOT / "scenarios" / f"{name}.yaml")
    for hw in ("nv_small", "nv_large"):
        yield f"holes_{hw}", parse_scenario({"hardware": hw, "network": HOLES}, None)


def _materialised(weights: dict) -> dict:
    return {op: {role: np.array(a) for role, a in roles.items()} for op, roles in weights.items()}


@pytest.mark.parametrize("name,scn", list(_scenarios()), ids=lambda v: v if isinstance(v, str) else "")
def test_views_give_the_program_of_materialised_stand_ins(name, scn):
    scn = replace(scn, mode="timing-only")
    prep = prepare(scn)
    arrays = _materialised(prep.weights)
    ref_plan = build_plan(prep.network, arrays, scn.hardware, prep.support, scn.dtype,
                          scn.layer_dtypes)
    convs = [(a, b) for a, b in zip(prep.plan.layers, ref_plan.layers) if a.kind == "conv"]
    assert convs
    ctx = context(prep)
    programs = [lower(p, ctx).program.commands for p in (prep.plan, ref_plan)]
    assert programs[0] == programs[1]
    for mine, ref in convs:
        assert mine.name == ref.name
        # the reference builds arrays; the views hold at most a kernels x channels plane
        assert compact(ref.conv.weight).size == ref.conv.weight.size
        assert compact(mine.conv.weight).size <= mine.conv.weight.shape[0] * mine.conv.weight.shape[1]
        assert compact(mine.quant.weight).size <= mine.conv.weight.shape[0] * mine.conv.weight.shape[1]
        np.testing.assert_array_equal(mine.conv.weight, ref.conv.weight)
        np.testing.assert_array_equal(mine.quant.weight, ref.quant.weight)
        assert mine.quant.weight.dtype == ref.quant.weight.dtype
        assert mine.quant.clip_truncate == ref.quant.clip_truncate


def test_resnet50_plan_holds_one_value_per_kernel():
    scn = replace(load_scenario(ROOT / "scenarios" / "resnet50_nv_large.yaml"), mode="timing-only")
    prep = prepare(scn)
    structural_quantization(prep.plan)
    held = full = 0
    for layer in prep.plan.layers:
        if layer.kind == "conv":
            w = layer.conv.weight
            held += compact(w).nbytes + compact(layer.quant.weight).nbytes
            full += w.nbytes + layer.quant.weight.nbytes
            assert compact(w).shape == (w.shape[0], 1, 1, 1)      # no holes in ResNet-50
    assert full > 100 << 20 and held < 1 << 20      # 25 M weights, float32 + INT8, as views


def test_an_8192_channel_fc_runs_timing_only_without_its_weights():
    """64 M weights (the plan held 4 GiB of float32 before); the memory check lets it run."""
    scn = parse_scenario({"hardware": "nv_large", "mode": "timing", "network": {
        "input": [8192, 1, 1], "layers": [{"name": "fc", "type": "fc", "out_features": 8192}]}},
        None)
    prep = prepare(scn)
    lowered = lower(prep.plan, context(prep))
    (layer,) = [layer for layer in prep.plan.layers if layer.kind == "conv"]
    assert layer.conv.weight.shape == (8192, 8192, 1, 1)
    assert compact(layer.quant.weight).nbytes == 8192
    # the weights are still fetched in full: the CDMA reads 64 MiB of INT8 kernels
    from nvdla_sim.program import RegWrite
    sizes = {c.name: c.value for c in lowered.program.commands if isinstance(c, RegWrite)}
    assert sizes["CDMA.D_WEIGHT_BYTES"] == 8192 * 8192
