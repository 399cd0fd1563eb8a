"""The join (compiler/lower.py): scenarios lowered to one register program and run on the engine,
end to end, in values+timing and timing-only modes; `nvdla-sim run` / `compile --emit-cfg`."""
from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from nvdla_sim.cli import main
from nvdla_sim.compiler.emit import read_output
from nvdla_sim.compiler.lower import lower, run_lowered
from nvdla_sim.config import load_hardware
from nvdla_sim.engine import Engine
from nvdla_sim.scenario.runner import context, execute, prepare
from nvdla_sim.scenario.schema import load_scenario

REPO = Path(__file__).resolve().parent.parent
LENET = REPO / "scenarios" / "lenet5_nv_small.yaml"
TINYMIX = REPO / "scenarios" / "tinymix_nv_large.yaml"


def quiet(fn, *args):
    with contextlib.redirect_stdout(io.StringIO()):
        return fn(*args)


def scenario(path: Path, **changes):
    scn = load_scenario(path)
    for key, value in changes.items():
        setattr(scn, key, value)
    return scn


def layers_scenario(tmp_path: Path, layers: list, shape, hardware="nv_small", **top) -> Path:
    data = {"name": "t", "hardware": hardware, "network": {"name": "t", "input": list(shape),
                                                          "layers": layers},
            "input": {"seed": 2}, "weights": {"seed": 2},
            "outputs": {"directory": str(tmp_path / "out"), "formats": ["json"], "plots": False},
            **top}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
def lenet_values(tmp_path_factory):
    out = tmp_path_factory.mktemp("lenet")
    prep = prepare(load_scenario(LENET))
    ctx = context(prep)
    lowered = lower(prep.plan, ctx)
    result = run_lowered(lowered, ctx)
    report = quiet(execute, prepare(load_scenario(LENET)), out)
    return prep, ctx, lowered, result, report, out


def test_lenet5_end_to_end_int8_sqnr(lenet_values):
    _, _, _, result, report, out = lenet_values
    final = report.rows[-1]
    assert final.layer == "ip2" and final.sqnr_db >= 20.0      # the bar on a seeded input
    assert all(r.sqnr_db is not None and r.sqnr_db >= 20.0 for r in report.rows)
    assert report.total_cycles == result.total_cycles > 0
    assert all(r.cycles and r.cycles > 0 and r.bound for r in report.rows)
    assert sum(r.cycles for r in report.rows) == pytest.approx(report.total_cycles)
    saved = json.loads((out / "report.json").read_text())
    assert saved["ms"] == pytest.approx(report.ms) and (out / "report.csv").is_file()
    assert (out / "layer_cycles.png").is_file()


def test_pieces_equal_the_whole_program(lenet_values):
    """Running step by step (as lower_and_run does) leaves the memory the whole program leaves."""
    prep, ctx, lowered, result, _, _ = lenet_values
    whole = Engine(ctx.hw, ctx.dram, ctx.clock_mhz).run(lowered.program)
    for step in lowered.steps:
        for ref, placement in step.outputs:
            cube = read_output(whole.engine, placement)
            got = result.outputs[ref.tensor][ref.channel_offset:ref.channel_offset + ref.channels]
            assert np.array_equal(cube, got), step.name


def test_image_input_for_the_first_layer(lenet_values):
    _, _, lowered, _, _, _ = lenet_values
    data = lowered.buffers["data"]
    assert (data.atom, data.line_stride) == (1, 32)          # R8 image, 32-byte lines
    regs = {c.name: c.value for c in lowered.program.commands[:200] if hasattr(c, "name")}
    assert regs["CDMA.D_DATAIN_FORMAT"] & 1 == 1              # PIXEL


def test_timing_only_has_the_same_cycles(lenet_values):
    _, _, _, result, _, _ = lenet_values
    scn = scenario(LENET, mode="timing-only")
    assert not scn.values
    prep = prepare(scn)
    timed = run_lowered(lower(prep.plan, context(prep)), context(prep))
    assert timed.outputs == {}
    assert timed.total_cycles == pytest.approx(result.total_cycles)
    assert [t.cycles for t in timed.layers] == pytest.approx([t.cycles for t in result.layers])
    assert not any(type(c).__name__ == "MemLoad" for c in lower(prep.plan, context(prep)).program.commands)


def test_cvsram_placement_changes_timing_not_values(tmp_path):
    """tinymix with 256 KiB of CVSRAM: buffers reuse CVSRAM once dead; the INT8 values are those
    of an all-DRAM placement."""
    with_sram = prepare(load_scenario(TINYMIX))
    ctx = context(with_sram)
    lowered = lower(with_sram.plan, ctx)
    in_sram = [p for p in lowered.buffers.values() if p.space == "CVSRAM"]
    assert len(in_sram) >= 3
    addresses = [p.address for p in in_sram]
    assert len(set(addresses)) < len(addresses)                # a dead buffer's bytes reused
    a = run_lowered(lowered, ctx)
    dram_only = scenario(TINYMIX)
    dram_only.memory.cvsram, dram_only.memory.cvsram_bytes = None, 0
    prep_b = prepare(dram_only)
    b = run_lowered(lower(prep_b.plan, context(prep_b)), context(prep_b))
    assert a.outputs.keys() == b.outputs.keys()
    for name in a.outputs:
        assert np.array_equal(a.outputs[name], b.outputs[name]), name
    assert sum(t.cvsram_read_bytes for t in a.layers) > 0
    assert sum(t.cvsram_read_bytes for t in b.layers) == 0


