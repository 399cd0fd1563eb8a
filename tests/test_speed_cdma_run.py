"""CDMA's request loops as callbacks in C (kernels/cdma_run.pyx, issue 20) give what the
generator loops give: the same cycles, bytes, transfers, spans, buffer credits and SimPy events.

Reference: the same program with NVDLA_SIM_CDMA_RUN=0 (`_cdma_data` / `_cdma_weight` loop in
their processes).  Compared with `==` on test_speed_follower's run record and cases (memory
starved and generous, other arrays, 16-bit precisions, CV-SRAM), and the loops must have run in
C."""
from __future__ import annotations

import pytest

from nvdla_sim.timing import conv

from test_speed_follower import CASES, RECORD_KEYS, _run, assert_same_record, prepared


@pytest.mark.parametrize("case", sorted(CASES))
def test_cdma_run_gives_the_generator_loops_cycles_bytes_and_spans(case, monkeypatch):
    prep = prepared(case)
    loops = []
    real = conv.RequestLoop
    monkeypatch.setattr(conv, "RequestLoop", lambda *a, **k: loops.append(1) or real(*a, **k))
    fast = _run(prep, True, monkeypatch, "NVDLA_SIM_CDMA_RUN")
    in_c = len(loops)
    plain = _run(prep, False, monkeypatch, "NVDLA_SIM_CDMA_RUN")
    assert len(loops) == in_c, "the switch did not turn the C loops off"
    assert in_c > 0, "no CDMA loop ran in C"
    assert_same_record(fast, plain, RECORD_KEYS + ("events",))
