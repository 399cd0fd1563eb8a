"""Energy plots: per-layer stacked bars by component (report), and the sweep's energy views."""
from __future__ import annotations

from pathlib import Path

from .model import COMPONENTS

COLOURS = {"DRAM": "#d62728", "CVSRAM": "#ff9896", "CBUF": "#1f77b4", "MAC": "#2ca02c",
           "CACC": "#98df8a", "SDP": "#9467bd", "PDP": "#c5b0d5", "CDP": "#8c564b",
           "leakage": "#7f7f7f"}


def plot_layer_energy(rep, path: Path) -> None:
    """layer_energy.png: `layer_energy_figure`."""
    from ..report.plots import default_style, save
    with default_style():
        save(layer_energy_figure(rep), path)


def layer_energy_figure(rep):
    """One horizontal stacked bar per DLA layer (first layer on top, names legible like
    layer_cycles.png beside it): uJ by component, one bar collection per component."""
    from ..report.plots import axes_title, hbars, layer_bar_figure, legend_beside

    rows = [r for r in rep.rows if r.device == "DLA" and r.energy_uj is not None]
    splits = [(r.energy or {}).get("split_uj", {}) for r in rows]
    used = [c for c in COMPONENTS if any(s.get(c, 0.0) for s in splits)]
    fig, (ax,) = layer_bar_figure([r.layer for r in rows], legend=bool(used))
    left = [0.0] * len(rows)
    for comp in used:
        vals = [s.get(comp, 0.0) for s in splits]
        hbars(ax, left, vals, COLOURS[comp])
        left = [a + v for a, v in zip(left, vals)]
    ax.set_xlim(0, max(left, default=0.0) * 1.03 or 1.0)
    ax.set_xlabel("energy per inference (uJ)")
    title = f"{rep.scenario}: {rep.network} on {rep.hardware}"
    if rep.energy_mj is not None:
        title += f"  ({rep.energy_mj:.3f} mJ, {rep.area_mm2:.2f} mm^2)"
    axes_title(ax, title)
    if used:
        legend_beside(ax, {c: COLOURS[c] for c in used})
    return fig
