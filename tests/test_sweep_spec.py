"""Sweep specs: grid and list expansion, point keys, axis coupling, validation errors by field path."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.sweep.spec import load_sweep, parse_sweep, point_scenario

TINY = {"name": "tiny", "input": [32, 24, 24],
        "layers": [{"name": "c1", "type": "conv", "out_channels": 64, "kernel": 3, "pad": 1}]}
BASE = {"hardware": "nv_small", "mode": "timing", "network": TINY}


def spec(tmp_path: Path, **fields):
    return parse_sweep({"base": BASE, **fields}, tmp_path)


def error(tmp_path: Path, **fields) -> str:
    with pytest.raises(NvdlaSimError) as exc:
        spec(tmp_path, **fields)
    return str(exc.value)


def test_grid_is_every_combination_first_axis_slowest(tmp_path):
    s = spec(tmp_path, grid={"cbuf_banks": [8, 16, 32], "dram_gbps": [5, 10]})
    assert [p.params for p in s.points] == [
        {"cbuf_banks": 8, "dram_gbps": 5}, {"cbuf_banks": 8, "dram_gbps": 10},
        {"cbuf_banks": 16, "dram_gbps": 5}, {"cbuf_banks": 16, "dram_gbps": 10},
        {"cbuf_banks": 32, "dram_gbps": 5}, {"cbuf_banks": 32, "dram_gbps": 10}]
    assert [p.index for p in s.points] == list(range(6))
    assert s.axes == ["cbuf_banks", "dram_gbps"]
    p = s.points[3]
    assert p.scenario["hardware"] == {"preset": "nv_small", "cbuf": {"banks": 16}}
    assert p.scenario["memory"] == {"dram_gbps": 10}
    assert p.scenario["mode"] == "timing"
    assert len({p.key for p in s.points}) == 6


def test_a_single_value_is_a_one_point_axis(tmp_path):
    s = spec(tmp_path, grid={"cbuf_banks": 8, "clock_mhz": [500, 1000]})
    assert [p.params for p in s.points] == [{"cbuf_banks": 8, "clock_mhz": 500},
                                           {"cbuf_banks": 8, "clock_mhz": 1000}]


def test_explicit_points_and_fixed_values(tmp_path):
    s = spec(tmp_path, fixed={"dram_gbps": 20, "memory.dram_latency_ns": 50},
             points=[{"cbuf_banks": 8}, {"cbuf_banks": 16, "clock_mhz": 500}])
    assert [p.params for p in s.points] == [{"cbuf_banks": 8}, {"cbuf_banks": 16, "clock_mhz": 500}]
    assert s.axes == ["cbuf_banks", "clock_mhz"]
    assert s.points[1].scenario["memory"] == {"dram_gbps": 20, "dram_latency_ns": 50}
    assert s.points[1].scenario["clock_mhz"] == 500


def test_point_keys_are_stable_and_independent_of_axis_order(tmp_path):
    a = spec(tmp_path, grid={"cbuf_banks": [8, 16], "dram_gbps": [5]})
    b = spec(tmp_path, grid={"dram_gbps": [5], "cbuf_banks": [8, 16]})
    c = spec(tmp_path, points=[{"dram_gbps": 5, "cbuf_banks": 16}])
    assert [p.key for p in a.points] == [p.key for p in b.points]
    assert c.points[0].key == a.points[1].key
    # The base is part of the point: another base value, another key.
    d = parse_sweep({"base": {**BASE, "clock_mhz": 500}, "grid": {"cbuf_banks": [8]}}, tmp_path)
    assert d.points[0].key != a.points[0].key


def test_atomic_c_and_bank_width_follow_each_other_unless_both_swept():
    base = {"hardware": "nv_small", "network": "lenet5"}
    assert point_scenario(base, {"atomic_c": 16})["hardware"] == \
        {"preset": "nv_small", "atomic_c": 16, "cbuf": {"bank_width_bytes": 16}}
    assert point_scenario(base, {"cbuf_bank_width": 32})["hardware"] == \
        {"preset": "nv_small", "cbuf": {"bank_width_bytes": 32}, "atomic_c": 32}
    both = point_scenario(base, {"atomic_c": 16, "cbuf_bank_width": 8})["hardware"]
    assert both == {"preset": "nv_small", "atomic_c": 16, "cbuf": {"bank_width_bytes": 8}}


def test_network_axis_and_field_path_axis(tmp_path):
    s = spec(tmp_path, grid={"network": ["lenet5", TINY], "hardware.sdp.bs_throughput": [1, 2]})
    assert [p.label() for p in s.points] == [
        "network=lenet5, hardware.sdp.bs_throughput=1", "network=lenet5, hardware.sdp.bs_throughput=2",
        "network=tiny, hardware.sdp.bs_throughput=1", "network=tiny, hardware.sdp.bs_throughput=2"]
    assert s.points[0].scenario["network"] == "lenet5"
    assert s.points[1].scenario["hardware"] == {"preset": "nv_small", "sdp": {"bs_throughput": 2}}
    assert s.custom_paths == ["hardware.sdp.bs_throughput"]


def test_hardware_limits_are_not_spec_errors(tmp_path):
    # 12 banks is no power of two, nv_small has no CVSRAM: infeasible points, decided per point.
    s = spec(tmp_path, grid={"cbuf_banks": [12, 16], "cvsram_bytes": [0, 65536]})
    assert len(s.points) == 4


@pytest.mark.parametrize("fields, message", [
    ({"grid": {"cbuf_banks": [8]}, "bogus": 1}, "bogus: unknown field"),
    ({"grid": {"cbuf_banks": [8, -4]}}, "grid.cbuf_banks[1]: must be a positive integer, got -4"),
    ({"grid": {"cbuf_banks": [8, 8]}}, "grid.cbuf_banks[1]: 8 is listed twice"),
    ({"grid": {"dram_gbps": []}}, "grid.dram_gbps: must be a non-empty list"),
    ({"grid": {"dram_gbps": [10, 0]}}, "grid.dram_gbps[1]: must be > 0, got 0"),
    ({"grid": {"cvsram_bytes": [-1]}}, "grid.cvsram_bytes[0]: must be an integer >= 0"),
    ({"grid": {"preset": ["nv_tiny"]}}, "grid.preset[0]: unknown hardware preset 'nv_tiny'"),
    ({"grid": {"network": ["resnet51"]}}, "grid.network[0]: builtin: unknown network 'resnet51'"),
    ({"grid": {"cbuf_size": [8]}}, "grid.cbuf_size: unknown axis"),
    ({"grid": {"hardware.cbuf.banks": [8]}}, "grid.hardware.cbuf.banks: use the axis name 'cbuf_banks'"),
    ({"grid": {"cbuf_banks": [8]}, "points": [{"cbuf_banks": 8}]}, "grid: give exactly one of grid"),
    ({}, "grid: give exactly one of grid"),
    ({"points": [{"cbuf_banks": 8}, "x"]}, "points[1]: expected a mapping"),
    ({"points": [{"cbuf_banks": 8}, {"cbuf_banks": 8}]}, "points[1]: the same scenario as points[0]"),
    ({"points": [{"dram_gbps": "fast"}]}, "points[0].dram_gbps: must be > 0, got 'fast'"),
    ({"grid": {"dram_gbps": [5]}, "fixed": {"dram_gbps": 10}}, "fixed.dram_gbps: is also an axis of grid"),
    ({"grid": {"memory.dram_latency_ns": [10, -5]}},
     "grid.memory.dram_latency_ns: point 1 (memory.dram_latency_ns=-5): memory.dram_latency_ns: must be >= 0"),
    ({"grid": {"cbuf_banks": [8]}, "area": {"bytes_per_mac": 0}}, "area.bytes_per_mac: must be > 0"),
    ({"grid": {"cbuf_banks": [8]}, "outputs": {"plots": "yes"}}, "outputs.plots: must be true or false"),
])
def test_validation_errors_name_the_field(tmp_path, fields, message):
    assert message in error(tmp_path, **fields)


def test_base_errors(tmp_path):
    with pytest.raises(NvdlaSimError, match="base: missing"):
        parse_sweep({"grid": {"cbuf_banks": [8]}}, tmp_path)
    with pytest.raises(NvdlaSimError, match="base: scenario file not found"):
        parse_sweep({"base": "nope.yaml", "grid": {"cbuf_banks": [8]}}, tmp_path)
    bad = {**BASE, "memory": {"dram_gbps": -10}}
    with pytest.raises(NvdlaSimError, match=r"base: memory.dram_gbps: must be > 0, got -10"):
        parse_sweep({"base": bad, "grid": {"cbuf_banks": [8]}}, tmp_path)


def test_base_file_and_file_name_in_errors(tmp_path):
    (tmp_path / "scn").mkdir()
    (tmp_path / "scn" / "base.yaml").write_text(yaml.safe_dump({**BASE, "name": "b"}))
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump({"base": "scn/base.yaml", "grid": {"cbuf_banks": [8, 16]}}))
    s = load_sweep(good)
    assert s.name == "good" and len(s.points) == 2
    assert "name" not in s.points[0].scenario and "outputs" not in s.points[0].scenario
    assert s.out_dir == Path("out/good")
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"base": "scn/base.yaml", "grid": {"cbuf_banks": [0]}}))
    with pytest.raises(NvdlaSimError) as exc:
        load_sweep(bad)
    assert str(exc.value) == f"{bad}: grid.cbuf_banks[0]: must be a positive integer, got 0"


def test_files_in_the_base_resolve_against_the_base_file(tmp_path):
    import numpy as np
    (tmp_path / "scn").mkdir()
    np.save(tmp_path / "scn" / "x.npy", np.zeros((32, 24, 24), np.float32))
    (tmp_path / "scn" / "base.yaml").write_text(yaml.safe_dump({**BASE, "input": {"npy": "x.npy"}}))
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({"base": "scn/base.yaml", "grid": {"cbuf_banks": [8]}}))
    p = load_sweep(sweep).points[0]
    assert p.scenario["input"] == {"npy": "scn/x.npy"}         # relative to the sweep file
    assert Path(p.base_dir) == tmp_path.resolve()


def test_shipped_resnet50_sweep_has_24_points():
    repo = Path(__file__).resolve().parent.parent
    s = load_sweep(repo / "scenarios" / "cbuf_sweep_resnet50.yaml")
    assert len(s.points) == 24
    assert s.axes == ["cbuf_banks", "dram_gbps"]
    assert all(p.scenario["mode"] == "timing" and p.scenario["network"] == "resnet50" for p in s.points)
