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
