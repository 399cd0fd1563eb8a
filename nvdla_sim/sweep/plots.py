"""Sweep plots (matplotlib, Agg), one panel per network; see docs/sweeps.md for how to read them.

- `latency_vs_cbuf.png`: ms per inference against CBUF KiB (log2 axis), one line per combination
  of the other swept values; CBUF sizes that were infeasible are marked x on the axis.
- `pareto_latency_area.png`: every point's ms against its area proxy; the Pareto front (no other
  point is both smaller and faster) joined by a step line and labelled, one front per
  combination of the swept values that are not area (DRAM GB/s, clock).
- `dram_vs_cvsram.png`: DRAM MiB moved per inference against CVSRAM KiB, one line per combination
  of the other swept values that change traffic (not DRAM GB/s or clock: their points are markers
  around the line).
With energy (nvdla_sim/energy; the pareto plot then uses `area_mm2`, the proxy when absent):
- `energy_vs_area.png`: mJ per inference against mm^2, the energy/area Pareto front per
  combination of the swept values area does not count, and stars on the points of the Pareto
  front over (latency, energy, area) (`pareto.csv` lists them);
- `energy_vs_cbuf.png`: mJ per inference against CBUF KiB stacked by component (DRAM, CBUF, MAC,
  ...) for one combination of the other swept values: where DRAM energy stops falling, a bigger
  CBUF stops paying for itself.
Large sweeps (more than MAX_SERIES lines in a panel) are faceted: one small panel per value of the
categorical axes (MAC array...), the numeric axis with most values (DRAM GB/s, CBUF KiB) as a
sequential colour with a colorbar instead of a legend.  Pareto plots then label at most MAX_LABELS
front points, shortly (array, CBUF KiB), and draw dominated points faint.
Re-plot without re-running: `python -m nvdla_sim.sweep.plots OUT/results.json [PLOT_DIR]`.
"""
from __future__ import annotations

from pathlib import Path

CBUF_COLUMNS = ("cbuf_banks", "cbuf_bank_depth", "cbuf_bank_width")
AREA_COLUMNS = ("preset", "atomic_c", "atomic_k", "cbuf_banks", "cbuf_bank_depth", "cbuf_bank_width",
                "cvsram_bytes")
MAX_SERIES = 10        # more lines than this in one panel: facet + colorbar instead of a legend
MAX_LABELS = 12        # front points labelled per panel (evenly thinned along the area axis)
SERIES_COLUMNS = ("preset", "atomic_c", "atomic_k", "cbuf_banks", "cbuf_bank_depth",
                  "cbuf_bank_width", "cvsram_bytes", "dram_gbps", "clock_mhz", "mode")


def pareto_3d(rows: list[dict], keys: tuple[str, ...] = ("ms", "energy_mj", "area_mm2")) -> list[dict]:
    """Rows no other row beats or equals on every key while beating on one (smaller is better)."""
    pts = [r for r in rows if all(r.get(k) is not None for k in keys)]

    def dominates(a: dict, b: dict) -> bool:
        return all(a[k] <= b[k] for k in keys) and any(a[k] < b[k] for k in keys)
    return [r for r in pts if not any(dominates(o, r) for o in pts if o is not r)]


def area_key(rows: list[dict]) -> str:
    """`area_mm2` when every row has it, else the proxy."""
    return "area_mm2" if rows and all(r.get("area_mm2") is not None for r in rows) else "area_proxy"


def pareto_front(rows: list[dict], x: str = "area_proxy", y: str = "ms") -> list[dict]:
    """Rows no other row beats on both `x` and `y` (smaller is better), by increasing `x`."""
    front: list[dict] = []
    for r in sorted(rows, key=lambda r: (r[x], r[y])):
        if not front or r[y] < front[-1][y]:
            if front and r[x] == front[-1][x]:
                continue
            front.append(r)
    return front


