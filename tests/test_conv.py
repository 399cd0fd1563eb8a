"""Convolution pipeline (CDMA, CBUF, CSC, CMAC_A/B, CACC) on hand-computed cases (NVDLA reference
map 5.1-5.5), a slow numpy reference of the same rules, and whole-pipeline runs on the engine."""
from __future__ import annotations

import numpy as np
import pytest

from nvdla_sim import formats
from nvdla_sim.config import load_hardware
from nvdla_sim.datatype import INT8
from nvdla_sim.engine import Engine
from nvdla_sim.errors import NvdlaSimError, UnsupportedError
from nvdla_sim.kernels.conv import (accumulator_output, benchmark_direct_conv, conv_lines,
                                    convert_feature, convert_pixels)
from nvdla_sim.memory import AddressSpace
from nvdla_sim.program import IntrNotify, MemLoad, RegisterProgram
from nvdla_sim.units.cacc import assemble, deliver
from nvdla_sim.units.cbuf import Cbuf
from nvdla_sim.units.cdma import PIXEL_LAYOUTS, pad_pixel_lines, read_pixel_lines
from nvdla_sim.units.cmac import MacPartial, cell_kernels, mac_layer
from nvdla_sim.units.csc import (ConvGeometry, ConvJob, feature_lines, pixel_lines, unpack_weights)

from program_helpers import reg_writes

I64_MAX_48 = (1 << 47) - 1
I32_MAX = (1 << 31) - 1


def geometry(**kw) -> ConvGeometry:
    base = dict(in_w=1, in_h=1, in_c=1, kernel_w=1, kernel_h=1, kernel_c=1, kernels=1, out_w=1,
                out_h=1, stride_x=1, stride_y=1, dilation_x=1, dilation_y=1, pad_left=0, pad_top=0,
                pad_value=0)
    base.update(kw)
    if "kernel_c" not in kw:
        base["kernel_c"] = base["in_c"]
    return ConvGeometry(**base)


def feature_sums(cube, weights_krsc, g: ConvGeometry) -> np.ndarray:
    """CSC lines + both CMAC halves + CACC assembly, as the units run them."""
    w = np.asarray(weights_krsc, np.int8)
    job = ConvJob(feature_lines(np.ascontiguousarray(cube, dtype=np.int8), g),
                  np.ascontiguousarray(w.reshape(w.shape[0], w.shape[1], -1)),
                  g.kernel_w, g.in_c, g.stride_x * g.in_c, g.dilation_x * g.in_c,
                  g.stride_y, g.dilation_y, g.out_h, g.out_w)
    parts = []
    for half in (0, 1):
        kernels = cell_kernels(job.kernels, 8, half)
        parts.append(MacPartial(kernels, mac_layer(job, kernels), job.kernels))
    return assemble(parts, job.kernels, g.out_h, g.out_w)


# -- CMAC arithmetic ---------------------------------------------------------------------------
def test_conv_lines_valid_2x2():
    lines = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]], np.int8)
    w = np.array([[[1, 2], [3, 4]]], np.int8)             # (K=1, R=2, S*C=2)
    out = np.zeros((1, 2, 2), np.int64)
    conv_lines(lines, w, out, 2, 1, 1, 1, 1, 1)
    # 1+2*2+3*4+4*5 = 37, 2+6+15+24 = 47, 4+10+21+32 = 67, 5+12+24+36 = 77
    assert out.tolist() == [[[37, 47], [67, 77]]]


def test_conv_lines_rejects_short_lines():
    with pytest.raises(ValueError):
        conv_lines(np.zeros((2, 2), np.int8), np.zeros((1, 2, 2), np.int8),
                   np.zeros((1, 2, 2), np.int64), 2, 1, 1, 1, 1, 1)


