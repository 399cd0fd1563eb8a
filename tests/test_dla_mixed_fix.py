"""A tensor read in two precisions (`precision: [int8, fp16]`, issue 11): an INT8 tensor of at most
16 channels per 32-channel surface, converted for an FP16 reader, must keep its values for its
INT8 readers.

The bug: an SDP with PROC INT8 and OUT FP16/INT16 (reformat pass `a`, or an INT8 layer writing
INT16) writes two 16-bit surfaces per 32-channel INT8 surface, the padding lanes included (v1 C
model: ceil(C/32)*2 surfaces), but the placement reserved ceil(C/16): a 16-channel cube spilled
one surface past its buffer.  With CVSRAM (xavier_dla, orin_dla: buffers reused by lifetime)
those bytes were the INT8 original, still to be read: its INT8 readers saw zeros (-0 dB).
Every materialised tensor is checked against the float
reference at the INT8 floor of tests/test_dla_mixed.py."""
from __future__ import annotations

import numpy as np
import pytest

from nvdla_sim.scenario.reference import sqnr_db
from nvdla_sim.scenario.runner import dla_tensors
from test_dla_mixed import INT8_FLOOR_DB, run, scenario

HARDWARE = ["xavier_dla", "orin_dla", "nv_full"]


def conv(name: str, src: str, out: int = 16, kernel: int = 1) -> dict:
    return {"name": name, "type": "conv", "out_channels": out, "kernel": kernel,
            "pad": kernel // 2, "input": src}


def unary(name: str, kind: str, src: str) -> dict:
    return {"name": name, "type": kind, "input": src}


GRAPHS = {
    # c read by an INT8 convolution and (reformatted) by an FP16 sigmoid
    "conv_and_sigmoid": [conv("c", "data", 16, 3), unary("r", "sigmoid", "c"), conv("n", "c"),
                         conv("d", "r")],
    # ... and also as the INT8 operand of an element-wise add after the FP16 branch
    "operand_too": [conv("c", "data", 16, 3), unary("r", "sigmoid", "c"), conv("n", "c"),
                    {"name": "e", "type": "add", "input": ["r", "c"]}, conv("d", "e")],
    # two FP16 readers (one reformatted copy) and an INT8 one
    "two_fp16_readers": [conv("c", "data", 16, 3), unary("r", "sigmoid", "c"),
                         unary("t", "tanh", "c"), conv("n", "c"), conv("d", "r"),
                         conv("f", "t")],
    # the INT8 tensor is also a network output
    "int8_output": [conv("c", "data", 8, 3), unary("r", "sigmoid", "c"), conv("d", "r"),
                    {"name": "p", "type": "pool", "method": "max", "kernel": 2, "stride": 2,
                     "input": "c"}],
    # 48 channels: one full INT8 surface and one half-used
    "one_and_a_half_surfaces": [conv("c", "data", 48, 3), unary("r", "sigmoid", "c"),
                                conv("n", "c"), conv("d", "r")],
}


@pytest.mark.parametrize("hardware", HARDWARE)
@pytest.mark.parametrize("graph", sorted(GRAPHS))
def test_tensor_read_in_two_precisions(tmp_path, graph, hardware):
    prep, _, res = run(scenario(tmp_path, GRAPHS[graph], hardware))
    assert any(layer.reformat for layer in prep.plan.layers)
    got = dla_tensors(prep.plan, res.outputs)
    names = [op.name for op in prep.network.ops if op.name in got]
    assert set(prep.network.outputs) <= set(names) and "c" in names
    for name in names:
        assert sqnr_db(prep.reference[name], got[name]) > INT8_FLOOR_DB, (name, hardware)


@pytest.mark.parametrize("hardware", ["xavier_dla", "nv_full"])
@pytest.mark.parametrize("channels", [8, 16, 24, 32, 48])
def test_live_buffers_keep_their_values(tmp_path, monkeypatch, channels, hardware):
    """After every step, each buffer between its first writer and its last reader still holds
    what was written (read back from memory): the INT8 -> FP16 pass writes ceil(C/32)*2 FP16
    surfaces (the padding lanes too, as the v1 C model's SDP does), and the placement reserves
    them.  (nv_full: the spill hit the next DRAM buffer, written later; xavier_dla's CVSRAM reuse
    put the INT8 original there.)"""
    from nvdla_sim.compiler import lower as lower_mod
    checked: list[str] = []
    read_step_outputs = lower_mod.read_step_outputs

    def checking(step, lowered, engine, per_image):
        read_step_outputs(step, lowered, engine, per_image)
        index = lowered.steps.index(step)
        life = lower_mod._lifetimes(lowered.plan, lower_mod._steps_of(lowered.plan))
        for name, cube in per_image[0].items():
            if name in lowered.buffers and life[name][0] <= index <= life[name][1]:
                got = lower_mod.read_output(engine, lowered.buffers[name])
                np.testing.assert_array_equal(got, cube, err_msg=f"{name} after step {index}")
                checked.append(name)
    monkeypatch.setattr(lower_mod, "read_step_outputs", checking)
    layers = [conv("c", "data", channels, 3), unary("r", "sigmoid", "c"), conv("n", "c"),
              conv("d", "r")]
    prep, lowered, res = run(scenario(tmp_path, layers, hardware))
    assert lowered.buffers["c@fp16q"].dtype.name == "FP16" and checked.count("c") >= 4
    n = res.outputs["n"].astype(np.float32) * prep.calibration.scales["n"]
    assert sqnr_db(prep.reference["n"], n) > INT8_FLOOR_DB
