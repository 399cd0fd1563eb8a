"""Compiler bugs found on the ONNX zoo: each test fails on the code before its fix.

1. An element-wise add whose operand is a concatenation with a part off the atom (112 + 24
   channels on nv_large's 32-channel atom) read that operand at other stored channels than the
   convolution wrote (ShuffleNet: 4.8 dB on nv_large).
"""
from __future__ import annotations

import pytest

import nvdla_sim
from nvdla_sim.errors import NvdlaSimError


def _catadd(hardware: str, parts: tuple[int, int], between: list[dict] | None = None) -> dict:
    total = sum(parts)
    layers = [
        {"name": "a", "type": "conv", "out_channels": parts[0], "kernel": 1, "input": "data"},
        {"name": "b", "type": "conv", "out_channels": parts[1], "kernel": 1, "input": "data"},
        {"name": "cat", "type": "concat", "input": ["a", "b"]},
        {"name": "c", "type": "conv", "out_channels": total, "kernel": 1},
        *(between or []),
        {"name": "s", "type": "add", "input": [(between or [{"name": "c"}])[-1]["name"], "cat"]},
    ]
    return {"name": f"catadd_{hardware}", "hardware": hardware, "clock_mhz": 1000,
            "memory": {"dram_gbps": 10, "dram_latency_ns": 100},
            "network": {"name": "catadd", "input": [16, 8, 8], "layers": layers},
            "input": {"seed": 3}, "weights": {"seed": 3}, "mode": "values+timing"}


def _lowest_sqnr(scn: dict, tmp_path) -> float:
    r = nvdla_sim.run(scn, out_dir=tmp_path)
    return r.report.lowest_sqnr[1]


@pytest.mark.parametrize("hardware", ["nv_large", "nv_small"])
@pytest.mark.parametrize("parts", [(112, 24), (96, 40)])
def test_add_reading_a_concat_off_the_atom_keeps_its_channels(hardware, parts, tmp_path):
    # Float32 reference vs the INT8 run: 34 dB when every channel meets its own operand channel,
    # about 10 dB on nv_large before the fix (112 + 24: channels 112..135 met the hole).
    assert _lowest_sqnr(_catadd(hardware, parts), tmp_path) > 30


def test_relu_between_conv_and_add_takes_the_concat_layout(tmp_path):
    # The add reads the ReLU's output; the convolution under it writes the concatenation's holes.
    scn = _catadd("nv_large", (112, 24), [{"name": "r", "type": "relu", "input": "c"},
                                         {"name": "r2", "type": "relu", "input": "c"}])
    scn["network"]["layers"].append({"name": "t", "type": "add", "input": ["r2", "s"]})
    assert _lowest_sqnr(scn, tmp_path) > 25


def test_add_of_input_and_holed_concat_is_refused(tmp_path):
    # The network input cannot be written in the concatenation's layout: a one-line refusal.
    scn = _catadd("nv_large", (112, 24))
    scn["network"]["input"] = [136, 8, 8]
    scn["network"]["layers"][-1]["input"] = ["data", "cat"]
    del scn["network"]["layers"][3]
    with pytest.raises(NvdlaSimError, match="different channel layouts") as e:
        nvdla_sim.run(scn, out_dir=tmp_path)
    assert "\n" not in str(e.value)


# 2. A max pooling without padding whose last window ends before the cube does (Inception v1's
#    first 3x3/2 pooling of 112x112), fused on the fly after the SDP (nv_large): the PDP plan read
#    111x111 while the SDP delivers 112x112, and the PDP refused the program.

def _conv_pool(hardware: str, size: int, mode: str = "values+timing") -> dict:
    layers = [{"name": "c1", "type": "conv", "out_channels": 64, "kernel": 3, "pad": 1, "relu": True},
              {"name": "p1", "type": "pool", "method": "max", "kernel": 3, "stride": 2}]
    return {"name": f"convpool_{hardware}", "hardware": hardware, "clock_mhz": 1000,
            "memory": {"dram_gbps": 10, "dram_latency_ns": 100},
            "network": {"name": "convpool", "input": [3, size, size], "layers": layers},
            "input": {"seed": 5}, "weights": {"seed": 5}, "mode": mode}


@pytest.mark.parametrize("hardware", ["nv_large", "nv_small"])
@pytest.mark.parametrize("size", [28, 27])          # 28: one row and column left unread
def test_pool_on_the_fly_takes_the_whole_sdp_cube(hardware, size, tmp_path):
    r = nvdla_sim.run(_conv_pool(hardware, size), out_dir=tmp_path)
    layers = r.report.rows
    if hardware == "nv_large":                       # the pooling is fused into the convolution
        assert [row.kinds for row in layers] == ["conv+pdp"]
    out = r.outputs["p1"]
    assert out["dla"].shape == out["reference"].shape == (64, (size - 3) // 2 + 1, (size - 3) // 2 + 1)
    assert r.report.lowest_sqnr[1] > 30


def test_pool_on_the_fly_timing_only(tmp_path):
    r = nvdla_sim.run(_conv_pool("nv_large", 28, mode="timing-only"), out_dir=tmp_path)
    assert r.total_cycles > 0


# 3. `compile --emit-cfg` on nv_full counted only check_crc values ("0 check_crc values") although
#    a v1 trace holds dump_mem golden images; the channel shuffle fell back without its reason.

def test_emit_cfg_on_nv_full_counts_dump_mem_images(tmp_path, capsys):
    from pathlib import Path

    from nvdla_sim.cli import main
    scn = Path(__file__).resolve().parent.parent / "scenarios" / "lenet5_nv_full_int16.yaml"
    assert main(["compile", str(scn), "--emit-cfg", str(tmp_path)]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    txn = (tmp_path / "lenet5_nv_full_int16" / "input.txn").read_text()
    dumps = sum(line.startswith("dump_mem") for line in txn.splitlines())
    assert dumps > 0 and f"{dumps} dump_mem golden images" in last
    assert "0 check_crc" not in last


def test_channel_shuffle_falls_back_with_its_reason():
    from nvdla_sim.compiler.network import Network, Shape
    from nvdla_sim.compiler.support import check_support
    from nvdla_sim.config import load_hardware
    n = Network("t", "data", Shape(8, 4, 4))
    c = n.conv("c", "data", 8, 1)
    n.add("shuffle", "sh", c, groups=2)
    reason = check_support(n, load_hardware("nv_large")).reason("sh")
    assert "channel permutation" in reason and "Rubik" in reason
