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


def plot_layer_statistics(rep: Report, path: Path) -> None:
    """Per DLA row: saturated results as a share of its output elements' counters (left) and
    LUT lookups split into hits, underflows and overflows (right), as a PNG."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from .statistics import LUT_RANGE_FLAG, lut_counts, lut_lookups, saturations

    rows = [r for r in rep.rows if r.device == "DLA" and r.statistics is not None]
    fig, (ax_sat, ax_lut) = plt.subplots(1, 2, figsize=(11, max(3.0, 0.2 * len(rows) + 1.8)),
                                         sharey=True)
    ys = list(range(len(rows)))
    sat = [saturations(r.statistics) or 0 for r in rows]
    ax_sat.barh(ys, sat, height=0.75, color=["#d62728" if r.stats_flags else "#1f77b4"
                                              for r in rows])
    ax_sat.set_xlabel("saturated results (CACC + SDP + CDP counters)")
    hit, under, over = [], [], []
    for r in rows:
        lut = lut_counts(r.statistics)
        if lut is None:
            hit.append(0), under.append(0), over.append(0)
            continue
        n = lut_lookups(*lut) or 1
        under.append(lut[1]["uflow"] / n)
        over.append(lut[1]["oflow"] / n)
        hit.append(1.0 - under[-1] - over[-1] if lut_lookups(*lut) else 0.0)
    ax_lut.barh(ys, hit, height=0.75, color="#2ca02c", label="LUT hit")
    ax_lut.barh(ys, under, left=hit, height=0.75, color="#9467bd", label="underflow")
    ax_lut.barh(ys, over, left=[h + u for h, u in zip(hit, under)], height=0.75,
                color="#ff7f0e", label="overflow")
    ax_lut.axvline(1.0 - LUT_RANGE_FLAG, color="0.5", lw=0.8, ls="--")
    ax_lut.set_xlim(0, 1)
    ax_lut.set_xlabel("share of LUT lookups")
    ax_lut.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax_sat.set_yticks(ys)
    ax_sat.set_yticklabels([r.layer for r in rows], fontsize=8 if len(rows) <= 80 else 6)
    if rows:
        ax_sat.set_ylim(len(rows) - 0.5, -0.5)
    for ax in (ax_sat, ax_lut):
        ax.grid(axis="x", color="0.9", lw=0.6)
        ax.set_axisbelow(True)
    fig.suptitle(f"{rep.scenario}: statistics registers per layer (red: flagged)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