def _by_network(rows: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in rows:
        out.setdefault(str(r.get("network")), []).append(r)
    return out


def _varying(rows: list[dict], exclude: tuple[str, ...], extra: list[str]) -> list[str]:
    cols = [c for c in (*SERIES_COLUMNS, *extra) if c not in exclude]
    return [c for c in cols if len({repr(r.get(c)) for r in rows}) > 1]


def _series(rows: list[dict], cols: list[str], x: str) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in rows:
        label = ", ".join(f"{c}={_fmt(r.get(c))}" for c in cols) or "all points"
        out.setdefault(label, []).append(r)
    return {k: sorted(v, key=lambda r: r[x]) for k, v in out.items()}


def _fmt(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _extra_columns(rows: list[dict]) -> list[str]:
    """Axes given as scenario field paths (dotted column names)."""
    return sorted({k for r in rows for k in r if "." in k})


def _figure(n: int, title: str):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    cols = min(n, 2)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(7.5 * cols, 5 * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    fig.suptitle(title)
    return plt, fig, list(axes.flat[:n])


def _finish(plt, fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _independent(rows: list[dict], cols: list[str]) -> list[str]:
    """`cols` without those another kept column determines (a preset fixes atomic_c/k and the bank
    width): they add nothing to a label or a facet."""
    kept: list[str] = []
    for c in cols:
        def fixes(k: str) -> bool:
            seen: dict[str, str] = {}
            return all(seen.setdefault(repr(r.get(k)), repr(r.get(c))) == repr(r.get(c)) for r in rows)
        if not any(fixes(k) for k in kept):
            kept.append(c)
    return kept


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _split_axes(rows: list[dict], cols: list[str]) -> tuple[list[str], str | None]:
    """(facet columns, colour column) for a panel with too many lines: the numeric column with
    most values is the colour, the others are facets."""
    cols = _independent(rows, cols)
    numeric = [c for c in cols if all(_is_number(r.get(c)) for r in rows)]
    colour = max(numeric, key=lambda c: len({r.get(c) for r in rows}), default=None)
    return [c for c in cols if c != colour], colour


def _norm(values: list[float]):
    """Log colour scale when the values span a decade or more (bandwidths, sizes), else linear."""
    from matplotlib.colors import LogNorm, Normalize
    lo, hi = min(values), max(values)
    if lo == hi:
        hi = lo + 1
    return LogNorm(lo, hi) if lo > 0 and hi / lo >= 8 else Normalize(lo, hi)


def _facet_figure(n: int, title: str):
    """A grid of small panels sharing axes, constrained layout (room for a colorbar and a legend
    outside the data without tight_layout warnings); <= 4 panels a row, <= ~1700 px wide."""
    import math
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    cols = min(4, max(1, math.ceil(math.sqrt(n))))
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols + 1.2, 2.8 * rows + 1.0),
                             squeeze=False, sharex=True, sharey=True, layout="constrained")
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    fig.suptitle(title)
    return plt, fig, list(axes.flat[:n])


def _finish_facets(plt, fig, path: Path, axes: list, norm, colour: str, handles: list,
                   ticks: list[float] = ()) -> Path:
    """Colorbar ticked at the swept values, legend (few proxy entries) below the panels."""
    from matplotlib.cm import ScalarMappable
    if norm is not None:
        from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator
        bar = fig.colorbar(ScalarMappable(norm=norm, cmap=CMAP), ax=axes, shrink=0.8,
                           label=AXIS_NAMES.get(colour, colour))
        bar.ax.yaxis.set_major_locator(FixedLocator(_thin(sorted(set(ticks)), 10)))
        bar.ax.yaxis.set_minor_locator(NullLocator())
        bar.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    if handles:
        fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 4),
                   fontsize=8, frameon=False)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


CMAP = "viridis"
AXIS_NAMES = {"dram_gbps": "DRAM GB/s", "cbuf_kib": "CBUF KiB", "clock_mhz": "clock MHz",
              "cvsram_bytes": "CVSRAM bytes"}


def _facet_groups(rows: list[dict], facet_cols: list[str]) -> list[tuple[str, str, list[dict]]]:
    """(network, facet label, rows) in sweep order."""
    out: dict[tuple[str, str], list[dict]] = {}
    for net, rs in _by_network(rows).items():
        for r in rs:
            label = ", ".join(f"{c}={_fmt(r.get(c))}" for c in facet_cols) or "all points"
            out.setdefault((net, label), []).append(r)
    return [(net, label, rs) for (net, label), rs in out.items()]


def _facet_title(net: str, label: str, nets: int) -> str:
    return label if nets == 1 else f"{net}: {label}"


def _lines_by_colour(ax, rows: list[dict], colour: str, norm, x: str, y, style: str = "o-",
                     **kw) -> None:
    """One line per value of `colour` (its other values share the line, sorted by x)."""
    import matplotlib
    cmap = matplotlib.colormaps[CMAP]
    for value in sorted({r[colour] for r in rows}):
        s = sorted((r for r in rows if r[colour] == value), key=lambda r: r[x])
        ax.plot([r[x] for r in s], [y(r) for r in s], style, color=cmap(norm(value)),
                markersize=3, linewidth=1, **kw)


