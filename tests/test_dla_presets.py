"""The xavier_dla / orin_dla presets: they load through the configuration validator, carry the
public figures they cite, and run the existing networks."""
from __future__ import annotations

import yaml

from nvdla_sim.compiler.dla_rules import DLA_TARGETS, dla_target
from nvdla_sim.config import load_hardware, preset_names
from nvdla_sim.scenario.runner import execute, prepare
from nvdla_sim.scenario.schema import parse_scenario


def test_presets_load_and_cite_sources():
    for name in ("xavier_dla", "orin_dla"):
        assert name in preset_names()
        hw = load_hardware(name)
        assert set(hw.data_types) == {"int8", "fp16"}        # TensorRT: FP16 and INT8 only
        assert hw.cbuf.banks == 16                           # numConvBufBankAllotted
        assert hw.secondary_memif is not None                # the managed SRAM
        assert dla_target(hw) is DLA_TARGETS[name]
        text = (load_hardware.__globals__["PRESET_DIR"] / f"{name}.yaml").read_text()
        lines = text.splitlines()
        for prev, line in zip(lines, lines[1:]):    # every value says where it is from
            if line and not line.startswith(("#", " ", "name:", "energy_table:")):
                assert "#" in line or prev.startswith("#"), line
        assert "assumption" in text
    assert dla_target(load_hardware({"preset": "xavier_dla", "pdp_throughput": 4})) is not None
    assert dla_target(load_hardware("nv_full")) is None


def test_xavier_macs_match_the_public_figure():
    """'up to 5 TOPS INT8 / 2.5 TFLOPS FP16' per Xavier DLA: 2 ops per MAC at the DLA clock."""
    hw, target = load_hardware("xavier_dla"), DLA_TARGETS["xavier_dla"]
    int8_tops = 2 * hw.macs * target.clock_mhz * 1e6 / 1e12
    assert 5.0 <= int8_tops < 6.0
    assert target.managed_sram_default == 1 << 20 and DLA_TARGETS["orin_dla"].managed_sram_default == 512 << 10


def test_orin_macs_match_the_public_figure():
    """'105 INT8 sparse TOPS' for two Orin DLA cores: 26 dense TOPS per core at 1.6 GHz."""
    hw, target = load_hardware("orin_dla"), DLA_TARGETS["orin_dla"]
    dense_tops_per_core = 105 / 2 / 2
    assert hw.macs == 8192
    assert abs(2 * hw.macs * target.clock_mhz * 1e6 / 1e12 - dense_tops_per_core) < 0.5


SCN = """
name: %s_lenet
hardware: %s
clock_mhz: 1000
memory: {dram_gbps: 10, dram_latency_ns: 100, cvsram_bytes: 0}
network: %s
precision: %s
mode: timing
outputs: {directory: %s, formats: [json], plots: false}
"""


def run(tmp_path, hw, net="lenet5", precision="int8"):
    scn = parse_scenario(yaml.safe_load(SCN % (hw, hw, net, precision, tmp_path / hw)), tmp_path)
    return execute(prepare(scn))


def test_dla_presets_run_like_nv_full(tmp_path):
    """xavier_dla: nv_full's engine configuration, the same cycles; orin_dla's 8192-MAC array
    runs LeNet-5's conv2 (20 -> 50 channels, 5x5, 8x8 output) faster."""
    ref = run(tmp_path, "nv_full")
    for hw in ("xavier_dla", "orin_dla"):
        got = run(tmp_path, hw, precision="fp16")
        assert got.total_cycles > 0
    assert run(tmp_path, "xavier_dla").total_cycles == ref.total_cycles
    orin = {r.layer: r for r in run(tmp_path, "orin_dla").rows}
    assert [r.layer for r in ref.rows] == list(orin)
    assert orin["conv2"].cycles < next(r.cycles for r in ref.rows if r.layer == "conv2")


def test_resnet50_timing_only_on_orin(tmp_path):
    rep = run(tmp_path, "orin_dla", "resnet50")
    assert rep.total_cycles > 0
    assert all(row.device == "DLA" for row in rep.rows)
