"""SDP and SDP_RDMA: the datapath kernel on hand-computed cases, register decoding, LUT loading,
and the units in the engine (memory operands, flying input, output to PDP, EQL mode)."""
from __future__ import annotations

import numpy as np
import pytest

from nvdla_sim.config import load_hardware
from nvdla_sim.engine import Engine
from nvdla_sim.errors import NvdlaSimError, UnsupportedError
from nvdla_sim.kernels.sdp import (ALGO_EQL, ALGO_MAX, ALGO_MIN, ALGO_SUM, LE_ENTRIES,
                                   LO_ENTRIES, sdp_layer)
from nvdla_sim.program import IntrNotify, MemLoad, RegisterProgram, RegWrite
from nvdla_sim.regs import RegisterFile, register_map
from nvdla_sim.units.lut_memory import LutMemory
from nvdla_sim.units.sdp import StageOperands, datapath_config, sdp_compute

from program_helpers import reg_writes

INT32_MAX = 2**31 - 1
INT32_MIN = -2**31

# -- kernel harness ----------------------------------------------------------------------------
X_BYPASSED = {"bypass": 1, "alu_bypass": 1, "alu_algo": 0, "alu_shift": 0, "mul_bypass": 1,
              "mul_prelu": 0, "mul_shift": 0, "relu_bypass": 1}
Y_BYPASSED = {"bypass": 1, "alu_bypass": 1, "alu_algo": 0, "mul_bypass": 1, "mul_prelu": 0,
              "truncate": 0, "lut_bypass": 1,
              "alu_mem": 0, "mul_mem": 0,
              "alu_cvt": 0, "alu_cvt_offset": 0, "alu_cvt_scale": 1, "alu_cvt_truncate": 0,
              "mul_cvt": 0, "mul_cvt_offset": 0, "mul_cvt_scale": 1, "mul_cvt_truncate": 0}
TABLE = {"exponent": 0, "index_offset": 0, "index_select": 0, "start": 0, "end": 0,
         "uflow_scale": 0, "uflow_shift": 0, "oflow_scale": 0, "oflow_shift": 0}
BASE_CFG = {"x1": X_BYPASSED, "x2": X_BYPASSED, "y": Y_BYPASSED, "le": TABLE, "lo": TABLE,
            "priority": {"uflow_lo": 0, "oflow_lo": 0, "hybrid_lo": 0},
            "c": {"offset": 0, "scale": 1, "shift": 0, "eql": 0, "proc_precision": 0,
                  "out_precision": 0, "nan_to_zero": 0}}


def config(**stages) -> dict:
    """BASE_CFG with some stage dicts updated, e.g. config(x1={"bypass": 0, ...})."""
    cfg = {name: dict(fields) for name, fields in BASE_CFG.items()}   # x1/x2, le/lo unshared
    for name, fields in stages.items():
        cfg[name].update(fields)
    return cfg


def run(values, cfg, ops=None, le=None, lo=None):
    """Run the kernel on a 1x1xN cube (one value per lane); `ops` maps x1_alu .. y_mul to a
    scalar or a per-lane list.  Returns (outputs, counters)."""
    x = np.array(values, np.int32).reshape(-1, 1, 1)
    names = ("x1_alu", "x1_mul", "x2_alu", "x2_mul", "y_alu", "y_mul")
    arrays = []
    for name in names:
        v = (ops or {}).get(name, 0)
        arrays.append(np.broadcast_to(np.array(v, np.int32).reshape(-1, 1, 1), x.shape))
    le_values = np.zeros(LE_ENTRIES, np.int64) if le is None else np.asarray(le, np.int64)
    lo_values = np.zeros(LO_ENTRIES, np.int64) if lo is None else np.asarray(lo, np.int64)
    out = np.full(x.shape, 99, np.int8)
    counters = sdp_layer(x, *arrays, le_values, lo_values, cfg, out)
    return out.reshape(-1).tolist(), counters


def lut_cfg(le=None, lo=None, priority=None, c_shift=0):
    """EW with only the LUT on, and a C stage that keeps the LUT result (offset 0, scale 1)."""
    cfg = config(y={"bypass": 0, "lut_bypass": 0}, c={"shift": c_shift})
    cfg["le"].update(le or {})
    cfg["lo"].update(lo or {})
    cfg["priority"].update(priority or {})
    return cfg


# -- C converter -------------------------------------------------------------------------------
def test_c_converter_rounds_half_away_from_zero():
    # (x - 1) * 3 / 2:  x=2 -> 1.5 -> 2;  x=0 -> -1.5 -> -2;  x=5 -> 6 exact
    out, _ = run([2, 0, 5], config(c={"offset": 1, "scale": 3, "shift": 1}))
    assert out == [2, -2, 6]


def test_c_converter_saturates_and_counts_only_17_bit_overflow():
    # 1000 saturates to int8 only (not counted); 100000 passes 17 bits (counted once)
    out, counters = run([1000, -1000, 100000, -100000, 7], BASE_CFG)
    assert out == [127, -128, 127, -128, 7]
    assert counters["out_saturation"] == 2


