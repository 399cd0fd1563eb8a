"""The activity log's columns (engine/activity.py, issue 20) give the figures of the
straightforward span list, bit for bit.

The reference here is the loop the log used before it kept columns: one (unit, kind, start, end,
label) tuple per span, per (unit, kind) the (start, end) pairs sorted and merged, the merged
groups' lengths added from the left.  Random logs (hypothesis) mix spans added one by one,
frozen blocks and blocks replayed at a shift, with ties, touching and nested spans and shifts
that round; ResNet-50 (timing-only, the step cache replaying steps) compares the run's unit
totals and every step's busy cycles with the reference on the same spans.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import given, settings, strategies as st

from nvdla_sim.compiler import lower
from nvdla_sim.engine.activity import ActivityLog, SpanBlock, merged_length

ROOT = Path(__file__).resolve().parent.parent
UNITS = ("SDP", "CACC", "CSC", "CMAC_A", "PDP")
KINDS = ("busy", "stall", "layer")
LABELS = ("busy", "layer g0", "layer g1", "full x")


# -- the reference: the straightforward loop -----------------------------------------------------
def loop_length(intervals) -> float:
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def loop_totals(spans, kind=None, units=None, clip=None) -> dict[str, dict[str, float]]:
    """Per unit and kind in the order of their first counted span (what the reports print)."""
    by_key: dict[tuple[str, str], list] = {}
    for unit, k, s, e, _ in spans:
        if (kind is not None and k != kind) or (units is not None and unit not in units):
            continue
        if clip is not None:
            s, e = max(s, clip[0]), min(e, clip[1])
            if not e > s:
                continue
        by_key.setdefault((unit, k), []).append((s, e))
    out: dict[str, dict[str, float]] = {}
    for (unit, k), intervals in by_key.items():
        out.setdefault(unit, {})[k] = loop_length(intervals)
    return out


def ordered(totals: dict) -> list:
    """The totals with their order (dict equality ignores it; ties of a bound follow it)."""
    return [(u, list(kinds.items())) for u, kinds in totals.items()]


# -- random logs ---------------------------------------------------------------------------------
# times on a coarse grid of awkward fractions: many ties, touching and nested spans, and sums
# that round
times = st.integers(0, 40).map(lambda i: i * 0.1 + (i % 3) * 1e-9)
spans_st = st.lists(st.tuples(st.sampled_from(UNITS), st.sampled_from(KINDS), times,
                              st.integers(0, 12).map(lambda n: n * 0.3),
                              st.sampled_from(LABELS)), max_size=25)


@st.composite
def interval_lists(draw) -> list[tuple[float, float]]:
    """Intervals on an awkward grid (tenths, far from zero or not: sums round), many of them
    disjoint (many groups: a pairwise sum would differ from the loop's), some starting exactly
    where an earlier one ends (touching: one group, not two)."""
    base = draw(st.sampled_from((0.0, 0.3, 1e6 + 0.1, 3.7e9)))
    out: list[tuple[float, float]] = []
    for anchor, i, n in draw(st.lists(st.tuples(st.integers(-1, 30), st.integers(0, 2000),
                                                st.integers(0, 9)), min_size=1, max_size=80)):
        s = out[anchor][1] if 0 <= anchor < len(out) else base + i * 0.1
        out.append((s, s + n * 0.7 + (n % 2) * 0.1))     # zero-length spans too (n = 0)
    return out


@settings(max_examples=400, deadline=None)
@given(interval_lists())
def test_merged_length_is_the_loop_bit_for_bit(intervals):
    got = merged_length(np.array([s for s, _ in intervals]), np.array([e for _, e in intervals]))
    assert got == loop_length(intervals)


# Two cases where a shortcut would give another float: disjoint groups whose lengths a pairwise
# sum (np.sum) adds to another value than the loop's left-to-right sum, and two spans that
# touch (one group for the loop: 8.1 - 0.7, not (6.4 - 0.7) + (8.8 - 6.4)).
DISJOINT = [(0.1, 1.6), (2.8, 5.699999999999999), (6.8999999999999995, 9.1), (9.4, 13.7),
            (14.6, 21.0), (21.9, 23.4), (24.599999999999998, 26.099999999999998),
            (27.599999999999998, 32.599999999999994), (32.89999999999999, 37.19999999999999),
            (38.69999999999999, 45.09999999999999), (45.399999999999984, 46.19999999999998),
            (47.399999999999984, 49.59999999999999)]
TOUCHING = [(6.3999999999999995, 8.799999999999999), (0.7000000000000001, 6.3999999999999995)]


def test_merged_length_where_shortcuts_round_otherwise():
    lengths = np.array([e - s for s, e in DISJOINT])
    assert float(np.sum(lengths)) != loop_length(DISJOINT)          # the case tells them apart
    (a, b), (c, d) = sorted(TOUCHING)
    assert (b - a) + (d - c) != d - a
    for intervals in (DISJOINT, TOUCHING, DISJOINT[::-1] + TOUCHING):
        got = merged_length(np.array([s for s, _ in intervals]),
                            np.array([e for _, e in intervals]))
        assert got == loop_length(intervals)


def _relabel(label: str) -> str:
    return {"layer g0": "layer g1", "layer g1": "layer g0"}.get(label, label)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(("add", "freeze", "replay")), spans_st,
                          st.sampled_from((0.0, 0.1, 1e6 + 0.3, 123456.789)),
                          st.booleans()), max_size=6),
       times, times)
def test_log_of_segments_is_the_span_list(ops, lo, width):
    log, ref, frozen, marks = ActivityLog(), [], [], [0]
    live = 0                    # where the spans added one by one since the last block begin
    for op, spans, shift, flip in ops:
        if op == "add":
            for unit, kind, s, d, label in spans:
                log.add(unit, kind, s, s + d, label)
                if d > 0:
                    ref.append((unit, kind, s, s + d, label))
            marks.append(log.mark())
        elif op == "freeze":            # a recorded step: its spans become a block in place
            block = log.freeze_since(live)
            if len(block):
                frozen.append(block)
            live = log.mark()
        elif frozen:                    # a replay: a frozen block, relative, shifted
            block = frozen[-1]
            t0 = float(block.starts.min())
            labels = [_relabel(x) if flip else x for x in block.labels]
            rel = block.relative(t0, block.labels)
            log.append_block(rel, shift, labels)
            keys, idx = rel.keys, rel.key_idx.tolist()
            ref += [(*keys[k], shift + (s - t0), shift + (e - t0), labels[lab])
                    for k, s, e, lab in zip(idx, block.starts.tolist(), block.ends.tolist(),
                                            rel.label_idx.tolist())]
            live = log.mark()
            marks.append(live)
    assert len(log) == len(ref)
    assert list(log.iter_spans()) == ref
    assert ordered(log.totals()) == ordered(loop_totals(ref))
    clip = (lo, lo + width)
    for since in sorted(set(marks)):
        for kind, units in ((None, None), ("busy", {"SDP", "CMAC_A"}), ("stall", None)):
            got = log.merged(kind, units, since, clip)
            assert ordered(got) == ordered(loop_totals(ref[since:], kind, units, clip))
    assert log.spans == ref                         # materialised: the same list from then on
    assert ordered(log.totals()) == ordered(loop_totals(ref))


def test_block_round_trip_and_relative_times():
    spans = [("SDP", "busy", 10.1, 12.3, "busy"), ("CACC", "stall", 10.2, 10.7, "empty"),
             ("SDP", "layer", 10.0, 40.0, "layer g1")]
    block = SpanBlock.from_spans(spans)
    log = ActivityLog()
    log.append_block(block.relative(10.1, ["busy", "empty", "layer g0"]), 1000.05,
                     ["busy", "empty", "layer g0"])
    assert list(log.iter_spans()) == [(u, k, 1000.05 + (s - 10.1), 1000.05 + (e - 10.1),
                                       "layer g0" if lab.startswith("layer") else lab)
                                      for u, k, s, e, lab in spans]


# -- a network: the run's totals and each step's busy cycles against the loop ---------------------
def test_resnet50_totals_and_step_busy_match_the_loop(monkeypatch):
    from nvdla_sim.engine import step_cache
    from nvdla_sim.scenario.runner import context, prepare
    from nvdla_sim.scenario.schema import load_scenario
    monkeypatch.delenv(step_cache.ENV_OFF, raising=False)
    scn = load_scenario(ROOT / "scenarios" / "resnet50_nv_large.yaml")
    scn.mode = "timing"
    prep = prepare(scn)
    steps = []
    fast_busy = lower._busy

    def checked_busy(activity, since, start, end):
        got = fast_busy(activity, since, start, end)
        spans = list(activity.iter_spans())[since:]
        want = {u: k["busy"] for u, k in
                loop_totals(spans, "busy", lower.CORE_UNITS, (start, end)).items()}
        steps.append((list(got.items()), list(want.items())))
        return got

    monkeypatch.setattr(lower, "_busy", checked_busy)
    result = lower.lower_and_run(prep.plan, context(prep))
    engine = result.engine_result.engine
    assert engine.step_cache.replayed > 0          # blocks replayed at a shift are in the log
    assert any(type(seg) is not list for seg in engine.activity._segments)
    assert steps and all(got == want for got, want in steps)
    want = loop_totals(engine.activity.iter_spans())
    assert ordered(engine.activity.totals()) == ordered(want)
    summary = result.engine_result.unit_stats
    for unit, stats in summary.items():
        assert stats["busy_cycles"] == want[unit].get("busy", 0.0)
        assert stats["stall_cycles"] == want[unit].get("stall", 0.0)
        assert stats["active_cycles"] == want[unit].get("layer", 0.0)



# -- VP layer report: the stretches' units, bytes and bounds against straightforward loops --------
def test_vp_layers_match_loops_over_spans_and_transfers(tmp_path):
    from nvdla_sim.config import load_hardware
    from nvdla_sim.engine import Engine
    from nvdla_sim.frontends.vp_trace import parse_vp
    from nvdla_sim.frontends.vp_writer import write_vp_trace
    from nvdla_sim.report.vp_layers import CORES, LAYER_UNITS, _interface_cycles, vp_layers
    from nvdla_sim.scenario.runner import context, prepare
    from nvdla_sim.scenario.schema import load_scenario
    scn = load_scenario(ROOT / "scenarios" / "lenet5_nv_full_fp16.yaml")
    scn.mode = "timing-only"
    prep = prepare(scn)
    ctx = context(prep)
    folder = write_vp_trace(lower.lower(prep.plan, ctx, name="lenet5").program, ctx.hw,
                            tmp_path / "lenet5")
    result = Engine(load_hardware("nv_full"), "ideal", compute_values=False).run(parse_vp(folder))
    layers = vp_layers(result)
    engine = result.engine
    spans = list(engine.activity.iter_spans())
    memifs = [m for m in (engine.mcif, engine.cvif) if m]
    assert len(layers) >= 5 and len({x.bound for x in layers}) >= 2
    for i, layer in enumerate(layers):
        start, end, last = layer.start, layer.end, i == len(layers) - 1
        units = []
        for unit, kind, s, e, _ in spans:
            if kind == "layer" and unit in LAYER_UNITS and start < e <= end and unit not in units:
                units.append(unit)
        assert layer.units == units
        per_client, cand = {}, {}
        for memif in memifs:
            read = write = 0
            for t0, _, client, direction, nbytes in memif.transfers:
                if start <= t0 < end or (last and t0 >= end):
                    key = client if memif is engine.mcif else f"{client}@{memif.name}"
                    per_client.setdefault(key, {"read": 0, "write": 0})[direction] += nbytes
                    read += nbytes if direction == "read" else 0
                    write += nbytes if direction == "write" else 0
            cand["memory"] = max(cand.get("memory", 0.0), _interface_cycles(memif, read, write))
        assert list(layer.bytes.items()) == list(per_client.items())
        for unit, kinds in loop_totals(spans, "busy", CORES, (start, end)).items():
            cand[CORES[unit]] = kinds["busy"]
        working = loop_length([(max(s, start), min(e, end)) for _, k, s, e, _ in spans
                               if k == "layer" and min(e, end) > max(s, start)])
        best = max(cand, key=cand.get)
        assert layer.bound == ("CSB" if working < 0.5 * layer.cycles else best)
