"""CDP (LRN) on hand-computed cases (NVDLA reference map 5.9, 3.3) and the CDP/CDP_RDMA units."""
from __future__ import annotations

import numpy as np
import pytest

from nvdla_sim.config import load_hardware
from nvdla_sim.engine import Engine
from nvdla_sim.datatype import INT8
from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.kernels.cdp import LE_ENTRIES, LO_ENTRIES, lrn_int
from nvdla_sim.program import IntrNotify, MemLoad, RegisterProgram, RegWrite
from nvdla_sim.regs import register_map
from nvdla_sim.units.cdp import decode_lrn
from nvdla_sim.units.lut_memory import LutMemory

NEVER = 1 << 30           # a LUT start no square sum reaches: that table always underflows


def table(n: int, values=(), fill: int = 0) -> np.ndarray:
    t = np.full(n, fill, np.int64)
    t[:len(values)] = values
    return t


def config(**over) -> dict:
    """Kernel configuration: identity converters, LEN3, LE and LO linear from 0, slopes 0,
    every priority LE."""
    cfg = dict(datin_offset=0, datin_scale=1, datin_shift=0, normalz_len=0,
               sqsum_bypass=0, mul_bypass=1, le_exponent=0, uflow_priority=0,
               oflow_priority=0, hybrid_priority=0, datout_offset=0, datout_scale=1,
               datout_shift=0, le_index_offset=0)
    for p, last in (("le", 64), ("lo", 256)):
        cfg.update({f"{p}_start": 0, f"{p}_end": last, f"{p}_index_select": 0,
                    f"{p}_uflow_scale": 0, f"{p}_oflow_scale": 0, f"{p}_uflow_shift": 0,
                    f"{p}_oflow_shift": 0})
    cfg.update(over)
    return cfg


LO_IDENTITY = dict(le_start=NEVER, uflow_priority=1, oflow_priority=1, hybrid_priority=1)


def run(values, cfg, le=None, lo=None, channels=None, lanes=8):
    """LRN of one pixel whose lanes are `values` (padded with garbage 77); returns the lanes."""
    cube = np.full((lanes, 1, 1), 77, np.int8)
    cube[:len(values), 0, 0] = values
    le = table(LE_ENTRIES) if le is None else le
    lo = table(LO_ENTRIES, range(LO_ENTRIES)) if lo is None else lo
    out, counters = lrn_int(cube, channels or len(values), cfg, le, lo)
    return out[:, 0, 0].tolist(), counters


# -- square sum window, padding lanes --------------------------------------------------------------
# With LO[i] = i (start 0, 1 entry per step) and LE always under, the output is the square sum.
def test_square_sum_window_len3_and_padding_lanes_fed_datin_offset():
    out, _ = run([1, 2, 3], config(**LO_IDENTITY))
    # lane 3 is a padding lane: its own value (garbage 77) counts as 0, its neighbour lane 2 not
    assert out == [1 + 4, 1 + 4 + 9, 4 + 9, 9, 0, 0, 0, 0]


def test_square_sum_window_len5():
    out, _ = run([1, 2, 3], config(normalz_len=1, **LO_IDENTITY))
    assert out == [14, 14, 14, 4 + 9, 9, 0, 0, 0]


def test_datin_offset_applies_to_real_channels_only():
    # x - 1: real lanes become 0, 1, 2; padding lanes are fed the offset itself, i.e. 0
    out, _ = run([1, 2, 3], config(datin_offset=1, **LO_IDENTITY))
    assert out == [0 + 1, 0 + 1 + 4, 1 + 4, 4, 0, 0, 0, 0]


def test_window_crosses_surfaces():
    values = [0] * 10
    values[7], values[8] = 1, 2
    out, _ = run(values, config(**LO_IDENTITY), lanes=16)
    assert out[6:11] == [1, 1 + 4, 1 + 4, 4, 0]


def test_sqsum_bypass_uses_the_converted_value():
    out, _ = run([5, 9], config(sqsum_bypass=1, **LO_IDENTITY))
    assert out[:3] == [5, 9, 0]


