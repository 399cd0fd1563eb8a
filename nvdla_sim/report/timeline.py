"""Timelines of a run: Chrome/Perfetto trace-event JSON and a matplotlib utilization plot."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..engine.activity import ActivityLog


def write_trace_events(log: ActivityLog, transfers: list, path: Path, clock_mhz: float = 1000.0,
                       name: str = "nvdla-sim") -> None:
    """One track per unit (busy and stall spans) and one per memory client; ts in microseconds."""
    us_per_cycle = 1.0 / clock_mhz
    units = sorted({s[0] for s in log.spans})
    tids = {u: i + 1 for i, u in enumerate(units)}
    events = [{"ph": "M", "pid": 1, "name": "process_name", "args": {"name": name}}]
    for u, tid in tids.items():
        events.append({"ph": "M", "pid": 1, "tid": tid, "name": "thread_name", "args": {"name": u}})
    for unit, kind, start, end, label in log.spans:
        events.append({"ph": "X", "pid": 1, "tid": tids[unit], "name": label or kind, "cat": kind,
                       "ts": start * us_per_cycle, "dur": (end - start) * us_per_cycle,
                       "args": {"start_cycle": start, "end_cycle": end}})
    clients = sorted({(t[2], t[3]) for t in transfers})
    ctids = {c: 1000 + i for i, c in enumerate(clients)}
    for c, tid in ctids.items():
        events.append({"ph": "M", "pid": 2, "tid": tid, "name": "thread_name",
                       "args": {"name": f"mem {c[0]} {c[1]}"}})
    events.append({"ph": "M", "pid": 2, "name": "process_name", "args": {"name": "memory"}})
    for start, end, client, direction, nbytes in transfers:
        events.append({"ph": "X", "pid": 2, "tid": ctids[(client, direction)],
                       "name": f"{direction} {nbytes} B", "ts": start * us_per_cycle,
                       "dur": max(end - start, 1) * us_per_cycle, "args": {"bytes": nbytes}})
    path.write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ns"}))


def plot_utilization(log: ActivityLog, transfers: list, path: Path, total_cycles: float,
                     title: str = "", bins: int = 100) -> None:
    """Per-unit busy fraction and memory bandwidth (bytes/cycle) over time, as a PNG."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    total = max(total_cycles, 1.0)
    edges = np.linspace(0.0, total, bins + 1)
    width = edges[1] - edges[0]
    units = sorted({s[0] for s in log.spans if s[1] == "busy"})
    fig, (ax_u, ax_m) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    for unit in units:
        busy = np.zeros(bins)
        for u, kind, s, e, _ in log.spans:
            if u != unit or kind != "busy":
                continue
            busy += np.clip(np.minimum(edges[1:], e) - np.maximum(edges[:-1], s), 0, None)
        ax_u.plot(edges[:-1], busy / width, label=unit)
    ax_u.set_ylabel("busy fraction")
    ax_u.set_ylim(0, 1.05)
    if units:
        ax_u.legend(loc="upper right", fontsize="small", ncol=3)
    for direction in ("read", "write"):
        bw = np.zeros(bins)
        for s, e, _, d, nbytes in transfers:
            if d != direction:
                continue
            span = max(e - s, 1.0)
            overlap = np.clip(np.minimum(edges[1:], e) - np.maximum(edges[:-1], s), 0, None)
            bw += overlap / span * nbytes
        ax_m.plot(edges[:-1], bw / width, label=direction)
    ax_m.set_ylabel("memory bytes/cycle")
    ax_m.set_xlabel("cycle")
    ax_m.legend(loc="upper right", fontsize="small")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
