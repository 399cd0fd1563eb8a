"""The activity log's spans as columns (kernels/span_columns.pyx) against a plain reference:
each field's distinct values numbered in order of first appearance, starts and ends as float64."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from nvdla_sim.engine.activity import ActivityLog, SpanBlock
from nvdla_sim.kernels.span_columns import span_columns

SPANS = st.lists(st.tuples(st.sampled_from(["CSC", "CACC", "SDP", "CDMA_WT"]),
                           st.sampled_from(["busy", "stall"]),
                           st.one_of(st.integers(0, 10 ** 6), st.floats(0, 1e9)),
                           st.floats(0, 1e9),
                           st.sampled_from(["busy", "read", "no CACC credits", ""])),
                 max_size=60)


def _reference(spans: list, field: int) -> tuple[list, list]:
    """The field's values in order of first appearance, and each span's number among them."""
    order: dict = {}
    codes = [order.setdefault(s[field], len(order)) for s in spans]
    return list(order), codes


@given(SPANS)
@settings(max_examples=200, deadline=None)
def test_span_columns_number_values_by_first_appearance(spans):
    units, unit_idx, kinds, kind_idx, labels, label_idx, starts, ends = span_columns(spans)
    for field, values, codes in ((0, units, unit_idx), (1, kinds, kind_idx),
                                 (4, labels, label_idx)):
        ref_values, ref_codes = _reference(spans, field)
        assert values == ref_values
        assert codes.dtype == np.intp and codes.tolist() == ref_codes
    assert starts.dtype == np.float64 and starts.tolist() == [float(s[2]) for s in spans]
    assert ends.tolist() == [float(s[3]) for s in spans]


@given(SPANS)
@settings(max_examples=100, deadline=None)
def test_a_frozen_block_gives_back_the_spans(spans):
    log = ActivityLog()
    for span in spans:
        log.add(*span)
    kept = [s for s in spans if s[3] > s[2]]
    block = log.freeze_since(0)
    assert isinstance(block, SpanBlock) and len(block) == len(kept)
    assert log.spans == [(u, k, float(a), float(b), lab) for u, k, a, b, lab in kept]
