"""PDP pooling on hand-computed cases (NVDLA reference map 5.8) and the PDP/PDP_RDMA units."""
from __future__ import annotations

import numpy as np
import pytest

from nvdla_sim.config import load_hardware
from nvdla_sim.engine import Engine
from nvdla_sim.errors import NvdlaSimError, UnsupportedError
from nvdla_sim.kernels.pdp import POOL_AVERAGE, POOL_MAX, POOL_MIN, pool_int
from nvdla_sim.program import IntrNotify, MemLoad, RegisterProgram
from nvdla_sim.units.pdp import (PoolingConfig, Strip, pad_value, pool_cube,
                                 strip_columns)

from program_helpers import reg_writes

ONE = 0x10000          # Q16 reciprocal 1.0
HALF = 0x8000
THIRD = 0x5555


def pool(cube, out_h, out_w, method, kernel=(1, 1), stride=(1, 1), pad_left=0, pad_top=0,
         pad_values=(0,) * 7, recip=(ONE, ONE)):
    """Run the kernel on a (C, H, W) list-of-lists cube; kernel/stride are (width, height)."""
    x = np.array(cube, dtype=np.int8)
    out = np.full((x.shape[0], out_h, out_w), 99, np.int8)
    empty = pool_int(x, out, method, kernel[0], kernel[1], stride[0], stride[1], pad_left,
                     pad_top, np.array(pad_values, np.int64), recip[0], recip[1])
    assert empty == 0
    return out.tolist()


CUBE_4X4 = [[[1, -5, 3, 0],
             [2, 7, -8, 4],
             [-1, -2, 9, 9],
             [0, -3, -4, 10]]]


# -- kernel ------------------------------------------------------------------------------------
def test_max_and_min_2x2_stride_2():
    assert pool(CUBE_4X4, 2, 2, POOL_MAX, (2, 2), (2, 2)) == [[[7, 4], [0, 10]]]
    assert pool(CUBE_4X4, 2, 2, POOL_MIN, (2, 2), (2, 2)) == [[[-5, -8], [-3, -4]]]


def test_max_min_overlapping_windows_stride_1():
    # 3x3 windows at (0,0) and (0,1) of the first three rows
    assert pool(CUBE_4X4, 2, 2, POOL_MAX, (3, 3)) == [[[9, 9], [9, 10]]]
    assert pool(CUBE_4X4, 2, 2, POOL_MIN, (3, 3)) == [[[-8, -8], [-8, -8]]]


def test_max_min_ignore_padding():
    # 3x3 window around a single element: padding is no value for MAX/MIN, whatever PAD_VALUE says
    assert pool([[[-100]]], 1, 1, POOL_MAX, (3, 3), pad_left=1, pad_top=1,
                 pad_values=(50,) * 7) == [[[-100]]]
    assert pool([[[100]]], 1, 1, POOL_MIN, (3, 3), pad_left=1, pad_top=1,
                 pad_values=(-50,) * 7) == [[[100]]]


def test_average_rounds_twice_half_away_from_zero():
    # sum 5, x 1/2 = 2.5 -> 3, x 1/2 = 1.5 -> 2 (one rounding of 5/4 would give 1)
    assert pool([[[1, 1], [1, 2]]], 1, 1, POOL_AVERAGE, (2, 2), recip=(HALF, HALF)) == [[[2]]]
    assert pool([[[-1, -1], [-1, -2]]], 1, 1, POOL_AVERAGE, (2, 2), recip=(HALF, HALF)) == [[[-2]]]
    # sum 3: 1.5 -> 2, then 1.0 -> 1;  sum 2: 1.0, then 0.5 -> 1
    assert pool([[[1, 2]]], 1, 1, POOL_AVERAGE, (2, 1), recip=(HALF, ONE)) == [[[2]]]
    assert pool([[[1], [1]]], 1, 1, POOL_AVERAGE, (1, 2), recip=(HALF, HALF)) == [[[1]]]


def test_average_output_wraps_to_int8():
    # 100 + 100 with reciprocals 1.0 -> 200, kept as its low 8 bits (no saturation)
    assert pool([[[100, 100]]], 1, 1, POOL_AVERAGE, (2, 1)) == [[[200 - 256]]]


