"""Timelines of a run: a Chrome/Perfetto trace (trace-event JSON) and a Gantt-style PNG.

Both read the engine's ActivityLog (busy / stall / layer spans per unit) and the memory
interfaces' transfer records.  Perfetto drops slices that overlap on one track without nesting, so
every track here is packed by `pack_nested`: a span goes on the first lane of its (unit, kind)
where it nests, or opens a new lane ("CDMA_WT stall #2", one per outstanding request slot for
memory).  Long runs get a level of detail: `detail="summary"` merges a unit's spans closer than
the trace's resolution and shows memory as bytes/cycle counters instead of one slice per request.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from ..engine.activity import ActivityLog
from ..errors import NvdlaSimError

# Pipeline order of the tracks and the PNG rows (units not listed follow, by name).
UNIT_ORDER = ("BDMA", "CDMA", "CDMA_DAT", "CDMA_WT", "CSC", "CMAC_A", "CMAC_B", "CACC",
              "SDP_RDMA", "SDP", "SDP_WDMA", "PDP_RDMA", "PDP", "PDP_WDMA", "CDP_RDMA", "CDP",
              "CDP_WDMA", "RUBIK")
DETAILS = ("auto", "full", "summary")
AUTO_FULL_LIMIT = 40_000          # spans + transfers up to which "auto" writes every one
SUMMARY_RESOLUTION = 20_000       # summary: spans closer than run/this are merged
COUNTER_BINS = 2_000              # memory counters: samples per run


@dataclass
class MemoryTrack:
    """One memory interface as the timeline draws it."""
    name: str                      # "DRAM (MCIF)" / "CVSRAM (CVIF)"
    transfers: list                # (start, end, client, direction, bytes) as memif records them
    bus_bytes_per_cycle: float     # what one direction's data bus carries per cycle
    shared_bytes_per_cycle: float | None = None   # a cap both directions share, if any
    write_latency_cycles: float = 0.0             # a write's record ends this long after its data


@dataclass
class LayerSpan:
    """A network layer (or a hardware layer in a replay) and the cycles it ran."""
    name: str
    start: float
    end: float


def memory_tracks(engine) -> list[MemoryTrack]:
    """The engine's interfaces: DRAM always, CVSRAM when the configuration has one."""
    out = []
    for memif, label in ((engine.mcif, "DRAM (MCIF)"), (getattr(engine, "cvif", None), "CVSRAM (CVIF)")):
        if memif is None:
            continue
        out.append(MemoryTrack(label, memif.transfers, float(memif.bus_bytes_per_cycle),
                               memif.shared_bytes_per_cycle,
                               float(memif.profile.write_latency_cycles)))
    return out


def network_layer_spans(rows: Iterable, hw_timings: Iterable) -> list[LayerSpan]:
    """Network layers (report rows: `.layer`, `.hw_layers`) over the cycles their hardware layers
    (`.name`, `.start_cycle`, `.end_cycle`) ran; layers that took no DLA cycles are left out."""
    by_name = {t.name: t for t in hw_timings}
    out = []
    for row in rows:
        hw = [by_name[h] for h in getattr(row, "hw_layers", ()) if h in by_name]
        if not hw:
            continue
        start = min(t.start_cycle for t in hw)
        end = max(t.end_cycle for t in hw)
        if end > start:
            out.append(LayerSpan(row.layer, start, end))
    return sorted(out, key=lambda s: s.start)


def _as_tracks(transfers) -> list[MemoryTrack]:
    """Accept MemoryTracks, or a bare transfer list (one interface, cap from the records)."""
    if not transfers:
        return []
    if isinstance(transfers[0], MemoryTrack):
        return list(transfers)
    return [MemoryTrack("memory", list(transfers), 0.0)]


def _as_layers(layers) -> list[LayerSpan]:
    return [l if isinstance(l, LayerSpan) else LayerSpan(*l) for l in (layers or [])]


def _unit_key(unit: str) -> tuple[int, str]:
    return (UNIT_ORDER.index(unit) if unit in UNIT_ORDER else len(UNIT_ORDER), unit)


# -------------------------------------------------------------------------------------------------
# Interval arithmetic

