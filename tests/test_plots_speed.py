"""The report's plots drawn cheaply and beside the run (issue 20): what each figure draws (one
bar collection per colour, bars as long as the report's numbers, every label and legend entry),
the PNG files, and the forked plot process (same bytes as drawing inline, figures side by side,
errors raised in the parent, no process left behind).  No timing here: benchmarks/bench_speed.py
prints the command's seconds."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from nvdla_sim.cli import main
from nvdla_sim.compiler.lower import lower, run_lowered
from nvdla_sim.energy.model import COMPONENTS
from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.report.plot_worker import ChildTraceback, ForkedPlotter, Plotter, start_plotter
from nvdla_sim.report.tables import build_report
from nvdla_sim.scenario.runner import batch_values, context, prepare
from nvdla_sim.scenario.schema import parse_scenario

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SCENARIO = {"name": "lenet_plots", "hardware": "nv_small", "network": "lenet5", "weights": {"seed": 3},
            "mode": "values+timing"}


@pytest.fixture(scope="module")
def rep(tmp_path_factory):
    scn = parse_scenario(dict(SCENARIO), tmp_path_factory.mktemp("rep"), SCENARIO["name"])
    prep = prepare(scn)
    ctx = context(prep)
    result = run_lowered(lower(prep.plan, ctx), ctx)
    return build_report(prep, result, batch_values(prep.plan, result))


def _dla(rep, field: str):
    return [r for r in rep.rows if r.device == "DLA" and getattr(r, field) is not None]


def _bars(ax):
    """(row, left, right, face colour) of every bar the axes' collections hold."""
    from matplotlib.collections import PolyCollection
    out = []
    for coll in ax.collections:
        assert isinstance(coll, PolyCollection)
        for path, face in zip(coll.get_paths(), coll.get_facecolors()):
            xs, ys = path.vertices[:, 0], path.vertices[:, 1]
            out.append((round(float(ys.mean())), float(xs.min()), float(xs.max()), tuple(face)))
    return out


def test_cycles_figure_draws_a_bar_per_layer_as_long_as_its_cycles(rep):
    from matplotlib.colors import to_rgba
    from nvdla_sim.report.plots import BOUND_COLOURS, layer_cycles_figure
    rows = _dla(rep, "cycles")
    assert len(rows) >= 3
    fig = layer_cycles_figure(rep)
    (ax,) = fig.axes
    # one collection per bounding unit, no rectangle artist per bar
    bounds = {r.bound for r in rows}
    assert len(ax.collections) == len(bounds) and not ax.patches
    bars = sorted(_bars(ax))
    assert [b[0] for b in bars] == list(range(len(rows)))
    for (row, left, right, face), r in zip(bars, rows):
        assert left == 0 and right == pytest.approx(r.cycles)
        assert face == pytest.approx(to_rgba(BOUND_COLOURS[r.bound]))
    # names on the y axis, first layer on top; every label, the title and the legend
    assert [t.get_text() for t in ax.get_yticklabels()] == [r.layer for r in rows]
    assert ax.get_ylim()[0] > ax.get_ylim()[1]
    assert ax.get_xlabel() == "cycles per layer"
    assert rep.scenario in ax.get_title() and f"{rep.ms:.3f} ms" in ax.get_title()
    assert [t.get_text() for t in ax.get_legend().get_texts()] == \
        [f"{b} bound" for b in BOUND_COLOURS if b in bounds]
    assert ax.get_xlim()[1] >= max(r.cycles for r in rows)


def test_energy_figure_stacks_each_layers_components_to_its_energy(rep):
    from nvdla_sim.energy.plots import layer_energy_figure
    rows = _dla(rep, "energy_uj")
    fig = layer_energy_figure(rep)
    (ax,) = fig.axes
    used = [c for c in COMPONENTS if any(r.energy["split_uj"].get(c) for r in rows)]
    assert len(ax.collections) == len(used) and not ax.patches
    assert [t.get_text() for t in ax.get_legend().get_texts()] == used
    bars = _bars(ax)
    for i, r in enumerate(rows):
        mine = sorted((left, right) for row, left, right, _ in bars if row == i)
        # the segments touch end to end from 0 and add up to the row's energy
        assert mine[0][0] == 0
        assert all(a[1] == pytest.approx(b[0]) for a, b in zip(mine, mine[1:]))
        assert mine[-1][1] == pytest.approx(r.energy_uj, rel=1e-9)
    assert [t.get_text() for t in ax.get_yticklabels()] == [r.layer for r in rows]
    assert ax.get_xlabel() == "energy per inference (uJ)"
    assert f"{rep.energy_mj:.3f} mJ" in ax.get_title()


