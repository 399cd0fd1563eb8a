"""`precision: [int8, fp16]` in one register program (issue 11, compiler/reformat.py): the layers
TensorRT upgrades (LRN, sigmoid) run FP16 between INT8 convolutions, with SDP reformat passes
where the precision changes.  Checked against the float reference (INT8 floor), the reformat
buffers against the conversion written out in numpy from the SDP's documented arithmetic, and the
SDP precision registers of the passes."""
from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest
import yaml

from nvdla_sim.compiler.lower import lower, run_lowered
from nvdla_sim.report.tables import format_console
from nvdla_sim.scenario.reference import sqnr_db
from nvdla_sim.scenario.runner import context, execute, prepare
from nvdla_sim.scenario.schema import parse_scenario

INT8_FLOOR_DB = 25.0          # the INT8 SQNR floor of the other DLA tests (test_dla_io_formats)

CONV = {"name": "c1", "type": "conv", "out_channels": 32, "kernel": 3, "pad": 1, "relu": True}
CONV_LIN = {"name": "c1", "type": "conv", "out_channels": 32, "kernel": 3, "pad": 1}
LRN = {"name": "n1", "type": "lrn", "size": 5}
POOL = {"name": "p1", "type": "pool", "method": "max", "kernel": 2, "stride": 2}
SIG = {"name": "s1", "type": "sigmoid"}
CONV2 = {"name": "c2", "type": "conv", "out_channels": 16, "kernel": 1}


def scenario(tmp_path, layers, hardware="xavier_dla", mode="values+timing", **fields):
    d = {"name": "mixed", "hardware": hardware, "network": {"input": [8, 16, 16], "layers": layers},
         "precision": ["int8", "fp16"], "mode": mode, "input": {"seed": 3}, "weights": {"seed": 3},
         "outputs": {"directory": str(tmp_path / "out"), "formats": ["json"], "plots": False}}
    d.update(fields)
    return parse_scenario(yaml.safe_load(yaml.safe_dump(d)), tmp_path)


def run(scn):
    prep = prepare(scn)
    ctx = context(prep)
    lowered = lower(prep.plan, ctx)
    return prep, lowered, run_lowered(lowered, ctx)


def expect_int8_to_fp16(q: np.ndarray, s: float) -> np.ndarray:
    """Passes a + b: the INT8 codes as FP16 integers, times the FP16 register value of the
    scale in FP32, rounded to FP16 (nearest even)."""
    return (q.astype(np.float32) * np.float32(np.float16(s))).astype(np.float16)


def expect_fp16_to_int8(x: np.ndarray, s: float) -> np.ndarray:
    """Passes c + d: x times FP16(1/s) in FP32 rounded to FP16, to an integer (ties away from
    zero), saturated to INT8."""
    v = (x.astype(np.float32) * np.float32(np.float16(1.0 / s))).astype(np.float16).astype(np.float64)
    r = np.trunc(v + np.copysign(0.5, v))
    return np.clip(r, -128, 127).astype(np.int8)


@pytest.mark.parametrize("hardware", ["xavier_dla", "nv_full"])
def test_lrn_between_int8_convolutions(tmp_path, hardware):
    prep, lowered, res = run(scenario(tmp_path, [CONV, LRN, CONV2], hardware))
    plan = prep.plan
    assert [(layer.name, plan.layer_dtype(layer).name) for layer in plan.layers] == [
        ("c1", "INT8"), ("reformat_c1@fp16q", "INT8"), ("reformat_c1@fp16", "FP16"),
        ("n1", "FP16"), ("reformat_n1@int16", "FP16"), ("reformat_n1@int8", "INT8"),
        ("c2", "INT8")]
    out = res.outputs
    assert out["c1"].dtype == np.int8 and out["n1"].dtype == np.float16
    assert out["n1@int16"].dtype == np.int16 and out["c2"].dtype == np.int8
    s_c1 = prep.calibration.scales["c1"]
    s_n1 = prep.calibration.scales["n1"]
    # the reformat buffers, bit for bit
    np.testing.assert_array_equal(out["c1@fp16q"], out["c1"].astype(np.float16))
    np.testing.assert_array_equal(out["c1@fp16"], expect_int8_to_fp16(out["c1"], s_c1))
    np.testing.assert_array_equal(out["n1@int8"], expect_fp16_to_int8(out["n1"], s_n1))
    # every layer against the float reference
    ref = prep.reference
    assert sqnr_db(ref["c1"], out["c1"].astype(np.float32) * s_c1) > INT8_FLOOR_DB
    assert sqnr_db(ref["n1"], out["n1"].astype(np.float32)) > INT8_FLOOR_DB
    c2 = out["c2"].astype(np.float32) * prep.calibration.scales["c2"]
    assert sqnr_db(ref["c2"], c2) > INT8_FLOOR_DB


