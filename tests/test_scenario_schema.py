"""Scenario YAML: the shipped scenarios load; broken ones give one line naming the field and a
non-zero exit, as a new user would meet them."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from nvdla_sim.cli import main
from nvdla_sim.scenario.schema import load_scenario, parse_scenario

REPO = Path(__file__).resolve().parent.parent
SHIPPED = sorted((REPO / "scenarios").glob("*.yaml"))
SWEEPS = [p for p in SHIPPED if "base" in (yaml.safe_load(p.read_text()) or {})]
SCENARIOS = [p for p in SHIPPED if p not in SWEEPS]


def write(tmp_path: Path, data: dict | str, name: str = "s.yaml") -> Path:
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return p


def run_cli(args, capsys) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err.strip()


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_shipped_scenarios_are_valid(path):
    scn = load_scenario(path)
    # the precision is in the file name when it is not INT8
    assert scn.precision == next((p for p in ("int16", "fp16") if p in path.stem), "int8")
    assert scn.hardware.name in path.stem
    assert scn.network.source == "layers" or (scn.network.builtin or scn.network.name) in path.stem


@pytest.mark.parametrize("path", SWEEPS, ids=[p.stem for p in SWEEPS])
def test_shipped_sweeps_are_valid(path):
    from nvdla_sim.sweep.spec import load_sweep
    assert load_sweep(path).points


def test_a_sweep_file_run_as_a_scenario_says_so(capsys):
    code, _, err = run_cli(["run", SWEEPS[0]], capsys)
    assert code != 0 and "sweep file" in err and "nvdla-sim sweep" in err


def test_resnet50_scenario_is_the_estimator_configuration():
    scn = load_scenario(REPO / "scenarios" / "resnet50_nv_large.yaml")
    assert (scn.hardware.name, scn.hardware.macs, scn.clock_mhz) == ("nv_large", 2048, 1000.0)
    assert scn.memory.dram.bandwidth_gbps == 10.0
    assert scn.memory.cvsram is None and scn.memory.cvsram_bytes == 0
    assert scn.values


def test_memory_section_becomes_profiles(tmp_path):
    scn = parse_scenario({"hardware": "nv_large", "network": "lenet5", "clock_mhz": 500,
                          "memory": {"dram_gbps": 12.5, "dram_latency_ns": 100,
                                     "cvsram_bytes": 4 << 20, "cvsram_gbps": 25,
                                     "cvsram_latency_ns": 20}}, tmp_path)
    d, c = scn.memory.dram, scn.memory.cvsram
    assert d.bandwidth_gbps == 12.5
    assert d.read_latency_cycles == 50            # 100 ns at 500 MHz
    assert d.bytes_per_cycle_cap(500) == 25.0     # 12.5 GB/s over 500 M cycles/s
    assert c.bandwidth_gbps == 25 and c.read_latency_cycles == 10
    assert scn.memory.cvsram_bytes == 4 << 20


def test_defaults(tmp_path):
    scn = parse_scenario({"hardware": "nv_small", "network": "lenet5"}, tmp_path, "mine")
    assert scn.name == "mine" and scn.clock_mhz == 1000.0 and scn.mode == "values+timing"
    assert scn.gpu_fallback and scn.outputs.directory == Path("out/mine")
    assert scn.input.source == "random" and scn.weights.source == "random"
    assert scn.memory.dram.bandwidth_gbps == 10.0


def test_explicit_layer_list(tmp_path):
    scn = parse_scenario({"hardware": "nv_small", "network": {"name": "tiny", "input": [3, 16, 16], "layers": [
        {"name": "c1", "type": "conv", "out_channels": 8, "kernel": 3, "pad": 1, "relu": True},
        {"name": "p1", "type": "pool", "method": "max", "kernel": 2},
        {"name": "c2", "type": "conv", "out_channels": 8, "kernel": [1, 1]},
        {"name": "sum", "type": "add", "input": ["p1", "c2"], "relu": True},
        {"name": "gap", "type": "pool", "method": "avg", "global": True},
        {"name": "fc", "type": "fc", "out_features": 4},
        {"name": "prob", "type": "softmax"}]}}, tmp_path)
    net = scn.network.network
    assert net.name == "tiny"
    assert [op.kind for op in net.ops] == ["conv", "pool", "conv", "add", "pool", "fc", "softmax"]
    assert (net.shapes["p1"].c, net.shapes["p1"].h) == (8, 8)
    assert net.op("p1").attrs["stride"] == (2, 2)           # stride defaults to the kernel
    assert net.op("gap").attrs["kernel"] == (8, 8)


# -- broken scenarios: one line naming the field, non-zero exit ------------------------------------

BASE = {"hardware": "nv_small", "network": "lenet5"}


@pytest.mark.parametrize("change, expect", [
    # the four a new user meets first
    ({"network": {"onnx": "models/missing.onnx"}}, "network.onnx: file not found"),
    ({"hardware": "nv_huge"}, "hardware.preset: unknown hardware preset 'nv_huge' (known: nv_full"),
    ({"memory": {"dram_gbps": -10}}, "memory.dram_gbps: must be > 0, got -10"),
    ({"gpu_fallback": False, "network": {"input": [4, 8, 8], "layers": [
        {"name": "c", "type": "conv", "out_channels": 4, "kernel": 3},
        {"name": "prob", "type": "softmax"}]}},
     "gpu_fallback: false, but layer 'prob' (softmax) cannot run on the DLA: softmax"),
    # and more
    ({"hardware": {"preset": "nv_small", "cbuf": {"banks": 3}}}, "hardware.cbuf.banks: must be a power of two"),
    ({"hardware": {"preset": "nv_small", "mac": 1}}, "hardware.mac: unknown field"),
    ({"memory": {"cvsram_bytes": 1024}}, "memory.cvsram_bytes: nv_small has no secondary memory interface"),
    ({"memory": {"dram_latency_ns": "slow"}}, "memory.dram_latency_ns: must be a number, got 'slow'"),
    ({"memory": {"profile": "sram"}}, "memory.profile: unknown memory profile 'sram'"),
    ({"network": "vgg16"}, "network.builtin: unknown network 'vgg16' (built-in: lenet5"),
    ({"network": {"builtin": "lenet5", "onnx": "x.onnx"}}, "network: give exactly one of builtin, onnx, layers"),
    ({"network": {"input": [1, 8, 8], "layers": [{"name": "c", "type": "conv", "out_channels": 2,
                                                  "kernel": 9}]}},
     "network.layers[0]: layer 'c': kernel larger than its padded input"),
    ({"network": {"input": [1, 8, 8], "layers": [{"name": "c", "type": "convolution"}]}},
     "network.layers[0].type: must be one of conv"),
    ({"network": {"input": [1, 8, 8], "layers": [{"name": "c", "type": "conv", "out_channels": 2,
                                                  "kernel": 3, "padding": 1}]}},
     "network.layers[0].padding: unknown field"),
    ({"network": {"input": [1, 8, 8], "layers": [{"name": "a", "type": "add", "input": ["data", "b"]}]}},
     "network.layers[0].input: unknown layer 'b'"),
    ({"network": {"input": [1, 8], "layers": [{"name": "r", "type": "relu"}]}},
     "network.input: must be [channels, height, width]"),
    ({"precision": "fp16"}, "precision: fp16 is not a data type of nv_small (it has int8; int16 and "
                            "fp16 need nv_full)"),
    ({"precision": "int4"}, "precision: must be one of int8, int16, fp16, got 'int4'"),
    ({"mode": "fast"}, "mode: must be one of values+timing, timing, timing-only, got 'fast'"),
    ({"clock_mhz": 0}, "clock_mhz: must be > 0, got 0"),
    ({"input": {"npy": "nope.npy"}}, "input.npy: file not found"),
    ({"weights": {"npz": "w.npz", "seed": 3}}, "weights: give either npz or seed, not both"),
    ({"quantization": {"weights": "per_channel"}}, "quantization.weights: must be one of per_kernel, per_tensor"),
    ({"outputs": {"formats": ["pdf"]}}, "outputs.formats: must list some of console, json, csv"),
    ({"gpu_fallback": "no"}, "gpu_fallback: must be true or false"),
    ({"colour": "blue"}, "colour: unknown field"),
])
def test_broken_scenario_one_line(tmp_path, capsys, change, expect):
    path = write(tmp_path, {**BASE, **change})
    code, out, err = run_cli(["run", path], capsys)
    assert code != 0
    assert err.count("\n") == 0, err
    assert err.startswith(f"nvdla-sim: error: {path}: "), err
    assert expect in err


@pytest.mark.parametrize("text, expect", [
    ("hardware: [nv_small\n", "s.yaml:2: malformed YAML"),
    ("- 1\n- 2\n", "expected a mapping"),
    ("", "empty scenario"),
    ("network: lenet5\n", "hardware: missing"),
])
def test_broken_file(tmp_path, capsys, text, expect):
    code, _, err = run_cli(["run", write(tmp_path, text)], capsys)
    assert code != 0 and err.count("\n") == 0 and expect in err, err


def test_missing_scenario_file(tmp_path, capsys):
    code, _, err = run_cli(["run", tmp_path / "nothere.yaml"], capsys)
    assert code != 0 and err.endswith("nothere.yaml: scenario file not found")


def test_compile_lists_hardware_layers(tmp_path, capsys):
    code, out, _ = run_cli(["compile", write(tmp_path, BASE)], capsys)
    assert code == 0
    assert "pool1" in out and "on-the-fly" in out
