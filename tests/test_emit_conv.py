"""Convolution emitter: weight image layout, CBUF bank split and partial-height split, and whole
convolutions (with SDP post-processing, fused PDP) run on the engine against numpy."""
from __future__ import annotations

import numpy as np
import pytest

from nvdla_sim import formats
from nvdla_sim.datatype import INT8
from emit_helpers import INT32, conv_reference, random_cube, rha, run_layer, sat, sat8
from nvdla_sim.compiler.emit import Converter
from nvdla_sim.compiler.emit_conv import (ConvLayer, PartialH, emit_conv, entry_per_slice,
                                          partial_heights, plan_cbuf)
from nvdla_sim.compiler.emit_pdp import PdpLayer
from nvdla_sim.compiler.emit_sdp import SdpLayer, XStage
from nvdla_sim.compiler.placement import CVSRAM
from nvdla_sim.config import load_hardware
from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.program import RegWrite

SMALL = load_hardware("nv_small")
LARGE = load_hardware("nv_large")


# -- weights -----------------------------------------------------------------------------------
def test_weight_image_order_group_block_position_kernel_channel():
    k, c, r, s = 3, 10, 1, 2
    w = (np.arange(k * c * r * s) % 127).astype(np.int8).reshape(k, c, r, s)
    image = formats.pack_direct_weights(w, INT8, 8, 2).view(np.int8)[:w.size]
    expected = []
    for k0, group in ((0, (0, 1)), (2, (2,))):
        for block in (range(0, 8), range(8, 10)):
            for pos in range(s):                  # r = 0 only
                for kk in group:
                    expected += [w[kk, ch, 0, pos] for ch in block]
    assert image.tolist() == expected and image.size == k * c * r * s


# -- CBUF ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("preset, channels, width, eps", [
    ("nv_small", 192, 6, 24 * 6),          # one 8-byte atom per entry
    ("nv_small", 3, 10, 10),
    ("nv_large", 64, 7, 7),                 # two 32-byte atoms per 64-byte entry
    ("nv_large", 70, 7, 7 + 4),             # 3 atoms: a whole entry and a half one per pixel
    ("nv_small_256", 14, 10, 5),            # 2 of 4 atoms: half an entry per pixel
    ("nv_small_256", 24, 10, 10),           # 3 of 4 atoms count as a whole entry
    ("nv_small_256", 40, 10, 10 + 3),
])
def test_entry_per_slice(preset, channels, width, eps):
    assert entry_per_slice(load_hardware(preset), channels, width) == eps


def test_bank_split_preferences():
    # all input (8x8x64: 64 entries/line, 1 bank) and all weights (64x64x3x3 = 9 banks)
    plan = plan_cbuf(SMALL, 64, 8, 8, 64, 64 * 9, 3, 1, 1, 1)
    assert (plan.data_banks, plan.weight_banks, plan.mode, plan.split) == (1, 9, "full", False)
    # 1024 kernels of 3x3x64 need 144 banks: two kernel groups (2 x 9/8 -> 2 x 2 banks)
    plan = plan_cbuf(SMALL, 64, 8, 8, 1024, 64 * 9, 3, 1, 1, 1)
    assert (plan.weight_banks, plan.mode) == (4, "ping-pong")
    # input of 29 banks: room for one group only
    plan = plan_cbuf(SMALL, 64, 29 * 8, 8, 1024, 64 * 9, 3, 1, 1, 1)
    assert (plan.data_banks, plan.weight_banks, plan.mode) == (29, 2, "one-group")


def test_partial_heights_walk():
    # 10 lines, 4 per part, 3x3 kernel, stride 1, padding 1: windows of output o start at o - 1
    assert partial_heights(10, 4, 3, 1, 1, 1) == [
        PartialH(0, 3, 1, 0, 0, 3), PartialH(2, 5, 0, 0, 3, 2),
        PartialH(4, 7, 0, 0, 5, 2), PartialH(6, 9, 0, 1, 7, 3)]
    # stride 2: the next part starts two lines after the last window's top
    parts = partial_heights(11, 5, 3, 2, 0, 0)
    assert [(p.top, p.bottom, p.out_top, p.out_height) for p in parts] == \
        [(0, 4, 0, 2), (4, 8, 2, 2), (8, 10, 4, 1)]
    with pytest.raises(NvdlaSimError, match="does not fit"):
        partial_heights(10, 2, 3, 1, 0, 0)


def test_split_plan_keeps_all_weights_when_they_fit():
    plan = plan_cbuf(SMALL, 64, 64, 64, 64, 64 * 9, 3, 1, 1, 1)
    assert (plan.entry_per_slice, plan.weight_banks, plan.data_banks) == (512, 9, 23)
    assert plan.keep_weights and [p.top for p in plan.parts] == [0, 21, 42]
    assert sum(p.out_height for p in plan.parts) == 64