def test_padding_uses_csc_pad_value_with_stride():
    # 3x3 single-channel input, lanes 1..7 hold garbage the CSC never feeds; 2x2 ones kernel,
    # stride 2, pad left/top 1, pad value -2.
    cube = np.full((8, 3, 3), 100, np.int8)
    cube[0] = [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
    g = geometry(in_w=3, in_h=3, kernel_w=2, kernel_h=2, out_w=2, out_h=2, stride_x=2,
                 stride_y=2, pad_left=1, pad_top=1, pad_value=-2)
    sums = feature_sums(cube, np.ones((1, 2, 2, 1)), g)
    # (0,0): three pads + 1 = -5; (0,1): two pads + 2 + 3 = 1; (1,0): two pads + 4 + 7 = 7;
    # (1,1): 5 + 6 + 8 + 9 = 28
    assert sums.tolist() == [[[-5, 1], [7, 28]]]


def test_dilation_x():
    cube = np.zeros((8, 1, 5), np.int8)
    cube[0, 0] = [1, 2, 3, 4, 5]
    g = geometry(in_w=5, kernel_w=2, out_w=2, dilation_x=3)
    sums = feature_sums(cube, [[[[1], [10]]]], g)
    assert sums.tolist() == [[[1 + 4 * 10, 2 + 5 * 10]]]


def test_pad_value_feeds_every_real_channel_on_both_sides():
    cube = np.zeros((8, 1, 1), np.int8)
    cube[:3, 0, 0] = [1, 2, 3]
    cube[3:, 0, 0] = 99                       # channels >= C are never fed
    g = geometry(in_c=3, kernel_w=3, pad_left=1, pad_value=4)
    w = [[[[1, 1, 1], [1, 2, 3], [1, 1, 1]]]]  # (K, R, S, C)
    # left and right kernel columns read the pad value in 3 channels: 2 * 3 * 4; centre 1+4+9
    assert feature_sums(cube, w, g).tolist() == [[[24 + 14]]]


def test_kernels_split_between_the_two_cmacs():
    assert cell_kernels(11, 8, 0).tolist() == [0, 1, 2, 3, 8, 9, 10]
    assert cell_kernels(11, 8, 1).tolist() == [4, 5, 6, 7]
    assert cell_kernels(3, 32, 1).tolist() == []


# -- weight layout -----------------------------------------------------------------------------
def test_weight_layout_groups_blocks_positions_kernels():
    # K=3 in groups of 2, C=3 in blocks of 2, one row of 2 positions: byte order
    # [group][block][position][kernel in group][channel in block]
    raw = np.arange(18, dtype=np.uint8)
    w = unpack_weights(raw, 3, 1, 2, 3, atomic_c=2, atomic_k=2)
    assert w[:, 0].tolist() == [
        [[0, 1, 8], [4, 5, 10]],        # kernel 0: block 0 at 0.., block 1 (1 channel) at 8..
        [[2, 3, 9], [6, 7, 11]],        # kernel 1
        [[12, 13, 16], [14, 15, 17]],   # kernel 2: a group of one kernel at 12
    ]


def test_weight_layout_is_a_permutation():
    offs = formats.direct_weight_offsets(41, 19, 3, 2, atomic_c=8, kernel_group_=8)
    assert sorted(offs.ravel().tolist()) == list(range(41 * 3 * 2 * 19))


def test_short_weights_are_an_error():
    with pytest.raises(NvdlaSimError, match="WEIGHT_BYTES"):
        unpack_weights(np.zeros(10, np.uint8), 2, 1, 1, 8, 8, 8)


# -- CACC --------------------------------------------------------------------------------------
def cacc(values, clip):
    acc = np.array(values, np.int64).reshape(1, 1, -1)
    out = np.zeros(acc.shape, np.int32)
    sat = accumulator_output(acc, out, clip)
    return out.ravel().tolist(), sat


def test_cacc_rounds_half_away_from_zero():
    assert cacc([6, -6, 5, -5, 4, -4, 7], 2) == ([2, -2, 1, -1, 1, -1, 2], 0)
    assert cacc([5, -5, 3], 1) == ([3, -3, 2], 0)
    assert cacc([123, -123], 0) == ([123, -123], 0)


def test_cacc_saturates_to_32_bits_and_counts():
    assert cacc([1 << 40, -(1 << 40), I32_MAX, I32_MAX + 1], 0) == \
        ([I32_MAX, -I32_MAX - 1, I32_MAX, I32_MAX], 3)


def test_cacc_accumulator_is_48_bits():
    # sat48 first: (2^47 - 1) / 2^16 rounds up to 2^31, which then saturates to 2^31 - 1;
    # -2^47 / 2^16 = -2^31 fits exactly.
    assert cacc([1 << 50, -(1 << 50)], 16) == ([I32_MAX, -I32_MAX - 1], 1)
    assert cacc([I64_MAX_48], 17) == ([1 << 30], 0)


def test_cacc_delivers_zero_lanes_for_missing_kernels():
    acc = np.arange(3 * 2, dtype=np.int64).reshape(3, 1, 2) * 4
    out, sat = deliver(acc, atom=8, clip_truncate=2)
    assert out.shape == (8, 1, 2) and out.dtype == np.int32 and sat == 0
    assert out[:3].ravel().tolist() == [0, 1, 2, 3, 4, 5]
    assert not out[3:].any()


# -- CDMA converters ---------------------------------------------------------------------------
def cvt_feature(values, offset, scale, truncate):
    cube = np.array(values, np.int8).reshape(1, 1, -1)
    out = np.zeros_like(cube)
    convert_feature(cube, out, offset, scale, truncate)
    return out.ravel().tolist()


def test_feature_cvt_offset_scale_round_saturate():
    assert cvt_feature([3, -3, 1, -1], 0, 1, 1) == [2, -2, 1, -1]      # ties away from zero
    assert cvt_feature([10, -10], 4, 3, 2) == [5, -11]                # 18/4=4.5, -42/4=-10.5
    assert cvt_feature([100, -100], 0, 2, 0) == [127, -128]
    assert cvt_feature([-128], -5000, -1, 0) == [-128]                 # -(-128+5000) saturates


def test_pixel_cvt_unsigned_signed_and_means():
    px = np.array([[[200, 10, 0, 255]]], np.uint8)
    out = np.zeros(px.shape, np.int8)
    convert_pixels(px, out, np.array([0, 20, -3, 200], np.int64), 1, 0, False)
    assert out.ravel().tolist() == [127, -10, 3, 55]
    convert_pixels(px, out, np.array([0, 20, -3, 200], np.int64), 1, 0, True)
    assert out.ravel().tolist() == [-56, -10, 3, -128]               # 255 is -1 when signed
    convert_pixels(px, out, np.array([190, 13, 0, 250], np.int64), 3, 1, False)
    assert out.ravel().tolist() == [15, -5, 0, 8]                     # 30/2, -9/2, 0, 15/2


def test_pixel_byte_reorder_and_x_offset():
    space = AddressSpace("test", 0x1000, 0x1000)
    # two lines of 3 pixels (stride 16); pixel p of line y holds bytes 10*y + 4*p + (0..3)
    line = np.arange(12, dtype=np.uint8)
    space.write(0x1000, line)
    space.write(0x1010, line + 100)
    argb = read_pixel_lines(space, 0x1000, 16, width=2, height=2, x_offset=1,
                            layout=PIXEL_LAYOUTS[13])                 # A8R8G8B8: 2,1,0,3
    assert argb[0].tolist() == [[6, 5, 4, 7], [10, 9, 8, 11]]
    assert argb[1, 0].tolist() == [106, 105, 104, 107]
    rgba = read_pixel_lines(space, 0x1000, 16, 1, 1, 0, PIXEL_LAYOUTS[15])   # R8G8B8A8: 3,2,1,0
    assert rgba.ravel().tolist() == [3, 2, 1, 0]
    bgra = read_pixel_lines(space, 0x1000, 16, 1, 1, 0, PIXEL_LAYOUTS[14])   # B8G8R8A8: 1,2,3,0
    assert bgra.ravel().tolist() == [1, 2, 3, 0]


def test_image_lines_padding_is_not_converted():
    px = np.array([[[1, 2], [3, 4]]], np.int8)
    assert pad_pixel_lines(px, 1, 2, -7).tolist() == [[-7, -7, 1, 2, 3, 4, -7, -7, -7, -7]]


def test_image_mode_kernel_column_and_top_padding():
    # CBUF lines of 3 pixels x 2 elements; kernel 2 rows x (2 pixels x 2 elements), pad top 1
    # with CSC pad value 7.
    lines = np.array([[1, 2, 3, 4, 5, 6], [10, 20, 30, 40, 50, 60]], np.int8)
    g = geometry(in_w=3, in_h=2, in_c=2, kernel_c=4, kernel_h=2, out_w=2, out_h=2, pad_top=1,
                 pad_value=7)
    w = np.array([[[1, 1, 1, 1], [1, 0, 0, 1]]], np.int8)
    job = ConvJob(pixel_lines(lines, g, 2), w, 1, 4, 2, 4, 1, 1, 2, 2)
    sums = mac_layer(job, np.array([0]))
    # row -1 is padding: 4 * 7 = 28.  (0,0): 28 + 1+4; (0,1): 28 + 3+6;
    # (1,0): 1+2+3+4 + 10+40; (1,1): 3+4+5+6 + 30+60
    assert sums.tolist() == [[[33, 37], [60, 108]]]


# -- CBUF --------------------------------------------------------------------------------------
def test_cbuf_bank_allocation_and_capacity():
    cbuf = Cbuf(load_hardware("nv_small"))          # 32 banks of 512 x 8 bytes
    with pytest.raises(NvdlaSimError, match="32 banks"):
        cbuf.allocate(20, 13)
    cbuf.allocate(2, 1)
    cbuf.check_data_fits(1024, "feature input")
    with pytest.raises(NvdlaSimError, match="1025 entries"):
        cbuf.check_data_fits(1025, "feature input")
    cbuf.check_weights_fit(10_000, 4096, keep_all=False)
    with pytest.raises(NvdlaSimError, match="SKIP_WEIGHT_RLS"):
        cbuf.check_weights_fit(10_000, 4096, keep_all=True)
    with pytest.raises(NvdlaSimError, match="kernel group"):
        cbuf.check_weights_fit(10_000, 4097, keep_all=False)


# -- slow numpy reference ----------------------------------------------------------------------
def reference_conv(cube, w, g: ConvGeometry, clip: int) -> np.ndarray:
    """Direct transcription of map 5.3-5.5: positions outside the cube read the pad value."""
    k_n = w.shape[0]
    out = np.zeros((k_n, g.out_h, g.out_w), np.int64)
    data = cube[:g.in_c].astype(np.int64)
    for oy in range(g.out_h):
        for ox in range(g.out_w):
            for r in range(g.kernel_h):
                for s in range(g.kernel_w):
                    y = oy * g.stride_y + r * g.dilation_y - g.pad_top
                    x = ox * g.stride_x + s * g.dilation_x - g.pad_left
                    if 0 <= y < g.in_h and 0 <= x < g.in_w:
                        vec = data[:, y, x]
                    else:
                        vec = np.full(g.in_c, g.pad_value, np.int64)
                    out[:, oy, ox] += w[:, r, s, :].astype(np.int64) @ vec
    out = np.clip(out, -(1 << 47), (1 << 47) - 1)
    if clip:
        mag = (np.abs(out) + (1 << (clip - 1))) >> clip
        out = np.where(out < 0, -mag, mag)
    return np.clip(out, -(1 << 31), (1 << 31) - 1)


@pytest.mark.parametrize("preset", ["nv_small", "nv_large"])
@pytest.mark.parametrize("seed", range(4))
def test_pipeline_matches_slow_reference(preset, seed):
    hw = load_hardware(preset)
    rng = np.random.default_rng(seed)
    in_c, in_h, in_w = rng.integers(1, 40), rng.integers(1, 9), rng.integers(1, 9)
    g = geometry(in_w=int(in_w), in_h=int(in_h), in_c=int(in_c),
                 kernel_w=int(rng.integers(1, 4)), kernel_h=int(rng.integers(1, 4)),
                 kernels=int(rng.integers(1, 45)), out_w=int(rng.integers(1, 7)),
                 out_h=int(rng.integers(1, 7)), stride_x=int(rng.integers(1, 4)),
                 stride_y=int(rng.integers(1, 4)), dilation_x=int(rng.integers(1, 3)),
                 dilation_y=int(rng.integers(1, 3)), pad_left=int(rng.integers(0, 3)),
                 pad_top=int(rng.integers(0, 3)), pad_value=int(rng.integers(-128, 128)))
    atom = hw.memory_atomic_bytes
    lanes = -(-g.in_c // atom) * atom
    cube = rng.integers(-128, 128, (lanes, g.in_h, g.in_w)).astype(np.int8)
    w = rng.integers(-128, 128, (g.kernels, g.kernel_h, g.kernel_w, g.in_c)).astype(np.int8)
    raw = formats.pack_direct_weights(w.transpose(0, 3, 1, 2), INT8, hw.atomic_c, hw.atomic_k)
    unpacked = unpack_weights(raw, g.kernels, g.kernel_h, g.kernel_w, g.in_c, hw.atomic_c,
                              hw.atomic_k)
    clip = int(rng.integers(0, 8))
    out, _ = deliver(feature_sums(cube, unpacked, g), atom, clip)
    assert np.array_equal(out[:g.kernels], reference_conv(cube, w, g, clip))


def test_benchmark_entry_point_matches_reference():
    rng = np.random.default_rng(7)
    data = rng.integers(-128, 128, (5, 6, 7)).astype(np.int8)
    w = rng.integers(-128, 128, (11, 5, 3, 2)).astype(np.int8)
    g = geometry(in_w=7, in_h=6, in_c=5, kernel_w=2, kernel_h=3, kernels=11, out_w=6, out_h=4)
    expected = reference_conv(data, np.transpose(w, (0, 2, 3, 1)), g, 0)
    assert np.array_equal(benchmark_direct_conv(data, w, 8, 8), expected)


# -- the units on the engine -------------------------------------------------------------------
SRC, WT = 0x8000_0000, 0x8010_0000




CONV_UNITS = ("CACC", "CMAC_A", "CMAC_B", "CSC", "CDMA")


def _layerreg_writes(cdma: dict, csc: dict, cacc: dict, misc: int = 0, group: int = 0) -> list:
    """Registers of one layer in register group `group`, then its OP_ENABLEs."""
    common = {"D_MISC_CFG": {"CONV_MODE": misc}}
    regs = {f"{u}.S_POINTER": {"PRODUCER": group} for u in CONV_UNITS}
    # the CSC's own copies of the CDMA's slice size and weight bytes, and its atomic-operation
    # count (units/checks.py refuses a program whose CSC disagrees)
    out = csc.get("D_DATAOUT_SIZE_0", {})
    csc = {**{reg: cdma[reg] for reg in ("D_ENTRY_PER_SLICE", "D_WEIGHT_BYTES") if reg in cdma},
           "D_ATOMICS": {"ATOMICS": (out.get("DATAOUT_WIDTH", 0) + 1)
                         * (out.get("DATAOUT_HEIGHT", 0) + 1) - 1}, **csc}
    for unit, fields in (("CDMA", cdma), ("CSC", csc), ("CMAC_A", {}), ("CMAC_B", {}),
                         ("CACC", cacc)):
        for reg, f in {**common, **fields}.items():
            regs[f"{unit}.{reg}"] = f
    return reg_writes(regs) + reg_writes({f"{u}.D_OP_ENABLE": {"OP_EN": 1} for u in CONV_UNITS})


def _conv_program(cdma: dict, csc: dict, cacc: dict, images: list[MemLoad],
                  misc: int = 0) -> RegisterProgram:
    return RegisterProgram("conv_unit_test", [
        *images, IntrNotify("CACC", 0, "cacc"), IntrNotify("CDMA_DAT", 0, "dat"),
        IntrNotify("CDMA_WT", 0, "wt"), *_layerreg_writes(cdma, csc, cacc, misc)])


def _feature_layer(pad_value: int = -2, clip: int = 1) -> tuple[dict, dict, dict, list]:
    """The 3x3 input of test_padding_uses_csc_pad_value_with_stride, two kernels (ones, and
    ones times 3), CACC clip 1: (CDMA, CSC, CACC registers, memory images)."""
    image = np.zeros(64 * 3, np.uint8)
    for y in range(3):
        for x in range(3):
            image[y * 64 + x * 8] = 1 + 3 * y + x
            image[y * 64 + x * 8 + 1: y * 64 + x * 8 + 8] = 0x64     # garbage lanes
    # two kernels (one group), one block of 1 channel, positions (0,0),(0,1),(1,0),(1,1):
    weights = np.array([1, 3] * 4, np.int8).view(np.uint8)
    cdma = {"D_DATAIN_FORMAT": {"DATAIN_FORMAT": 0},
            "D_DATAIN_SIZE_0": {"DATAIN_WIDTH": 2, "DATAIN_HEIGHT": 2},
            "D_DATAIN_SIZE_1": {"DATAIN_CHANNEL": 0},
            "D_DAIN_RAM_TYPE": {"DATAIN_RAM_TYPE": 1},
            "D_DAIN_ADDR_LOW_0": {"DATAIN_ADDR_LOW_0": SRC},
            "D_LINE_STRIDE": {"LINE_STRIDE": 64}, "D_SURF_STRIDE": {"SURF_STRIDE": 256},
            "D_ENTRY_PER_SLICE": {"ENTRIES": 2},
            "D_WEIGHT_SIZE_0": {"BYTE_PER_KERNEL": 3}, "D_WEIGHT_SIZE_1": {"WEIGHT_KERNEL": 1},
            "D_WEIGHT_RAM_TYPE": {"WEIGHT_RAM_TYPE": 1},
            "D_WEIGHT_ADDR_LOW": {"WEIGHT_ADDR_LOW": WT}, "D_WEIGHT_BYTES": {"WEIGHT_BYTES": 8},
            "D_BANK": {"DATA_BANK": 0, "WEIGHT_BANK": 0}}
    csc = {"D_DATAIN_FORMAT": {"DATAIN_FORMAT": 0},
           "D_DATAIN_SIZE_EXT_0": {"DATAIN_WIDTH_EXT": 2, "DATAIN_HEIGHT_EXT": 2},
           "D_DATAIN_SIZE_EXT_1": {"DATAIN_CHANNEL_EXT": 0},
           "D_WEIGHT_SIZE_EXT_0": {"WEIGHT_WIDTH_EXT": 1, "WEIGHT_HEIGHT_EXT": 1},
           "D_WEIGHT_SIZE_EXT_1": {"WEIGHT_CHANNEL_EXT": 0, "WEIGHT_KERNEL": 1},
           "D_DATAOUT_SIZE_0": {"DATAOUT_WIDTH": 1, "DATAOUT_HEIGHT": 1},
           "D_DATAOUT_SIZE_1": {"DATAOUT_CHANNEL": 1},
           "D_CONV_STRIDE_EXT": {"CONV_X_STRIDE_EXT": 1, "CONV_Y_STRIDE_EXT": 1},
           "D_ZERO_PADDING": {"PAD_LEFT": 1, "PAD_TOP": 1},
           "D_ZERO_PADDING_VALUE": {"PAD_VALUE": pad_value & 0xFFFF},
           "D_BANK": {"DATA_BANK": 0, "WEIGHT_BANK": 0}}
    cacc = {"D_DATAOUT_SIZE_0": {"DATAOUT_WIDTH": 1, "DATAOUT_HEIGHT": 1},
            "D_DATAOUT_SIZE_1": {"DATAOUT_CHANNEL": 1}, "D_CLIP_CFG": {"CLIP_TRUNCATE": clip}}
    return cdma, csc, cacc, [MemLoad("pri_mem", SRC, image), MemLoad("pri_mem", WT, weights)]


def _feature_program(misc: int = 0) -> RegisterProgram:
    cdma, csc, cacc, images = _feature_layer()
    return _conv_program(cdma, csc, cacc, images, misc)


def _delivered(engine: Engine) -> np.ndarray:
    items = engine.channel("cacc->sdp").items
    assert len(items) == 1
    return items[0]


def test_units_run_a_layer_and_raise_their_interrupts():
    engine = Engine(load_hardware("nv_small"))
    engine.run(_feature_program())
    out = _delivered(engine)
    assert out.shape == (8, 2, 2) and out.dtype == np.int32
    # sums -5, 1, 7, 28 (kernel of ones) and three times that; / 2 rounded half away from zero
    assert out[0].tolist() == [[-3, 1], [4, 14]]
    assert out[1].tolist() == [[-8, 2], [11, 42]]
    assert not out[2:].any()
    raised = {(src, grp) for _, src, grp in engine.glb.raised}
    assert {("CDMA_DAT", 0), ("CDMA_WT", 0), ("CACC", 0)} <= raised
    assert engine.regs["CACC"].view(0).word("D_OUT_SATURATION") == 0


def test_winograd_is_unsupported():
    with pytest.raises(UnsupportedError, match="Winograd"):
        Engine(load_hardware("nv_small")).run(_feature_program(misc=1))


@pytest.mark.parametrize("compute_values", [True, False], ids=["values", "timing-only"])
def test_unmodelled_pixel_format_is_unsupported_in_both_modes(compute_values):
    cdma, csc, cacc, images = _feature_layer()
    cdma["D_DATAIN_FORMAT"] = {"DATAIN_FORMAT": 1, "PIXEL_FORMAT": 28}     # semi-planar YUV
    csc["D_DATAIN_FORMAT"] = {"DATAIN_FORMAT": 1}
    with pytest.raises(UnsupportedError, match="PIXEL_FORMAT=28"):
        Engine(load_hardware("nv_small"), compute_values=compute_values).run(
            _conv_program(cdma, csc, cacc, images))


def test_image_input_pipeline():
    """A8R8G8B8 image, 2x1 pixels, mean per element, kernel 1 row x 2 pixels x 4 elements."""
    image = np.array([4, 3, 2, 1, 40, 30, 20, 10], np.uint8)   # B,G,R,A -> R,G,B,A = 2,3,4,1
    weights = np.array([1, 1, 1, 1, 1, 2, 3, 4], np.int8).view(np.uint8)
    cdma = {"D_DATAIN_FORMAT": {"DATAIN_FORMAT": 1, "PIXEL_FORMAT": 13},
            "D_DATAIN_SIZE_0": {"DATAIN_WIDTH": 1, "DATAIN_HEIGHT": 0},
            "D_DATAIN_SIZE_1": {"DATAIN_CHANNEL": 3},
            "D_DAIN_RAM_TYPE": {"DATAIN_RAM_TYPE": 1},
            "D_DAIN_ADDR_LOW_0": {"DATAIN_ADDR_LOW_0": SRC}, "D_LINE_STRIDE": {"LINE_STRIDE": 64},
            "D_ENTRY_PER_SLICE": {"ENTRIES": 0},
            "D_WEIGHT_SIZE_0": {"BYTE_PER_KERNEL": 7}, "D_WEIGHT_SIZE_1": {"WEIGHT_KERNEL": 0},
            "D_WEIGHT_RAM_TYPE": {"WEIGHT_RAM_TYPE": 1},
            "D_WEIGHT_ADDR_LOW": {"WEIGHT_ADDR_LOW": WT}, "D_WEIGHT_BYTES": {"WEIGHT_BYTES": 8},
            "D_CVT_CFG": {"CVT_EN": 1, "CVT_TRUNCATE": 0}, "D_CVT_SCALE": {"CVT_SCALE": 1},
            "D_MEAN_FORMAT": {"MEAN_FORMAT": 1},
            "D_MEAN_GLOBAL_0": {"MEAN_RY": 1, "MEAN_GU": 2},
            "D_MEAN_GLOBAL_1": {"MEAN_BV": 3, "MEAN_AX": 0xFFFF},          # AX = -1
            "D_BANK": {"DATA_BANK": 0, "WEIGHT_BANK": 0}}
    csc = {"D_DATAIN_FORMAT": {"DATAIN_FORMAT": 1},
           "D_DATAIN_SIZE_EXT_0": {"DATAIN_WIDTH_EXT": 1, "DATAIN_HEIGHT_EXT": 0},
           "D_DATAIN_SIZE_EXT_1": {"DATAIN_CHANNEL_EXT": 3},
           "D_WEIGHT_SIZE_EXT_0": {"WEIGHT_WIDTH_EXT": 0, "WEIGHT_HEIGHT_EXT": 0},
           "D_WEIGHT_SIZE_EXT_1": {"WEIGHT_CHANNEL_EXT": 7, "WEIGHT_KERNEL": 0},
           "D_DATAOUT_SIZE_0": {"DATAOUT_WIDTH": 0, "DATAOUT_HEIGHT": 0},
           "D_DATAOUT_SIZE_1": {"DATAOUT_CHANNEL": 0},
           "D_BANK": {"DATA_BANK": 0, "WEIGHT_BANK": 0}}
    cacc = {"D_DATAOUT_SIZE_0": {"DATAOUT_WIDTH": 0, "DATAOUT_HEIGHT": 0},
            "D_DATAOUT_SIZE_1": {"DATAOUT_CHANNEL": 0}}
    engine = Engine(load_hardware("nv_small"))
    engine.run(_conv_program(cdma, csc, cacc, [MemLoad("pri_mem", SRC, image),
                                               MemLoad("pri_mem", WT, weights)]))
    # pixel 0: R,G,B,A = 2,3,4,1 minus means 1,2,3,-1 -> 1,1,1,2
    # pixel 1: 20,30,40,10 -> 19,28,37,11
    # sum = (1+1+1+2)*1 + 19*1 + 28*2 + 37*3 + 11*4 = 5 + 19 + 56 + 111 + 44
    assert _delivered(engine)[0].tolist() == [[235]]


def test_data_reuse_keeps_the_previous_layers_input():
    """Layer 1 (group 0) keeps its input (SKIP_DATA_RLS); layer 2 (group 1) points DAIN at zeros
    but sets DATA_REUSE, so it convolves the same input; layer 3 (group 0) reloads."""
    cdma, csc, cacc, images = _feature_layer()
    keep = {**cdma, "D_MISC_CFG": {"SKIP_DATA_RLS": 1}}
    zeros = {**cdma, "D_DAIN_ADDR_LOW_0": {"DATAIN_ADDR_LOW_0": SRC + 0x1000}}
    reuse = {**zeros, "D_MISC_CFG": {"DATA_REUSE": 1}}
    engine = Engine(load_hardware("nv_small"))
    got = []

    def drain():
        while True:
            got.append((yield engine.channel("cacc->sdp").get()))
    engine.env.process(drain())
    engine.run(RegisterProgram("reuse", [
        *images, IntrNotify("CACC", 0, "l1"), IntrNotify("CACC", 1, "l2"),
        *_layerreg_writes(keep, csc, cacc, group=0), *_layerreg_writes(reuse, csc, cacc, group=1)]))
    assert len(got) == 2 and np.array_equal(got[0], got[1])
    engine.run(RegisterProgram("reload", [
        IntrNotify("CACC", 0, "l3"), *_layerreg_writes(zeros, csc, cacc, group=0)]))
    # only padding (-2) contributes now: 3, 2, 2, 0 pad positions of the 2x2 ones kernel
    assert got[2][0].tolist() == [[-3, -2], [-2, 0]]
