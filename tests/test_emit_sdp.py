"""SDP emitter: memory->memory SDP layers (operands from registers and memory, ReLU/PReLU,
element-wise, LUT, output converter, on-the-fly PDP), run on the engine and compared with the
INT8 arithmetic of reference map 5.6 written out with Python integers."""
from __future__ import annotations

import numpy as np
import pytest

from emit_helpers import INT32, random_cube, rha, run_layer, sat, sat8
from nvdla_sim import precision
from nvdla_sim.compiler.emit import Converter
from nvdla_sim.compiler.emit_pdp import PdpLayer
from nvdla_sim.compiler.emit_sdp import SdpLayer, XStage, YStage, emit_sdp
from nvdla_sim.compiler.lut import activation_lut
from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.program import RegWrite


def x_stage(v, alu=None, alu_op=0, alu_shift=0, mul=None, mul_op=1, mul_shift=0, relu=False):
    """X1/X2 on int64 arrays: ALU (no saturation), MUL or PReLU, rounded shift, ReLU."""
    v = np.asarray(v, np.int64)
    if alu is not None:
        op = sat(np.asarray(alu_op, np.int64) << alu_shift, *INT32)
        v = {"sum": v + op, "max": np.maximum(v, op), "min": np.minimum(v, op)}[alu]
    if mul == "prelu":
        passed = ((v + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)          # low 32 bits, no rounding
        v = np.where(v >= 0, passed, sat(rha(v * mul_op, mul_shift), *INT32))
    elif mul == "mul":
        v = sat(rha(v * mul_op, mul_shift), *INT32)
    else:
        v = sat(rha(v, mul_shift), *INT32)
    return np.maximum(v, 0) if relu else v


def out_cvt(v, offset, scale, shift):
    return sat8(sat(rha((np.asarray(v, np.int64) - offset) * scale, shift), -(1 << 16), (1 << 16) - 1))


def sdp_on_engine(preset, x, layer, extra=None, pdp=None):
    inputs = {"x": x}
    if extra is not None:
        inputs["e"] = extra
    out_shape = x.shape if pdp is None else (x.shape[0],) + pdp[1]

    def emit(b, alloc, p):
        lay = layer
        if extra is not None:
            lay = SdpLayer(layer.x1, layer.x2, YStage(**{**layer.y.__dict__, "alu_operand": p["e"]}),
                           layer.out_cvt)
        if pdp is None:
            emit_sdp(b, alloc, lay, p["x"], p["y"])
        else:
            emit_sdp(b, alloc, lay, p["x"], None, (pdp[0], p["y"]))
    cubes, _, program = run_layer(preset, inputs, {"y": out_shape}, emit)
    return cubes["y"], program


def regs_of(program) -> dict[str, int]:
    return {c.name: c.value for c in program.commands if isinstance(c, RegWrite)}


def test_hand_computed_bias_scale_relu():
    # (10 + 5*2) * 3 / 4 = 15;  (-10 + 10) -> 0;  (100 + 10) * 3 / 4 = 82.5 -> 83;  -50 -> ReLU 0
    x = np.array([10, -10, 100, -50], np.int8).reshape(4, 1, 1)
    layer = SdpLayer(x1=XStage(alu="sum", alu_operand=5, alu_shift=1, mul="mul", mul_operand=3,
                               mul_shift=2, relu=True))
    out, _ = sdp_on_engine("nv_small", x, layer)
    assert out.reshape(-1).tolist() == [15, 0, 83, 0]


@pytest.mark.parametrize("preset", ["nv_small", "nv_large"])
@pytest.mark.parametrize("bias_range", [100, 20000])     # one-byte and two-byte operands
def test_per_channel_bias_from_memory(preset, bias_range):
    rng = np.random.default_rng(bias_range)
    x = random_cube(rng, (21, 3, 5))
    bias = rng.integers(-bias_range, bias_range, 21)
    layer = SdpLayer(x1=XStage(alu="sum", alu_operand=bias, alu_shift=2, mul="mul",
                               mul_operand=300, mul_shift=3, relu=True),
                     out_cvt=Converter(5, 23456, 20))
    out, program = sdp_on_engine(preset, x, layer)
    ref = out_cvt(x_stage(x, "sum", bias[:, None, None], 2, "mul", 300, 3, True), 5, 23456, 20)
    assert np.array_equal(out, ref)
    regs = regs_of(program)
    cfg = regs["SDP_RDMA.D_BRDMA_CFG"]        # enabled, ALU, size, per kernel, MC
    assert cfg == 1 << 1 | (0 if bias_range == 100 else 1) << 3 | 1 << 5
    assert regs["SDP.D_DP_BS_CFG"] == 2 << 2      # SUM, nothing bypassed
    assert regs["SDP.D_DP_BS_ALU_CFG"] == 1 | 2 << 8 and regs["SDP.D_DP_BS_MUL_CFG"] == 3 << 8


def test_alu_and_mul_operands_interleaved_from_memory():
    rng = np.random.default_rng(5)
    x = random_cube(rng, (19, 2, 3))
    add, mul = rng.integers(-3000, 3000, 19), rng.integers(-300, 300, 19)
    layer = SdpLayer(x1=XStage(alu="max", alu_operand=add, mul="mul", mul_operand=mul,
                               mul_shift=6), out_cvt=Converter(0, 1, 0))
    out, program = sdp_on_engine("nv_small", x, layer)
    ref = sat8(x_stage(x, "max", add[:, None, None], 0, "mul", mul[:, None, None], 6))
    assert np.array_equal(out, ref)
    assert regs_of(program)["SDP_RDMA.D_BRDMA_CFG"] == 2 << 1 | 1 << 3 | 1 << 5   # BOTH, 2 bytes


def test_per_element_operand_and_prelu():
    rng = np.random.default_rng(6)
    x = random_cube(rng, (10, 3, 4))
    scale = rng.integers(-5, 6, (10, 3, 4))             # per element, one byte
    slope = rng.integers(-200, 200, 10)
    layer = SdpLayer(x1=XStage(mul="mul", mul_operand=scale, mul_shift=1),
                     x2=XStage(mul="prelu", mul_operand=slope, mul_shift=4),
                     out_cvt=Converter(-3, 7, 2))
    out, program = sdp_on_engine("nv_small", x, layer)
    v = x_stage(x, mul="mul", mul_op=scale, mul_shift=1)
    v = x_stage(v, mul="prelu", mul_op=slope[:, None, None], mul_shift=4)
    assert np.array_equal(out, out_cvt(v, -3, 7, 2))
    regs = regs_of(program)
    assert regs["SDP_RDMA.D_BRDMA_CFG"] == 1 << 4 | 1 << 5          # MUL, 1 byte, per element
    assert regs["SDP.D_DP_BN_CFG"] == 1 << 1 | 1 << 5 | 1 << 6       # ALU bypass, PReLU, no ReLU


@pytest.mark.parametrize("preset", ["nv_large", "nv_small_256_full"])
def test_element_wise_add_with_operand_converter(preset):
    rng = np.random.default_rng(8)
    x, e = random_cube(rng, (21, 3, 5)), random_cube(rng, (21, 3, 5))
    layer = SdpLayer(x1=XStage(mul_shift=0), y=YStage(alu="sum", alu_cvt=Converter(-3, 700, 5)),
                     out_cvt=Converter(0, 1, 2))
    out, program = sdp_on_engine(preset, x, layer, extra=e)
    operand = sat(rha((e.astype(np.int64) + 3) * 700, 5), *INT32)
    assert np.array_equal(out, sat8(rha(sat(x.astype(np.int64) + operand, *INT32), 2)))
    assert regs_of(program)["SDP_RDMA.D_ERDMA_CFG"] == 1 << 1 | 1 << 4 | 1 << 5


def test_element_wise_register_operands():
    x = random_cube(np.random.default_rng(9), (40, 2, 2))
    layer = SdpLayer(y=YStage(mul="mul", mul_operand=-70000, truncate=7, alu="max",
                              alu_operand=-900), out_cvt=Converter(0, 5, 4))
    out, program = sdp_on_engine("nv_large", x, layer)
    v = np.maximum(sat(rha(x.astype(np.int64) * -70000, 7), *INT32), -900)
    assert np.array_equal(out, out_cvt(v, 0, 5, 4))
    regs = regs_of(program)
    assert regs["SDP.D_DP_EW_MUL_SRC_VALUE"] == (-70000) & 0xFFFFFFFF
    assert "SDP_RDMA.D_OP_ENABLE" in regs      # memory -> memory: SDP_RDMA reads the input


@pytest.mark.parametrize("function, s_in", [("sigmoid", 0.05), ("tanh", 0.03), ("sigmoid", 0.5)])
def test_lut_activation_matches_float(function, s_in):
    x = random_cube(np.random.default_rng(10), (33, 4, 4))
    design = activation_lut(function, s_in)
    s_out = 1 / 127
    scale, shift, _ = precision.fixed_point(design.entry_lsb / s_out)
    out, _ = sdp_on_engine("nv_large", x, SdpLayer(y=YStage(lut=design.lut),
                                                   out_cvt=Converter(0, scale, shift)))
    xf = x.astype(np.float64) * s_in
    f = 1 / (1 + np.exp(-xf)) if function == "sigmoid" else np.tanh(xf)
    assert np.abs(out - np.clip(np.rint(f / s_out), -128, 127)).max() <= 1


def test_sdp_feeds_pdp_on_the_fly():
    x = random_cube(np.random.default_rng(11), (20, 4, 6))
    layer = SdpLayer(x1=XStage(alu="sum", alu_operand=3, relu=True))
    out, program = sdp_on_engine("nv_small", x, layer, pdp=(PdpLayer("max", (2, 3), (2, 3)), (2, 2)))
    v = np.maximum(x.astype(np.int64) + 3, 0)
    assert np.array_equal(out, sat8(v).reshape(20, 2, 2, 2, 3).max(axis=(2, 4)))
    regs = regs_of(program)
    assert regs["SDP.D_FEATURE_MODE_CFG"] == 1 << 1            # from memory, output to PDP
    assert regs["PDP.D_OPERATION_MODE_CFG"] & 1 << 4 == 0      # PDP on the fly
    assert "PDP_RDMA.D_OP_ENABLE" not in regs and "SDP.D_DST_BASE_ADDR_LOW" not in regs


@pytest.mark.parametrize("layer, message", [
    (SdpLayer(y=YStage(alu="sum", alu_operand=1)), "no SDP element-wise"),
    (SdpLayer(y=YStage(lut=activation_lut("tanh", 0.1).lut)), "no SDP lookup table"),
    (SdpLayer(x1=XStage(alu="eql")), "ALU 'eql' is not one of sum, max, min"),
    (SdpLayer(x1=XStage(mul="div")), "MUL 'div'"),
    (SdpLayer(x1=XStage(alu="sum", alu_operand=np.ones(5, np.int64))), "expected"),
    (SdpLayer(x1=XStage(alu="sum", alu_operand=np.full(8, 40000))), "fit int16"),
])
def test_invalid_layers_are_errors(layer, message):
    x = random_cube(np.random.default_rng(0), (8, 2, 2))
    with pytest.raises(NvdlaSimError, match=message):
        sdp_on_engine("nv_small", x, layer)