def _cbuf_axis(ax) -> None:
    from matplotlib.ticker import FuncFormatter
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))


def _latency_vs_cbuf_facets(rows: list[dict], path: Path, title: str, extra: list[str]) -> Path:
    """A panel per MAC array (the categorical axes), a line per DRAM GB/s (the numeric axis with
    most values) coloured on a colorbar."""
    from matplotlib.lines import Line2D
    ok = [r for r in rows if r.get("status") == "ok"]
    cols = _varying(ok, CBUF_COLUMNS + ("network",), extra)
    facet_cols, colour = _split_axes(ok, cols)
    groups = _facet_groups(ok, facet_cols)
    nets = len(_by_network(ok))
    plt, fig, axes = _facet_figure(len(groups), f"{title}: latency vs CBUF size")
    norm = _norm([r[colour] for r in ok]) if colour else None
    handles = []
    for ax, (net, label, rs) in zip(axes, groups):
        if colour:
            _lines_by_colour(ax, rs, colour, norm, "cbuf_kib", lambda r: r["ms"])
        else:
            ax.plot([r["cbuf_kib"] for r in rs], [r["ms"] for r in rs], "o", markersize=3)
        same = {c: rs[0].get(c) for c in facet_cols}
        bad = sorted({r["cbuf_kib"] for r in rows if r.get("status") == "infeasible"
                      and r.get("network") == net and r.get("cbuf_kib")
                      and all(repr(r.get(c)) == repr(v) for c, v in same.items())})
        if bad:
            ax.plot(bad, [0.0] * len(bad), "x", color="grey", markersize=6, clip_on=False,
                    transform=ax.get_xaxis_transform())
            handles = [Line2D([], [], marker="x", color="grey", linestyle="none",
                              label="infeasible CBUF (this array)")]
        _cbuf_axis(ax)
        _style_panel(ax, _facet_title(net, label, nets))
    _label_panels(axes, "CBUF KiB", "ms per inference")
    return _finish_facets(plt, fig, path, axes, norm, colour or "", handles,
                          [r[colour] for r in ok] if colour else [])



def _style_panel(ax, title: str) -> None:
    """One facet panel's look: small title and ticks, a grid, the y axis from 0."""
    ax.set_title(title, fontsize=8)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.tick_params(labelsize=7)


def _label_panels(axes, xlabel: str, ylabel: str) -> None:
    """Axis labels on the facets' outer edges: x under the bottom panel of each column (or a
    panel with nothing below it), y on the first column."""
    for ax in axes:
        if ax.get_subplotspec().is_last_row() or not _below_visible(ax, axes):
            ax.set_xlabel(xlabel, fontsize=8)
            ax.xaxis.set_tick_params(labelbottom=True)
        if ax.get_subplotspec().is_first_col():
            ax.set_ylabel(ylabel, fontsize=8)

def _below_visible(ax, axes: list) -> bool:
    """Whether a visible panel sits under `ax` (else it carries the x label)."""
    spec = ax.get_subplotspec()
    return any(o.get_subplotspec().rowspan.start == spec.rowspan.stop
               and o.get_subplotspec().colspan.start == spec.colspan.start for o in axes)


def plot_latency_vs_cbuf(rows: list[dict], path: Path, title: str) -> Path:
    from matplotlib.ticker import FuncFormatter
    ok = [r for r in rows if r.get("status") == "ok"]
    nets = _by_network(ok)
    plt, fig, axes = _figure(len(nets), f"{title}: latency vs CBUF size")
    extra = _extra_columns(rows)
    if any(len(_series(rs, _varying(rs, CBUF_COLUMNS + ("network",), extra), "cbuf_kib"))
           > MAX_SERIES for rs in nets.values()):
        plt.close(fig)
        return _latency_vs_cbuf_facets(rows, path, title, extra)
    for ax, (net, rs) in zip(axes, nets.items()):
        cols = _varying(rs, CBUF_COLUMNS + ("network",), extra)
        for label, s in _series(rs, cols, "cbuf_kib").items():
            ax.plot([r["cbuf_kib"] for r in s], [r["ms"] for r in s], "o-", label=label)
        bad = sorted({r["cbuf_kib"] for r in rows if r.get("status") == "infeasible"
                      and r.get("network") == net and r.get("cbuf_kib")})
        if bad:
            ax.plot(bad, [0.0] * len(bad), "x", color="grey", markersize=9, clip_on=False,
                    transform=ax.get_xaxis_transform(), label="infeasible CBUF")
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xlabel("CBUF KiB")
        ax.set_ylabel("ms per inference")
        ax.set_title(net)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    return _finish(plt, fig, path)


