"""Report plots: per-layer cycles coloured by what bounds each layer, per-layer statistics.

Drawn cheaply (issue 20: they were half of a timing-only ResNet-50 command): matplotlib's Agg
canvas without pyplot, a fixed layout computed from the label lengths instead of
`tight_layout` (which draws every text twice), one bar collection per colour instead of one
rectangle artist per bar, 100 dpi, the title placed without measuring the axes.
`layer_bar_figure` is shared with the energy plot.  A values+timing command draws them in the
process report/plot_worker.py forks when the run starts (matplotlib imported meanwhile, the
figures side by side); the `*_figure` functions return the figure (tests look at its artists).
"""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from .tables import Report

BOUND_COLOURS = {"MAC": "#1f77b4", "memory": "#ff7f0e", "CBUF": "#d62728", "SDP": "#2ca02c",
                 "PDP": "#9467bd", "CDP": "#8c564b", None: "#7f7f7f"}
DPI = 100
ROW_INCHES = 0.2                        # one bar per layer: 8-point names stay legible
LABEL_POINTS = 8
CHAR_EM = 0.62                          # DejaVu Sans: mean advance of names like res4e_branch2b
TOP_INCHES, BOTTOM_INCHES = 0.45, 0.6   # title; x tick labels and x label
LEGEND_INCHES = 1.5                     # legend beside the axes, never over a bar


def label_inches(labels: list[str], points: float = LABEL_POINTS) -> float:
    """Width the longest label takes (estimated from its length: no text is drawn to measure)."""
    longest = max((len(s) for s in labels), default=0)
    return longest * CHAR_EM * points / 72 + 0.15