def test_average_padding_values_per_row_and_per_column():
    # 3x3 window from (-1,-1) over [[1,2],[3,4]]: one pad column (1X=5) in each of the 2 in-range
    # rows, one pad row (1X * kernel width = 15): 10 + 2*5 + 15 = 35
    pads = (5, 10, 20, 0, 0, 0, 0)
    assert pool([[[1, 2], [3, 4]]], 1, 1, POOL_AVERAGE, (3, 3), pad_left=1, pad_top=1,
                pad_values=pads) == [[[35]]]
    # window reaching past both sides of a 1x1 cube: 2 pad columns (2X once for the one row),
    # 2 pad rows (2X * 3): 7 + 10 + 30 = 47
    assert pool([[[7]]], 1, 1, POOL_AVERAGE, (3, 3), pad_left=1, pad_top=1,
                pad_values=pads) == [[[47]]]
    # right/bottom padding only: window (1,1) of a 2x2 cube with a 2x2 kernel, stride 1
    # -> in range only 4; 1 pad column (5) + 1 pad row (5*2) = 19
    assert pool([[[1, 2], [3, 4]]], 2, 2, POOL_AVERAGE, (2, 2),
                pad_values=pads)[0][1][1] == 19


def test_average_sum_wraps_at_16_bits():
    # 2x2 window from (-1,0) over a zero 1-wide, 2-high cube: 1 pad column in 2 rows: 2 * 20000
    # = 40000, which the 16-bit accumulator holds as -25536.  x 0x5555/2^16 = -8511.87 -> -8512,
    # x 1.0 -> -8512, low 8 bits -> -64.  (Unwrapped, 40000 would give 13333 -> 21.)
    assert pool([[[0], [0]]], 1, 1, POOL_AVERAGE, (2, 2), pad_left=1,
                pad_values=(20000, 0, 0, 0, 0, 0, 0), recip=(THIRD, ONE)) == [[[-64]]]


def test_average_strides_and_channels():
    # two channels, 2x1 kernel, stride 2 across; 1/2 each: (3+4)/2 = 3.5 -> 4, (-3-4)/2 -> -4
    cube = [[[3, 4, 10, 20]], [[-3, -4, -10, -21]]]
    assert pool(cube, 1, 2, POOL_AVERAGE, (2, 1), (2, 1), recip=(HALF, ONE)) == \
        [[[4, 15]], [[-4, -16]]]


def test_window_entirely_in_padding_is_reported():
    out = np.zeros((1, 1, 1), np.int8)
    empty = pool_int(np.zeros((1, 1, 1), np.int8), out, POOL_MAX, 2, 1, 1, 1, 3, 0,
                      np.zeros(7, np.int64), ONE, ONE)
    assert empty == 1


# -- register decoding -------------------------------------------------------------------------
@pytest.mark.parametrize("raw, sign_bit, value", [
    (0x7F, 7, 127),
    (0x80, 7, -128),
    (0x7FF80, 7, -128),       # 19-bit field, already sign-extended by software
    (0x3DAD3, 7, -45),        # bit 7 set: ones above it, low 16 bits 0xffd3
    (0x100, 7, 256),          # bit 7 clear: the C model keeps the bits above as written
    (0xFE, 8, 254),
    (0x100, 8, -256),
    (0x17D, 9, 381),
    (0x400, 10, -1024),
])
def test_pad_value_sign_extension(raw, sign_bit, value):
    assert pad_value(raw, sign_bit) == value


def test_split_strip_columns():
    # 16 wide, kernel 4 stride 2: strips of 2, 12, 2 columns, later ones with 2 overlap columns
    assert strip_columns(2, (2, 12, 2), 4, 2) == [(0, 2), (0, 14), (12, 4)]
    # kernel 4 stride 1 (overlap 3), two strips of 3 and 2 columns
    assert strip_columns(1, (3, 9, 2), 4, 1) == [(0, 3), (0, 5)]