def _scenario_file(tmp_path: Path) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({**SCENARIO, "outputs": {
        "directory": str(tmp_path / "out"), "formats": ["json"]}}))
    return path


def test_the_command_draws_in_a_child_the_same_pngs_as_inline(tmp_path, rep):
    """A values+timing command: the PNGs come from the plot process (the command's own process
    never imports matplotlib), byte for byte those drawn inline, 10 inches wide at 100 dpi."""
    from PIL import Image
    from nvdla_sim.energy.plots import plot_layer_energy
    from nvdla_sim.report.plots import plot_layer_cycles
    code = ("import sys; from nvdla_sim.cli import main; rc = main(['run', sys.argv[1]]); "
            "print(rc, 'matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(_scenario_file(tmp_path))],
                         capture_output=True, text=True, check=True).stdout.split()
    assert out[-2:] == ["0", "False"]
    rows = len(_dla(rep, "cycles"))
    for plot, name in ((plot_layer_cycles, "layer_cycles.png"),
                       (plot_layer_energy, "layer_energy.png")):
        drawn = (tmp_path / "out" / name).read_bytes()
        assert drawn[:8] == PNG_MAGIC
        plot(rep, tmp_path / name)
        assert drawn == (tmp_path / name).read_bytes()
        with Image.open(tmp_path / "out" / name) as png:
            # a 0.2-inch row per layer plus 1.35 inches of title, axis and air; 3 inches at least
            assert png.size == (1000, round(100 * max(3.0, 0.2 * rows + 1.35)))


def _write_pid(path: Path) -> None:
    path.write_text(str(os.getpid()))


def _refuse(path: Path) -> None:
    raise NvdlaSimError(f"{path}: no room for the figure")


def _refuse_figure(rep, path: Path) -> None:
    _refuse(path)