# -- input converter ---------------------------------------------------------------------------
def test_input_convert_rounds_half_away_from_zero():
    # LUT constant 1 everywhere, multiply on: output = converted input
    ones_le, ones_lo = table(LE_ENTRIES, fill=1), table(LO_ENTRIES, fill=1)
    out, _ = run([3, -3, 1, -1], config(sqsum_bypass=1, mul_bypass=0, datin_shift=1),
                 le=ones_le, lo=ones_lo)
    assert out[:4] == [2, -2, 1, -1]


def test_input_convert_saturates_to_9_bits():
    ones_le, ones_lo = table(LE_ENTRIES, fill=1), table(LO_ENTRIES, fill=1)
    # (127 + 128) * 2 = 510 -> 255 (9 bits); 255 / 4 = 63.75 -> 64 (510 / 4 would give 127)
    cfg = config(sqsum_bypass=1, mul_bypass=0, datin_offset=-128, datin_scale=2, datout_shift=2)
    out, _ = run([127, -128], cfg, le=ones_le, lo=ones_lo)
    assert out[:2] == [64, 0]


def test_multiply_by_converted_input():
    threes = table(LO_ENTRIES, fill=3)
    out, _ = run([-5, 4], config(sqsum_bypass=1, mul_bypass=0, **LO_IDENTITY),
                 le=table(LE_ENTRIES, fill=3), lo=threes)
    assert out[:3] == [-15, 12, 0]


# -- LUT: linear tables ------------------------------------------------------------------------
def test_linear_interpolation_rounds_half_away_from_zero():
    # 4 steps per entry: fractions 1/4, 2/4, 3/4 of 10 -> 2.5, 5, 7.5
    lo = table(LO_ENTRIES, [0, 10])
    out, _ = run([1, 2, 3], config(sqsum_bypass=1, lo_index_select=2, **LO_IDENTITY), lo=lo)
    assert out[:3] == [3, 5, 8]
    lo = table(LO_ENTRIES, [0, -10])
    out, _ = run([1, 3], config(sqsum_bypass=1, lo_index_select=2, **LO_IDENTITY), lo=lo)
    assert out[:2] == [-3, -8]


def test_negative_index_select_has_no_fraction():
    # select -1: index = 2 * (ss - start), fraction 0
    lo = table(LO_ENTRIES, [0, 10, 20, 30, 40, 50, 60])
    out, _ = run([1, 2, 3], config(sqsum_bypass=1, lo_index_select=-1, **LO_IDENTITY), lo=lo)
    assert out[:3] == [20, 40, 60]


def test_underflow_line_with_rounding():
    lo = table(LO_ENTRIES, [20])
    cfg = config(sqsum_bypass=1, lo_start=10, lo_end=266, lo_uflow_scale=3, lo_uflow_shift=1,
                 **LO_IDENTITY)
    out, counters = run([5, 10], cfg, lo=lo)
    # 20 + (5 - 10) * 3 / 2 = 20 - 7.5 -> 20 - 8; at START itself: underflow, 20 + 0
    assert out[:2] == [12, 20]
    assert counters["lut_uflow"] == 8


def test_overflow_line_with_negative_shift_is_a_left_shift():
    lo = table(LO_ENTRIES, fill=0)
    lo[256] = -5
    cfg = config(sqsum_bypass=1, lo_start=-200, lo_end=56, lo_oflow_scale=1, lo_oflow_shift=-1,
                 **LO_IDENTITY)
    out, _ = run([100], cfg, lo=lo)
    assert out[0] == -5 + (100 - 56) * 2
    cfg["lo_oflow_shift"] = 3                       # 44 / 8 = 5.5 -> 6
    out, _ = run([100], cfg, lo=lo)
    assert out[0] == -5 + 6


def test_lut_result_saturates_to_int16_before_the_output_converter():
    lo = table(LO_ENTRIES, [32000])
    cfg = config(sqsum_bypass=1, lo_start=10, lo_uflow_scale=-1000, lo_uflow_shift=0,
                 datout_shift=9, **LO_IDENTITY)
    out, _ = run([5], cfg, lo=lo)
    # 32000 + 5000 saturates to 32767; 32767 / 512 = 63.998 -> 64 (37000 / 512 would give 72)
    assert out[0] == 64


# -- LUT: LE exponent table --------------------------------------------------------------------
def le_exponent_config(**over):
    return config(sqsum_bypass=1, le_exponent=1, lo_start=NEVER, **over)


