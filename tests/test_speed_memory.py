"""Runs that draw no timeline keep no per-request transfer records (issue 20: a timing-only
ResNet-50 on nv_small books 800 k requests).  Reference: the same run with the timeline on, which
records them -- cycles, bytes and bounds must be the same, and the records must add up to the
bytes each interface counted."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from nvdla_sim.compiler.lower import lower_and_run
from nvdla_sim.scenario.runner import context, prepare
from nvdla_sim.scenario.schema import load_scenario

ROOT = Path(__file__).resolve().parent.parent


def test_no_transfer_records_without_a_timeline_and_the_same_run():
    scn = load_scenario(ROOT / "scenarios" / "lenet5_nv_small.yaml")
    prep = prepare(replace(scn, mode="timing-only"))
    runs = {}
    for timeline in (False, True):
        runs[timeline] = lower_and_run(prep.plan, replace(context(prep), timeline=timeline))
    quiet, full = runs[False], runs[True]
    assert quiet.engine_result.engine.mcif.transfers == []
    records = full.engine_result.engine.mcif.transfers
    assert records
    assert [(t.name, t.start_cycle, t.end_cycle, t.dram_read_bytes, t.dram_write_bytes, t.bound)
            for t in quiet.layers] == \
        [(t.name, t.start_cycle, t.end_cycle, t.dram_read_bytes, t.dram_write_bytes, t.bound)
         for t in full.layers]
    counted = full.engine_result.engine.mcif.bytes_by_client
    for direction in ("read", "write"):
        assert sum(r[4] for r in records if r[3] == direction) == \
            sum(c[direction] for c in counted.values())
    assert quiet.engine_result.engine.mcif.bytes_by_client == counted
