"""Every compiled network in traces/ (tools/make_traces.py) replays with every CRC check passing,
exactly as `nvdla-sim replay <folder> --project <preset>` runs it."""
from __future__ import annotations

from pathlib import Path

import pytest

from nvdla_sim.config import load_hardware
from nvdla_sim.conformance import run_test

TRACES = Path(__file__).resolve().parent.parent / "traces"
CFGS = sorted(TRACES.glob("*/*/*.cfg"))        # traces/<preset>/<network>/<network>.cfg


def test_traces_exist():
    presets = {cfg.parent.parent.name for cfg in CFGS}
    assert {"nv_small", "nv_large"} <= presets, "run python tools/make_traces.py"


@pytest.mark.parametrize("cfg", CFGS, ids=[f"{c.parent.parent.name}/{c.stem}" for c in CFGS])
def test_trace_replays_and_passes(cfg):
    outcome = run_test(cfg.parent, load_hardware(cfg.parent.parent.name))
    assert outcome.status == "pass", outcome.error
    crcs = [c for c in outcome.checks if c.kind == "crc"]
    assert crcs and all(c.passed for c in crcs)
