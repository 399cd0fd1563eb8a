"""CSC's stripes run in C (kernels/stripe_run.pyx, issue 20) give what the Python stripe loop
gives: the same cycles, bytes, transfers, spans and buffer credits, bit for bit.

Reference: the same program with NVDLA_SIM_STRIPE_RUN=0 (CSC's loop, `CaccDelivery.step` and
`FlyingWriter.take` in Python, which test_speed_follower holds against the SDP processes).
Compared with `==` on the run record of test_speed_follower (every layer, every transfer in
booking order, every span, unit summary, CBUF and output-buffer peaks and final credits), on its
cases: memory starved and generous, other arrays, 16-bit precisions, CV-SRAM; and the C run must
have taken stripes."""
from __future__ import annotations

import pytest

from nvdla_sim.timing import conv

from test_speed_follower import CASES, RECORD_KEYS, _run, assert_same_record, prepared


class _Counting:
    """conv.StripeRun, counting the stripes its runs take."""
    taken = 0

    def __init__(self, *args):
        self._run = _REAL(*args)

    def run(self, g, i, t, load, stop, delivery, phase=0):
        out = self._run.run(g, i, t, load, stop, delivery, phase)
        _Counting.taken += out[0] - i
        return out


_REAL = conv.StripeRun


@pytest.mark.parametrize("case", sorted(CASES))
def test_stripe_run_gives_the_python_loops_cycles_bytes_and_spans(case, monkeypatch):
    prep = prepared(case)
    monkeypatch.setattr(conv, "StripeRun", _Counting)
    _Counting.taken = 0
    fast = _run(prep, True, monkeypatch, "NVDLA_SIM_STRIPE_RUN")
    in_c = _Counting.taken
    plain = _run(prep, False, monkeypatch, "NVDLA_SIM_STRIPE_RUN")
    assert _Counting.taken == in_c, "the switch did not turn the C run off"
    assert in_c > 0, "no stripe ran in C"
    assert_same_record(fast, plain, RECORD_KEYS + ("events",))
