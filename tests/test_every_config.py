"""Every configuration the validator accepts runs, or is refused before the run (issue 20).

Refusals: `nvdla-sim run` exits with one line naming the field, and the engine never starts
(`run_lowered` is replaced by a function that fails the test).  Before this file, nv_small with
`atomic_k: 1` simulated the whole network and then failed in the energy report; a missing
`energy_table` file, a 4 GiB CBUF and one CACTI cannot organise likewise; a CBUF too small for a convolution was refused without naming
the layer or the CBUF fields.

Accepted odd configurations run a ResNet-50 bottleneck (tests/test_array_configs.py) through the
whole `nvdla-sim run` path (compile, engine, reports, energy) and take at least each
convolution's MACs at the array's MACs per cycle.  The whole ResNet-50 on the smallest arrays
(about 5-30 CPU s and up to 2 GB each) runs with NVDLA_SIM_FULL_CONFIGS=1;
benchmarks/bench_presets.py times every preset and array variant.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

import nvdla_sim.compiler.lower as lower_module
from tests.test_array_configs import BOTTLENECK, CONV_MACS
from tests.test_fuzz_scenarios import assert_one_line_error, run_cli

FULL = os.environ.get("NVDLA_SIM_FULL_CONFIGS") == "1"

RESNET_MACS = 3_858_000_000 * 0.999     # ResNet-50's 3.858 GMAC (issue 20), rounded down


def _scenario(tmp_path: Path, hardware: dict, network="resnet50") -> Path:
    doc = {"hardware": hardware, "network": network, "mode": "timing-only", "precision": "int8",
           "memory": {"dram_gbps": 10, "dram_latency_ns": 100, "cvsram_bytes": 0},
           "outputs": {"directory": str(tmp_path / "out"), "formats": ["json"], "plots": False}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture
def no_run(monkeypatch):
    """The engine must not start: a refusal comes before the run."""
    def started(*args, **kwargs):
        raise AssertionError("the run started before the configuration was refused")
    monkeypatch.setattr(lower_module, "run_lowered", started)


@pytest.mark.parametrize("hardware,needles", [
    # 16 MACs in one kernel: the CACC delivery buffer would be 0 results wide
    ({"preset": "nv_small", "atomic_k": 1}, ["hardware.atomic_k", "at least 2"]),
    ({"preset": "nv_full", "atomic_k": 1}, ["hardware.atomic_k", "at least 2"]),
    # banks of 4 x 8 bytes: below what CACTI (the energy report's SRAM model) can size
    ({"preset": "nv_small", "cbuf": {"bank_depth": 4}}, ["cbuf.bank_depth", "CACTI"]),
    # 32 x 2^24 x 8 B = 4 GiB: CACTI's size wraps to 0 (it ran the whole network before)
    ({"preset": "nv_small", "cbuf": {"bank_depth": 1 << 24}}, ["cbuf.bank_depth", "4 GiB"]),
    ({"preset": "nv_small", "energy_table": "/nonexistent/energy.yaml"},
     ["hardware.energy_table", "no such file"]),
    # the validator's older rules, for completeness: atom wider than the array's input
    ({"preset": "nv_small", "atomic_c": 4, "cbuf": {"bank_width_bytes": 4}},
     ["hardware.memory_atomic_bytes", "atomic_c (4)"]),
    ({"preset": "nv_small", "cbuf": {"banks": 24}}, ["hardware.cbuf.banks", "power of two"]),
    # a 1-byte atom holds no 16-bit element (the compiler divided by zero)
    ({"preset": "nv_full", "memory_atomic_bytes": 1}, ["hardware.memory_atomic_bytes",
                                                       "at least 2"]),
])
def test_refused_before_the_run_naming_the_field(tmp_path, no_run, hardware, needles):
    rc, _, err = run_cli(["run", str(_scenario(tmp_path, hardware))])
    assert_one_line_error(rc, err, *needles)


@pytest.mark.parametrize("hardware,layer,needles", [
    ({"preset": "nv_small", "cbuf": {"banks": 2}}, "conv1", ["cbuf.banks", "has 2"]),
    ({"preset": "nv_small", "cbuf": {"bank_depth": 16}}, "conv1", ["cbuf.bank_depth", "16 entries"]),
    # 2-byte CBUF entries, banks of 1 KiB: the first 3x3 over 512 channels needs 8 kernels x
    # 512 x 9 B = 36 banks for one kernel group (res4's 3x3: 18 + 11 for 3 lines of 14 x 256)
    ({"preset": "nv_small", "atomic_c": 2, "memory_atomic_bytes": 2,
      "cbuf": {"bank_width_bytes": 2}}, "res5a_branch2b", ["needs 36 banks", "cbuf.banks"]),
])
def test_cbuf_too_small_for_a_layer_names_the_layer_and_fields(tmp_path, no_run, hardware,
                                                               layer, needles):
    rc, _, err = run_cli(["run", str(_scenario(tmp_path, hardware))])
    assert_one_line_error(rc, err, f"{layer}: convolution does not fit CBUF", *needles)


TINY = {"name": "tiny", "input": [8, 8, 8],
        "layers": [{"name": "c", "type": "conv", "out_channels": 8, "kernel": 1}]}


def test_a_cbuf_cacti_cannot_organise_is_refused_before_the_run(tmp_path, no_run):
    """32 banks of 16 x 8-byte entries: the network fits, but CACTI (which prices the report's
    SRAMs) finds no array organisation; that came after the whole run."""
    from nvdla_sim.energy.cacti import cacti_available
    if not cacti_available():
        pytest.skip("CACTI (zigzag-dse) is not installed: energy is reported as unavailable")
    path = _scenario(tmp_path, {"preset": "nv_small", "cbuf": {"bank_depth": 16}}, TINY)
    rc, _, err = run_cli(["run", str(path)])
    assert_one_line_error(rc, err, "cbuf.bank_depth", "CACTI rejects a 512 x 8-byte CBUF")


def test_the_api_and_a_sweep_point_refuse_it_before_the_run_too(tmp_path, no_run):
    from nvdla_sim.api import run
    from nvdla_sim.energy.cacti import cacti_available
    from nvdla_sim.errors import NvdlaSimError
    from nvdla_sim.sweep.point import run_scenario_point
    if not cacti_available():
        pytest.skip("CACTI (zigzag-dse) is not installed: energy is reported as unavailable")
    doc = yaml.safe_load(_scenario(tmp_path, {"preset": "nv_small", "cbuf": {"bank_depth": 16}},
                                   TINY).read_text())
    with pytest.raises(NvdlaSimError, match="CACTI rejects a 512 x 8-byte CBUF"):
        run(doc)
    with pytest.raises(NvdlaSimError, match="CACTI rejects a 512 x 8-byte CBUF"):
        run_scenario_point(doc, str(tmp_path))


ODD = [
    {"preset": "nv_small", "atomic_k": 4},                     # 32 MACs (the issue's deadlock)
    {"preset": "nv_small", "atomic_k": 2},                     # 16 MACs
    {"preset": "nv_small", "atomic_c": 4, "memory_atomic_bytes": 4,
     "cbuf": {"bank_width_bytes": 4}},                         # 4-channel atoms
    {"preset": "nv_full", "atomic_k": 2},                      # 16-bit groups of one kernel
    {"preset": "nv_small", "atomic_k": 16},                    # ATOMIC_K > ATOMIC_C
    {"preset": "nv_small", "cbuf": {"bank_depth": 64}},        # 16 KiB of CBUF
    {"preset": "nv_small", "cbuf": {"bank_depth": 8192}},      # 2 MiB of CBUF
    {"preset": "nv_large", "cbuf": {"banks": 32, "bank_depth": 32}},
    {"preset": "nv_small", "primary_memif": {"width_bits": 64, "max_burst": 1}},
    {"preset": "nv_small", "sdp": {"bs_throughput": 1, "bn_throughput": 1, "ew_throughput": 0},
     "pdp_throughput": 1, "cdp_throughput": 1},
]


@pytest.mark.parametrize("hardware", ODD, ids=[json.dumps(h, separators=(",", ":")) for h in ODD])
def test_accepted_odd_configurations_run_the_whole_command(tmp_path, hardware):
    from nvdla_sim.config import load_hardware
    rc, _, err = run_cli(["run", str(_scenario(tmp_path, hardware, BOTTLENECK))])
    assert rc == 0, err
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    macs = load_hardware(hardware).macs
    rows = {r["layer"]: r for r in report["rows"]}
    for name, conv_macs in CONV_MACS.items():
        assert rows[name]["cycles"] >= conv_macs / macs, (name, rows[name])
    assert report["total_cycles"] >= sum(CONV_MACS.values()) / macs
    assert report["energy_mj"] > 0              # the report after the run completed too


@pytest.mark.skipif(not FULL, reason="whole ResNet-50 per configuration: NVDLA_SIM_FULL_CONFIGS=1")
@pytest.mark.parametrize("hardware", ODD[:4], ids=[json.dumps(h, separators=(",", ":"))
                                                   for h in ODD[:4]])
def test_whole_resnet50_on_the_smallest_arrays(tmp_path, hardware):
    from nvdla_sim.config import load_hardware
    rc, _, err = run_cli(["run", str(_scenario(tmp_path, hardware))])
    assert rc == 0, err
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["total_cycles"] >= RESNET_MACS / load_hardware(hardware).macs


def _random_hardware(rng) -> dict:
    """A preset with random powers of two for the array, atoms, CBUF, memory interface and
    SDP/PDP rates (what the validator then accepts or refuses)."""
    preset = rng.choice(["nv_small", "nv_small_256", "nv_medium_512", "nv_large", "nv_full",
                         "orin_dla"])
    hw: dict = {"preset": preset}
    cbuf: dict = {}
    if rng.random() < .7:
        hw["atomic_c"] = 1 << rng.randint(1, 7)
        cbuf["bank_width_bytes"] = hw["atomic_c"] * (2 if preset in ("nv_full", "orin_dla") else 1)
    if rng.random() < .7:
        hw["atomic_k"] = 1 << rng.randint(0, 7)
    if rng.random() < .5:
        hw["memory_atomic_bytes"] = 1 << rng.randint(0, 6)
    if rng.random() < .5:
        cbuf["banks"] = 1 << rng.randint(0, 5)
    if rng.random() < .5:
        cbuf["bank_depth"] = 1 << rng.randint(3, 13)
    if cbuf:
        hw["cbuf"] = cbuf
    if rng.random() < .3:
        hw["primary_memif"] = {"width_bits": 1 << rng.randint(6, 10),
                               "max_burst": 1 << rng.randint(0, 4)}
    if rng.random() < .3:
        hw["sdp"] = {"bs_throughput": 1 << rng.randint(0, 4), "bn_throughput": 1 << rng.randint(0, 4),
                     "ew_throughput": rng.choice([0, 1, 4])}
    return hw


@pytest.mark.parametrize("seed", range(4))
def test_random_configurations_run_or_are_refused_before_the_run(tmp_path, monkeypatch, seed):
    """Four random configurations per seed: each is refused (one line) before the engine starts,
    or runs the bottleneck to the end within the MAC bound."""
    import random
    started = []
    real = lower_module.run_lowered

    def run_lowered(*args, **kwargs):
        started.append(True)
        return real(*args, **kwargs)
    monkeypatch.setattr(lower_module, "run_lowered", run_lowered)
    rng = random.Random(seed)
    for i in range(4):
        hardware = _random_hardware(rng)
        started.clear()
        folder = tmp_path / str(i)
        folder.mkdir()
        rc, _, err = run_cli(["run", str(_scenario(folder, hardware, BOTTLENECK))])
        if rc:
            assert_one_line_error(rc, err)
            assert not started, (hardware, err)       # refused before the run
            continue
        report = json.loads((folder / "out" / "report.json").read_text())
        from nvdla_sim.config import load_hardware
        assert report["total_cycles"] >= sum(CONV_MACS.values()) / load_hardware(hardware).macs