def test_pdp_unfused_when_the_convolution_splits(tmp_path):
    """A convolution split by height cannot stream to PDP: the pooling runs from DRAM."""
    path = layers_scenario(tmp_path, [
        {"name": "c", "type": "conv", "out_channels": 16, "kernel": 3, "pad": 1, "relu": True},
        {"name": "p", "type": "pool", "method": "max", "kernel": 2}], [16, 96, 96])
    report = quiet(execute, prepare(load_scenario(path)), tmp_path / "out")
    row = report.rows[0]
    assert "split by height" in row.note and "PDP not on the fly" in row.note
    assert row.sqnr_db > 30


def test_gpu_fallback_between_dla_layers(tmp_path, capsys):
    """A 9x9 pooling window (DLA: at most 8) runs on the GPU between two convolutions."""
    layers = [{"name": "c1", "type": "conv", "out_channels": 8, "kernel": 3, "pad": 1, "relu": True},
              {"name": "big", "type": "pool", "method": "avg", "kernel": 9, "stride": 1, "pad": 4},
              {"name": "c2", "type": "conv", "out_channels": 8, "kernel": 3, "pad": 1}]
    path = layers_scenario(tmp_path, layers, [8, 16, 16])
    report = quiet(execute, prepare(load_scenario(path)), tmp_path / "out")
    devices = {r.layer: r.device for r in report.rows}
    assert devices == {"c1": "DLA", "big": "GPU", "c2": "DLA"}
    assert report.rows[-1].sqnr_db > 25
    code = main(["compile", str(path), "--emit-cfg", str(tmp_path / "cfg")])
    err = capsys.readouterr().err.strip()
    assert code != 0 and "'big'" in err and "GPU" in err and err.count("\n") == 0


def test_cli_run_and_emit_cfg_replay(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", str(LENET), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "total:" in text and " ms at 1000 MHz" in text and "fps" in text
    assert main(["compile", str(LENET), "--emit-cfg", str(tmp_path / "cfg")]) == 0
    capsys.readouterr()
    folder = tmp_path / "cfg" / "lenet5_nv_small"
    assert main(["replay", str(folder), "--project", "nv_small", "--quiet"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert sum(line.endswith("PASS") for line in lines) == 4     # one check per hardware layer


def test_resnet50_scenario_prints_the_estimator(tmp_path):
    """The estimator's figure is printed beside ResNet-50 on its configuration (timing-only)."""
    from nvdla_sim.report.tables import format_console
    scn = scenario(REPO / "scenarios" / "resnet50_nv_large.yaml", mode="timing")
    scn.outputs.formats, scn.outputs.plots = (), False
    report = quiet(execute, prepare(scn), tmp_path)
    text = format_console(report)
    assert "7.11 ms" in text and report.estimator_ms == 7.11
    assert 3.0 < report.ms < 12.0
    assert len(report.rows) == 54 and all(r.cycles for r in report.rows)


BROKEN = [
    ({"network": {"onnx": "missing.onnx"}}, "network.onnx: file not found"),
    ({"hardware": "nv_tiny"}, "hardware.preset: unknown hardware preset"),
    ({"memory": {"dram_gbps": -10}}, "memory.dram_gbps: must be > 0, got -10"),
    ({"gpu_fallback": False, "network": {"input": [8, 16, 16], "layers": [
        {"name": "big", "type": "pool", "method": "max", "kernel": 9, "stride": 1}]}},
     "gpu_fallback: false, but layer 'big'"),
]


@pytest.mark.parametrize("change,expect", BROKEN, ids=["missing-network", "unknown-preset",
                                                       "negative-bandwidth", "no-fallback"])
def test_broken_scenarios_give_one_line(tmp_path, capsys, change, expect):
    data = {"hardware": "nv_small", "network": "lenet5", **change}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    code = main(["run", str(path)])
    err = capsys.readouterr().err.strip()
    assert code != 0
    assert err.count("\n") == 0 and expect in err, err


def test_timing_only_engine_matches_on_the_official_corpus():
    """Engine(compute_values=False) gives every official nv_small trace the cycles of the full
    run (the timing processes never depend on values)."""
    from conftest import NO_CORPUS, trace_tests
    from nvdla_sim.frontends.cfg_trace import parse_cfg
    tests = trace_tests("nv_small")
    if not tests:
        pytest.skip(NO_CORPUS)
    hw = load_hardware("nv_small")
    for test in tests:
        program = parse_cfg(test, 2)
        full = Engine(hw).run(program)
        timed = Engine(hw, compute_values=False).run(program)
        assert timed.cycles == full.cycles, test.name
        assert timed.checks == [c for c in full.checks if c.kind == "nothing"], test.name