def merge_intervals(starts: np.ndarray, ends: np.ndarray, gap: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """The union of [start, end) intervals, joining those less than `gap` apart."""
    if len(starts) == 0:
        return np.zeros(0), np.zeros(0)
    order = np.argsort(starts, kind="stable")
    s, e = np.asarray(starts, float)[order], np.asarray(ends, float)[order]
    run_end = np.maximum.accumulate(e)
    new = np.ones(len(s), bool)
    new[1:] = s[1:] > run_end[:-1] + gap
    idx = np.flatnonzero(new)
    return s[idx], run_end[np.r_[idx[1:] - 1, len(s) - 1]]


def covered(starts: np.ndarray, ends: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Per bin [edges[i], edges[i+1]), the length covered by disjoint intervals."""
    def integral(x):              # sum over intervals of |[s, e) ∩ [0, x)|
        s_sorted, e_sorted = np.sort(starts), np.sort(ends)
        cs, ce = np.r_[0.0, np.cumsum(s_sorted)], np.r_[0.0, np.cumsum(e_sorted)]
        ns, ne = np.searchsorted(s_sorted, x), np.searchsorted(e_sorted, x)
        return (ns * x - cs[ns]) - (ne * x - ce[ne])
    if len(starts) == 0:
        return np.zeros(len(edges) - 1)
    return np.diff(integral(np.asarray(edges, float)))


def data_windows(track: MemoryTrack, direction: str | None) -> tuple[np.ndarray, np.ndarray, float]:
    """When the bytes of each transfer crossed the data bus: disjoint windows of bytes/rate cycles
    ending no later than the transfer's data (a read's record ends on its last beat, a write's one
    write latency after it), packed back to front.  `direction` None: both directions on a shared
    cap.  Returns (starts, ends, rate in bytes/cycle); no window carries more than the cap."""
    rate = track.shared_bytes_per_cycle if direction is None else track.bus_bytes_per_cycle
    recs = [t for t in track.transfers if direction is None or t[3] == direction]
    if not recs or not rate:
        return np.zeros(0), np.zeros(0), float(rate or 0.0)
    ends = np.array([t[1] - (track.write_latency_cycles if t[3] == "write" else 0.0) for t in recs])
    lengths = np.array([t[4] for t in recs], float) / rate
    order = np.argsort(ends)[::-1]
    out_s, out_e = np.empty(len(recs)), np.empty(len(recs))
    limit = np.inf
    for i in order:                          # latest first: each window ends before the next starts
        end = min(ends[i], limit)
        out_s[i], out_e[i] = end - lengths[i], end
        limit = out_s[i]
    return out_s, out_e, float(rate)


def bandwidth(track: MemoryTrack, edges: np.ndarray) -> tuple[dict[str, np.ndarray], float, bool]:
    """Bytes per cycle per bin for read and write, the cap drawn, and whether the cap is shared
    (then read + write stay under it; otherwise each direction does)."""
    width = np.diff(edges)
    out = {}
    if track.shared_bytes_per_cycle:
        recs = track.transfers
        s, e, rate = data_windows(track, None)
        for direction in ("read", "write"):
            pick = np.array([t[3] == direction for t in recs], bool)
            out[direction] = covered(s[pick], e[pick], edges) * rate / width if len(recs) else \
                np.zeros(len(width))
        return out, rate, True
    for direction in ("read", "write"):
        s, e, rate = data_windows(track, direction)
        out[direction] = covered(s, e, edges) * rate / width if rate else np.zeros(len(width))
    if not track.bus_bytes_per_cycle:        # a bare transfer list: spread over each record
        for direction in ("read", "write"):
            recs = [t for t in track.transfers if t[3] == direction]
            acc = np.zeros(len(width))
            for s0, e0, _, _, nbytes in recs:
                span = max(e0 - s0, 1.0)
                acc += np.clip(np.minimum(edges[1:], e0) - np.maximum(edges[:-1], s0), 0, None) \
                    * nbytes / span
            out[direction] = acc / width
    return out, track.bus_bytes_per_cycle, False


# -------------------------------------------------------------------------------------------------
# Perfetto / Chrome trace events

def pack_nested(spans: Sequence[tuple[float, float]]) -> list[int]:
    """A lane per span such that the spans of one lane are disjoint or nested (the trace-event
    rule for complete events on one track): the first lane whose open spans contain it."""
    order = sorted(range(len(spans)), key=lambda i: (spans[i][0], -spans[i][1]))
    stacks: list[list[float]] = []           # per lane: ends of the spans still open
    lanes = [0] * len(spans)
    for i in order:
        start, end = spans[i]
        for lane, stack in enumerate(stacks):
            while stack and stack[-1] <= start:
                stack.pop()
            if not stack or end <= stack[-1]:
                stack.append(end)
                lanes[i] = lane
                break
        else:
            stacks.append([end])
            lanes[i] = len(stacks) - 1
    return lanes


def _ns(cycles: float, ns_per_cycle: float) -> int:
    return int(round(cycles * ns_per_cycle))


def nesting_violations(events: list[dict]) -> list[str]:
    """Pairs of complete ("X") slices on one (pid, tid) that overlap without nesting, compared in
    integer nanoseconds as Perfetto imports them; [] when the trace follows the rule."""
    by_track: dict[tuple, list[tuple[int, int, str]]] = {}
    for e in events:
        if e.get("ph") == "X":
            s = int(round(e["ts"] * 1000))
            by_track.setdefault((e["pid"], e["tid"]), []).append(
                (s, s + int(round(e["dur"] * 1000)), e.get("name", "")))
    bad = []
    for track, slices in by_track.items():
        slices.sort(key=lambda x: (x[0], -x[1]))
        stack: list[tuple[int, int, str]] = []
        for s, e, name in slices:
            while stack and stack[-1][1] <= s:
                stack.pop()
            if stack and e > stack[-1][1]:
                bad.append(f"track {track}: '{name}' [{s}, {e}) ns overlaps '{stack[-1][2]}' "
                           f"[{stack[-1][0]}, {stack[-1][1]}) ns")
            stack.append((s, e, name))
    return bad


def _layer_at(layers: list[LayerSpan]):
    starts = np.array([l.start for l in layers])

    def name(cycle: float) -> str | None:
        i = int(np.searchsorted(starts, cycle, side="right")) - 1
        return layers[i].name if 0 <= i < len(layers) and cycle < layers[i].end else None
    return name


def trace_events(log: ActivityLog, transfers=(), clock_mhz: float = 1000.0,
                 name: str = "nvdla-sim", layers=None, detail: str = "auto",
                 total_cycles: float | None = None) -> tuple[list[dict], str]:
    """The trace's events and the detail used.  Processes: "network" (one slice per layer, named
    after it), "units" (per unit: busy and stall tracks; a hardware layer's span is named after the
    network layer it ran in), "memory" (bytes/cycle counters per interface; with full detail also
    one slice per request on a track per outstanding slot)."""
    if detail not in DETAILS:
        raise NvdlaSimError(f"timeline detail '{detail}': use one of {', '.join(DETAILS)}")
    tracks = _as_tracks(list(transfers))
    layers = _as_layers(layers)
    n_transfers = sum(len(t.transfers) for t in tracks)
    if detail == "auto":
        detail = "full" if len(log.spans) + n_transfers <= AUTO_FULL_LIMIT else "summary"
    ns_per_cycle = 1000.0 / clock_mhz
    end_cycle = max([s[3] for s in log.spans] + [t[1] for tr in tracks for t in tr.transfers]
                    + [l.end for l in layers] + [total_cycles or 0.0, 1.0])
    events: list[dict] = []
    tid_next = [0]

    def track(pid: int, label: str) -> int:
        tid_next[0] += 1
        events.append({"ph": "M", "pid": pid, "tid": tid_next[0], "name": "thread_name",
                       "args": {"name": label}})
        events.append({"ph": "M", "pid": pid, "tid": tid_next[0], "name": "thread_sort_index",
                       "args": {"sort_index": tid_next[0]}})
        return tid_next[0]

    def slices(pid: int, label: str, items: list[tuple[float, float, str, str, dict | None]]) -> None:
        """items: (start, end, name, cat, args) in cycles; packed onto as many lanes as needed."""
        ns = [(_ns(s, ns_per_cycle), _ns(e, ns_per_cycle)) for s, e, *_ in items]
        keep = [i for i, (s, e) in enumerate(ns) if e > s]
        lanes = pack_nested([ns[i] for i in keep])
        tids: dict[int, int] = {}
        for i, lane in zip(keep, lanes):
            if lane not in tids:
                tids[lane] = track(pid, label if lane == 0 else f"{label} #{lane + 1}")
            s, e = ns[i]
            ev = {"ph": "X", "pid": pid, "tid": tids[lane], "name": items[i][2], "cat": items[i][3],
                  "ts": s / 1000, "dur": (e - s) / 1000}
            if items[i][4]:
                ev["args"] = items[i][4]
            events.append(ev)

    for pid, pname in ((1, "network"), (2, "units"), (3, "memory")):
        events.append({"ph": "M", "pid": pid, "name": "process_name", "args": {"name": f"{name}: {pname}"}})
        events.append({"ph": "M", "pid": pid, "name": "process_sort_index", "args": {"sort_index": pid}})
    if layers:
        slices(1, "layers", [(l.start, l.end, l.name, "layer",
                              {"start_cycle": round(l.start), "end_cycle": round(l.end),
                               "cycles": round(l.end - l.start)}) for l in layers])
    layer_name = _layer_at(layers) if layers else (lambda c: None)
    gap = end_cycle / SUMMARY_RESOLUTION if detail == "summary" else 0.0
    by_unit: dict[tuple[str, str], list] = {}
    for unit, kind, start, end, label in log.spans:
        by_unit.setdefault((unit, kind), []).append((start, end, label))
    for unit in sorted({u for u, _ in by_unit}, key=_unit_key):
        for kind in ("layer", "busy", "stall"):
            spans = by_unit.get((unit, kind), [])
            if not spans:
                continue
            items = []
            if kind == "layer":
                for s, e, label in spans:
                    net = layer_name((s + e) / 2)
                    items.append((s, e, net or label, "layer",
                                  {"register_group": label, "cycles": round(e - s)}))
            elif detail == "summary":
                ms, me = merge_intervals(np.array([s[0] for s in spans]), np.array([s[1] for s in spans]), gap)
                items = [(s, e, kind, kind, None) for s, e in zip(ms, me)]
            else:
                items = [(s, e, label or kind, kind, None) for s, e, label in spans]
            slices(2, unit if kind == "busy" else f"{unit} {kind}", items)
    edges = np.linspace(0.0, end_cycle, COUNTER_BINS + 1)
    for tr in tracks:
        bw, _, _ = bandwidth(tr, edges)
        for i in range(COUNTER_BINS):
            events.append({"ph": "C", "pid": 3, "name": f"{tr.name} bytes/cycle",
                           "ts": _ns(edges[i], ns_per_cycle) / 1000,
                           "args": {d: round(float(bw[d][i]), 3) for d in ("read", "write")}})
        if detail == "full":
            by_client: dict[tuple[str, str], list] = {}
            for s, e, client, direction, nbytes in tr.transfers:
                by_client.setdefault((client, direction), []).append(
                    (s, max(e, s + 1), f"{direction} {nbytes} B", "memory", {"bytes": nbytes}))
            for (client, direction), items in sorted(by_client.items()):
                slices(3, f"{tr.name.split()[0]} {client} {direction}", items)
    return events, detail


def write_trace_events(log: ActivityLog, transfers, path: Path, clock_mhz: float = 1000.0,
                       name: str = "nvdla-sim", layers=None, detail: str = "auto",
                       total_cycles: float | None = None) -> str:
    """Write the trace (Chrome trace-event JSON; ts in microseconds) and return the detail used.
    `transfers`: MemoryTracks (see memory_tracks) or one interface's transfer records;
    `layers`: LayerSpans (or (name, start, end)) naming the network's layers."""
    events, used = trace_events(log, transfers, clock_mhz, name, layers, detail, total_cycles)
    with open(path, "w") as f:
        json.dump({"traceEvents": events, "displayTimeUnit": "ns",
                   "otherData": {"detail": used, "clock_mhz": clock_mhz}}, f,
                  separators=(",", ":"))
    return used