def test_exponent_index_and_fraction():
    le = table(LE_ENTRIES, [10 * i for i in range(LE_ENTRIES)])
    out, _ = run([1, 3, 5, 6], le_exponent_config(), le=le)
    # ss=1: entry 0; 3 = 2 + 1: entry 1 + 1/2; 5 = 4 + 1: entry 2 + 1/4 (2.5 -> 3); 6: 2 + 2/4
    assert out[:4] == [0, 15, 23, 25]


def test_exponent_fraction_is_truncated_to_16_bits():
    le = table(LE_ENTRIES)
    le[7] = 32767
    # start -2^20, offset 14: ss + 2^20 has exponent 20 -> index 6, fraction (ss >> 4) / 2^16
    cfg = le_exponent_config(le_start=-(1 << 20), le_index_offset=14, datin_scale=255)
    out, _ = run([1], cfg, le=le)
    assert out[0] == 7          # 32767 * 15 / 65536 = 7.49; the exact 255/16 would give 8


def test_exponent_underflow_starts_at_two_to_the_offset():
    le = table(LE_ENTRIES, [0, 10])
    cfg = le_exponent_config(le_index_offset=2, le_uflow_scale=6, le_uflow_shift=1)
    out, _ = run([0, 3, 5], cfg, le=le)
    # ss=0 and ss=3 (exponent 1 < offset 2) underflow: (ss - 4) * 6 / 2; ss=5: entry 0 + 1/4
    assert out[:3] == [-12, -3, 3]


def test_exponent_overflow():
    le = table(LE_ENTRIES, fill=0)
    le[64] = 50
    cfg = le_exponent_config(le_index_offset=-62, le_end=4, le_oflow_scale=-1)
    out, _ = run([1, 9], cfg, le=le)
    # ss=1: exponent 0 -> index 62 (hit, entry 0); ss=9: exponent 3 -> index 65 -> 50 - (9 - 4)
    assert out[:2] == [0, 45]


# -- table selection ---------------------------------------------------------------------------
@pytest.mark.parametrize("priorities, expected", [
    ((1, 0, 1), [2, 1, 2, 2, 1]),
    ((0, 1, 0), [1, 1, 1, 2, 2]),
])
def test_priorities(priorities, expected):
    # LE constant 1: hit for ss 1..63; LO constant 2, start 32, select -1: hit for ss 33..159
    uflow, oflow, hybrid = priorities
    cfg = config(sqsum_bypass=1, lo_start=32, lo_index_select=-1, uflow_priority=uflow,
                 oflow_priority=oflow, hybrid_priority=hybrid, datin_scale=2)
    # ss = 0 (both under), 10 (LE hit only), 40 (both hit), 100 (LO hit only), 200 (both over)
    out, counters = run([0, 5, 20, 50, 100], cfg, le=table(LE_ENTRIES, fill=1),
                        lo=table(LO_ENTRIES, fill=2))
    assert out[:5] == expected
    # the 3 padding lanes (ss = 0) are both-underflow lookups too
    assert counters == {"lut_uflow": 4, "lut_oflow": 1, "lut_hybrid": 1, "lut_le_hit": 1,
                        "lut_lo_hit": 1, "out_saturation": 0}


# -- output converter --------------------------------------------------------------------------
@pytest.mark.parametrize("lut, offset, scale, shift, expected, saturated", [
    (100, 0, 3, 2, 75, 0),
    (10, 0, 1, 2, 3, 0),            # 2.5 -> 3
    (-10, 0, 1, 2, -3, 0),          # -2.5 -> -3
    (100, -28, 1, 0, 127, 1),       # 128 saturates
    (-100, 29, 1, 0, -128, 1),      # -129 saturates
])
def test_output_convert(lut, offset, scale, shift, expected, saturated):
    cfg = config(sqsum_bypass=1, datout_offset=offset, datout_scale=scale, datout_shift=shift)
    out, counters = run([0], cfg, le=table(LE_ENTRIES, fill=lut), lo=table(LO_ENTRIES, fill=lut),
                        lanes=8, channels=1)
    assert out[0] == expected
    assert counters["out_saturation"] == 8 * saturated


