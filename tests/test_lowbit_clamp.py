"""N-bit activations clamped on the N-bit grid by the SDP (`quantization.activation_bits` < 8):
the compiler places ALU MIN / MAX stages with register operands in front of the output converter
(emit_sdp.grid_clamp).  Checked on the engine against the SDP arithmetic written out here
(X stage, output converter, then the clip to the grid), on hand-made SDP layers and on every layer
of LeNet-5 read back from memory."""
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from emit_helpers import INT32, conv_reference, rha, sat
from nvdla_sim import precision
from nvdla_sim.compiler.emit import Converter
from nvdla_sim.compiler.emit_sdp import SdpLayer, XStage, grid_clamp
from nvdla_sim.compiler.lower import lower_and_run
from nvdla_sim.scenario.runner import context, prepare
from nvdla_sim.scenario.schema import parse_scenario
from test_emit_sdp import out_cvt, regs_of, sdp_on_engine, x_stage

BASE = {"hardware": "nv_large", "network": "lenet5", "input": {"seed": 1}, "weights": {"seed": 1}}


def _grid(bits: int, signed: bool) -> tuple[int, int]:
    """The N-bit grid's codes as written out in docs/precision.md."""
    if signed:
        return -((1 << (bits - 1)) - 1), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


@pytest.mark.parametrize("preset", ["nv_large", "nv_small"])      # with / without the EW stage
@pytest.mark.parametrize("bits", [2, 3, 4])
@pytest.mark.parametrize("signed", [True, False])
@pytest.mark.parametrize("reach", [None, 0.6, 2.5])     # identity converter; x1 ends at reach x grid
def test_sdp_writes_only_grid_codes(preset, bits, signed, reach):
    rng = np.random.default_rng(bits * 7 + signed)
    x = rng.integers(-128, 128, (20, 3, 5), dtype=np.int8)
    low, high = _grid(bits, signed)
    # X1's results reach about +-430: a converter taking them to reach x the grid's end
    ratio = 1.0 if reach is None else reach * high / 430
    c = precision.converter(ratio)
    cvt = Converter(c.offset, c.scale, c.shift)
    relu = not signed
    bias = rng.integers(-40, 40, 20)
    plain = SdpLayer(x1=XStage("sum", bias, 2, "mul", 3, 1, relu), out_cvt=cvt)
    clamped, placed = grid_clamp(plain, None if relu else low, high, ew=preset != "nv_small")
    out, program = sdp_on_engine(preset, x, clamped)

    v = x_stage(x.astype(np.int64), "sum", bias[:, None, None], 2, "mul", 3, 1, relu)
    unclamped = out_cvt(v, cvt.offset, cvt.scale, cvt.shift)
    # clamp then round: the converted value clipped to the grid's ends the stages were placed for
    want = np.clip(unclamped, low if "low" in placed else -128, high)
    if reach != 0.6:                               # the clamp has work
        assert (unclamped > high).any() and (relu or (unclamped < low).any())
    assert np.array_equal(out.astype(np.int64), want)
    if preset == "nv_small" and not relu:
        assert placed == ("high",)                 # one free ALU (BN) only: the floor is missing
    else:
        assert "high" in placed and (relu or "low" in placed)
        assert out.min() >= low and out.max() <= high
    regs = regs_of(program)
    assert ("SDP.D_DP_EW_ALU_SRC_VALUE" in regs) == (preset != "nv_small" and not relu)


def test_no_free_stage_leaves_the_layer_alone():
    busy = SdpLayer(x1=XStage("sum", 1, 0, "mul", 3, 1),
                    x2=XStage(mul="prelu", mul_operand=2, mul_shift=1))
    layer, placed = grid_clamp(busy, -3, 3, ew=False)
    assert layer == busy and placed == ()


def _stored(plan, outputs, name: str) -> np.ndarray:
    """The integer codes of a tensor as the hardware left them in memory."""
    t = plan.tensors[name]
    root, offset = plan.root(name)
    return t.from_stored(outputs[root][offset:offset + t.stored_channels]).astype(np.int64)


@pytest.mark.parametrize("bits", [2, 3, 4])
def test_lenet5_layers_write_grid_codes_equal_to_the_clamped_datapath(bits):
    scn = parse_scenario({**BASE, "quantization": {"activation_bits": bits, "weight_bits": bits}},
                         Path("."))
    prep = prepare(scn)
    result = lower_and_run(prep.plan, replace(context(prep), timeline=False))
    plan, cal = prep.plan, prep.calibration
    checked = 0
    following = {a.name: b for a, b in zip(plan.layers, plan.layers[1:])}
    for layer in plan.layers:
        if layer.kind != "conv":
            continue
        name = layer.ops[-1]
        low, high = _grid(bits, signed=cal.grid[name] != (1 << bits) - 1)
        assert cal.grid[name] == high
        # the same layer in numpy on the codes it read: conv, CACC truncation, X1, converter, clip
        c, q = layer.conv, layer.quant
        src = plan.network.op(layer.ops[0]).inputs[0]
        xin = _stored(plan, result.outputs, src).reshape(c.in_channels, c.in_h, c.in_w)
        acc = sat(rha(conv_reference(xin, q.weight.astype(np.int64), c.stride, c.pad,
                                     c.dilation), q.clip_truncate), *INT32)
        x1 = q.sdp.x1
        kern = (slice(None), None, None)
        v = x_stage(acc, x1.alu, np.asarray(x1.alu_operand)[kern] if np.ndim(x1.alu_operand)
                    else x1.alu_operand, x1.alu_shift, x1.mul,
                    np.asarray(x1.mul_operand)[kern] if np.ndim(x1.mul_operand) else
                    x1.mul_operand, x1.mul_shift, x1.relu)
        cvt = q.sdp.out_cvt
        want = np.clip(out_cvt(v, cvt.offset, cvt.scale, cvt.shift), low, high)
        if not plan.tensors[name].materialised:      # streamed to a max pooling (PDP on the fly)
            p = following[layer.name].pdp
            assert p.on_the_fly and p.method == "max" and p.kernel == p.stride == (2, 2)
            k, h, w = want.shape
            want = want[:, :h // 2 * 2, :w // 2 * 2].reshape(k, h // 2, 2, w // 2, 2).max(axis=(2, 4))
            name = following[layer.name].ops[-1]
        got = _stored(plan, result.outputs, name)
        assert got.min() >= low and got.max() <= high, layer.name
        assert np.array_equal(got, want.reshape(got.shape)), layer.name
        assert cal.clamps[layer.name] == (("high",) if x1.relu else ("low", "high"))
        checked += 1
    assert checked == 4


def test_int8_programs_place_no_clamp():
    prep = prepare(parse_scenario({**BASE, "quantization": {"weight_bits": 3}}, Path(".")))
    assert prep.calibration.clamps == {}
    assert all(layer.quant.sdp.x2 is None and layer.quant.sdp.y is None
               for layer in prep.plan.layers if layer.kind == "conv")