# -- on the engine -------------------------------------------------------------------------------
def conv_on_engine(preset, x, layer, out_shape, pdp=None, cvsram=False):
    def emit(b, alloc, p):
        src = p["x"]
        if cvsram:
            src = alloc.feature("x_cv", *x.shape, space=CVSRAM)
            b.load_cube(src, x)
        if pdp is None:
            emit_conv(b, alloc, layer, src, p["y"])
        else:
            mid = alloc.feature("mid", *out_shape)
            emit_conv(b, alloc, layer, src, mid, pdp=(pdp[0], p["y"]))
    final = out_shape if pdp is None else (out_shape[0],) + pdp[1]
    cubes, result, program = run_layer(preset, {"x": x}, {"y": final}, emit,
                                       cvsram_bytes=1 << 20 if cvsram else 0)
    return cubes["y"], program


def sdp_bias_relu(bias, shift):
    return SdpLayer(x1=XStage(alu="sum", alu_operand=bias, alu_shift=3, relu=True),
                    out_cvt=Converter(0, 1, shift))


def expected(acc, bias, shift, clip=0):
    v = sat(rha(acc, clip), *INT32) + (np.asarray(bias, np.int64)[:, None, None] << 3)
    return sat8(rha(np.maximum(v, 0), shift))


@pytest.mark.parametrize("preset, shape, kernels, rs, stride, pad, dilation, pad_value, clip", [
    ("nv_small", (16, 8, 8), 16, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 0, 0),
    ("nv_small", (19, 9, 7), 13, (3, 2), (2, 1), (1, 0, 2, 1), (1, 2), -5, 2),
    ("nv_small", (3, 11, 12), 9, (5, 5), (3, 2), (2, 2, 2, 2), (1, 1), 7, 0),
    ("nv_large", (70, 6, 5), 40, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 0, 1),
    ("nv_large", (33, 7, 9), 65, (1, 4), (1, 4), (0, 3, 0, 3), (2, 1), -128, 0),
])
def test_convolution_matches_numpy(preset, shape, kernels, rs, stride, pad, dilation, pad_value,
                                   clip):
    rng = np.random.default_rng(kernels)
    x = random_cube(rng, shape)
    w = rng.integers(-128, 128, (kernels, shape[0]) + rs, dtype=np.int8)
    bias = rng.integers(-20000, 20000, kernels)
    acc = conv_reference(x, w, stride, pad, dilation, pad_value)
    layer = ConvLayer(w, stride, pad, dilation, pad_value, clip, sdp=sdp_bias_relu(bias, 9))
    out, program = conv_on_engine(preset, x, layer, acc.shape)
    assert np.array_equal(out, expected(acc, bias, 9, clip))
    regs = {c.name: c.value for c in program.commands if isinstance(c, RegWrite)}
    assert regs["CDMA.D_WEIGHT_BYTES"] % 128 == 0
    assert regs["CDMA.D_WEIGHT_BYTES"] >= kernels * shape[0] * rs[0] * rs[1]
    assert regs["CSC.D_ATOMICS"] == acc.shape[1] * acc.shape[2] - 1
    assert regs["SDP.D_FEATURE_MODE_CFG"] == 1                  # flying, to memory
    enables = [c.name.split(".")[0] for c in program.commands
               if isinstance(c, RegWrite) and c.name.endswith("D_OP_ENABLE")]
    assert enables == ["SDP_RDMA", "SDP", "CACC", "CMAC_A", "CMAC_B", "CSC", "CDMA"]


def test_feature_input_converter():
    rng = np.random.default_rng(1)
    x = random_cube(rng, (8, 4, 4))
    w = rng.integers(-128, 128, (8, 8, 1, 1), dtype=np.int8)
    layer = ConvLayer(w, in_cvt=Converter(10, 3, 1), sdp=SdpLayer(out_cvt=Converter(0, 1, 6)))
    out, _ = conv_on_engine("nv_small", x, layer, (8, 4, 4))
    xc = sat8(rha((x.astype(np.int64) - 10) * 3, 1))
    assert np.array_equal(out, sat8(rha(conv_reference(xc, w), 6)))


@pytest.mark.parametrize("preset, shape, kernels, rs, stride, pad, parts", [
    ("nv_small", (64, 64, 64), 64, (3, 3), (1, 1), (1, 1, 1, 1), 3),    # all weights kept
    ("nv_small", (64, 50, 64), 24, (5, 3), (2, 2), (2, 1, 2, 1), 3),
    ("nv_small", (200, 24, 40), 300, (3, 3), (1, 1), (1, 1, 1, 1), 3),  # one kernel group
    ("nv_large", (256, 60, 60), 64, (3, 3), (1, 1), (1, 1, 1, 1), 3),
])
def test_partial_height_split(preset, shape, kernels, rs, stride, pad, parts):
    rng = np.random.default_rng(parts)
    x = random_cube(rng, shape)
    w = rng.integers(-128, 128, (kernels, shape[0]) + rs, dtype=np.int8)
    bias = rng.integers(-1000, 1000, kernels)
    acc = conv_reference(x, w, stride, pad)
    out, program = conv_on_engine(preset, x, ConvLayer(w, stride, pad, sdp=sdp_bias_relu(bias, 12)),
                                  acc.shape)
    assert np.array_equal(out, expected(acc, bias, 12))
    enables = [c for c in program.commands
               if isinstance(c, RegWrite) and c.name == "CDMA.D_OP_ENABLE"]
    assert len(enables) == parts


