"""A run's timing in a few lines: per-unit busy/stall/utilization, memory bytes, CBUF peak."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..engine import RunResult


def timing_json(result: "RunResult") -> dict:
    """The timing part of a run, for JSON reports."""
    return {
        "units": {name: {"busy_cycles": round(s["busy_cycles"], 1),
                         "stall_cycles": round(s["stall_cycles"], 1),
                         "utilization": round(s["utilization"], 4)}
                  for name, s in result.unit_stats.items()},
        "memory_bytes": result.memory_bytes,
        "cbuf_peak_entries": result.cbuf.get("peak_entries", 0),
        "events": result.events,
    }


def format_summary(result: "RunResult") -> str:
    """Per unit: busy and stall cycles and utilization of the run; bytes per memory client; CBUF
    peak occupancy."""
    lines = [f"{'unit':<10} {'busy':>10} {'stall':>10} {'util':>6}"]
    for name, s in result.unit_stats.items():
        if not s["busy_cycles"] and not s["stall_cycles"]:
            continue
        lines.append(f"{name:<10} {s['busy_cycles']:>10.0f} {s['stall_cycles']:>10.0f} "
                     f"{100 * s['utilization']:>5.1f}%")
    for memif, clients in result.memory_bytes.items():
        parts = []
        for client, d in sorted(clients.items()):
            for direction in ("read", "write"):
                if d.get(direction):
                    parts.append(f"{client} {direction} {d[direction]:,} B")
        if parts:
            lines.append(f"{memif}: " + ", ".join(parts))
    cbuf = result.cbuf
    if cbuf.get("peak_entries"):
        lines.append(f"CBUF peak: {cbuf['peak_entries']:,.0f} of {cbuf['capacity_entries']:,} entries "
                     f"({cbuf['peak_bytes'] / 1024:.1f} KiB, {100 * cbuf['peak_fraction']:.1f} %)")
    lines.append(f"events: {result.events:,}")
    return "\n".join(lines)