def _config(method, strips, out_h, pads=(1, 1), pad_values=(0,) * 7, recip=(ONE, ONE)):
    return PoolingConfig(method=method, kernel_w=4, kernel_h=2, stride_w=2, stride_h=2,
                         pad_top=pads[1], out_height=out_h, strips=tuple(strips),
                         pad_values=np.array(pad_values, np.int64), recip_w=recip[0],
                         recip_h=recip[1])


@pytest.mark.parametrize("method", [POOL_MAX, POOL_MIN, POOL_AVERAGE])
def test_split_width_equals_unsplit_pooling(method):
    rng = np.random.default_rng(7)
    cube = rng.integers(-128, 128, (8, 6, 16), dtype=np.int8)
    pad_values = (-3, 9, -14, 17, 0, 0, 0)
    whole = _config(method, [Strip(0, 16, 9, 2, 2)], 4, (2, 1), pad_values, (0x4000, HALF))
    split = _config(method, [Strip(0, 2, 1, 2, 0), Strip(0, 14, 6, 0, 0), Strip(12, 4, 2, 0, 2)],
                    4, (2, 1), pad_values, (0x4000, HALF))
    a, empty_a = pool_cube(cube, whole)
    b, empty_b = pool_cube(cube, split)
    assert empty_a == empty_b == 0
    assert np.array_equal(a, b)


# -- the units in the engine -------------------------------------------------------------------
SRC = 0x8000_0000
DST = 0x8010_0000