@pytest.mark.parametrize("hardware", ["xavier_dla", "nv_full"])
def test_sigmoid_between_int8_layers(tmp_path, hardware):
    """A sigmoid on its own SDP pass (after a pooling) runs FP16; fused into a convolution's SDP
    it takes the convolution to FP16 with it (one SDP pass, one precision)."""
    prep, _, res = run(scenario(tmp_path, [CONV_LIN, POOL, SIG, CONV2], hardware))
    plan = prep.plan
    kinds = {layer.name: plan.layer_dtype(layer).name for layer in plan.layers}
    assert kinds["c1"] == "INT8" and kinds["s1"] == "FP16" and kinds["c2"] == "INT8"
    out, ref = res.outputs, prep.reference
    assert sqnr_db(ref["s1"], out["s1"].astype(np.float32)) > INT8_FLOOR_DB
    c2 = out["c2"].astype(np.float32) * prep.calibration.scales["c2"]
    assert sqnr_db(ref["c2"], c2) > INT8_FLOOR_DB
    np.testing.assert_array_equal(out["s1@int8"],
                                  expect_fp16_to_int8(out["s1"], prep.calibration.scales["s1"]))
    # fused: conv + sigmoid is one hardware layer
    prep, _, res = run(scenario(tmp_path, [CONV_LIN, SIG, CONV2], hardware))
    assert prep.precisions["c1"][0] == "fp16" and "'s1'" in prep.precisions["c1"][1]
    assert prep.precisions["c2"] == ("int8", "INT8 where possible")
    c2 = res.outputs["c2"].astype(np.float32) * prep.calibration.scales["c2"]
    assert sqnr_db(prep.reference["c2"], c2) > INT8_FLOOR_DB


def test_reformat_registers(tmp_path):
    """The passes program the SDP conversions NVDLA has (v1 C model): IN/PROC/OUT precision."""
    from nvdla_sim.compiler import reformat
    prep, lowered, _ = run(scenario(tmp_path, [CONV, LRN, CONV2], mode="timing"))
    passes = [layer for layer in prep.plan.layers if reformat.is_reformat(layer)]
    got = [(layer.reformat["pass"], layer.quant.input_type.name, layer.quant.dtype.name,
            layer.quant.output_type.name) for layer in passes]
    assert got == [("a", "INT8", "INT8", "FP16"), ("b", "FP16", "FP16", "FP16"),
                   ("c", "FP16", "FP16", "INT16"), ("d", "INT16", "INT8", "INT8")]


def test_timing_only_and_report(tmp_path):
    scn = scenario(tmp_path, [CONV, LRN, CONV2], mode="timing")
    with contextlib.redirect_stdout(io.StringIO()):
        rep = execute(prepare(scn))
    assert rep.precision == "INT8+FP16"
    rows = {r.layer: r for r in rep.rows}
    assert rows["n1"].precision == "FP16" and "reformat INT8 -> FP16" in rows["n1"].note
    assert rows["n1"].note.startswith("FP16: LRN INT8 is supported by auto-upgrading to FP16 "
                                      "[rule lrn.int8_upgrade]")
    assert rows["c2"].precision == "INT8" and "reformat FP16 -> INT8" in rows["c2"].note
    text = format_console(rep)
    assert "INT8+FP16" in text and "[rule lrn.int8_upgrade]" in text
    # the reformat passes cost cycles: more than the same network in plain INT8
    int8 = scenario(tmp_path, [CONV, LRN, CONV2], mode="timing", precision="int8")
    with contextlib.redirect_stdout(io.StringIO()):
        rep8 = execute(prepare(int8))
    assert rep.total_cycles > rep8.total_cycles


