"""Every official nv_small trace test, one case each: the CRC of simulated memory must match."""
from __future__ import annotations

import pytest

from nvdla_sim.config import load_hardware
from nvdla_sim.conformance import run_test

from conftest import NO_CORPUS, trace_tests

TESTS = trace_tests("nv_small")
HW = load_hardware("nv_small")


@pytest.mark.skipif(not TESTS, reason=NO_CORPUS)
@pytest.mark.parametrize("test_dir", TESTS, ids=[t.name for t in TESTS])
def test_nv_small_trace(test_dir):
    outcome = run_test(test_dir, HW)
    assert outcome.error is None, outcome.error
    assert outcome.checks, "the test ran no check"
    failed = [c.describe() for c in outcome.checks if not c.passed]
    assert not failed, "; ".join(failed)
    assert outcome.cycles and outcome.cycles > 0


def test_corpus_is_complete_when_present():
    if not TESTS:
        pytest.skip(NO_CORPUS)
    families = {}
    for t in TESTS:
        families[t.name.split("_")[0]] = families.get(t.name.split("_")[0], 0) + 1
    assert families == {"sdp": 24, "pdp": 15, "cdp": 23, "dc": 12, "img": 10}
