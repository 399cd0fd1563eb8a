"""What the whole `nvdla-sim run` command writes and computes once (issue 20): plots as the mode
suits unless the scenario or the command line says, the end-to-end host model reading the
program the run executed in both modes (no second lowering), legible report plots."""
from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest
import yaml

from nvdla_sim.cli import main
from nvdla_sim.compiler.lower import lower, run_lowered
from nvdla_sim.host.end_to_end import attach_host
from nvdla_sim.report.tables import build_report
from nvdla_sim.scenario.runner import batch_values, context, prepare
from nvdla_sim.scenario.schema import parse_scenario

BASE = {"hardware": "nv_small", "network": "lenet5", "weights": {"seed": 3}}


def _file(tmp_path: Path, **fields) -> Path:
    data = {**BASE, **fields}
    data.setdefault("outputs", {})
    data["outputs"] = {"directory": str(tmp_path / "out"), "formats": ["json"], **data["outputs"]}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("mode, outputs, flags, drawn", [
    ("values+timing", {}, [], True),               # values runs draw them by default
    ("timing-only", {}, [], False),                # a sizing run: the table and the JSON
    ("timing-only", {"plots": True}, [], True),    # the scenario asks
    ("timing-only", {}, ["--plots"], True),        # the command asks
    ("values+timing", {"plots": True}, ["--no-plots"], False),
])
def test_plots_follow_the_mode_unless_asked(tmp_path, mode, outputs, flags, drawn):
    path = _file(tmp_path, mode=mode, outputs=outputs)
    assert main(["run", str(path), *flags]) == 0
    assert (tmp_path / "out" / "report.json").is_file()
    assert (tmp_path / "out" / "layer_cycles.png").is_file() == drawn
    assert (tmp_path / "out" / "layer_energy.png").is_file() == drawn


def test_model_path_takes_the_plots_flag_too(tmp_path):
    # a scenario with a flag goes through the public API: --plots reaches it
    path = _file(tmp_path, mode="values+timing")
    assert main(["run", str(path), "--mode", "timing-only", "--plots"]) == 0
    assert (tmp_path / "out" / "layer_cycles.png").is_file()


def test_values_run_keeps_its_program_for_the_host_model(tmp_path):
    """The end-to-end estimate of a values run reads the program the run executed: the same
    figures as lowering the plan again without images (what it did before)."""
    scn = parse_scenario({**BASE, "mode": "values+timing"}, tmp_path)
    prep = prepare(scn)
    ctx = context(prep)
    lowered = lower(prep.plan, ctx)
    assert lowered.images
    with contextlib.redirect_stdout(io.StringIO()):
        result = run_lowered(lowered, ctx)
    assert result.timing_program is lowered
    rep = build_report(prep, result, batch_values(prep.plan, result))
    kept = rep.end_to_end
    assert kept is not None
    result.timing_program = None                # the old way: lower again without images
    attach_host(rep, prep, result)
    again = rep.end_to_end
    assert (kept.end_to_end_cycles, kept.changeover_cycles) == \
        (again.end_to_end_cycles, again.changeover_cycles)
    assert kept.end_to_end_cycles > kept.hardware_cycles


def test_layer_plots_are_legible_for_resnet50(tmp_path):
    """54 rows, names beside their bars, the legend outside the axes (not over a bar)."""
    from matplotlib.image import imread
    from nvdla_sim.energy.plots import plot_layer_energy
    from nvdla_sim.report.plots import ROW_INCHES, label_inches, plot_layer_cycles
    scn = parse_scenario({"hardware": "nv_large", "network": "resnet50", "mode": "timing"},
                         tmp_path)
    prep = prepare(scn)
    ctx = context(prep)
    result = run_lowered(lower(prep.plan, ctx), ctx)
    rep = build_report(prep, result, None)
    names = [r.layer for r in rep.rows if r.device == "DLA"]
    assert len(names) == 54
    for plot, name in ((plot_layer_cycles, "c.png"), (plot_layer_energy, "e.png")):
        plot(rep, tmp_path / name)
        png = imread(tmp_path / name)
        # a row per layer at 0.2 inch (20 pixels at 100 dpi): 8-point names do not overlap
        assert png.shape[0] >= 54 * ROW_INCHES * 100
        assert png.shape[1] == 1000
    # the fixed left margin holds the longest name (res4a_branch2c: 14 characters at 8 points)
    assert label_inches(names) >= 14 * 8 * 0.55 / 72


def test_a_timing_only_run_without_plots_never_imports_matplotlib(tmp_path):
    """The default timing-only command loads no plotting library (~0.3 s of its start)."""
    import subprocess
    import sys
    path = _file(tmp_path, mode="timing-only")
    code = ("import sys; from nvdla_sim.cli import main; rc = main(['run', sys.argv[1]]); "
            "print(rc, 'matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[-2:] == ["0", "False"]
    assert not (tmp_path / "out" / "layer_cycles.png").exists()