def plot_pareto(rows: list[dict], path: Path, title: str) -> Path:
    """A front per combination of the swept values the area proxy does not count (DRAM GB/s,
    clock...): bandwidth costs nothing in area, so one front over all of them would only show
    the fastest memory."""
    return _front_plot(rows, path, title, "ms", "ms per inference", "latency")


def plot_energy_vs_area(rows: list[dict], path: Path, title: str) -> Path:
    return _front_plot(rows, path, title, "energy_mj", "mJ per inference", "energy")


def _short_label(r: dict, sized: list[str]) -> str:
    """Array name and CBUF KiB (and CVSRAM KiB when swept): what an architect builds."""
    parts = []
    if "preset" in sized:
        parts.append(str(r.get("preset")))
    elif "atomic_c" in sized or "atomic_k" in sized:
        parts.append(f"c{r.get('atomic_c')}k{r.get('atomic_k')}")
    if any(c in sized for c in CBUF_COLUMNS) and r.get("cbuf_kib") is not None:
        parts.append(f"{r['cbuf_kib']:g}K")
    if "cvsram_bytes" in sized:
        parts.append(f"sram {r['cvsram_bytes'] // 1024}K")
    return " ".join(parts)


def _thin(points: list, n: int) -> list:
    """At most `n` of `points`, evenly spread, first and last kept."""
    if len(points) <= n:
        return points
    return [points[round(i * (len(points) - 1) / (n - 1))] for i in range(n)]


def _spaced(points: list[tuple[dict, str]], x: str, y: str) -> list[tuple[dict, str]]:
    """Drop labels that would sit on an earlier one (closer than 1/14 of the x range and 1/12 of
    the y range): clusters of small designs otherwise print over each other."""
    if not points:
        return points
    xs = [r[x] for r, _ in points]
    ys = [r[y] for r, _ in points]
    dx = (max(xs) - min(xs)) / 14 or 1.0
    dy = (max(ys) - min(ys)) / 12 or 1.0
    kept: list[tuple[dict, str]] = []
    for r, text in points:
        if all(abs(r[x] - k[x]) >= dx or abs(r[y] - k[y]) >= dy for k, _ in kept):
            kept.append((r, text))
    return kept