# -- LUT access registers ----------------------------------------------------------------------
def test_lut_access_auto_increments_and_stops_at_the_last_entry():
    rmap = register_map(2)
    unit = rmap.units["CDP"]
    lut = LutMemory(unit)
    write, lo_id = 1 << 17, 1 << 16
    lut.on_access_cfg(write | lo_id | 250)
    for v in range(10):
        lut.on_access_data(v)
    # 6, 7, 8 and 9 all land on entry 256
    assert lut.lo[250:257].tolist() == [0, 1, 2, 3, 4, 5, 9]
    lut.on_access_cfg(write | 63)
    lut.on_access_data(0xFFFF)                # int16 -1
    lut.on_access_data(0x8000)                # int16 -32768, entry 64
    lut.on_access_data(0x7FFF)                # stays at entry 64
    assert lut.le[62:65].tolist() == [0, -1, 32767]
    lut.on_access_cfg(lo_id | 0)              # read access: data writes store nothing
    lut.on_access_data(123)
    assert lut.lo[0] == 0


# -- register decoding -------------------------------------------------------------------------
def _writes(regs: dict[str, int]) -> list[RegWrite]:
    rmap = register_map(2)
    out = []
    for name, value in regs.items():
        unit, reg = name.split(".")
        u, r = rmap.resolve(unit, reg)
        out.append(RegWrite(rmap.base(u.name) + r.offset, value, name))
    return out


def test_decode_signed_fields():
    engine = Engine(load_hardware("nv_small"))
    for w in _writes({
        "CDP.S_LUT_LE_START_LOW": 0, "CDP.S_LUT_LE_START_HIGH": 0x20,
        "CDP.S_LUT_LO_END_LOW": 0xFFFFFFFF, "CDP.S_LUT_LO_END_HIGH": 0x1F,
        "CDP.S_LUT_INFO": 0xDF20C7,          # LO select 0xdf, LE select 0x20, offset 0xc7
        "CDP.S_LUT_LO_SLOPE_SHIFT": 0x1D | (0x0F << 5),
        "CDP.S_LUT_LE_SLOPE_SCALE": 0x8000FFFF,
        "CDP.D_DATOUT_OFFSET": 0xFF03CA09, "CDP.D_DATIN_OFFSET": 0xFF9C,
        "CDP.D_DATIN_SCALE": 0xFFFE, "CDP.D_FUNC_BYPASS": 2,
    }):
        engine.regs.write(w.addr, w.value)
    cfg = decode_lrn(engine.regs["CDP"].view(0), INT8)
    assert cfg["le_start"] == -(1 << 37)
    assert cfg["lo_end"] == (0x1F << 32) | 0xFFFFFFFF
    assert (cfg["le_index_select"], cfg["lo_index_select"]) == (-32, 31)
    assert cfg["le_index_offset"] == -57
    assert (cfg["lo_uflow_shift"], cfg["lo_oflow_shift"]) == (-3, 15)
    assert (cfg["le_uflow_scale"], cfg["le_oflow_scale"]) == (-1, -32768)
    assert cfg["datout_offset"] == 0x103CA09 - (1 << 25)       # low 25 bits, signed
    assert (cfg["datin_offset"], cfg["datin_scale"]) == (-100, -2)
    assert (cfg["sqsum_bypass"], cfg["mul_bypass"]) == (0, 1)  # 1 means bypass


# -- CDP_RDMA + CDP through the engine ---------------------------------------------------------
SRC = 0x8000_0000
DST = 0x8010_0000


