"""The scenario `host:` field (the host profile of the report's end-to-end time) and the summary
line of a written trace (check_crc values in v2, dump_mem golden images in v1)."""
from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from nvdla_sim.compiler.lower import emit_summary, emit_trace
from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.scenario.runner import context, execute, prepare
from nvdla_sim.scenario.schema import load_scenario, parse_scenario

REPO = Path(__file__).resolve().parent.parent
BASE = {"hardware": "nv_small", "network": "lenet5", "mode": "timing"}


def report_for(tmp_path, **change):
    scn = parse_scenario({**BASE, **change}, tmp_path)
    scn.outputs.formats, scn.outputs.plots = (), False
    with contextlib.redirect_stdout(io.StringIO()):
        return execute(prepare(scn), tmp_path)


def test_host_profile_sets_the_end_to_end_host(tmp_path):
    default = report_for(tmp_path)
    testbench = report_for(tmp_path, host="rtl_testbench")
    assert default.end_to_end.host == "embedded_linux"
    assert testbench.end_to_end.host == "rtl_testbench"
    assert testbench.total_cycles == default.total_cycles       # hardware time is the same
    assert testbench.end_to_end.end_to_end_cycles != default.end_to_end.end_to_end_cycles


def test_host_as_a_file_and_as_overrides(tmp_path):
    (tmp_path / "slow.yaml").write_text(
        "profile: embedded_linux\nname: slow_driver\ndriver_per_layer_ns: 200000\n"
        "sources: {driver_per_layer: a test}\n")
    slow = report_for(tmp_path, host="slow.yaml")
    fast = report_for(tmp_path, host={"profile": "embedded_linux", "driver_per_layer_ns": 0,
                                      "sources": {"driver_per_layer": "a test"}})
    assert slow.end_to_end.host == "slow_driver"
    steps = len(slow.end_to_end.changeover_cycles)
    # 200 us more per layer changeover at 1 GHz
    assert slow.end_to_end.end_to_end_cycles - fast.end_to_end.end_to_end_cycles >= \
        steps * 200_000 * 0.99


@pytest.mark.parametrize("host, message", [
    ("nope", "host: unknown host profile 'nope'"),
    (3, "host: must be a profile name, a YAML file or a mapping, got 3"),
    ("missing.yaml", "host: "),
    ({"profile": "rtl_testbench", "bogus": 1}, "host: unknown host profile field 'bogus'")])
def test_bad_host_is_a_one_line_field_error(tmp_path, host, message):
    path = tmp_path / "s.yaml"
    import yaml
    path.write_text(yaml.safe_dump({**BASE, "host": host}))
    with pytest.raises(NvdlaSimError) as exc:
        load_scenario(path)
    text = str(exc.value)
    assert text.startswith(f"{path}: {message}") and "\n" not in text


def test_emit_summary_counts_dump_mem_on_nv_full(tmp_path):
    scn = load_scenario(REPO / "scenarios" / "lenet5_nv_full_fp16.yaml")
    with contextlib.redirect_stdout(io.StringIO()):
        prep = prepare(scn)
    path, result = emit_trace(prep.plan, context(prep), tmp_path, "t")
    dumps = [line for line in path.read_text().splitlines() if line.startswith("dump_mem")]
    line = emit_summary(path, result, "--project nv_full")
    assert f"{len(dumps)} dump_mem golden images" in line and len(dumps) == 4
    assert "check_crc" not in line


def test_emit_summary_counts_check_crc_on_v2(tmp_path):
    scn = load_scenario(REPO / "scenarios" / "lenet5_nv_small.yaml")
    with contextlib.redirect_stdout(io.StringIO()):
        prep = prepare(scn)
    path, result = emit_trace(prep.plan, context(prep), tmp_path, "t")
    crcs = [line for line in path.read_text().splitlines() if "check_crc" in line]
    assert emit_summary(path, result, "--project nv_small").startswith(
        f"{path}: {len(crcs)} check_crc values from the simulator")


def test_replay_hint_names_a_config_with_the_scenarios_overrides(tmp_path):
    """A scenario whose hardware differs from its preset (clock gating on) is replayed with a
    written --hw-config, not --project, and that file loads back to the same configuration."""
    from nvdla_sim.config import load_hardware, replay_options
    gated = load_hardware({"preset": "nv_small", "clock_gating": True})
    assert replay_options(load_hardware("nv_small"), tmp_path) == "--project nv_small"
    hint = replay_options(gated, tmp_path)
    assert hint == f"--hw-config {tmp_path / 'hardware.yaml'}"
    assert load_hardware(tmp_path / "hardware.yaml") == gated