# -------------------------------------------------------------------------------------------------
# The PNG

BUSY_COLOUR, STALL_COLOUR = "#1f77b4", "#ff7f0e"
READ_COLOUR, WRITE_COLOUR = "#2ca02c", "#9467bd"


@dataclass
class Utilization:
    """What the timeline PNG draws, binned (a few KB: handed to the plot process whole)."""
    title: str
    total_cycles: float
    edges: np.ndarray                               # bins + 1 cycle edges
    units: list[str]                                # rows, first on top
    fractions: dict[tuple[str, str], np.ndarray]    # (unit, "busy"/"stall"): covered share per bin
    memory: list[tuple[str, dict[str, np.ndarray], float, bool]]  # name, B/cycle r/w, cap, shared
    layers: list[LayerSpan]


def utilization(log: ActivityLog, transfers, total_cycles: float, title: str = "",
                bins: int = 1200, layers=None) -> Utilization:
    """Each unit's busy and stalled share of every time bin and each memory interface's bytes per
    cycle, over `bins` bins of the run."""
    tracks = [t for t in _as_tracks(list(transfers)) if t.transfers]
    all_spans = log.spans
    total = max([total_cycles, 1.0] + [s[3] for s in all_spans])
    edges = np.linspace(0.0, total, bins + 1)
    width = edges[1] - edges[0]
    spans: dict[tuple[str, str], tuple[list, list]] = {}
    for unit, kind, s, e, _ in all_spans:
        if kind in ("busy", "stall"):
            starts_ends = spans.setdefault((unit, kind), ([], []))
            starts_ends[0].append(s)
            starts_ends[1].append(e)
    fractions = {key: covered(*merge_intervals(*map(np.array, se)), edges) / width
                 for key, se in spans.items()}
    units = sorted({unit for unit, _ in spans}, key=_unit_key)
    memory = [(tr.name, *bandwidth(tr, edges)) for tr in tracks]
    return Utilization(title, total, edges, units, fractions, memory, _as_layers(layers))