def _front_plot(rows: list[dict], path: Path, title: str, y: str, ylabel: str, what: str) -> Path:
    import matplotlib
    from matplotlib.lines import Line2D
    ok = [r for r in rows if r.get("status") == "ok" and r.get(y) is not None]
    nets = _by_network(ok)
    x = area_key(ok)
    xlabel = ("area mm^2 (CACTI SRAM + datapaths, docs/energy.md)" if x == "area_mm2" else
              "area proxy: MACs + SRAM bytes / bytes_per_mac")
    extra = _extra_columns(rows)
    plan = {}
    for net, rs in nets.items():
        varying = _varying(rs, ("network",), extra)
        sized = [c for c in varying if c in AREA_COLUMNS]
        # Latency: a front per memory/clock combination (bandwidth costs no area).  Energy hardly
        # depends on them (leakage only), so one front over every point.
        others = [c for c in varying if c not in AREA_COLUMNS] if what == "latency" else []
        plan[net] = (sized, others, _series(rs, others, x))
    many = any(len(groups) > MAX_SERIES for _, _, groups in plan.values())
    fig_title = f"{title}: {what} vs {'area' if x == 'area_mm2' else 'area proxy (MAC-equivalents)'}"
    if many:
        plt, fig, axes = _facet_figure(max(1, len(nets)), fig_title)
        fig.set_size_inches(min(9.0 * len(nets), 16.0), 6.0)
    else:
        plt, fig, axes = _figure(max(1, len(nets)), fig_title)
    norm, colour = None, None
    for ax, (net, rs) in zip(axes, nets.items()):
        sized, others, groups = plan[net]
        short = many or len(sized) > 3     # long "8, 8, 16, 512, 8" labels only for few axes
        if many:
            colour = _split_axes(rs, others)[1]
            norm = _norm([r[colour] for r in ok]) if colour else None
        labelled: dict[float, tuple[dict, str]] = {}
        for label, group in groups.items():
            front = pareto_front(group, x, y)
            on_front = {id(r) for r in front}
            if many and colour:
                c = matplotlib.colormaps[CMAP](norm(group[0][colour]))
                faint = [r for r in group if id(r) not in on_front]
                ax.plot([r[x] for r in faint], [r[y] for r in faint], ".", color=c, alpha=0.25,
                        markersize=4)
            else:
                points = ax.plot([r[x] for r in group], [r[y] for r in group], "o",
                                 alpha=0.35 if len(group) <= 50 else 0.12)
                c = points[0].get_color()
            xs = [r[x] for r in front]
            ys = [r[y] for r in front]
            ax.step(xs, ys, where="post", color=c, linewidth=1 if many else 1.5)
            ax.plot(xs, ys, "o", color=c, markersize=4 if many else 6,
                    label=None if many else f"front: {label}")
            for r in front:     # one label per design (same area on every front), on the lowest
                text = (_short_label(r, sized) if short
                        else ", ".join(_fmt(r.get(c)) for c in sized))
                if r[x] not in labelled or r[y] < labelled[r[x]][0][y]:
                    labelled[r[x]] = (r, text)
        chosen = _thin(_spaced([labelled[k] for k in sorted(labelled)], x, y), MAX_LABELS)
        for i, (r, text) in enumerate(chosen):
            ax.annotate(text, (r[x], r[y]), textcoords="offset points",
                        xytext=(4, 4 if i % 2 == 0 else -10), fontsize=6 if not many else 7,
                        bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "alpha": 0.7,
                              "edgecolor": "none"} if many else None)
        if what == "energy" and x == "area_mm2":
            best = pareto_3d(rs)
            ax.plot([r[x] for r in best], [r[y] for r in best], "*", color="black", markersize=9,
                    fillstyle="none", label="Pareto over (latency, energy, area)")
        if sized:
            names = ", ".join(sized)
            if short:
                names = ", ".join(n for n, on in (
                    ("array", bool({"preset", "atomic_c", "atomic_k"} & set(sized))),
                    ("CBUF KiB", bool(set(CBUF_COLUMNS) & set(sized))),
                    ("CVSRAM KiB", "cvsram_bytes" in sized)) if on)
            more = f" ({len(chosen)} of {len(labelled)} front designs)" if len(chosen) < len(labelled) else ""
            ax.text(0.99, 0.99, f"labels: {names}{more}", transform=ax.transAxes,
                    ha="right", va="top", fontsize=7)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(net)
        if what == "latency":
            ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        if not many:
            ax.legend(fontsize=7, loc="lower left" if what == "latency" else "best")
    if many:
        handles = [Line2D([], [], color="grey", marker="o", markersize=4,
                          label=f"Pareto front per {AXIS_NAMES.get(colour, colour or 'combination')}"),
                   Line2D([], [], color="grey", marker=".", linestyle="none", alpha=0.4,
                          label="dominated designs")]
        if what == "energy" and x == "area_mm2":
            handles.append(Line2D([], [], color="black", marker="*", fillstyle="none",
                                  linestyle="none", label="Pareto over (latency, energy, area)"))
        return _finish_facets(plt, fig, path, axes, norm, colour or "", handles,
                          [r[colour] for r in ok] if colour else [])
    return _finish(plt, fig, path)


SPLIT = ("dram", "cvsram", "cbuf", "mac", "cacc", "sdp", "pdp", "cdp", "leakage")