def test_c_converter_offset_is_32_bit_and_product_is_not_saturated():
    # (INT32_MIN - INT32_MAX) = -(2^32 - 1); * -1 = 2^32 - 1; >> 26 = 63.99... -> 64
    out, _ = run([INT32_MIN], config(c={"offset": INT32_MAX, "scale": -1, "shift": 26}))
    assert out == [64]


# -- X stages (BS / BN) ------------------------------------------------------------------------
def test_x_alu_shifted_operand_and_algorithms():
    base = {"bypass": 0, "alu_bypass": 0, "alu_shift": 2}
    for algo, expected in ((ALGO_SUM, [17, 8]), (ALGO_MAX, [12, 12]), (ALGO_MIN, [5, -4]),
                           (ALGO_EQL, [17, 8])):        # EQL sums in the X stages
        out, _ = run([5, -4], config(x1=dict(base, alu_algo=algo)), {"x1_alu": 3})
        assert out == expected, algo


def test_x_alu_operand_shift_saturates_to_32_bits():
    # 1 << 40 saturates to INT32_MAX; + 10 stays 33-bit; the truncate step saturates to INT32_MAX.
    # C: (INT32_MAX - (INT32_MAX - 5)) = 5
    cfg = config(x1={"bypass": 0, "alu_bypass": 0, "alu_algo": ALGO_SUM, "alu_shift": 40},
                 c={"offset": INT32_MAX - 5})
    out, _ = run([10], cfg, {"x1_alu": 1})
    assert out == [5]


def test_x_alu_sum_is_33_bit_before_the_multiplier():
    # INT32_MAX + 1 = 2^31 (not saturated), * -1 = INT32_MIN exactly.  C offset INT32_MIN -> 0.
    # A saturating ALU would give -(INT32_MAX) and the output 1.
    cfg = config(x1={"bypass": 0, "alu_bypass": 0, "alu_algo": ALGO_SUM, "mul_bypass": 0},
                 c={"offset": INT32_MIN})
    out, _ = run([INT32_MAX], cfg, {"x1_alu": 1, "x1_mul": -1})
    assert out == [0]


def test_x_mul_and_truncate_round_half_away():
    # 7 * 3 = 21, / 4 = 5.25 -> 5;  -7 * 3 / 4 = -5.25 -> -5;  5 * 3 / 4 = 3.75 -> 4; 2*3/4 -> 2
    cfg = config(x1={"bypass": 0, "mul_bypass": 0, "mul_shift": 2})
    out, _ = run([7, -7, 5, 2, -2], cfg, {"x1_mul": 3})
    assert out == [5, -5, 4, 2, -2]


def test_x_truncate_applies_with_mul_bypassed():
    cfg = config(x1={"bypass": 0, "mul_bypass": 1, "mul_shift": 1})
    out, _ = run([7, -7, 6], cfg, {"x1_mul": 100})
    assert out == [4, -4, 3]


def test_x_prelu_passes_non_negative_inputs_unshifted():
    # negative: -6 * 3 / 2 = -9;  positive 6 passes without the shift;  0 passes
    cfg = config(x1={"bypass": 0, "mul_bypass": 0, "mul_prelu": 1, "mul_shift": 1})
    out, _ = run([-6, 6, 0], cfg, {"x1_mul": 3})
    assert out == [-9, 6, 0]


def test_x_prelu_pass_through_wraps_to_32_bits():
    # INT32_MAX + 5 = 2^31 + 4 (33-bit, non-negative) passes PReLU and wraps to INT32_MIN + 4.
    # C offset INT32_MIN -> 4.  With ReLU on, the wrapped negative value becomes 0 -> C gives
    # (0 - INT32_MIN) >> 24 = 128 -> 127.
    stage = {"bypass": 0, "alu_bypass": 0, "alu_algo": ALGO_SUM, "mul_bypass": 0, "mul_prelu": 1}
    out, _ = run([INT32_MAX], config(x1=stage, c={"offset": INT32_MIN}), {"x1_alu": 5})
    assert out == [4]
    relu = dict(stage, relu_bypass=0)
    out, _ = run([INT32_MAX], config(x1=relu, c={"offset": INT32_MIN, "shift": 24}),
                 {"x1_alu": 5})
    assert out == [127]


def test_x_relu_and_chained_bs_bn():
    # BS: x + 10 then ReLU; BN: * 2 (shift 0).  -20 -> -10 -> 0 -> 0;  -3 -> 7 -> 14
    bs = {"bypass": 0, "alu_bypass": 0, "alu_algo": ALGO_SUM, "relu_bypass": 0}
    bn = {"bypass": 0, "mul_bypass": 0}
    out, _ = run([-20, -3], config(x1=bs, x2=bn), {"x1_alu": 10, "x2_mul": 2})
    assert out == [0, 14]