def plot_utilization(log: ActivityLog, transfers, path: Path, total_cycles: float,
                     title: str = "", bins: int = 1200, layers=None, dpi: int = 100) -> None:
    """Rows per unit (busy above the row's line, stall below, as the fraction of each time bin),
    the network's layers named along the top with their boundaries across every panel, and per
    memory interface the bytes per cycle that crossed its data bus (read/write, cap dashed)."""
    draw_utilization(utilization(log, transfers, total_cycles, title, bins, layers), path, dpi)


def draw_utilization(u: Utilization, path: Path, dpi: int = 100) -> None:
    """The timeline PNG of `utilization`: matplotlib's Agg canvas without pyplot, the layout fixed
    before drawing (the layer names are fitted to the axes' width without a first draw), one
    collection for the layer bands and one for their boundaries per panel."""
    from .plots import default_style
    with default_style():
        fig = utilization_figure(u, dpi)
        fig.savefig(path, dpi=dpi, pil_kwargs={"compress_level": 3})   # see plots.save


def utilization_figure(u: Utilization, dpi: int = 100):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter

    layers, units, total = u.layers, u.units, u.total_cycles
    heights = ([1.3] if layers else []) + [max(2.0, 0.32 * len(units))] + [1.1] * len(u.memory)
    fig_h = sum(heights) + 1.2
    fig = Figure(figsize=(16, fig_h), dpi=dpi)
    FigureCanvasAgg(fig)
    axes = list(fig.subplots(len(heights), 1, sharex=True, squeeze=False,
                             gridspec_kw={"height_ratios": heights, "hspace": 0.08})[:, 0])
    # the layout before anything is drawn: the layer names are fitted to these widths
    fig.subplots_adjust(left=0.07, right=0.86, top=1 - 0.5 / fig_h, bottom=0.6 / fig_h)
    axes[-1].set_xlim(0, total)
    ax_layers = axes.pop(0) if layers else None
    ax_units, ax_mem = axes[0], axes[1:]
    edges = u.edges
    x = (edges[:-1] + edges[1:]) / 2
    for row, unit in enumerate(units):
        base = len(units) - 1 - row           # first unit on top
        for kind, colour, sign in (("busy", BUSY_COLOUR, 1), ("stall", STALL_COLOUR, -1)):
            frac = u.fractions.get((unit, kind))
            if frac is not None:
                ax_units.fill_between(x, base + 0.5, base + 0.5 + sign * 0.42 * frac,
                                      step="mid", color=colour, lw=0)
        ax_units.axhline(base + 0.5, color="0.8", lw=0.4)
    ax_units.set_yticks([len(units) - 1 - i + 0.5 for i in range(len(units))])
    ax_units.set_yticklabels(units, fontsize=8)
    ax_units.set_ylim(0, max(len(units), 1))
    ax_units.tick_params(axis="y", length=0)
    ax_units.legend(handles=[Patch(color=BUSY_COLOUR, label="busy (up: fraction of the bin)"),
                             Patch(color=STALL_COLOUR, label="stalled (down)")],
                    loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8, frameon=False)
    if not units:
        ax_units.text(0.5, 0.5, "no unit activity recorded", transform=ax_units.transAxes,
                      ha="center")
    for ax, (name, bw, cap, shared) in zip(ax_mem, u.memory):
        if shared:
            ax.stackplot(x, bw["read"], bw["write"], colors=[READ_COLOUR, WRITE_COLOUR], step="mid",
                         labels=["read", "write"], lw=0)
        else:
            ax.fill_between(x, 0, bw["read"], step="mid", color=READ_COLOUR, lw=0, label="read")
            ax.fill_between(x, 0, bw["write"], step="mid", color=WRITE_COLOUR, lw=0, alpha=0.7,
                            label="write")
        if cap:
            ax.axhline(cap, color="k", ls="--", lw=0.8,
                       label=f"cap {cap:g} B/cycle" + (" (read+write)" if shared else " per direction"))
            ax.set_ylim(0, cap * 1.15)
        ax.set_ylabel(f"{name.split()[0]}\nB/cycle", fontsize=8)
        ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8, frameon=False)
    if layers:
        _draw_layers(fig, ax_layers, [ax_units] + ax_mem, layers)
    axes[-1].set_xlabel(f"cycle (run: {total:,.0f} cycles)")
    axes[-1].xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    (ax_layers or ax_units).set_title(u.title, fontsize=11, loc="left", y=1.0)
    return fig


