"""Timelines: the Perfetto trace's nesting rule, layer names, level of detail, memory bandwidth
never above the interface's cap, and the PNGs (nvdla_sim/report/timeline.py, plots.py)."""
from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from nvdla_sim.engine.activity import ActivityLog
from nvdla_sim.report.timeline import (MemoryTrack, bandwidth, covered, data_windows,
                                       merge_intervals, nesting_violations, pack_nested,
                                       trace_events, write_trace_events)

REPO = Path(__file__).resolve().parent.parent


def _overlaps_without_nesting(a, b) -> bool:
    disjoint = a[1] <= b[0] or b[1] <= a[0]
    nested = (a[0] <= b[0] and b[1] <= a[1]) or (b[0] <= a[0] and a[1] <= b[1])
    return not (disjoint or nested)


def test_pack_nested_puts_only_nesting_spans_on_a_lane():
    rng = random.Random(7)
    for _ in range(200):
        spans = []
        for _ in range(rng.randint(1, 40)):
            s = rng.randint(0, 100)
            spans.append((s, s + rng.randint(1, 30)))
        lanes = pack_nested(spans)
        for i in range(len(spans)):
            for j in range(i + 1, len(spans)):
                if lanes[i] == lanes[j]:
                    assert not _overlaps_without_nesting(spans[i], spans[j]), (spans[i], spans[j])
        # A lane is only opened when the span nests on none of the earlier ones.
        assert max(lanes) < len(spans)


def test_nesting_checker_finds_an_overlap():
    ok = [{"ph": "X", "pid": 1, "tid": 1, "name": "a", "ts": 0.0, "dur": 10.0},
          {"ph": "X", "pid": 1, "tid": 1, "name": "b", "ts": 2.0, "dur": 3.0},
          {"ph": "X", "pid": 1, "tid": 1, "name": "c", "ts": 10.0, "dur": 1.0},
          {"ph": "X", "pid": 1, "tid": 2, "name": "d", "ts": 5.0, "dur": 10.0}]
    assert nesting_violations(ok) == []
    bad = ok + [{"ph": "X", "pid": 1, "tid": 1, "name": "e", "ts": 9.0, "dur": 1.5}]
    found = nesting_violations(bad)                      # e crosses a's end and c's start
    assert len(found) == 2 and all("'e'" in f for f in found)


def test_intervals_merge_and_cover():
    s, e = merge_intervals(np.array([0., 5, 2, 20]), np.array([3., 6, 4, 30]))
    assert s.tolist() == [0, 5, 20] and e.tolist() == [4, 6, 30]
    s, e = merge_intervals(np.array([0., 5]), np.array([3., 6]), gap=2.5)
    assert s.tolist() == [0] and e.tolist() == [6]
    edges = np.array([0., 10, 20, 30])
    assert covered(np.array([5., 18]), np.array([12., 25]), edges).tolist() == [5, 4, 5]


def test_memory_bandwidth_keeps_bytes_and_the_cap():
    """Overlapping requests (latency windows) spread over the data bus: per bin never above the
    cap, and every byte is somewhere."""
    rng = random.Random(3)
    transfers = []
    t = 0.0
    for _ in range(500):
        t += rng.uniform(0, 160)        # the interface model keeps the load under the cap
        nbytes = rng.choice([64, 256, 1024])
        direction = rng.choice(["read", "write"])
        transfers.append((t, t + 100 + nbytes / 8 + rng.uniform(0, 50), "X", direction, nbytes))
    edges = np.linspace(0, t + 400, 301)
    for shared in (None, 8.0):
        track = MemoryTrack("DRAM (MCIF)", transfers, 8.0, shared, 20.0)
        bw, cap, is_shared = bandwidth(track, edges)
        width = edges[1] - edges[0]
        total = (bw["read"].sum() + bw["write"].sum()) * width
        assert total == pytest.approx(sum(x[4] for x in transfers), rel=1e-9)
        if is_shared:
            assert (bw["read"] + bw["write"]).max() <= cap * (1 + 1e-9)
        else:
            assert max(bw["read"].max(), bw["write"].max()) <= cap * (1 + 1e-9)
        s, e, rate = data_windows(track, None if shared else "read")
        order = np.argsort(s)
        assert np.all(s[order][1:] >= e[order][:-1] - 1e-9)     # disjoint windows