def test_per_lane_operands():
    bs = {"bypass": 0, "alu_bypass": 0, "alu_algo": ALGO_SUM}
    out, _ = run([1, 1, 1], config(x1=bs), {"x1_alu": [-5, 0, 5]})
    assert out == [-4, 1, 6]


# -- Y stage (EW) ------------------------------------------------------------------------------
def test_y_mul_truncate_and_prelu():
    # 5 * 3 = 15, / 4 = 3.75 -> 4;  -5 * 3 / 4 -> -4;  PReLU passes 5 unchanged
    out, _ = run([5, -5], config(y={"bypass": 0, "mul_bypass": 0, "truncate": 2}), {"y_mul": 3})
    assert out == [4, -4]
    out, _ = run([5, -5], config(y={"bypass": 0, "mul_bypass": 0, "mul_prelu": 1, "truncate": 2}),
                 {"y_mul": 3})
    assert out == [5, -4]


def test_y_mul_product_is_64_bit():
    # 100000 * 100000 = 10^10, / 2^30 = 9.31 -> 9
    out, _ = run([100000], config(y={"bypass": 0, "mul_bypass": 0, "truncate": 30}),
                 {"y_mul": 100000})
    assert out == [9]


def test_y_alu_saturates_and_eql():
    # SUM saturates: INT32_MAX + 1 -> INT32_MAX; C offset INT32_MAX -> 0
    cfg = config(y={"bypass": 0, "alu_bypass": 0, "alu_algo": ALGO_SUM}, c={"offset": INT32_MAX})
    out, _ = run([INT32_MAX], cfg, {"y_alu": 1})
    assert out == [0]
    for algo, expected in ((ALGO_MAX, [3, 9]), (ALGO_MIN, [-2, 3])):
        out, _ = run([-2, 9], config(y={"bypass": 0, "alu_bypass": 0, "alu_algo": algo}),
                     {"y_alu": 3})
        assert out == expected
    eql = config(y={"bypass": 0, "alu_bypass": 0, "alu_algo": ALGO_EQL}, c={"eql": 1})
    assert run([4, 4], eql, {"y_alu": 4})[1]["unequal"] is False
    assert run([4, 5], eql, {"y_alu": 4})[1]["unequal"] is True


def test_y_mul_before_alu():
    # (3 * 4) + 1 = 13, not (3 + 1) * 4 = 16
    cfg = config(y={"bypass": 0, "mul_bypass": 0, "alu_bypass": 0, "alu_algo": ALGO_SUM})
    out, _ = run([3], cfg, {"y_mul": 4, "y_alu": 1})
    assert out == [13]


def test_y_operand_converters():
    # MUL operand 10 -> (10 - 4) * 3 / 2 = 9, x 2 = 18.  ALU operand -7 -> (-7 - 0) * 1 / 2
    # = -3.5 -> -4, 18 + -4 = 14
    y = {"bypass": 0, "mul_bypass": 0, "alu_bypass": 0, "alu_algo": ALGO_SUM,
         "mul_cvt": 1, "mul_cvt_offset": 4, "mul_cvt_scale": 3, "mul_cvt_truncate": 1,
         "alu_cvt": 1, "alu_cvt_offset": 0, "alu_cvt_scale": 1, "alu_cvt_truncate": 1}
    out, _ = run([2], config(y=y), {"y_mul": 10, "y_alu": -7})
    assert out == [14]


# -- LUT ---------------------------------------------------------------------------------------
def ramp_le(step=10):
    return [i * step for i in range(LE_ENTRIES)]


def test_lut_linear_hit_interpolates_with_rounding():
    # LE linear, start 0, select 2: x=5 -> index 1, fraction 1/4; table i*10 -> 12.5 -> 13
    # x=6 -> 1/2 of the way from 10 to 20 -> 15; x=4 -> 10 exactly
    cfg = lut_cfg(le={"index_select": 2}, priority={"hybrid_lo": 0})
    out, counters = run([5, 6, 4], cfg, le=ramp_le())
    assert out == [13, 15, 10]
    assert counters["lut_le_hit"] == 3 and counters["lut_hybrid"] == 3
    # ties away from zero on negative entries: -1 .. -2 at one half -> -1.5 -> -2
    le = [0] * LE_ENTRIES
    le[1], le[2] = -1, -2
    out, _ = run([6], cfg, le=le)
    assert out == [-2]


def test_lut_exponent_hit_uses_the_octave():
    # start 0, offset 0: x=12 = 8 + 4 -> index 3, fraction 4/8; table i*10 -> 35
    # offset 2: index 1 -> 15;  x=1 -> index 0, fraction 0 -> 0
    out, _ = run([12, 1], lut_cfg(le={"exponent": 1}), le=ramp_le())
    assert out == [35, 0]
    out, _ = run([12], lut_cfg(le={"exponent": 1, "index_offset": 2}), le=ramp_le())
    assert out == [15]