def test_all_weights_reused_across_parts():
    rng = np.random.default_rng(0)
    x = random_cube(rng, (64, 64, 64))
    w = rng.integers(-128, 128, (64, 64, 3, 3), dtype=np.int8)
    _, program = conv_on_engine("nv_small", x, ConvLayer(w, pad=(1, 1, 1, 1),
                                                         sdp=SdpLayer(x1=XStage(mul_shift=12))),
                                (64, 64, 64))
    misc = [c.value for c in program.commands
            if isinstance(c, RegWrite) and c.name == "CDMA.D_MISC_CFG"]
    reuse, keep = 1 << 20, 1 << 28
    assert misc == [keep, reuse | keep, reuse]
    pads = [c.value for c in program.commands
            if isinstance(c, RegWrite) and c.name == "CDMA.D_ZERO_PADDING"]
    assert pads == [1 | 1 << 8 | 1 << 16, 1 | 1 << 8, 1 | 1 << 8 | 1 << 24]   # top first, bottom last


@pytest.mark.parametrize("preset", ["nv_small", "nv_large"])
def test_convolution_feeds_pdp_on_the_fly(preset):
    rng = np.random.default_rng(4)
    x = random_cube(rng, (16, 12, 12))
    w = rng.integers(-128, 128, (24, 16, 3, 3), dtype=np.int8)
    layer = ConvLayer(w, pad=(1, 1, 1, 1), sdp=SdpLayer(x1=XStage(mul_shift=9, relu=True)))
    out, _ = conv_on_engine(preset, x, layer, (24, 12, 12),
                            pdp=(PdpLayer("max", (2, 2), (2, 2)), (6, 6)))
    v = sat8(np.maximum(rha(conv_reference(x, w, pad=(1, 1, 1, 1)), 9), 0))
    assert np.array_equal(out, v.reshape(24, 6, 2, 6, 2).max(axis=(2, 4)))


def test_input_from_cvsram():
    rng = np.random.default_rng(6)
    x = random_cube(rng, (40, 5, 5))
    w = rng.integers(-128, 128, (32, 40, 3, 3), dtype=np.int8)
    out, program = conv_on_engine("nv_large", x, ConvLayer(w, sdp=SdpLayer(x1=XStage(mul_shift=10))),
                                  (32, 3, 3), cvsram=True)
    assert np.array_equal(out, sat8(rha(conv_reference(x, w), 10)))
    regs = {c.name: c.value for c in program.commands if isinstance(c, RegWrite)}
    assert regs["CDMA.D_DAIN_RAM_TYPE"] == 0 and regs["CDMA.D_DAIN_ADDR_LOW_0"] == 0x5000_0000


@pytest.mark.parametrize("kwargs, shape, out_shape, message", [
    (dict(weights=np.zeros((8, 4, 3, 3), np.int8)), (8, 6, 6), (8, 4, 4), "4 channels"),
    (dict(weights=np.zeros((8, 8, 3, 3), np.int8)), (8, 6, 6), (8, 6, 6), "gives 4x4"),
    (dict(weights=np.zeros((8, 8, 3, 3), np.int8), stride=(9, 1)), (8, 20, 6), (8, 2, 4),
     "stride 9"),
    (dict(weights=np.zeros((8, 8, 3, 3), np.float32)), (8, 6, 6), (8, 4, 4), "int8"),
    (dict(weights=np.zeros((8, 8, 3, 3), np.int8), clip_truncate=17), (8, 6, 6), (8, 4, 4),
     "CLIP_TRUNCATE"),
])
def test_invalid_convolutions_are_errors(kwargs, shape, out_shape, message):
    with pytest.raises(NvdlaSimError, match=message):
        conv_on_engine("nv_small", np.zeros(shape, np.int8), ConvLayer(**kwargs), out_shape)


def test_too_large_for_cbuf():
    # one kernel group of 8 kernels x 2048 channels x 5x5 = 400 KiB > the 128 KiB CBUF
    with pytest.raises(NvdlaSimError, match="does not fit CBUF"):
        plan_cbuf(SMALL, 2048, 8, 8, 8, 2048 * 25, 5, 1, 0, 0)
