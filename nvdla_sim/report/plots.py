"""Report plots: per-layer cycles coloured by what bounds each layer."""
from __future__ import annotations

from pathlib import Path

from .tables import Report

BOUND_COLOURS = {"MAC": "#1f77b4", "memory": "#ff7f0e", "CBUF": "#d62728", "SDP": "#2ca02c",
                 "PDP": "#9467bd", "CDP": "#8c564b", None: "#7f7f7f"}


def plot_layer_cycles(rep: Report, path: Path) -> None:
    """One bar per DLA layer (cycles), coloured MAC / memory / CBUF bound, as a PNG."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    rows = [r for r in rep.rows if r.device == "DLA" and r.cycles is not None]
    fig, ax = plt.subplots(figsize=(max(8.0, 0.18 * len(rows) + 2), 5))
    xs = range(len(rows))
    ax.bar(xs, [r.cycles for r in rows], color=[BOUND_COLOURS.get(r.bound, "#7f7f7f") for r in rows])
    ax.set_xticks(list(xs))
    ax.set_xticklabels([r.layer for r in rows], rotation=90, fontsize=6)
    ax.set_ylabel("cycles")
    title = f"{rep.scenario}: {rep.network} on {rep.hardware}"
    if rep.ms is not None:
        title += f"  ({rep.ms:.3f} ms at {rep.clock_mhz:g} MHz)"
    ax.set_title(title)
    used = [b for b in BOUND_COLOURS if b and any(r.bound == b for r in rows)]
    if used:
        ax.legend(handles=[Patch(color=BOUND_COLOURS[b], label=f"{b} bound") for b in used])
    if not rows:
        ax.text(0.5, 0.5, "no hardware layer ran on the DLA", transform=ax.transAxes, ha="center")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
