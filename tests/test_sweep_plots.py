"""Sweep plots stay readable at 1,000 points (issue 20): faceted panels and a colorbar instead of
a legend per series, Pareto labels only on front points (at most 12), no matplotlib warning;
small sweeps keep one legend entry per series.  The plots are drawn from synthetic result rows
(the plotting reads only these columns), the fronts checked against a brute-force dominance."""
from __future__ import annotations

import json
import warnings

import pytest
from matplotlib.figure import Figure
from matplotlib.text import Annotation

from nvdla_sim.sweep import plots

ARRAYS = [(8, 8), (16, 8), (16, 16), (32, 8), (32, 16), (32, 32), (64, 8), (64, 16), (64, 32)]
CBUF_KIB = [16, 32, 64, 128, 256, 512, 1024, 2048]
DRAM_GBPS = [2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0, 16.0, 20.0, 25.0, 32.0, 40.0, 64.0]


def synthetic_rows() -> list[dict]:
    """1,008 points shaped like array_sweep_resnet50: compute time falls with MACs, a memory
    time with bandwidth and CBUF, small CBUFs infeasible for big arrays."""
    rows = []
    for c, k in ARRAYS:
        for kib in CBUF_KIB:
            banks = 16 if kib <= 1024 else 32
            depth = kib * 1024 // (banks * c)
            for gbps in DRAM_GBPS:
                macs = c * k
                feasible = kib * 1024 >= 64 * macs
                dram_mib = 49 + 35 * 64 / kib
                ms = 4000 / macs + dram_mib / gbps * (1 + 0.001 * macs / kib)
                area = 0.002 * macs + 0.0015 * kib
                energy = 6 + 0.003 * kib + 0.01 * dram_mib
                rows.append({
                    "status": "ok" if feasible else "infeasible", "network": "resnet50",
                    "preset": f"c{c}k{k}", "atomic_c": c, "atomic_k": k, "cbuf_banks": banks,
                    "cbuf_bank_depth": depth, "cbuf_bank_width": c, "cvsram_bytes": 0,
                    "dram_gbps": gbps, "clock_mhz": 1000.0, "mode": "timing", "cbuf_kib": float(kib),
                    "area_proxy": macs + kib * 1024 / 64, "ms": ms if feasible else None,
                    "dram_bytes": int(dram_mib * 2**20) if feasible else None,
                    "area_mm2": area, "energy_mj": energy if feasible else None,
                    "energy_dram_mj": 0.01 * dram_mib, "energy_cbuf_mj": 0.003 * kib,
                    "energy_mac_mj": 6.0, "avg_power_mw": 1.0, "edp": 1.0})
    return rows


@pytest.fixture
def saved_figures(monkeypatch):
    """Every figure a plot function saves (they close it afterwards)."""
    figs: list[Figure] = []
    original = Figure.savefig

    def keep(self, *a, **kw):
        figs.append(self)
        return original(self, *a, **kw)
    monkeypatch.setattr(Figure, "savefig", keep)
    return figs


def legends(fig: Figure) -> list:
    return list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]


def brute_front(rows: list[dict], x: str, y: str) -> set[tuple[float, float]]:
    """(x, y) of the points no other point beats on both (smaller better, ties not beaten)."""
    return {(r[x], r[y]) for r in rows
            if not any(o[x] <= r[x] and o[y] <= r[y] and (o[x], o[y]) != (r[x], r[y])
                       for o in rows)}


def test_thousand_points_are_faceted_without_warnings(tmp_path, saved_figures):
    rows = synthetic_rows()
    assert len(rows) == 1008
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        files = plots.plot_all(rows, tmp_path, "synthetic")
    assert [f.name for f in files] == ["latency_vs_cbuf.png", "pareto_latency_area.png",
                                       "dram_vs_cvsram.png", "energy_vs_area.png",
                                       "energy_vs_cbuf.png", "pareto.csv"]
    assert len(saved_figures) == 5
    for fig in saved_figures:
        assert fig.get_size_inches()[0] * 110 <= 2000
        for leg in legends(fig):
            assert len(leg.get_texts()) <= 10
    latency, pareto = saved_figures[0], saved_figures[1]
    # a panel per MAC array, DRAM GB/s on a colorbar (not 126 legend entries)
    panels = [ax for ax in latency.axes if ax.get_visible() and ax.get_title()]
    assert sorted(ax.get_title() for ax in panels) == sorted(f"preset=c{c}k{k}" for c, k in ARRAYS)
    assert any(ax.get_ylabel() == "DRAM GB/s" for ax in latency.axes)
    # Pareto: only front points labelled (fronts per DRAM GB/s), at most 12, short labels
    ok = [r for r in rows if r["status"] == "ok"]
    fronts = set().union(*(brute_front([r for r in ok if r["dram_gbps"] == g], "area_mm2", "ms")
                           for g in DRAM_GBPS))
    notes = [t for ax in pareto.axes for t in ax.texts if isinstance(t, Annotation)]
    assert 3 <= len(notes) <= plots.MAX_LABELS
    for t in notes:
        assert (t.xy[0], t.xy[1]) in fronts
        assert len(t.get_text()) <= 14 and t.get_text().split()[1].endswith("K")
    assert any(ax.get_ylabel() == "DRAM GB/s" for ax in pareto.axes)


def test_small_sweep_keeps_a_legend_per_series(tmp_path, saved_figures):
    rows = [r for r in synthetic_rows() if r["preset"] == "c64k16" and r["dram_gbps"] in
            (2.0, 5.0, 10.0, 20.0, 40.0, 64.0)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plots.plot_latency_vs_cbuf(rows, tmp_path / "l.png", "small")
    (fig,) = saved_figures
    (leg,) = legends(fig)
    texts = [t.get_text() for t in leg.get_texts()]
    assert len(texts) == 7 and texts[-1] == "infeasible CBUF"   # 6 bandwidths + infeasible marks


def test_replot_from_results_json(tmp_path, capsys):
    rows = synthetic_rows()
    (tmp_path / "results.json").write_text(json.dumps({"sweep": "syn", "rows": rows}))
    assert plots.main([str(tmp_path / "results.json"), str(tmp_path / "again")]) == 0
    assert (tmp_path / "again" / "pareto_latency_area.png").stat().st_size > 10_000
    (tmp_path / "bad.json").write_text("{not json")
    assert plots.main([str(tmp_path / "bad.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "bad.json" in err and "Traceback" not in err