def test_lut_underflow_extrapolates_from_the_start():
    # x <= start: T[0] + (x - start) * scale / 2^shift = 100 + (4 - 10) * 3 / 2 = 91
    le = [100] + [0] * (LE_ENTRIES - 1)
    cfg = lut_cfg(le={"start": 10, "uflow_scale": 3, "uflow_shift": 1},
                  lo={"start": 1000}, priority={"uflow_lo": 0})
    out, counters = run([4, 10], cfg, le=le)
    assert out == [91, 100]
    assert counters["lut_uflow"] == 2 and counters["lut_hybrid"] == 0


def test_lut_exponent_underflow_adds_two_to_the_offset():
    # offset 2: x - start = 2 lies below 2^2, underflow from start + 4: 100 + (2 - 4) * 5 = 90
    le = [100] + [0] * (LE_ENTRIES - 1)
    cfg = lut_cfg(le={"exponent": 1, "index_offset": 2, "uflow_scale": 5},
                  lo={"start": 1000}, priority={"uflow_lo": 0})
    out, _ = run([2], cfg, le=le)
    assert out == [90]


def test_lut_overflow_with_negative_slope_shift():
    # LO linear select 0 from 0: x=300 overflows (index >= 256): T[256] + (300 - 260) << 1
    # (shift field -1 = left shift by one) = 5 + 80 = 85
    lo = [0] * LO_ENTRIES
    lo[256] = 5
    cfg = lut_cfg(le={"start": 1000}, lo={"end": 260, "oflow_scale": 1, "oflow_shift": -1},
                  priority={"hybrid_lo": 1})
    out, counters = run([300], cfg, lo=lo)
    assert out == [85]
    assert counters["lut_oflow"] == 1


def test_lut_negative_select_scales_the_index_up():
    # select -3: index = (x - start) << 3, no fraction.  x=7 -> entry 56 (560); x=8 -> 64
    # overflows: T[64] = 640 (slope 0).  C divides by 16: 35 and 40.
    cfg = lut_cfg(le={"index_select": -3}, lo={"start": 1000}, c_shift=4)
    out, counters = run([7, 8], cfg, le=ramp_le())
    assert out == [35, 40]
    assert counters["lut_le_hit"] == 1 and counters["lut_oflow"] == 1


def test_lut_table_choice_by_priorities():
    le = [1] * LE_ENTRIES
    lo = [2] * LO_ENTRIES
    both_hit = lut_cfg(le={"index_select": 0}, lo={"index_select": 0})
    assert run([3], both_hit, le=le, lo=lo)[0] == [1]
    both_hit["priority"]["hybrid_lo"] = 1
    assert run([3], both_hit, le=le, lo=lo)[0] == [2]
    # only LO hits (LE underflows): LO whatever the priorities say
    lo_only = lut_cfg(le={"start": 100}, lo={"index_select": 0},
                      priority={"uflow_lo": 0, "hybrid_lo": 0})
    out, counters = run([3], lo_only, le=le, lo=lo)
    assert out == [2] and counters["lut_lo_hit"] == 1 and counters["lut_le_hit"] == 0
    # both underflow: the underflow priority picks the table (scale 0: just T[0])
    both_under = lut_cfg(le={"start": 100}, lo={"start": 100}, priority={"uflow_lo": 1})
    assert run([3], both_under, le=le, lo=lo)[0] == [2]
    # LE underflows, LO overflows (index 300): the hybrid priority picks
    mixed = lut_cfg(le={"start": 1000}, lo={"index_select": 0}, priority={"hybrid_lo": 0})
    out, counters = run([300], mixed, le=le, lo=lo)
    assert out == [1] and counters["lut_uflow"] == 1 and counters["lut_oflow"] == 0
    mixed["priority"]["hybrid_lo"] = 1
    out, counters = run([300], mixed, le=le, lo=lo)
    assert out == [2] and counters["lut_oflow"] == 1
    # both overflow: the overflow priority picks
    both_over = lut_cfg(le={"index_select": 0}, lo={"index_select": 0}, priority={"oflow_lo": 1})
    assert run([300], both_over, le=le, lo=lo)[0] == [2]


# -- LUT loading -------------------------------------------------------------------------------
def test_lut_access_auto_increments_and_stops_at_the_last_entry():
    unit = register_map(2).units["SDP"]
    lut = LutMemory(unit)
    lut.on_access_cfg((1 << 17) | 62)                  # write LE from entry 62
    for value in (0x0001, 0xFFFF, 0x8000, 0x1234):
        lut.on_access_data(value)
    assert lut.le[61:].tolist() == [0, 1, -1, 0x1234]  # the 4th write overwrote entry 64
    lut.on_access_cfg((1 << 17) | (1 << 16) | 0)       # write LO from 0
    lut.on_access_data(7)
    assert lut.lo[:2].tolist() == [7, 0]
    lut.on_access_cfg(1 << 16)                          # read mode: writes store nothing
    lut.on_access_data(9)
    assert lut.lo[0] == 7