def _gone(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def test_figures_are_drawn_side_by_side_and_waited_for(tmp_path):
    plotter = start_plotter(True)
    assert isinstance(plotter, ForkedPlotter)
    files = [tmp_path / f"{i}.pid" for i in range(3)]
    plotter.submit([(_write_pid, (f,)) for f in files])
    plotter.wait()
    pids = {int(f.read_text()) for f in files}          # written before wait returned
    assert len(pids) == 3 and os.getpid() not in pids   # each figure a process of its own
    assert _gone(plotter.pid)


def test_a_figures_error_is_raised_in_the_parent(tmp_path):
    plotter = start_plotter(True)
    plotter.submit([(_write_pid, (tmp_path / "a.pid",)), (_refuse, (tmp_path / "b.png",)),
                    (_write_pid, (tmp_path / "c.pid",))])
    with pytest.raises(NvdlaSimError, match="b.png: no room for the figure") as err:
        plotter.wait()
    assert isinstance(err.value.__cause__, ChildTraceback)
    assert "_refuse" in str(err.value.__cause__)         # where the child failed
    assert (tmp_path / "a.pid").is_file() and (tmp_path / "c.pid").is_file()
    assert _gone(plotter.pid)


def test_a_figure_failing_in_the_command_is_one_line(tmp_path, monkeypatch, capsys):
    import nvdla_sim.report.plots as plots
    monkeypatch.setattr(plots, "plot_layer_cycles", _refuse_figure)
    assert main(["run", str(_scenario_file(tmp_path))]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith("layer_cycles.png: no room for the figure")


def test_an_unused_plot_process_ends(tmp_path):
    plotter = start_plotter(True)
    plotter.close()                         # the run failed before its report
    assert _gone(plotter.pid)
    plotter = start_plotter(True)
    plotter.wait()                          # nothing was submitted (no cycles to plot)
    assert _gone(plotter.pid)
    with pytest.raises(RuntimeError):
        plotter.submit([(_write_pid, (tmp_path / "late.pid",))])


def test_no_plots_no_process(tmp_path):
    plotter = start_plotter(False)          # the timing-only default: nothing forked
    assert type(plotter) is Plotter
    plotter.submit([(_write_pid, (tmp_path / "inline.pid",))])
    assert not (tmp_path / "inline.pid").exists()
    plotter.wait()
    assert int((tmp_path / "inline.pid").read_text()) == os.getpid()


def test_figures_ignore_the_style_the_process_set(tmp_path, rep):
    """What a library set before (zigzag's plot module: 22-point labels) changes no pixel."""
    import matplotlib
    from nvdla_sim.report.plots import plot_layer_cycles
    plot_layer_cycles(rep, tmp_path / "plain.png")
    with matplotlib.rc_context({"font.size": 22, "axes.labelsize": 22, "xtick.labelsize": 20,
                                "axes.titlesize": 22, "legend.fontsize": 20}):
        plot_layer_cycles(rep, tmp_path / "styled.png")
    assert (tmp_path / "plain.png").read_bytes() == (tmp_path / "styled.png").read_bytes()


def _log():
    from nvdla_sim.engine.activity import ActivityLog
    log = ActivityLog()
    for unit, kind, start, end in (("CSC", "busy", 0, 30), ("CSC", "busy", 20, 50),
                                   ("CSC", "stall", 60, 70), ("CACC", "busy", 10, 35)):
        log.add(unit, kind, start, end, "L")
    return log


def test_timeline_bins_each_units_share_of_every_bin():
    from nvdla_sim.report.timeline import utilization
    u = utilization(_log(), [], 100.0, "t", bins=4, layers=[("a", 0, 50), ("b", 50, 100)])
    assert u.units == ["CSC", "CACC"]                    # pipeline order, not by name
    assert list(u.edges) == [0, 25, 50, 75, 100]
    # overlapping busy spans count once: [0, 50) covers the first two 25-cycle bins
    assert list(u.fractions[("CSC", "busy")]) == [1, 1, 0, 0]
    assert list(u.fractions[("CSC", "stall")]) == [0, 0, 10 / 25, 0]
    assert list(u.fractions[("CACC", "busy")]) == [15 / 25, 10 / 25, 0, 0]


def test_timeline_figure_draws_the_layers_as_one_band_collection(tmp_path):
    from matplotlib.collections import LineCollection, PolyCollection
    from nvdla_sim.report.timeline import draw_utilization, utilization, utilization_figure
    layers = [("conv1", 0, 40), ("pool1", 40, 55), ("fc1", 55, 100)]
    u = utilization(_log(), [], 100.0, "tiny", bins=50, layers=layers)
    fig = utilization_figure(u)
    ax_layers, ax_units = fig.axes
    (bands,) = ax_layers.collections
    assert isinstance(bands, PolyCollection) and len(bands.get_paths()) == 3
    assert [sorted({x for x, _ in p.vertices}) for p in bands.get_paths()] == \
        [[0, 40], [40, 55], [55, 100]]
    # the boundaries: one line collection through the unit panel, a line per layer start
    (bounds,) = [c for c in ax_units.collections if isinstance(c, LineCollection)]
    assert sorted(seg[0][0] for seg in bounds.get_segments()) == [0, 40, 55]
    names = {t.get_text() for t in ax_layers.texts}
    assert {"conv1", "pool1", "fc1", "3 layers"} <= names    # wide bands: every name fits
    assert [t.get_text() for t in ax_units.get_yticklabels()] == ["CSC", "CACC"]
    assert ax_units.get_xlim() == (0, 100) and ax_layers.get_title(loc="left") == "tiny"
    assert "cycle (run: 100 cycles)" == fig.axes[-1].get_xlabel()
    draw_utilization(u, tmp_path / "t.png")
    from PIL import Image
    with Image.open(tmp_path / "t.png") as png:          # 16 x (1.3 + 2 + 1.2) inches
        assert png.size == (1600, 450)


def test_no_fork_beside_another_thread(tmp_path):
    """A process running other Python threads (a notebook kernel) draws inline."""
    import threading
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        plotter = start_plotter(True)
    finally:
        stop.set()
        other.join()
    assert type(plotter) is Plotter


def test_figures_pickle_cannot_send_are_drawn_here(tmp_path):
    plotter = start_plotter(True)
    unpicklable = (lambda: None,)                     # e.g. a report field holding a closure
    plotter.submit([(_write_pid_of, (tmp_path / "here.pid", unpicklable))])
    assert _gone(plotter.pid)                         # the child is not needed
    plotter.wait()
    assert int((tmp_path / "here.pid").read_text()) == os.getpid()


def _write_pid_of(path: Path, _data) -> None:
    _write_pid(path)