def plot_energy_vs_cbuf(rows: list[dict], path: Path, title: str) -> Path:
    """Stacked energy by component against CBUF KiB, for the combination of the other swept
    values with the most points (the middle one of equals)."""
    from matplotlib.ticker import FuncFormatter
    from ..energy.plots import COLOURS
    ok = [r for r in rows if r.get("status") == "ok" and r.get("energy_mj") is not None]
    nets = _by_network(ok)
    plt, fig, axes = _figure(max(1, len(nets)), f"{title}: energy vs CBUF size by component")
    extra = _extra_columns(rows)
    for ax, (net, rs) in zip(axes, nets.items()):
        cols = _varying(rs, CBUF_COLUMNS + ("network",), extra)
        series = _series(rs, cols, "cbuf_kib")
        most = max(len(v) for v in series.values())
        labels = [k for k, v in series.items() if len(v) == most]
        label = labels[len(labels) // 2]
        s = series[label]
        xs = [r["cbuf_kib"] for r in s]
        stack = [[r.get(f"energy_{c}_mj") or 0.0 for r in s] for c in SPLIT]
        names = [c for c, v in zip(SPLIT, stack) if any(v)]
        key = {c.lower(): c for c in COLOURS}
        ax.stackplot(xs, *[v for v in stack if any(v)], labels=[key[c] for c in names],
                     colors=[COLOURS[key[c]] for c in names], alpha=0.85)
        ax.plot(xs, [r["energy_dram_mj"] or 0.0 for r in s], "k--", linewidth=1,
                label="DRAM alone")
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xlabel("CBUF KiB")
        ax.set_ylabel("mJ per inference")
        ax.set_title(f"{net} ({label})", fontsize=9)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="upper right")
    return _finish(plt, fig, path)


def write_pareto_csv(rows: list[dict], path: Path) -> Path:
    """The points of the Pareto front over (ms, energy_mj, area_mm2), per network."""
    import csv
    import json
    cols = ["network", "key", "params", "ms", "energy_mj", "area_mm2", "avg_power_mw", "edp",
            "cbuf_kib", "dram_bytes"]
    ok = [r for r in rows if r.get("status") == "ok"]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for net, rs in _by_network(ok).items():
            for r in sorted(pareto_3d(rs), key=lambda r: r["area_mm2"]):
                w.writerow(["" if r.get(c) is None else
                            json.dumps(r[c], sort_keys=True) if isinstance(r.get(c), dict) else r[c]
                            for c in cols])
    return path


def _dram_vs_cvsram_facets(rows: list[dict], path: Path, title: str, exclude: tuple[str, ...],
                           extra: list[str]) -> Path:
    """A panel per MAC array, CBUF KiB (in place of its bank columns) as colour."""
    ok = [r for r in rows if r.get("status") == "ok"]
    cols = [c for c in _varying(ok, exclude, extra) if c not in CBUF_COLUMNS]
    unswept = len({r["cvsram_bytes"] for r in ok}) == 1
    # CVSRAM not swept: a single x value says nothing, so CBUF KiB (what does change the traffic)
    # takes the x axis; else CBUF KiB is the colour.
    xcol, xlabel = ("cbuf_kib", "CBUF KiB") if unswept else ("cvsram_kib", "CVSRAM KiB")
    if len(cols) < len(_varying(ok, exclude, extra)) and not unswept:
        cols.append("cbuf_kib")
    facet_cols, colour = _split_axes(ok, cols)
    groups = _facet_groups(ok, facet_cols)
    nets = len(_by_network(ok))
    plt, fig, axes = _facet_figure(len(groups), f"{title}: DRAM traffic vs CVSRAM size")
    norm = _norm([r[colour] for r in ok]) if colour else None
    for ax, (net, label, rs) in zip(axes, groups):
        mib = lambda r: r["dram_bytes"] / 2**20  # noqa: E731
        kib = [dict(r, cvsram_kib=r["cvsram_bytes"] / 1024) for r in rs]
        if colour:
            _lines_by_colour(ax, kib, colour, norm, xcol, mib)
        else:
            xs = sorted({r[xcol] for r in kib})
            mean = [sum(mib(r) for r in kib if r[xcol] == v) / sum(1 for r in kib if r[xcol] == v)
                    for v in xs]
            ax.plot(xs, mean, "-", color="C0", linewidth=1)
            ax.plot([r[xcol] for r in kib], [mib(r) for r in kib], "o", color="C0", markersize=3)
        if unswept:
            _cbuf_axis(ax)
        _style_panel(ax, _facet_title(net, label, nets))
    _label_panels(axes, xlabel, "DRAM MiB / inference")
    if unswept:
        fig.get_layout_engine().set(h_pad=0.1)
        fig.supxlabel(f"CVSRAM is not swept ({ok[0]['cvsram_bytes'] // 1024} KiB at every point): "
                      "DRAM traffic per MAC array against CBUF KiB; add a cvsram_bytes axis for "
                      "the CVSRAM trade-off", fontsize=8)
    return _finish_facets(plt, fig, path, axes, norm, colour or "", [],
                          [r[colour] for r in ok] if colour else [])