# -- register decoding -------------------------------------------------------------------------
def sdp_view(**regs):
    """An SDP register group 0 view with `regs` = {REG: {FIELD: value}} written."""
    rmap = register_map(2)
    rf = RegisterFile(rmap)
    unit = rmap.units["SDP"]
    for reg, fields in regs.items():
        r = unit.regs[reg]
        rf["SDP"].csb_write(r, sum(v << r.fields[f].lo for f, v in fields.items()))
    return rf["SDP"].view(0)


def test_decoding_signed_fields_and_six_bit_mul_shift():
    view = sdp_view(D_DP_BS_MUL_CFG={"BS_MUL_SHIFT_VALUE": 0x41},
                    D_CVT_OFFSET={"CVT_OFFSET": 0xFFFFFFFE},
                    D_CVT_SCALE={"CVT_SCALE": 0xFFFF},
                    S_LUT_INFO={"LUT_LE_INDEX_OFFSET": 0xC1, "LUT_LO_INDEX_SELECT": 0x05},
                    S_LUT_LE_SLOPE_SHIFT={"LUT_LE_SLOPE_UFLOW_SHIFT": 31,
                                          "LUT_LE_SLOPE_OFLOW_SHIFT": 15},
                    D_DP_EW_ALU_CFG={"EW_ALU_SRC": 1, "EW_ALU_CVT_BYPASS": 0},
                    D_DP_EW_MUL_CFG={"EW_MUL_SRC": 0, "EW_MUL_CVT_BYPASS": 0})
    cfg = datapath_config(view)
    assert cfg["x1"]["mul_shift"] == 1
    assert cfg["c"]["offset"] == -2 and cfg["c"]["scale"] == -1
    assert cfg["le"]["index_offset"] == -63 and cfg["lo"]["index_select"] == 5
    assert cfg["le"]["uflow_shift"] == -1 and cfg["le"]["oflow_shift"] == 15
    # only memory operands are converted
    assert cfg["y"]["alu_cvt"] and not cfg["y"]["mul_cvt"]


def test_reset_state_bypasses_every_stage():
    cfg = datapath_config(sdp_view())
    assert cfg["x1"]["bypass"] and cfg["x2"]["bypass"] and cfg["y"]["bypass"]


def test_sdp_compute_per_kernel_and_per_element_memory_operands():
    view = sdp_view(D_DP_BS_CFG={"BS_BYPASS": 0, "BS_ALU_BYPASS": 0, "BS_ALU_ALGO": ALGO_SUM,
                                 "BS_MUL_BYPASS": 0, "BS_MUL_PRELU": 0, "BS_RELU_BYPASS": 1},
                    D_DP_BS_ALU_CFG={"BS_ALU_SRC": 1},
                    D_DP_BS_MUL_CFG={"BS_MUL_SRC": 0},
                    D_DP_BS_MUL_SRC_VALUE={"BS_MUL_OPERAND": 0xFFFE},      # -2 (register)
                    D_CVT_SCALE={"CVT_SCALE": 1})
    x = np.arange(2 * 2 * 3, dtype=np.int32).reshape(2, 2, 3)
    per_kernel = StageOperands(alu=np.array([10, -10], np.int16))
    out = sdp_compute(view, x, {"BS": per_kernel}).output
    assert np.array_equal(out, (x + np.array([10, -10]).reshape(2, 1, 1)) * -2)
    per_element = StageOperands(alu=np.ones((2, 2, 3), np.int16))
    out = sdp_compute(view, x, {"BS": per_element}).output
    assert np.array_equal(out, (x + 1) * -2)
    with pytest.raises(ValueError, match="ALU"):
        sdp_compute(view, x, {"BS": StageOperands(mul=np.ones(2, np.int16))})


# -- the units in the engine -------------------------------------------------------------------
SRC = 0x8000_0000
OPS = 0x8004_0000
DST = 0x8010_0000
ATOM = 8




