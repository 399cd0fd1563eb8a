"""Energy plots: per-layer stacked bars by component (report), and the sweep's energy views."""
from __future__ import annotations

from pathlib import Path

from .model import COMPONENTS

COLOURS = {"DRAM": "#d62728", "CVSRAM": "#ff9896", "CBUF": "#1f77b4", "MAC": "#2ca02c",
           "CACC": "#98df8a", "SDP": "#9467bd", "PDP": "#c5b0d5", "CDP": "#8c564b",
           "leakage": "#7f7f7f"}


def plot_layer_energy(rep, path: Path) -> None:
    """One stacked bar per DLA layer: uJ by component."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rep.rows if r.device == "DLA" and r.energy_uj is not None]
    fig, ax = plt.subplots(figsize=(max(8.0, 0.18 * len(rows) + 2), 5))
    xs = list(range(len(rows)))
    bottom = [0.0] * len(rows)
    for comp in COMPONENTS:
        vals = [(r.energy or {}).get("split_uj", {}).get(comp, 0.0) for r in rows]
        if any(vals):
            ax.bar(xs, vals, bottom=bottom, color=COLOURS[comp], label=comp)
            bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_xticks(xs)
    ax.set_xticklabels([r.layer for r in rows], rotation=90, fontsize=6)
    ax.set_ylabel("energy per inference (uJ)")
    title = f"{rep.scenario}: {rep.network} on {rep.hardware}"
    if rep.energy_mj is not None:
        title += f"  ({rep.energy_mj:.3f} mJ, {rep.area_mm2:.2f} mm^2)"
    ax.set_title(title)
    if rows:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