GRAPHS = {
    # c1 read by an FP16 LRN and an INT8 convolution; the LRN's output added to the INT8 branch
    "two_readers": [CONV, LRN, {"name": "c2", "type": "conv", "out_channels": 32, "kernel": 1,
                                "input": "c1"},
                    {"name": "a1", "type": "add", "input": ["n1", "c2"]},
                    {"name": "c3", "type": "conv", "out_channels": 16, "kernel": 1}],
    # a tanh over a concatenation; an FP16 first layer reading the host's input
    "concat": [{"name": "c1", "type": "conv", "out_channels": 16, "kernel": 3, "pad": 1},
               {"name": "c2", "type": "conv", "out_channels": 16, "kernel": 1, "input": "data"},
               {"name": "cat", "type": "concat", "input": ["c1", "c2"]},
               {"name": "t1", "type": "tanh"}, {**CONV2, "name": "c3"}],
    "fp16_first": [SIG, {"name": "c1", "type": "conv", "out_channels": 16, "kernel": 3, "pad": 1}],
    # a concatenation of an FP16 part (conv + sigmoid) and an INT8 one: both parts FP16
    "fp16_concat_part": [CONV_LIN, SIG,
                         {"name": "c2", "type": "conv", "out_channels": 32, "kernel": 1,
                          "input": "data"},
                         {"name": "cat", "type": "concat", "input": ["s1", "c2"]},
                         {**CONV2, "name": "c3"}],
}


@pytest.mark.parametrize("graph", sorted(GRAPHS))
def test_every_tensor_within_the_int8_floor(tmp_path, graph):
    from nvdla_sim.scenario.runner import dla_tensors
    prep, _, res = run(scenario(tmp_path, GRAPHS[graph]))
    got = dla_tensors(prep.plan, res.outputs)
    names = [op.name for op in prep.network.ops if op.name in got]   # (fused ones: not in memory)
    assert prep.network.outputs[0] in names and len(names) >= 2
    for name in names:
        assert sqnr_db(prep.reference[name], got[name]) > INT8_FLOOR_DB, name
    assert any(layer.reformat for layer in prep.plan.layers)
    if graph == "fp16_concat_part":
        assert prep.precisions["c2"] == ("fp16", "writes part of 'cat', which an FP16 layer "
                                                 "writes too (one element type per buffer)")
        assert prep.precisions["c3"] == ("int8", "INT8 where possible")


def test_chw16_output_of_an_int8_network(tmp_path):
    """`output_format: chw16` with [int8, fp16]: the layer writing the output runs FP16 (kCHW16
    holds FP16; without this the output check refuses an INT8 output [rule io.precision]), the
    others INT8; the output buffer is FP16 in the kCHW16 layout, within the INT8 floor."""
    from nvdla_sim.compiler.io_formats import io_layout, io_tensors
    scn = scenario(tmp_path, [CONV, CONV2], output_format="chw16")
    prep, lowered, res = run(scn)
    assert prep.precisions["c2"] == ("fp16", "output_format chw16: a kCHW16 output is FP16 "
                                             "[rule io.precision]")
    assert prep.precisions["c1"] == ("int8", "INT8 where possible")
    out = io_tensors(lowered, context(prep))["c2"]
    want = io_layout("chw16", 16, 16, 16, out.dtype)
    assert out.dtype.name == "FP16"
    assert (out.layout.line_stride, out.layout.surface_stride) == (want.line_stride,
                                                                   want.surface_stride)
    got = res.outputs["c2"].astype(np.float32)
    assert sqnr_db(prep.reference["c2"], got) > INT8_FLOOR_DB
