"""Report plots: per-layer cycles coloured by what bounds each layer."""
from __future__ import annotations

from pathlib import Path

from .tables import Report

BOUND_COLOURS = {"MAC": "#1f77b4", "memory": "#ff7f0e", "CBUF": "#d62728", "SDP": "#2ca02c",
                 "PDP": "#9467bd", "CDP": "#8c564b", None: "#7f7f7f"}


def plot_layer_cycles(rep: Report, path: Path) -> None:
    """One bar per DLA layer (cycles), coloured by what bounds it (MAC, memory, CBUF...), as a PNG."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter

    rows = [r for r in rep.rows if r.device == "DLA" and r.cycles is not None]
    # One horizontal bar per layer, first layer on top: names stay horizontal and legible however
    # many layers there are (ResNet-50: 54).
    fig, ax = plt.subplots(figsize=(10, max(3.0, 0.2 * len(rows) + 1.6)))
    ys = range(len(rows))
    ax.barh(list(ys), [r.cycles for r in rows], height=0.75,
            color=[BOUND_COLOURS.get(r.bound, "#7f7f7f") for r in rows])
    ax.set_yticks(list(ys))
    ax.set_yticklabels([r.layer for r in rows], fontsize=8 if len(rows) <= 80 else 6)
    if rows:
        ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlabel("cycles per layer")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.grid(axis="x", color="0.9", lw=0.6)
    ax.set_axisbelow(True)
    title = f"{rep.scenario}: {rep.network} on {rep.hardware}"
    if rep.ms is not None:
        title += f"  ({rep.ms:.3f} ms at {rep.clock_mhz:g} MHz)"
    ax.set_title(title, fontsize=10)
    used = [b for b in BOUND_COLOURS if b and any(r.bound == b for r in rows)]
    if used:
        # Beside the axes: never over a bar.
        ax.legend(handles=[Patch(color=BOUND_COLOURS[b], label=f"{b} bound") for b in used],
                  loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    if not rows:
        ax.text(0.5, 0.5, "no hardware layer ran on the DLA", transform=ax.transAxes, ha="center")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
