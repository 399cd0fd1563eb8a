"""Convolution pacing by CACC's delivery-buffer credits (issue 16 part B).

The credit counter (`timing/conv.py` `DeliveryCredits`) is checked against a cycle-by-cycle
counter written from the RTL's description (`sg.v` `credit_cnt`: starts at the capacity, a
stripe's channel-end package takes its atoms, every delivered atom gives one back); the stripe
period of a credit-bound convolution against the RTL's observed pattern on nv_small (one output
atom every 9 cycles, 47 cycles from a stripe's last atom to the next stripe's first: 15 x 9 + 47 =
182 cycles a 16-atom stripe, `../shared/calibration/networks`); a CSC-bound one keeps CSC's rate.
"""
from __future__ import annotations

import random

import pytest

from nvdla_sim.timing.conv import DeliveryCredits

from test_timing import NV_SMALL, run_conv


def _reference_ready(capacity: int, ret: int, taken: list[int], deliveries: list[tuple],
                     n: int, now: int) -> int | None:
    """First cycle >= now at which a per-cycle counter holds `n` credits; None if never."""
    returns = []                         # cycle each delivered atom's credit is counted
    for start, c, k in deliveries:
        returns += [start + (j + 1) * c + ret for j in range(k)]
    for t in range(now, now + 10_000):
        if capacity - sum(taken) + sum(1 for r in returns if r <= t) >= n:
            return t
    return None


@pytest.mark.parametrize("seed", range(40))
def test_credit_counter_matches_a_cycle_by_cycle_counter(seed):
    rnd = random.Random(seed)
    capacity, ret = 16, rnd.choice((0, 2, 4))
    credits = DeliveryCredits(capacity, ret)
    taken, deliveries = [], []
    now, free = 0, 0
    for _ in range(12):
        n = rnd.choice((16, 16, 8, 4, 12, 1))
        got = credits.ready(n, now)
        want = _reference_ready(capacity, ret, taken, deliveries, n, now)
        assert got == want, (seed, n, now, taken, deliveries)
        now = got
        credits.take(n)
        taken.append(n)
        c = rnd.choice((9, 5, 3))
        start = max(free, now + rnd.randint(1, 40))     # CACC starts after its previous stripe
        credits.deliver(start, c, n)
        deliveries.append((start, c, n))
        free = start + n * c
        now += rnd.randint(0, 150)


def test_credits_wait_for_a_stripe_cacc_has_not_taken():
    credits = DeliveryCredits(16, 4)
    credits.take(16)
    assert credits.ready(8, 100) is None              # nothing booked: CSC must wait for CACC
    credits.deliver(120, 9, 16)
    assert credits.ready(8, 100) == 120 + 8 * 9 + 4   # half the previous stripe back


def _delivery_starts(eng) -> list[float]:
    return sorted(s for unit, kind, s, e, label in eng.activity.spans
                  if unit == "CACC" and kind == "busy")


def test_credit_bound_stripes_follow_the_rtl_period():
    """1x1 over 64 channels: 8 packages of 16 cycles (128) per stripe, CACC 9 x 16 = 144: the
    stripes go at the credit loop's pace, 182 cycles each (the RTL's)."""
    _, eng, _ = run_conv(w=32, h=16, c=64, r=1, s=1, k=8)
    starts = _delivery_starts(eng)
    assert len(starts) == 32
    gaps = {b - a for a, b in zip(starts[1:], starts[2:])}
    assert gaps == {182}
    assert eng.activity.totals()["CSC"].get("stall", 0) >= 31 * (182 - 128) - 1


def test_csc_bound_stripes_keep_the_package_rate():
    """1x1 over 128 channels: 16 packages of 16 cycles = 256 per stripe > the credit loop."""
    _, eng, _ = run_conv(w=32, h=16, c=128, r=1, s=1, k=8)
    starts = _delivery_starts(eng)
    gaps = {b - a for a, b in zip(starts[1:], starts[2:])}
    assert gaps == {256}


def test_short_stripe_needs_only_its_own_credits():
    """A stripe of 8 atoms after one of 16 issues when 8 atoms of the 16 have left (the RTL
    returns credits atom by atom), early enough for CACC to deliver it right after the 16:
    40 output atoms are stripes of 16, 8 and 16."""
    assert NV_SMALL.atomic_k == 8
    _, eng, _ = run_conv(w=40, h=1, c=64, r=1, s=1, k=8)
    spans = sorted((s, e) for unit, kind, s, e, label in eng.activity.spans
                   if unit == "CACC" and kind == "busy")
    assert spans[0][1] - spans[0][0] == (16 + 8) * 9      # no gap between the first two
    assert len(spans) == 2                                # the last 16 waits for all its credits