def _draw_layers(fig, ax, below: list, layers: list[LayerSpan]) -> None:
    """Alternating bands named after the layers (rotated; a name that would collide with the
    previous one is left to its number), and the boundaries as lines through the other panels."""
    from matplotlib.collections import PolyCollection
    ax.set_yticks([])
    ax.set_ylim(0, 1)
    ax.set_ylabel("layers", fontsize=8)
    x0, x1 = ax.get_xlim()                      # set, and the layout fixed: no draw to measure
    bbox = ax.get_window_extent()
    cycles_per_pt = (x1 - x0) / max(bbox.width * 72 / fig.dpi, 1.0)
    text_pt = 7.5                               # a rotated 6.5 pt label's width plus air
    ax.add_collection(PolyCollection(
        [((l.start, 0), (l.end, 0), (l.end, 1), (l.start, 1)) for l in layers],
        facecolors=["0.93" if i % 2 else "0.82" for i in range(len(layers))], edgecolors="none"),
        autolim=False)
    starts = [l.start for l in layers]
    for other in below:
        other.vlines(starts, 0, 1, transform=other.get_xaxis_transform(), colors="0.55", lw=0.4,
                     zorder=0)
    last_x = -np.inf
    for layer in layers:
        mid = (layer.start + layer.end) / 2
        band_pt = (layer.end - layer.start) / cycles_per_pt
        if band_pt >= 0.55 * 8 * len(layer.name) + 6:        # room to write it across
            ax.text(mid, 0.5, layer.name, ha="center", va="center", fontsize=8, clip_on=True)
            last_x = layer.end
        elif (mid - last_x) / cycles_per_pt >= text_pt:
            ax.text(mid, 0.5, layer.name, rotation=90, ha="center", va="center", fontsize=6.5,
                    clip_on=True)
            last_x = mid
    ax.text(1.005, 0.5, f"{len(layers)} layers", transform=ax.transAxes, fontsize=8, va="center")