def _pdp_program(method: int, flying_off: bool = True, rdma_first: bool = False,
                 input_data: int = 0) -> tuple[RegisterProgram, np.ndarray]:
    """A 4x2x10 cube (2 surfaces of 8 lanes; lanes 10..15 hold garbage), 2x2 stride-2 pooling."""
    atom = 8
    line_stride, surf_stride = 64, 256            # not dense: gaps between lines and surfaces
    cube = (np.arange(16 * 2 * 4, dtype=np.int64).reshape(16, 2, 4) * 7 % 251 - 125).astype(np.int8)
    image = np.zeros(2 * surf_stride, np.uint8)
    for c in range(16):
        for y in range(2):
            for x in range(4):
                image[(c // atom) * surf_stride + y * line_stride + x * atom + c % atom] = \
                    cube[c, y, x].view(np.uint8)
    rdma = reg_writes({
        "PDP_RDMA.D_DATA_CUBE_IN_WIDTH": {"CUBE_IN_WIDTH": 3},
        "PDP_RDMA.D_DATA_CUBE_IN_HEIGHT": {"CUBE_IN_HEIGHT": 1},
        "PDP_RDMA.D_DATA_CUBE_IN_CHANNEL": {"CUBE_IN_CHANNEL": 9},
        "PDP_RDMA.D_FLYING_MODE": {"FLYING_MODE": 1},
        "PDP_RDMA.D_SRC_BASE_ADDR_LOW": {"SRC_BASE_ADDR_LOW": SRC},
        "PDP_RDMA.D_SRC_LINE_STRIDE": {"SRC_LINE_STRIDE": line_stride},
        "PDP_RDMA.D_SRC_SURFACE_STRIDE": {"SRC_SURFACE_STRIDE": surf_stride},
        "PDP_RDMA.D_SRC_RAM_CFG": {"SRC_RAM_TYPE": 1},
        "PDP_RDMA.D_DATA_FORMAT": {"INPUT_DATA": input_data},
        "PDP_RDMA.D_POOLING_KERNEL_CFG": {"KERNEL_WIDTH": 1, "KERNEL_STRIDE_WIDTH": 1},
    })
    pdp = reg_writes({
        "PDP.D_DATA_CUBE_IN_WIDTH": {"CUBE_IN_WIDTH": 3},
        "PDP.D_DATA_CUBE_IN_HEIGHT": {"CUBE_IN_HEIGHT": 1},
        "PDP.D_DATA_CUBE_IN_CHANNEL": {"CUBE_IN_CHANNEL": 9},
        "PDP.D_DATA_CUBE_OUT_WIDTH": {"CUBE_OUT_WIDTH": 1},
        "PDP.D_DATA_CUBE_OUT_HEIGHT": {"CUBE_OUT_HEIGHT": 0},
        "PDP.D_DATA_CUBE_OUT_CHANNEL": {"CUBE_OUT_CHANNEL": 9},
        "PDP.D_OPERATION_MODE_CFG": {"POOLING_METHOD": method, "FLYING_MODE": int(flying_off)},
        "PDP.D_POOLING_KERNEL_CFG": {"KERNEL_WIDTH": 1, "KERNEL_HEIGHT": 1,
                                     "KERNEL_STRIDE_WIDTH": 1, "KERNEL_STRIDE_HEIGHT": 1},
        "PDP.D_RECIP_KERNEL_WIDTH": {"RECIP_KERNEL_WIDTH": HALF},
        "PDP.D_RECIP_KERNEL_HEIGHT": {"RECIP_KERNEL_HEIGHT": HALF},
        "PDP.D_DST_BASE_ADDR_LOW": {"DST_BASE_ADDR_LOW": DST},
        "PDP.D_DST_LINE_STRIDE": {"DST_LINE_STRIDE": 32},
        "PDP.D_DST_SURFACE_STRIDE": {"DST_SURFACE_STRIDE": 64},
        "PDP.D_DST_RAM_CFG": {"DST_RAM_TYPE": 1},
        "PDP.D_DATA_FORMAT": {"INPUT_DATA": input_data},
    })
    enable_rdma = reg_writes({"PDP_RDMA.D_OP_ENABLE": {"OP_EN": 1}}) if flying_off else []
    enable_pdp = reg_writes({"PDP.D_OP_ENABLE": {"OP_EN": 1}})
    enables = enable_rdma + enable_pdp if rdma_first else enable_pdp + enable_rdma
    program = RegisterProgram("pdp_unit_test", [
        MemLoad("pri_mem", SRC, image),
        *rdma, *pdp, IntrNotify("PDP", 0, "pdp_done"), *enables])
    return program, cube


def _output(engine: Engine) -> np.ndarray:
    """The 1x2 output atoms of both surfaces as (16 lanes, 2 columns)."""
    mem = engine.memory.space(1)
    surf = [mem.read(DST + s * 64, 16).view(np.int8).reshape(2, 8) for s in range(2)]
    return np.concatenate([s.T for s in surf])


def _half_away(v: int) -> int:
    """v / 2 rounded half away from zero."""
    return (abs(v) + 1) // 2 * (1 if v >= 0 else -1)


def _expected_max(cube: np.ndarray) -> np.ndarray:
    return np.stack([cube[:, :, 0:2].max(axis=(1, 2)), cube[:, :, 2:4].max(axis=(1, 2))], axis=1)


@pytest.mark.parametrize("rdma_first", [False, True])
def test_units_from_memory_all_lanes_either_enable_order(rdma_first):
    program, cube = _pdp_program(POOL_MAX, rdma_first=rdma_first)
    engine = Engine(load_hardware("nv_small"))
    engine.run(program)
    out = _output(engine)
    # all 16 lanes, the 6 padding lanes of the second surface included, are pooled and written
    assert np.array_equal(out, _expected_max(cube))
    assert engine.regs["PDP"].view(0).field("D_OP_ENABLE", "OP_EN") == 0


def test_unit_average_matches_hand_rounding():
    program, cube = _pdp_program(POOL_AVERAGE)
    engine = Engine(load_hardware("nv_small"))
    engine.run(program)
    out = _output(engine)
    c = cube.astype(np.int64)
    for lane in (0, 9, 15):                      # lane 15 is a padding lane of surface 1
        for ox in range(2):
            s = int(c[lane, :, 2 * ox:2 * ox + 2].sum())
            assert out[lane, ox] == _half_away(_half_away(s))


def test_unit_on_the_fly_takes_the_sdp_stream():
    program, cube = _pdp_program(POOL_MAX, flying_off=False)
    engine = Engine(load_hardware("nv_small"))
    engine.channel("sdp->pdp").put(cube)
    engine.run(program)
    assert np.array_equal(_output(engine), _expected_max(cube))


def test_int16_on_nv_small_is_refused():
    program, _ = _pdp_program(POOL_MAX, input_data=1)
    with pytest.raises(NvdlaSimError, match="INPUT_DATA=INT16: nv_small supports INT8 only"):
        Engine(load_hardware("nv_small")).run(program)