def layer_bar_figure(labels: list[str], width_in: float = 10.0, panels: int = 1,
                     legend: bool = True):
    """(figure, axes) for horizontal bars, one row per label, first row on top, layer names on
    the first panel's y axis; margins fixed from the label lengths."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    n = len(labels)
    points = LABEL_POINTS if n <= 80 else 6
    height = max(3.0, ROW_INCHES * n + TOP_INCHES + BOTTOM_INCHES + 0.3)
    fig = Figure(figsize=(width_in, height), dpi=DPI)
    FigureCanvasAgg(fig)
    left = label_inches(labels, points) + 0.1
    right = LEGEND_INCHES if legend else 0.3
    fig.subplots_adjust(left=left / width_in, right=1 - right / width_in,
                        top=1 - TOP_INCHES / height, bottom=BOTTOM_INCHES / height, wspace=0.08)
    axes = fig.subplots(1, panels, sharey=True, squeeze=False)[0]
    ys = list(range(n))
    axes[0].set_yticks(ys)
    axes[0].set_yticklabels(labels, fontsize=points)
    for ax in axes:
        ax.set_ylim(n - 0.5 if n else 0.5, -0.5)
        ax.tick_params(axis="y", length=2)
        ax.grid(axis="x", color="0.9", lw=0.6)
        ax.set_axisbelow(True)
    return fig, list(axes)


def hbars(ax, lefts: list[float], widths: list[float], colours, height: float = 0.75,
          label: str | None = None) -> None:
    """Row i's bar from lefts[i] to lefts[i] + widths[i]: one collection for all rows (a
    rectangle artist per bar costs ~1 ms each to build and draw); empty widths draw nothing."""
    from matplotlib.collections import PolyCollection
    h = height / 2
    verts, faces = [], []
    for i, (x0, w) in enumerate(zip(lefts, widths)):
        if w:
            verts.append(((x0, i - h), (x0 + w, i - h), (x0 + w, i + h), (x0, i + h)))
            faces.append(colours[i] if isinstance(colours, list) else colours)
    if verts:
        ax.add_collection(PolyCollection(verts, facecolors=faces, edgecolors="none", label=label),
                          autolim=False)


def legend_beside(ax, colours: dict[str, str]) -> None:
    from matplotlib.patches import Patch
    ax.legend(handles=[Patch(color=c, label=name) for name, c in colours.items()],
              loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)


def axes_title(ax, title: str) -> None:
    # y given: matplotlib then skips measuring the x axis's tick labels to lift the title over
    # them (they are below the axes: the same place, ~10 % of a figure's drawing)
    ax.set_title(title, fontsize=10, y=1.0)


def save(fig, path: Path) -> None:
    # zlib level 3: a tenth of the encoding time of the default for a few per cent more bytes
    fig.savefig(path, dpi=DPI, pil_kwargs={"compress_level": 3})


@contextmanager
def default_style():
    """matplotlib's own defaults while a report figure is built and saved (the fixed layouts
    assume its font sizes), whatever the process set before: zigzag's plot module sets 22-point
    axis labels when imported, and the plot process inherits what its parent had."""
    import matplotlib.style
    with matplotlib.style.context("default"):
        yield


def plot_layer_cycles(rep: Report, path: Path) -> None:
    """layer_cycles.png: `layer_cycles_figure`."""
    with default_style():
        save(layer_cycles_figure(rep), path)


def layer_cycles_figure(rep: Report):
    """One bar per DLA layer (cycles), coloured by what bounds it (MAC, memory, CBUF...)."""
    from matplotlib.ticker import FuncFormatter

    rows = [r for r in rep.rows if r.device == "DLA" and r.cycles is not None]
    used = {f"{b} bound": BOUND_COLOURS[b] for b in BOUND_COLOURS
            if b and any(r.bound == b for r in rows)}
    # One horizontal bar per layer, first layer on top: names stay horizontal and legible however
    # many layers there are (ResNet-50: 54).
    fig, (ax,) = layer_bar_figure([r.layer for r in rows], legend=bool(used))
    cycles = [r.cycles for r in rows]
    hbars(ax, [0] * len(rows), cycles, [BOUND_COLOURS.get(r.bound, "#7f7f7f") for r in rows])
    ax.set_xlim(0, max(cycles, default=0) * 1.03 or 1)
    ax.set_xlabel("cycles per layer")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    title = f"{rep.scenario}: {rep.network} on {rep.hardware}"
    if rep.ms is not None:
        title += f"  ({rep.ms:.3f} ms at {rep.clock_mhz:g} MHz)"
    axes_title(ax, title)
    if used:
        legend_beside(ax, used)
    if not rows:
        ax.text(0.5, 0.5, "no hardware layer ran on the DLA", transform=ax.transAxes, ha="center")
    return fig


def plot_layer_statistics(rep: Report, path: Path) -> None:
    """layer_statistics.png: `layer_statistics_figure`."""
    with default_style():
        save(layer_statistics_figure(rep), path)


def layer_statistics_figure(rep: Report):
    """Per DLA row: saturated results as a share of its output elements' counters (left) and
    LUT lookups split into hits, underflows and overflows (right)."""
    from .statistics import LUT_RANGE_FLAG, lut_counts, lut_lookups, saturations

    rows = [r for r in rep.rows if r.device == "DLA" and r.statistics is not None]
    fig, (ax_sat, ax_lut) = layer_bar_figure([r.layer for r in rows], width_in=11.0, panels=2)
    n = len(rows)
    sat = [saturations(r.statistics) or 0 for r in rows]
    hbars(ax_sat, [0] * n, sat, ["#d62728" if r.stats_flags else "#1f77b4" for r in rows])
    ax_sat.set_xlim(0, max(sat, default=0) * 1.05 or 1)
    ax_sat.set_xlabel("saturated results (CACC + SDP + CDP counters)")
    hit, under, over = [], [], []
    for r in rows:
        lut = lut_counts(r.statistics)
        if lut is None:
            hit.append(0), under.append(0), over.append(0)
            continue
        lookups = lut_lookups(*lut) or 1
        under.append(lut[1]["uflow"] / lookups)
        over.append(lut[1]["oflow"] / lookups)
        hit.append(1.0 - under[-1] - over[-1] if lut_lookups(*lut) else 0.0)
    shares = {"LUT hit": "#2ca02c", "underflow": "#9467bd", "overflow": "#ff7f0e"}
    hbars(ax_lut, [0] * n, hit, shares["LUT hit"])
    hbars(ax_lut, hit, under, shares["underflow"])
    hbars(ax_lut, [h + u for h, u in zip(hit, under)], over, shares["overflow"])
    ax_lut.axvline(1.0 - LUT_RANGE_FLAG, color="0.5", lw=0.8, ls="--")
    ax_lut.set_xlim(0, 1)
    ax_lut.set_xlabel("share of LUT lookups")
    legend_beside(ax_lut, shares)
    fig.suptitle(f"{rep.scenario}: statistics registers per layer (red: flagged)", fontsize=10)
    return fig
