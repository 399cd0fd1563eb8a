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
"""
from __future__ import annotations

from pathlib import Path

CBUF_COLUMNS = ("cbuf_banks", "cbuf_bank_depth", "cbuf_bank_width")
AREA_COLUMNS = ("preset", "atomic_c", "atomic_k", "cbuf_banks", "cbuf_bank_depth", "cbuf_bank_width",
                "cvsram_bytes")
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


def plot_latency_vs_cbuf(rows: list[dict], path: Path, title: str) -> Path:
    from matplotlib.ticker import FuncFormatter
    ok = [r for r in rows if r.get("status") == "ok"]
    nets = _by_network(ok)
    plt, fig, axes = _figure(len(nets), f"{title}: latency vs CBUF size")
    extra = _extra_columns(rows)
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


def _front_plot(rows: list[dict], path: Path, title: str, y: str, ylabel: str, what: str) -> Path:
    ok = [r for r in rows if r.get("status") == "ok" and r.get(y) is not None]
    nets = _by_network(ok)
    x = area_key(ok)
    xlabel = ("area mm^2 (CACTI SRAM + datapaths, docs/energy.md)" if x == "area_mm2" else
              "area proxy: MACs + SRAM bytes / bytes_per_mac")
    plt, fig, axes = _figure(max(1, len(nets)), f"{title}: {what} vs "
                             f"{'area' if x == 'area_mm2' else 'area proxy (MAC-equivalents)'}")
    extra = _extra_columns(rows)
    for ax, (net, rs) in zip(axes, nets.items()):
        varying = _varying(rs, ("network",), extra)
        sized = [c for c in varying if c in AREA_COLUMNS]
        # Latency: a front per memory/clock combination (bandwidth costs no area).  Energy hardly
        # depends on them (leakage only), so one front over every point.
        others = [c for c in varying if c not in AREA_COLUMNS] if what == "latency" else []
        for label, group in _series(rs, others, x).items():
            points = ax.plot([r[x] for r in group], [r[y] for r in group], "o", alpha=0.35)
            colour = points[0].get_color()
            front = pareto_front(group, x, y)
            xs = [r[x] for r in front]
            ys = [r[y] for r in front]
            ax.step(xs, ys, where="post", color=colour)
            ax.plot(xs, ys, "o", color=colour, label=f"front: {label}")
            for r in front:
                ax.annotate(", ".join(_fmt(r.get(c)) for c in sized), (r[x], r[y]),
                            textcoords="offset points", xytext=(4, 4), fontsize=6)
        if what == "energy" and x == "area_mm2":
            best = pareto_3d(rs)
            ax.plot([r[x] for r in best], [r[y] for r in best], "*", color="black", markersize=9,
                    fillstyle="none", label="Pareto over (latency, energy, area)")
        if sized:
            ax.text(0.99, 0.99, "labels: " + ", ".join(sized), transform=ax.transAxes,
                    ha="right", va="top", fontsize=7)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(net)
        if what == "latency":
            ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="lower left" if what == "latency" else "best")
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


def plot_dram_vs_cvsram(rows: list[dict], path: Path, title: str) -> Path:
    """Lines by the swept values that change traffic (CBUF, MAC array...); DRAM GB/s and clock
    change time, not bytes, so their points share a line (its mean) and show as markers."""
    ok = [r for r in rows if r.get("status") == "ok"]
    nets = _by_network(ok)
    plt, fig, axes = _figure(len(nets), f"{title}: DRAM traffic vs CVSRAM size")
    extra = _extra_columns(rows)
    for ax, (net, rs) in zip(axes, nets.items()):
        cols = _varying(rs, ("cvsram_bytes", "network", "dram_gbps", "clock_mhz"), extra)
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