def _cube_image(cube: np.ndarray, line_stride: int, surf_stride: int) -> np.ndarray:
    """Bytes of a (lanes, H, W) int8 cube laid out with the given strides."""
    lanes, height, width = cube.shape
    image = np.zeros((lanes // ATOM) * surf_stride, np.uint8)
    for c in range(lanes):
        for y in range(height):
            for x in range(width):
                image[(c // ATOM) * surf_stride + y * line_stride + x * ATOM + c % ATOM] = \
                    cube[c, y, x].view(np.uint8)
    return image


def _read_output(engine: Engine, shape, line_stride: int, surf_stride: int) -> np.ndarray:
    lanes, height, width = shape
    mem = engine.memory.space(1)
    out = np.zeros(shape, np.int8)
    for c in range(lanes):
        for y in range(height):
            row = mem.read(DST + (c // ATOM) * surf_stride + y * line_stride, width * ATOM)
            out[c, y] = row.view(np.int8)[c % ATOM::ATOM]
    return out


def _program(width: int, height: int, channels: int, sdp: dict, rdma: dict, loads=(),
             enables=("SDP", "SDP_RDMA")) -> RegisterProgram:
    cube = {"D_DATA_CUBE_WIDTH": {"WIDTH": width - 1},
            "D_DATA_CUBE_HEIGHT": {"HEIGHT": height - 1},
            "D_DATA_CUBE_CHANNEL": {"CHANNEL": channels - 1}}
    regs = {f"SDP.{k}": v for k, v in cube.items()}
    regs.update({f"SDP_RDMA.{k}": v for k, v in cube.items()})
    regs.update({"SDP.D_DATA_FORMAT": {"PROC_PRECISION": 0, "OUT_PRECISION": 0},
                 "SDP.D_CVT_SCALE": {"CVT_SCALE": 1},
                 "SDP.D_DST_BASE_ADDR_LOW": {"DST_BASE_ADDR_LOW": DST},
                 "SDP.D_DST_DMA_CFG": {"DST_RAM_TYPE": 1},
                 "SDP_RDMA.D_FEATURE_MODE_CFG": {"IN_PRECISION": 0, "PROC_PRECISION": 0},
                 "SDP_RDMA.D_SRC_BASE_ADDR_LOW": {"SRC_BASE_ADDR_LOW": SRC},
                 "SDP_RDMA.D_SRC_DMA_CFG": {"SRC_RAM_TYPE": 1}})
    regs.update({f"SDP.{k}": v for k, v in sdp.items()})
    regs.update({f"SDP_RDMA.{k}": v for k, v in rdma.items()})
    enable = [w for unit in enables for w in reg_writes({f"{unit}.D_OP_ENABLE": {"OP_EN": 1}})]
    return RegisterProgram("sdp_unit_test", [
        *[MemLoad("pri_mem", addr, data) for addr, data in loads],
        *reg_writes(regs), IntrNotify("SDP", 0, "sdp_done"), *enable])


def _random_cube(shape, seed=3) -> np.ndarray:
    return np.random.default_rng(seed).integers(-128, 128, shape, dtype=np.int8)


@pytest.mark.parametrize("enables", [("SDP", "SDP_RDMA"), ("SDP_RDMA", "SDP")])
def test_units_memory_to_memory_with_bs_per_element_and_bn_per_kernel(enables):
    """BS adds a 1-byte per-element operand, BN multiplies by a 2-byte per-channel operand with
    a 1-bit shift.  11 channels: the 5 padding lanes of surface 1 go through the math too."""
    width, height, channels = 3, 2, 11
    shape = (16, height, width)
    x = _random_cube(shape)
    bs = _random_cube(shape, seed=4)
    bn = np.arange(-8, 8, dtype=np.int16) * 3
    src_line, src_surf = 64, 256
    bs_line, bs_surf = 32, 128
    out_line, out_surf = 48, 160
    loads = [(SRC, _cube_image(x, src_line, src_surf)),
             (OPS, _cube_image(bs, bs_line, bs_surf)),
             (OPS + 0x1000, bn.view(np.uint8))]
    sdp = {"D_DP_BS_CFG": {"BS_BYPASS": 0, "BS_ALU_BYPASS": 0, "BS_ALU_ALGO": ALGO_SUM,
                           "BS_MUL_BYPASS": 1, "BS_RELU_BYPASS": 1},
           "D_DP_BS_ALU_CFG": {"BS_ALU_SRC": 1},
           "D_DP_BN_CFG": {"BN_BYPASS": 0, "BN_ALU_BYPASS": 1, "BN_MUL_BYPASS": 0,
                           "BN_MUL_PRELU": 0, "BN_RELU_BYPASS": 1},
           "D_DP_BN_MUL_CFG": {"BN_MUL_SRC": 1, "BN_MUL_SHIFT_VALUE": 1},
           "D_DST_LINE_STRIDE": {"DST_LINE_STRIDE": out_line},
           "D_DST_SURFACE_STRIDE": {"DST_SURFACE_STRIDE": out_surf}}
    rdma = {"D_SRC_LINE_STRIDE": {"SRC_LINE_STRIDE": src_line},
            "D_SRC_SURFACE_STRIDE": {"SRC_SURFACE_STRIDE": src_surf},
            "D_BRDMA_CFG": {"BRDMA_DISABLE": 0, "BRDMA_DATA_USE": 1, "BRDMA_DATA_SIZE": 0,
                            "BRDMA_DATA_MODE": 1, "BRDMA_RAM_TYPE": 1},
            "D_BS_BASE_ADDR_LOW": {"BS_BASE_ADDR_LOW": OPS},
            "D_BS_LINE_STRIDE": {"BS_LINE_STRIDE": bs_line},
            "D_BS_SURFACE_STRIDE": {"BS_SURFACE_STRIDE": bs_surf},
            "D_NRDMA_CFG": {"NRDMA_DISABLE": 0, "NRDMA_DATA_USE": 0, "NRDMA_DATA_SIZE": 1,
                            "NRDMA_DATA_MODE": 0, "NRDMA_RAM_TYPE": 1},
            "D_BN_BASE_ADDR_LOW": {"BN_BASE_ADDR_LOW": OPS + 0x1000},
            "D_ERDMA_CFG": {"ERDMA_DISABLE": 1}}
    engine = Engine(load_hardware("nv_small"))
    engine.run(_program(width, height, channels, sdp, rdma, loads, enables))
    v = (x.astype(np.int64) + bs) * bn.reshape(-1, 1, 1)
    expected = np.clip(np.sign(v) * ((np.abs(v) + 1) // 2), -128, 127)
    assert np.array_equal(_read_output(engine, shape, out_line, out_surf), expected)
    assert engine.regs["SDP"].view(0).field("D_OP_ENABLE", "OP_EN") == 0


def test_unit_1x1_cube_is_read_and_written_as_packed_surfaces():
    x = _random_cube((16, 1, 1))
    image = x.reshape(-1).view(np.uint8)
    rdma = {"D_SRC_LINE_STRIDE": {"SRC_LINE_STRIDE": 0x1000},      # ignored for 1x1
            "D_SRC_SURFACE_STRIDE": {"SRC_SURFACE_STRIDE": 0x1000}}
    sdp = {"D_DST_SURFACE_STRIDE": {"DST_SURFACE_STRIDE": 0x1000}}
    engine = Engine(load_hardware("nv_small"))
    engine.run(_program(1, 1, 16, sdp, rdma, [(SRC, image)]))
    assert np.array_equal(engine.memory.space(1).read(DST, 16).view(np.int8), x.reshape(-1))


def test_unit_flying_input_from_cacc():
    """Flying mode: the int32 cube comes from CACC; SDP_RDMA is never enabled."""
    shape = (8, 2, 2)
    x = (np.arange(32, dtype=np.int32).reshape(shape) - 16) * 1000
    sdp = {"D_FEATURE_MODE_CFG": {"FLYING_MODE": 1},
           "D_CVT_SHIFT": {"CVT_SHIFT": 8},
           "D_DST_LINE_STRIDE": {"DST_LINE_STRIDE": 2 * ATOM},
           "D_DST_SURFACE_STRIDE": {"DST_SURFACE_STRIDE": 4 * ATOM}}
    engine = Engine(load_hardware("nv_small"))
    engine.channel("cacc->sdp").put(x)
    engine.run(_program(2, 2, 8, sdp, {}, enables=("SDP",)))
    expected = np.clip(np.sign(x) * ((np.abs(x) + 128) // 256), -128, 127)
    assert np.array_equal(_read_output(engine, shape, 2 * ATOM, 4 * ATOM), expected)


def test_unit_output_to_pdp_writes_nothing():
    x = _random_cube((8, 2, 3))
    sdp = {"D_FEATURE_MODE_CFG": {"OUTPUT_DST": 1},
           "D_DST_LINE_STRIDE": {"DST_LINE_STRIDE": 3 * ATOM},
           "D_DST_SURFACE_STRIDE": {"DST_SURFACE_STRIDE": 6 * ATOM}}
    rdma = {"D_SRC_LINE_STRIDE": {"SRC_LINE_STRIDE": 3 * ATOM},
            "D_SRC_SURFACE_STRIDE": {"SRC_SURFACE_STRIDE": 6 * ATOM}}
    engine = Engine(load_hardware("nv_small"))
    result = engine.run(_program(3, 2, 8, sdp, rdma, [(SRC, _cube_image(x, 24, 48))]))
    sent = engine.channel("sdp->pdp").items
    assert len(sent) == 1 and sent[0].dtype == np.int8 and np.array_equal(sent[0], x)
    assert not engine.memory.space(1).read(DST, 48).any()
    assert result.unit_stats["SDP"]["layers"] == 1


def test_unit_eql_mode_sets_status_and_writes_nothing():
    x = np.full((8, 1, 2), 5, np.int8)
    for operand, unequal in ((5, 0), (6, 1)):
        sdp = {"D_DP_EW_CFG": {"EW_BYPASS": 0, "EW_ALU_BYPASS": 0, "EW_ALU_ALGO": ALGO_EQL,
                               "EW_MUL_BYPASS": 1, "EW_LUT_BYPASS": 1},
               "D_DP_EW_ALU_CFG": {"EW_ALU_SRC": 0},
               "D_DP_EW_ALU_SRC_VALUE": {"EW_ALU_OPERAND": operand}}
        rdma = {"D_SRC_LINE_STRIDE": {"SRC_LINE_STRIDE": 2 * ATOM},
                "D_SRC_SURFACE_STRIDE": {"SRC_SURFACE_STRIDE": 2 * ATOM}}
        engine = Engine(load_hardware("nv_small"))
        engine.run(_program(2, 1, 8, sdp, rdma, [(SRC, _cube_image(x, 16, 16))]))
        assert engine.regs["SDP"].view(0).field("D_STATUS", "STATUS_UNEQUAL") == unequal
        assert not engine.memory.space(1).read(DST, 16).any()


def test_unit_lut_counters_are_recorded():
    x = np.array([1, 2, 3, 4, 5, 6, 7, 8], np.int8).reshape(8, 1, 1)
    lut_load = reg_writes({"SDP.S_LUT_ACCESS_CFG": {"LUT_ACCESS_TYPE": 1, "LUT_TABLE_ID": 0}})
    lut_load += [RegWrite(lut_load[0].addr + 4, i, "SDP.S_LUT_ACCESS_DATA") for i in range(65)]
    sdp = {"D_DP_EW_CFG": {"EW_BYPASS": 0, "EW_ALU_BYPASS": 1, "EW_MUL_BYPASS": 1,
                           "EW_LUT_BYPASS": 0},
           "S_LUT_CFG": {"LUT_LE_FUNCTION": 1},
           "S_LUT_LE_START": {"LUT_LE_START": 0},
           "S_LUT_LO_START": {"LUT_LO_START": 100},
           "D_PERF_ENABLE": {"PERF_LUT_EN": 1, "PERF_SAT_EN": 1}}
    program = _program(1, 1, 8, sdp, {}, [(SRC, x.reshape(-1).view(np.uint8))])
    program.commands[1:1] = lut_load
    engine = Engine(load_hardware("nv_small"))
    engine.run(program)
    view = engine.regs["SDP"].view(0)
    # select 0: x -> entry x, value x (all hit LE); LO underflows (start 100)
    assert engine.memory.space(1).read(DST, 8).view(np.int8).tolist() == list(range(1, 9))
    assert view.word("D_PERF_LUT_LE_HIT") == 8 and view.word("D_PERF_LUT_LO_HIT") == 0
    assert view.word("D_PERF_LUT_HYBRID") == 8 and view.word("D_PERF_LUT_UFLOW") == 0
    assert view.word("D_PERF_OUT_SATURATION") == 0


@pytest.mark.parametrize("size, mode", [(1, 0), (2, 0), (1, 1)])
def test_rdma_both_operands_interleave_alu_then_mul(size, mode):
    """DATA_USE=BOTH: each element holds its ALU value, then its MUL value (map 5.1)."""
    width, height, lanes = 2, 1, 8
    engine = Engine(load_hardware("nv_small"))
    elements = lanes * (width * height if mode else 1)
    values = np.arange(1, 2 * elements + 1).reshape(elements, 2) * np.array([1, -1])
    dtype = np.int8 if size == 1 else np.int16
    if mode:      # per element: atom of 8 lanes per x position, each lane (alu, mul)
        image = values.reshape(width, lanes, 2).astype(dtype)
        alu = image[..., 0].T.reshape(lanes, 1, width)
        mul = image[..., 1].T.reshape(lanes, 1, width)
    else:
        image = values.astype(dtype)
        alu, mul = image[:, 0], image[:, 1]
    engine.memory.space(1).write(OPS, np.ascontiguousarray(image).reshape(-1).view(np.uint8))
    for w in reg_writes({
            "SDP_RDMA.D_DATA_CUBE_WIDTH": {"WIDTH": width - 1},
            "SDP_RDMA.D_DATA_CUBE_CHANNEL": {"CHANNEL": lanes - 1},
            "SDP_RDMA.D_FEATURE_MODE_CFG": {"IN_PRECISION": 0, "PROC_PRECISION": 0},
            "SDP_RDMA.D_BRDMA_CFG": {"BRDMA_DISABLE": 0, "BRDMA_DATA_USE": 2,
                                     "BRDMA_DATA_SIZE": size - 1, "BRDMA_DATA_MODE": mode,
                                     "BRDMA_RAM_TYPE": 1},
            "SDP_RDMA.D_BS_BASE_ADDR_LOW": {"BS_BASE_ADDR_LOW": OPS},
            "SDP_RDMA.D_BS_LINE_STRIDE": {"BS_LINE_STRIDE": width * lanes * 2 * size},
            "SDP_RDMA.D_BS_SURFACE_STRIDE": {"BS_SURFACE_STRIDE": width * lanes * 2 * size}}):
        engine.regs.write(w.addr, w.value)
    rdma = engine.units["SDP_RDMA"]
    operands, nbytes, ram_type = rdma.read_operands(engine.regs["SDP_RDMA"].view(0), "BS")
    assert np.array_equal(operands.alu, alu) and np.array_equal(operands.mul, mul)
    assert nbytes == elements * 2 * size and ram_type == 1


def test_int16_is_refused_where_the_hardware_has_int8_only():
    rdma = {"D_FEATURE_MODE_CFG": {"IN_PRECISION": 1, "PROC_PRECISION": 1}}
    with pytest.raises(NvdlaSimError, match="IN_PRECISION=INT16: nv_small supports INT8 only"):
        Engine(load_hardware("nv_small")).run(_program(1, 1, 8, {}, rdma))