def test_summary_detail_merges_and_counts():
    log = ActivityLog()
    for i in range(5000):
        log.add("CSC", "busy", 10 * i, 10 * i + 6, "busy")
        log.add("CSC", "stall", 10 * i + 6, 10 * i + 9, "empty x")
    log.add("CSC", "busy", 1_000_000, 1_000_010)        # resolution 50 cycles: the rest merge
    tr = [MemoryTrack("DRAM (MCIF)", [(10.0 * i, 10.0 * i + 40, "CDMA_DAT", "read", 32)
                                      for i in range(5000)], 8.0, None, 0.0)]
    full, used = trace_events(log, tr, detail="full")
    assert used == "full" and nesting_violations(full) == []
    summary, used = trace_events(log, tr, detail="summary")
    assert used == "summary" and nesting_violations(summary) == []
    busy = [e for e in summary if e.get("cat") == "busy"]
    assert [(e["ts"], e["dur"]) for e in busy] == [(0.0, 49.996), (1000.0, 0.01)]
    assert len(summary) < len(full) / 3
    assert not any(e.get("cat") == "memory" for e in summary)          # counters instead
    assert any(e["ph"] == "C" for e in summary)
    with pytest.raises(Exception, match="detail"):
        trace_events(log, tr, detail="everything")


def _scenario(tmp_path: Path, name: str) -> Path:
    """The shipped scenario, timing only, with the timeline on, writing into tmp_path."""
    import yaml
    doc = yaml.safe_load((REPO / "scenarios" / f"{name}.yaml").read_text())
    doc["mode"] = "timing-only"
    doc["outputs"] = {**doc.get("outputs", {}), "directory": str(tmp_path / name),
                      "timeline": True, "plots": True}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _run(path: Path):
    from nvdla_sim.scenario.runner import execute, prepare
    from nvdla_sim.scenario.schema import load_scenario
    scn = load_scenario(path)
    return execute(prepare(scn)), Path(scn.outputs.directory)


def _check_trace(trace: Path, rep) -> list[dict]:
    doc = json.loads(trace.read_text())
    events = doc["traceEvents"]
    assert nesting_violations(events) == []
    layer_slices = [e for e in events if e.get("ph") == "X" and e["pid"] == 1]
    dla = [r.layer for r in rep.rows if r.device == "DLA" and r.cycles]
    assert [e["name"] for e in sorted(layer_slices, key=lambda e: e["ts"])] == dla
    # Every hardware layer of a unit is named after the network layer it ran in.
    unit_layers = {e["name"] for e in events if e.get("cat") == "layer" and e["pid"] == 2}
    assert unit_layers and unit_layers <= set(dla)
    return events


def test_tinymix_timeline_names_layers_and_shows_cvsram(tmp_path):
    rep, out = _run(_scenario(tmp_path, "tinymix_nv_large"))
    events = _check_trace(out / "timeline.trace.json", rep)
    counters = {e["name"] for e in events if e["ph"] == "C"}
    assert counters == {"DRAM (MCIF) bytes/cycle", "CVSRAM (CVIF) bytes/cycle"}
    cvsram = [e["args"] for e in events if e["name"] == "CVSRAM (CVIF) bytes/cycle"]
    assert max(a["read"] + a["write"] for a in cvsram) > 0
    assert json.loads((out / "timeline.trace.json").read_text())["otherData"]["detail"] == "full"
    assert (out / "timeline.png").stat().st_size > 10_000


def test_resnet50_trace_is_small_and_nests(tmp_path):
    rep, out = _run(_scenario(tmp_path, "resnet50_nv_large"))
    trace = out / "timeline.trace.json"
    assert trace.stat().st_size < 4_000_000              # was 34 MB: opens in Perfetto/Chrome
    events = _check_trace(trace, rep)
    assert len([e for e in events if e.get("ph") == "X" and e["pid"] == 1]) == 54
    from matplotlib.image import imread
    png = imread(out / "layer_cycles.png")
    assert png.shape[0] > 1000                           # a row per layer: 54 legible labels


def test_write_trace_events_accepts_a_bare_transfer_list(tmp_path):
    log = ActivityLog()
    log.add("PDP", "busy", 0, 50)
    used = write_trace_events(log, [(0.0, 30.0, "PDP_WDMA", "write", 64)], tmp_path / "t.json")
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert used == "full" and nesting_violations(events) == []
    assert any(e.get("cat") == "memory" for e in events)