def plot_dram_vs_cvsram(rows: list[dict], path: Path, title: str) -> Path:
    """Lines by the swept values that change traffic (CBUF, MAC array...); DRAM GB/s and clock
    change time, not bytes, so their points share a line (its mean) and show as markers."""
    ok = [r for r in rows if r.get("status") == "ok"]
    nets = _by_network(ok)
    plt, fig, axes = _figure(len(nets), f"{title}: DRAM traffic vs CVSRAM size")
    extra = _extra_columns(rows)
    exclude = ("cvsram_bytes", "network", "dram_gbps", "clock_mhz")
    if any(len(_series(rs, _varying(rs, exclude, extra), "cvsram_bytes")) > MAX_SERIES
           for rs in nets.values()):
        plt.close(fig)
        return _dram_vs_cvsram_facets(rows, path, title, exclude, extra)
    for ax, (net, rs) in zip(axes, nets.items()):
        cols = _varying(rs, exclude, extra)
        for label, s in _series(rs, cols, "cvsram_bytes").items():
            xs = sorted({r["cvsram_bytes"] for r in s})
            mean = [sum(r["dram_bytes"] for r in s if r["cvsram_bytes"] == x)
                    / sum(1 for r in s if r["cvsram_bytes"] == x) / 2**20 for x in xs]
            line = ax.plot([x / 1024 for x in xs], mean, "-", label=label)
            ax.plot([r["cvsram_bytes"] / 1024 for r in s], [r["dram_bytes"] / 2**20 for r in s],
                    "o", color=line[0].get_color())
        if len({r["cvsram_bytes"] for r in rs}) == 1:
            ax.text(0.5, 0.5, f"CVSRAM is not swept ({rs[0]['cvsram_bytes'] // 1024} KiB at every "
                    "point):\nadd a cvsram_bytes axis (a preset with a secondary memory interface)",
                    transform=ax.transAxes, ha="center", va="center", fontsize=8,
                    bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "#999999"})
        ax.set_xlabel("CVSRAM KiB")
        ax.set_ylabel("DRAM MiB per inference (read + write)")
        ax.set_title(net)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    return _finish(plt, fig, path)


def plot_all(rows: list[dict], out_dir: Path, title: str) -> list[Path]:
    out_dir = Path(out_dir)
    files = [plot_latency_vs_cbuf(rows, out_dir / "latency_vs_cbuf.png", title),
             plot_pareto(rows, out_dir / "pareto_latency_area.png", title),
             plot_dram_vs_cvsram(rows, out_dir / "dram_vs_cvsram.png", title)]
    if any(r.get("status") == "ok" and r.get("energy_mj") is not None for r in rows):
        files += [plot_energy_vs_area(rows, out_dir / "energy_vs_area.png", title),
                  plot_energy_vs_cbuf(rows, out_dir / "energy_vs_cbuf.png", title),
                  write_pareto_csv(rows, out_dir / "pareto.csv")]
    return files


def replot(results_json: Path, out_dir: Path | None = None) -> list[Path]:
    """Draw the plots again from a sweep's `results.json` (no point is re-run)."""
    import json
    from ..errors import NvdlaSimError
    results_json = Path(results_json)
    try:
        data = json.loads(results_json.read_text())
        rows = data["rows"]
        name = data.get("sweep") or results_json.parent.name
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise NvdlaSimError(f"{results_json}: not a sweep results.json ({e.__class__.__name__}: "
                            f"{e})") from None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise NvdlaSimError(f"{results_json}: field 'rows' must be a list of objects")
    if not any(r.get("status") == "ok" for r in rows):
        raise NvdlaSimError(f"{results_json}: no point with status ok, nothing to plot")
    out = Path(out_dir) if out_dir is not None else results_json.parent
    out.mkdir(parents=True, exist_ok=True)
    return plot_all(rows, out, str(name))


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys
    from ..errors import NvdlaSimError
    ap = argparse.ArgumentParser(prog="python -m nvdla_sim.sweep.plots",
                                 description="Re-draw a sweep's plots from its results.json.")
    ap.add_argument("results", type=Path, help="OUT/results.json written by nvdla-sim sweep")
    ap.add_argument("out_dir", type=Path, nargs="?", help="where to write (default: beside it)")
    args = ap.parse_args(argv)
    try:
        for f in replot(args.results, args.out_dir):
            print(f)
    except NvdlaSimError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
