"""The span merge in C (kernels/span_merge.pyx, issue 20) against the straightforward loop,
bit for bit, on both of its paths: a key whose spans come in order of start (merged as they
come, one pass) and a key whose starts go back somewhere (gathered and sorted in a second pass),
over segments of tuples and of columns, shifted or not, from a position inside a segment on,
clipped or not, filtered by kind and units.

The reference is tests/test_speed_spans.py's loop (sort the (start, end) pairs of a key, extend
or close the current group, add the groups' lengths from the left)."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from nvdla_sim.kernels.span_merge import merge_spans, merged_length
from test_speed_spans import DISJOINT, KINDS, LABELS, UNITS, loop_length, loop_totals, ordered

# times with ties, touching spans and sums that round (far from zero too)
offsets = st.sampled_from((0.0, 0.3, 1e6 + 0.1, 3.7e9))
steps = st.integers(0, 6).map(lambda i: i * 0.1 + (i % 3) * 1e-9)
lengths = st.integers(0, 12).map(lambda n: n * 0.7 + (n % 2) * 0.1)


@st.composite
def in_order(draw) -> list[tuple]:
    """Spans whose starts never go back within a key (the log's usual order): the one-pass
    path.  Zero-length spans, equal starts and spans nested in others included."""
    base = draw(offsets)
    now = {key: base for key in ((u, k) for u in UNITS for k in KINDS)}
    out = []
    for unit, kind, step, length, label in draw(st.lists(st.tuples(
            st.sampled_from(UNITS[:3]), st.sampled_from(KINDS), steps, lengths,
            st.sampled_from(LABELS)), max_size=60)):
        s = now[unit, kind] = now[unit, kind] + step
        out.append((unit, kind, s, s + length, label))
    return out


def as_columns(spans: list[tuple]) -> tuple:
    keys: dict = {}
    key_idx = np.array([keys.setdefault(sp[:2], len(keys)) for sp in spans], np.intp)
    return (list(keys), key_idx, np.array([sp[2] for sp in spans], float),
            np.array([sp[3] for sp in spans], float))


def segments_of(spans: list[tuple], cuts: list[int], shifts: list) -> tuple[list, list]:
    """`spans` cut into segments at `cuts`, alternately tuples and columns; a column segment
    with a shift holds its spans `shift` earlier (the reference gets `shift + start`)."""
    bounds = [0, *sorted(set(c % (len(spans) + 1) for c in cuts)), len(spans)]
    segs, ref = [], []
    for i, (a, b) in enumerate(zip(bounds, bounds[1:])):
        part = spans[a:b]
        shift = shifts[i % len(shifts)]
        if i % 2 == 0 or not part:
            segs.append((0, part))
            ref += part
            continue
        keys, key_idx, starts, ends = as_columns(part)
        if shift is None:
            segs.append((0, keys, key_idx, starts, ends, None))
            ref += part
        else:
            segs.append((0, keys, key_idx, starts - shift, ends - shift, shift))
            ref += [(u, k, shift + (s - shift), shift + (e - shift), lab)
                    for u, k, s, e, lab in part]
    return segs, ref


def check(segs, ref, clip) -> None:
    assert ordered(merge_spans(segs)) == ordered(loop_totals(ref))
    for kind, units in (("busy", None), (None, {"SDP", "CACC"}), ("stall", {"CSC"})):
        got = merge_spans(segs, kind, units, clip)
        assert ordered(got) == ordered(loop_totals(ref, kind, units, clip))


@settings(max_examples=300, deadline=None)
@given(in_order(), st.lists(st.integers(0, 100), max_size=4),
       st.lists(st.sampled_from((None, 0.0, 0.1, 123456.789, 1e6 + 0.3)), min_size=1,
                max_size=3),
       steps, lengths)
def test_spans_in_order_merge_as_the_loop(spans, cuts, shifts, lo, width):
    segs, ref = segments_of(spans, cuts, shifts)
    check(segs, ref, (lo, lo + width))


@settings(max_examples=300, deadline=None)
@given(in_order(), st.randoms(use_true_random=False), st.lists(st.integers(0, 100), max_size=4),
       st.lists(st.sampled_from((None, 0.0, 0.1, 123456.789)), min_size=1, max_size=3),
       steps, lengths)
def test_spans_out_of_order_merge_as_the_loop(spans, rng, cuts, shifts, lo, width):
    rng.shuffle(spans)                          # starts go back (the sorting path)
    segs, ref = segments_of(spans, cuts, shifts)
    check(segs, ref, (lo, lo + width))


@settings(max_examples=200, deadline=None)
@given(in_order(), st.integers(0, 60), st.integers(0, 60), st.booleans())
def test_from_a_position_inside_a_segment(spans, cut, first, columns):
    """(first, ...) counts a segment's spans from `first` on, the rest of the log after it."""
    cut = min(cut, len(spans))
    first = min(first, cut)
    head, tail = spans[:cut], spans[cut:]
    seg = (first, *as_columns(head), None) if columns and head else (first, head)
    assert ordered(merge_spans([seg, (0, tail)])) == ordered(loop_totals(spans[first:]))


def test_a_key_going_back_in_a_later_segment_only():
    """Each segment alone in order, the key's starts go back across them; other keys stay on
    the one-pass path, and the order of units and kinds is the first counted span's."""
    first = [("SDP", "busy", 5.0, 7.0, ""), ("CACC", "busy", 0.1, 0.4, ""),
             ("SDP", "busy", 7.0, 9.3, "")]
    later = [("SDP", "stall", 1.0, 1.1, ""), ("SDP", "busy", 1.0, 6.2, ""),
             ("CACC", "busy", 0.4, 0.9, "")]
    keys, key_idx, starts, ends = as_columns(later)
    segs = [(0, first), (0, keys, key_idx, starts, ends, None)]
    got = merge_spans(segs)
    assert ordered(got) == ordered(loop_totals(first + later))
    assert got["SDP"]["busy"] == 9.3 - 1.0
    assert list(got) == ["SDP", "CACC"] and list(got["SDP"]) == ["busy", "stall"]


def test_groups_added_from_the_left_on_both_paths():
    """DISJOINT's lengths sum to another float pairwise; in order and reversed both give the
    loop's left-to-right sum."""
    s = np.array([a for a, _ in DISJOINT])
    e = np.array([b for _, b in DISJOINT])
    for order in (slice(None), slice(None, None, -1)):
        assert merged_length(s[order], e[order]) == loop_length(DISJOINT)
        spans = [("SDP", "busy", a, b, "") for a, b in zip(s[order], e[order])]
        assert merge_spans([(0, spans)]) == {"SDP": {"busy": loop_length(DISJOINT)}}
    assert merged_length(np.empty(0), np.empty(0)) == 0.0
    assert merge_spans([]) == {} and merge_spans([(0, [])], clip=(0.0, 1.0)) == {}