def _cdp_program(rdma_first: bool = False, input_data: int = 0):
    """A 2x1x10 cube (2 surfaces of 8 lanes, lanes 10..15 garbage), LEN3, LO[i] = i from -1,
    DATOUT_OFFSET -2 in its low 25 bits: every output is square sum + 3."""
    atom, line_stride, surf_stride = 8, 64, 128
    cube = np.full((16, 1, 2), 100, np.int8)
    cube[:10, 0, 0] = [1, -2, 3, 0, 1, 2, -1, 1, 2, -3]
    cube[:10, 0, 1] = [0, 0, 0, 0, 0, 0, 0, 2, -1, 0]
    image = np.zeros(2 * surf_stride, np.uint8)
    for c in range(16):
        for x in range(2):
            image[(c // atom) * surf_stride + x * atom + c % atom] = cube[c, 0, x].view(np.uint8)
    lut = _writes({"CDP.S_LUT_ACCESS_CFG": (1 << 17) | (1 << 16)})
    lut += [RegWrite(lut[0].addr + 4, i, "CDP.S_LUT_ACCESS_DATA") for i in range(300)]
    rdma = _writes({
        "CDP_RDMA.D_DATA_CUBE_WIDTH": 1, "CDP_RDMA.D_DATA_CUBE_HEIGHT": 0,
        "CDP_RDMA.D_DATA_CUBE_CHANNEL": 9, "CDP_RDMA.D_SRC_BASE_ADDR_LOW": SRC,
        "CDP_RDMA.D_SRC_LINE_STRIDE": line_stride, "CDP_RDMA.D_SRC_SURFACE_STRIDE": surf_stride,
        "CDP_RDMA.D_SRC_DMA_CFG": 1, "CDP_RDMA.D_DATA_FORMAT": input_data,
    })
    cdp = _writes({
        "CDP.S_LUT_CFG": 0x71,                            # LE linear, every priority LO
        "CDP.S_LUT_INFO": 0xC00000,                       # LO select 0xc0 -> 0 (from bit 5)
        "CDP.S_LUT_LE_START_LOW": 0, "CDP.S_LUT_LE_START_HIGH": 0x1F,   # far away: LE under
        "CDP.S_LUT_LO_START_LOW": 0xFFFFFFFF, "CDP.S_LUT_LO_START_HIGH": 0x3F,   # -1
        "CDP.S_LUT_LO_END_LOW": 255,
        "CDP.D_LRN_CFG": 0, "CDP.D_FUNC_BYPASS": 2,       # square sum on, multiply bypassed
        "CDP.D_DATIN_SCALE": 1, "CDP.D_DATOUT_SCALE": 1,
        "CDP.D_DATOUT_OFFSET": 0xFFFFFFFE & ~(1 << 25),   # bit 25 clear: only 25 bits count
        "CDP.D_DST_BASE_ADDR_LOW": DST, "CDP.D_DST_LINE_STRIDE": 32,
        "CDP.D_DST_SURFACE_STRIDE": 96, "CDP.D_DST_DMA_CFG": 1,
        "CDP.D_DATA_FORMAT": input_data,
    })
    enable_rdma = _writes({"CDP_RDMA.D_OP_ENABLE": 1})
    enable_cdp = _writes({"CDP.D_OP_ENABLE": 1})
    enables = enable_rdma + enable_cdp if rdma_first else enable_cdp + enable_rdma
    return RegisterProgram("cdp_unit_test", [
        MemLoad("pri_mem", SRC, image), *lut, *rdma, *cdp, IntrNotify("CDP", 0, "cdp_done"),
        *enables])


@pytest.mark.parametrize("rdma_first", [False, True])
def test_units_lrn_from_memory_either_enable_order(rdma_first):
    engine = Engine(load_hardware("nv_small"))
    engine.run(_cdp_program(rdma_first))
    mem = engine.memory.space(1)
    out = np.concatenate([mem.read(DST + s * 96, 16).view(np.int8).reshape(2, 8).T
                          for s in range(2)])          # (16 lanes, 2 columns)
    assert out[:, 0].tolist() == [8, 17, 16, 13, 8, 9, 9, 9, 17, 16, 12, 3, 3, 3, 3, 3]
    assert out[:, 1].tolist() == [3, 3, 3, 3, 3, 3, 7, 8, 8, 4, 3, 3, 3, 3, 3, 3]
    view = engine.regs["CDP"].view(0)
    assert view.word("D_PERF_LUT_LO_HIT") == 32
    assert view.word("D_PERF_LUT_UFLOW") == view.word("D_OUT_SATURATION") == 0
    assert view.field("D_OP_ENABLE", "OP_EN") == 0
    assert engine.units["CDP"].lut.lo[256] == 299   # later writes stay at 256


def test_int16_on_nv_small_is_refused():
    with pytest.raises(NvdlaSimError, match="INPUT_DATA(_TYPE)?=INT16: nv_small supports INT8 only"):
        Engine(load_hardware("nv_small")).run(_cdp_program(input_data=1))
