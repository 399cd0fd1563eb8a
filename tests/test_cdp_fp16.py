"""CDP FP16 LRN on nv_full: the C model's float arithmetic (kernels/cdp.pyx `lrn_fp16`) against a
float64 reference of the same algorithm, within the precision document's CDP threshold; LUT and
NaN/INF counters against reference counts; the unit through the engine.

The reference evaluates LRN exactly: x = the FP16 input (an INF read as the largest FP17 value,
as the C model's conversions saturate it), ss = the sum of x^2 over the window, the LUT as the
piecewise-linear function its FP16 entries, FP32 START/END and FP16 slopes define, out = x * LUT
(ss) saturated to +-65504.  Values that enter the FP17 datapath are saturated to the FP17 range
(the C model makes no infinities).  The square sum is an FP32 value in the hardware, so an ss
within 2^-20 (relative) of a table boundary may land on either side: the reference accepts either.

Threshold (precision-preservation, "FP16 error threshold", CDP): 0.0001 absolute or 0.001 of the
largest magnitude in the square-sum window (as tests/test_pool_precision.py reads it).  The
document's bound presumes an LRN table: the tables here sample (k + a*ss)^-0.75 < LRN_LUT_MAX =
0.75, and where an extrapolated LUT value is larger the relative bound grows with |LUT| /
LRN_LUT_MAX (two FP17 roundings of x * LUT alone reach ~2^-10 of |x * LUT|).  With MUL_BYPASS the output is the LUT value, computed as
L0 + (L1 - L0) * fraction in FP17: its error scales with the entries, so the largest entry
magnitude takes the window maximum's place.  Run `python tests/test_cdp_fp16.py [N]` for an N-case sweep
(default 1000) that prints the worst error relative to the threshold.
"""
from __future__ import annotations

import numpy as np
import pytest

from nvdla_sim.config import load_hardware
from nvdla_sim.engine import Engine
from nvdla_sim.kernels.cdp import LE_ENTRIES, LO_ENTRIES, lrn_fp16
from nvdla_sim.program import IntrNotify, MemLoad, RegisterProgram

from program_helpers import reg_writes
from test_pool_precision import (ABS_TOL, ATOM_BYTES, DST, FP16_MAX, FP17_MAX, REL_TOL, SRC,
                                 fp16_value, pack_cube, random_fp16_cube, unpack_cube)

UNDERFLOW, HIT, OVERFLOW = "uflow", "hit", "oflow"
LRN_LUT_MAX = 0.75
BOUNDARY = 2.0 ** -20          # relative distance of ss from a boundary that may go either way


def fp16_bits(x) -> np.ndarray:
    return np.asarray(x, np.float64).astype(np.float16).view(np.uint16)


def fp32_bits(x: float) -> int:
    return int(np.array(x, np.float32).view(np.uint32))


def fp32_value(bits: int) -> float:
    return float(np.array(bits & 0xFFFFFFFF, np.uint32).view(np.float32))


def sat17(v):
    return np.clip(v, -FP17_MAX, FP17_MAX)


# -- float64 reference -------------------------------------------------------------------------
def table_lookup(ss: np.ndarray, cfg: dict, p: str, entries: np.ndarray, exponent: bool):
    """One table at square sums `ss` (float64): (value, outcome codes 0 uflow / 1 hit / 2 oflow)."""
    last = entries.size - 1
    y = fp16_value(entries & 0xFFFF)
    start, end = fp32_value(cfg[f"{p}_start"]), fp32_value(cfg[f"{p}_end"])
    u_slope = float(fp16_value(np.array(cfg[f"{p}_uflow_scale"] & 0xFFFF)))
    o_slope = float(fp16_value(np.array(cfg[f"{p}_oflow_scale"] & 0xFFFF)))
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        d = ss - start
        positive = d > 0
        if exponent:
            offset = cfg["le_index_offset"]
            _, e = np.frexp(np.where(positive, d, 1.0))
            pos = (e - 1 - offset).astype(np.float64) + np.where(positive, d / np.ldexp(1.0, e - 1)
                                                                 - 1, 0)
            gap = d - (2.0 ** offset if offset > -127 else 0.0)
        else:
            pos = d / 2.0 ** cfg[f"{p}_index_select"]
            gap = d
        outcome = np.where(~positive | (pos < 0), 0, np.where(pos >= last, 2, 1))
        index = np.clip(np.floor(np.where(outcome == 1, pos, 0)), 0, last - 1).astype(int)
        frac = np.where(outcome == 1, pos - index, 0)
        hit = y[index] + (y[index + 1] - y[index]) * frac
        under = y[0] + sat17(sat17(gap) * u_slope)
        over = y[last] + sat17(sat17(ss - end) * o_slope)
        value = sat17(np.where(outcome == 0, under, np.where(outcome == 2, over, hit)))
    return value, outcome


def choose(le, lo, cfg):
    """(LUT value, counter name) per element from both tables' (value, outcome)."""
    (le_v, le_o), (lo_v, lo_o) = le, lo
    uflow = (le_o == 0) & (lo_o == 0)
    oflow = (le_o == 2) & (lo_o == 2)
    one_hit = (le_o == 1) != (lo_o == 1)
    use_lo = np.where(uflow, bool(cfg["uflow_priority"]),
                      np.where(oflow, bool(cfg["oflow_priority"]),
                               np.where(one_hit, lo_o == 1, bool(cfg["hybrid_priority"]))))
    kind = np.where(uflow, "lut_uflow", np.where(oflow, "lut_oflow", np.where(
        one_hit, np.where(le_o == 1, "lut_le_hit", "lut_lo_hit"), "lut_hybrid")))
    return np.where(use_lo, lo_v, le_v), kind


def lrn_fp16_reference(cube_bits: np.ndarray, channels: int, cfg: dict, le: np.ndarray,
                       lo: np.ndarray):
    """(candidate outputs (3, lanes, H, W): at ss and ss*(1 -+ 2^-20), window max magnitude,
    |LUT|, counters at the exact ss)."""
    with np.errstate(invalid="ignore", over="ignore"):      # NaN and INF inputs
        return _reference(np.asarray(cube_bits, np.uint16), channels, cfg, le, lo)


def _reference(bits: np.ndarray, channels: int, cfg: dict, le: np.ndarray, lo: np.ndarray):
    lanes = bits.shape[0]
    special = (bits & 0x7C00) == 0x7C00
    nan_in = special & ((bits & 0x3FF) != 0)
    x = fp16_value(bits)
    x = np.where(special & ~nan_in, np.sign(x) * FP17_MAX, x)            # INF -> largest FP17
    if cfg["nan_to_zero"]:
        x = np.where(nan_in, 0.0, x)
    x[channels:] = 0.0
    n = 0 if cfg["sqsum_bypass"] else cfg["normalz_len"] + 1
    padded = np.zeros((lanes + 8,) + x.shape[1:])
    padded[4:4 + lanes] = x
    window = np.stack([padded[4 + k:4 + k + lanes] for k in range(-n, n + 1)])
    ss = x if cfg["sqsum_bypass"] else (window ** 2).sum(axis=0)
    finite = np.where(np.isnan(window) | (np.abs(window) == FP17_MAX), 0, np.abs(window))
    window_max = np.maximum(finite.max(axis=0), np.nan_to_num(np.abs(x)))
    if cfg["mul_bypass"]:      # the output is the LUT value: the tables' range is the scale
        entries = fp16_value(np.concatenate([le, lo]) & 0xFFFF)
        window_max = np.full_like(window_max, np.abs(entries[np.isfinite(entries)]).max())
    outs, luts, counts = [], None, None
    for scale in (1.0, 1.0 - BOUNDARY, 1.0 + BOUNDARY):
        lut, kind = choose(table_lookup(ss * scale, cfg, "le", le, bool(cfg["le_exponent"])),
                           table_lookup(ss * scale, cfg, "lo", lo, False), cfg)
        if cfg["mul_bypass"]:
            v = np.where(np.isnan(x), x, lut)
        else:
            v = sat17(x * lut)
        outs.append(np.clip(v, -FP16_MAX, FP16_MAX))
        if luts is None:
            luts = np.abs(lut)
            counts = {k: int(np.count_nonzero(kind == k)) for k in
                      ("lut_uflow", "lut_oflow", "lut_hybrid", "lut_le_hit", "lut_lo_hit")}
            counts.update(nan_input=int(nan_in.sum()), inf_input=int((special & ~nan_in).sum()),
                          nan_output=int(np.isnan(outs[0]).sum()), out_saturation=0)
    return np.stack(outs), window_max, luts, counts


def error_ratio(got_bits: np.ndarray, candidates: np.ndarray, window_max: np.ndarray,
                lut: np.ndarray) -> float:
    """Largest |error| / allowed over the outputs (the nearest candidate); NaN must match NaN."""
    got = fp16_value(got_bits)
    nan_ref = np.isnan(candidates[0])
    if not np.array_equal(np.isnan(got), nan_ref):
        return float("inf")
    ok = ~nan_ref
    err = np.abs(candidates[:, ok] - got[ok]).min(axis=0)
    lut = np.nan_to_num(lut[ok], nan=1.0)
    allowed = np.maximum(ABS_TOL, REL_TOL * np.maximum(
        window_max[ok] * np.maximum(1.0, lut / LRN_LUT_MAX), lut))
    return float((err / allowed).max(initial=0.0))


# -- random LRN tables -------------------------------------------------------------------------
def lrn_tables(rng: np.random.Generator, exponent: bool, overflow_slope: bool = False
               ) -> tuple[dict, np.ndarray, np.ndarray]:
    """LE and LO tables of f(ss) = (k + a*ss)^-0.75 (k in [1.5, 3], so |f| < 0.75) with random
    ranges, random priorities and window; the underflow slope is f' at the start, the overflow
    slope 0 (LRN flattens out) or, with `overflow_slope`, f' at the end (a line that leaves the
    LRN range far beyond the table)."""
    k, a = rng.uniform(1.5, 3.0), 10.0 ** rng.uniform(-5, -1)

    def f(s):
        return (k + a * np.maximum(s, 0)) ** -0.75

    def df(s):
        return -0.75 * a * (k + a * max(s, 0)) ** -1.75

    cfg = {"normalz_len": int(rng.integers(0, 4)), "sqsum_bypass": int(rng.random() < 0.1),
           "mul_bypass": int(rng.random() < 0.1), "le_exponent": int(exponent),
           "uflow_priority": int(rng.integers(0, 2)), "oflow_priority": int(rng.integers(0, 2)),
           "hybrid_priority": int(rng.integers(0, 2)), "nan_to_zero": int(rng.integers(0, 2)),
           "le_index_offset": 0, "le_index_select": 0}
    start = 0.0 if rng.random() < 0.7 else float(rng.uniform(-1, 1))
    if exponent:
        offset = int(rng.integers(-30, 4))
        cfg["le_index_offset"] = offset
        le_x = start + 2.0 ** (offset + np.arange(LE_ENTRIES, dtype=np.float64))
        le_x[0] = start + 2.0 ** offset
    else:
        cfg["le_index_select"] = int(rng.integers(-6, 18))
        le_x = start + 2.0 ** cfg["le_index_select"] * np.arange(LE_ENTRIES, dtype=np.float64)
    cfg["lo_index_select"] = int(rng.integers(-6, 14))
    lo_x = start + 2.0 ** cfg["lo_index_select"] * np.arange(LO_ENTRIES, dtype=np.float64)
    for p, xs in (("le", le_x), ("lo", lo_x)):
        cfg[f"{p}_start"] = fp32_bits(start)
        cfg[f"{p}_end"] = fp32_bits(xs[-1])
        cfg[f"{p}_uflow_scale"] = int(fp16_bits(df(xs[0])))
        cfg[f"{p}_oflow_scale"] = int(fp16_bits(df(xs[-1]) if overflow_slope else 0.0))
        cfg[f"{p}_uflow_shift"] = cfg[f"{p}_oflow_shift"] = 0
    le = fp16_bits(f(le_x - start)).astype(np.int64)
    lo = fp16_bits(f(lo_x - start)).astype(np.int64)
    return cfg, le, lo


def random_case(rng: np.random.Generator) -> float:
    """One random FP16 LRN through the kernel; its error ratio."""
    cfg, le, lo = lrn_tables(rng, bool(rng.integers(0, 2)))
    lanes = 16 * int(rng.integers(1, 4))
    channels = int(rng.integers(1, lanes + 1))
    shape = (lanes, int(rng.integers(1, 4)), int(rng.integers(1, 4)))
    cube = random_fp16_cube(rng, shape) if rng.random() < 0.6 else fp16_bits(
        rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 3))
    out, _ = lrn_fp16(np.ascontiguousarray(cube, np.uint16), channels, cfg, le, lo)
    cand, wmax, lut, _ = lrn_fp16_reference(cube, channels, cfg, le, lo)
    return error_ratio(out, cand, wmax, lut)


def sweep(cases: int, seed: int = 0) -> float:
    rng = np.random.default_rng(seed)
    return max(random_case(rng) for _ in range(cases))


# -- kernel tests ------------------------------------------------------------------------------
def test_lrn_fp16_within_the_precision_threshold():
    worst = sweep(150, seed=2)
    assert worst <= 1.0, worst
    assert worst > 0.01            # the datapath really rounds (FP17 interpolation, FP16 output)


def exact_case(rng: np.random.Generator, exponent: bool):
    """Integer inputs (exact squares and sums in FP32) with NaNs and INFs mixed in, and tables
    placed so that every LUT case occurs.  Exponent: LE from 2 + 2^-54 to 2 + 2^10, LO [0, 256):
    ss 0 underflows both, 1 and 2 hit LO only, then both, from 256 LE only, from 1026 neither.
    Linear: LE [0, 512), LO [100, 1124)."""
    cfg, le, lo = lrn_tables(rng, exponent)
    cfg.update(sqsum_bypass=0, nan_to_zero=0, lo_start=0)
    if exponent:
        cfg.update(le_start=fp32_bits(2.0), le_index_offset=-54, le_end=fp32_bits(2.0 + 2 ** 10),
                   lo_index_select=0, lo_end=fp32_bits(256.0))
    else:
        cfg.update(le_start=0, le_index_select=3, le_end=fp32_bits(512.0),
                   lo_start=fp32_bits(100.0), lo_index_select=2, lo_end=fp32_bits(1124.0))
    cube = fp16_bits(rng.integers(-20, 21, (32, 3, 4)).astype(np.float64))
    cube[rng.random(cube.shape) < 0.03] = 0x7E01         # NaN
    cube[rng.random(cube.shape) < 0.03] = 0xFC00         # -INF
    cube[2:7, 0, 0] = 0                                  # square sum 0: underflows both
    cube[10:13, 0, 1] = [0, 1, 0]                        # 1
    return cfg, le, lo, cube


@pytest.mark.parametrize("exponent", [True, False])
def test_lrn_fp16_counters_match_reference_counts(exponent):
    cfg, le, lo, cube = exact_case(np.random.default_rng(7 + exponent), exponent)
    out, counters = lrn_fp16(cube, 27, cfg, le, lo)
    cand, wmax, lut, ref_counts = lrn_fp16_reference(cube, 27, cfg, le, lo)
    assert error_ratio(out, cand, wmax, lut) <= 1.0
    assert counters == ref_counts
    lut_kinds = ("lut_uflow", "lut_oflow", "lut_le_hit", "lut_lo_hit", "lut_hybrid")
    assert sum(counters[k] for k in lut_kinds) == cube.size
    assert all(counters[k] > 0 for k in (*lut_kinds, "nan_input", "inf_input", "nan_output"))


def test_nan_to_zero_flushes_inputs_but_counts_them():
    cfg, le, lo, cube = exact_case(np.random.default_rng(3), True)
    cfg["nan_to_zero"] = 1
    out, counters = lrn_fp16(cube, 32, cfg, le, lo)
    nan_in = int(np.count_nonzero(cube == 0x7E01))
    assert counters["nan_input"] == nan_in > 0 and counters["nan_output"] == 0
    flushed = np.where(cube == 0x7E01, 0, cube).astype(np.uint16)
    cfg["nan_to_zero"] = 0
    assert np.array_equal(out, lrn_fp16(flushed, 32, cfg, le, lo)[0])


def test_square_sum_adds_the_outer_pair_first():
    """ss = (q[c-1] + q[c+1]) + q[c] in FP32: with q = 2^-24, 1, 2^-24 that is 1 + 2^-23 (in order,
    each 2^-24 would round away).  LO starts at 1.0 with 2^-23-wide entries L[i] = i, so the
    centre's LUT value is 1 (a hit at entry 1), not 0 (an underflow at ss = START)."""
    cfg, le, lo = lrn_tables(np.random.default_rng(0), False)
    cfg.update(normalz_len=0, sqsum_bypass=0, mul_bypass=0, lo_start=fp32_bits(1.0),
               lo_index_select=-23, lo_end=fp32_bits(1.0 + 2.0 ** -15), lo_uflow_scale=0,
               le_start=fp32_bits(1e30), le_index_select=0, le_exponent=0, hybrid_priority=1)
    lo = fp16_bits(np.arange(LO_ENTRIES, dtype=np.float64)).astype(np.int64)
    cube = np.zeros((16, 1, 1), np.uint16)
    cube[:3, 0, 0] = [0x0C00, 0x3C00, 0x0C00]            # 2^-12, 1, 2^-12
    out, counters = lrn_fp16(cube, 16, cfg, le, lo)
    assert out[1, 0, 0] == 0x3C00                        # 1 * LO[1]
    assert counters["lut_lo_hit"] >= 1


def test_missing_channels_are_fed_zero():
    """Lanes from the channel count on are +0 whatever memory holds there."""
    cfg, le, lo = lrn_tables(np.random.default_rng(4), True)
    cfg["normalz_len"] = 3
    rng = np.random.default_rng(5)
    cube = fp16_bits(rng.standard_normal((32, 2, 2)))
    zeroed = cube.copy()
    zeroed[21:] = 0
    a, _ = lrn_fp16(cube, 21, cfg, le, lo)
    b, _ = lrn_fp16(zeroed, 32, cfg, le, lo)
    assert np.array_equal(a, b)


def test_mul_bypass_passes_a_nan_input_through():
    cfg, le, lo = lrn_tables(np.random.default_rng(6), False)
    cfg.update(mul_bypass=1, sqsum_bypass=1, nan_to_zero=0)
    cube = fp16_bits(np.full((16, 1, 2), 0.5))
    cube[3, 0, 0] = 0x7E05
    out, counters = lrn_fp16(cube, 16, cfg, le, lo)
    assert out[3, 0, 0] == 0x7E05                        # the input NaN, payload kept
    assert counters["nan_output"] == 1
    ref, _ = table_lookup(np.array([0.25]), cfg, "lo", lo, False)
    assert abs(fp16_value(out[0, 0, 0]) - ref[0]) <= 2e-3    # LUT(0.5) itself, no multiply


def test_extrapolation_lines_beyond_the_tables():
    """Overflow slopes f'(end): far beyond the tables (INF neighbours) the line leaves the LRN
    range and saturates in FP17; MUL_BYPASS outputs the LUT value itself."""
    rng = np.random.default_rng(8)
    worst = 0.0
    for case in range(20):
        cfg, le, lo = lrn_tables(rng, bool(case % 2), overflow_slope=True)
        cfg.update(mul_bypass=1, sqsum_bypass=0)
        cube = fp16_bits(rng.standard_normal((16, 2, 3)) * 10.0 ** rng.integers(-1, 3))
        cube[rng.random(cube.shape) < 0.05] = 0x7C00
        out, counters = lrn_fp16(cube, 16, cfg, le, lo)
        cand, wmax, lut, _ = lrn_fp16_reference(cube, 16, cfg, le, lo)
        worst = max(worst, error_ratio(out, cand, wmax, lut))
        assert counters["lut_oflow"] > 0
    assert worst <= 1.0


# -- the unit ----------------------------------------------------------------------------------
def field(v: int, bits: int) -> int:
    return v & ((1 << bits) - 1)


def cdp_fp16_program(cube: np.ndarray, channels: int, cfg: dict, le: np.ndarray, lo: np.ndarray,
                     converters: bool = False) -> tuple[RegisterProgram, int, int]:
    lanes, h, w = cube.shape
    line, surf = w * ATOM_BYTES, w * ATOM_BYTES * h
    lut = []
    for table_id, entries in ((0, le), (1, lo)):
        lut += reg_writes({"CDP.S_LUT_ACCESS_CFG": {"LUT_ACCESS_TYPE": 1,
                                                    "LUT_TABLE_ID": table_id}}, version=1)
        data = reg_writes({"CDP.S_LUT_ACCESS_DATA": {"LUT_DATA": 0}}, version=1)[0]
        lut += [type(data)(data.addr, int(v) & 0xFFFF, data.name) for v in entries]
    regs = {
        "CDP_RDMA.D_DATA_CUBE_WIDTH": {"WIDTH": w - 1},
        "CDP_RDMA.D_DATA_CUBE_HEIGHT": {"HEIGHT": h - 1},
        "CDP_RDMA.D_DATA_CUBE_CHANNEL": {"CHANNEL": channels - 1},
        "CDP_RDMA.D_SRC_BASE_ADDR_LOW": {"SRC_BASE_ADDR_LOW": SRC},
        "CDP_RDMA.D_SRC_LINE_STRIDE": {"SRC_LINE_STRIDE": line},
        "CDP_RDMA.D_SRC_SURFACE_STRIDE": {"SRC_SURFACE_STRIDE": surf},
        "CDP_RDMA.D_SRC_DMA_CFG": {"SRC_RAM_TYPE": 1},
        "CDP_RDMA.D_DATA_FORMAT": {"INPUT_DATA": 2},
        "CDP.D_DATA_FORMAT": {"INPUT_DATA_TYPE": 2},
        "CDP.S_LUT_CFG": {"LUT_LE_FUNCTION": 0 if cfg["le_exponent"] else 1,
                          "LUT_UFLOW_PRIORITY": cfg["uflow_priority"],
                          "LUT_OFLOW_PRIORITY": cfg["oflow_priority"],
                          "LUT_HYBRID_PRIORITY": cfg["hybrid_priority"]},
        "CDP.S_LUT_INFO": {"LUT_LE_INDEX_OFFSET": field(cfg["le_index_offset"], 8),
                           "LUT_LE_INDEX_SELECT": field(cfg["le_index_select"], 8),
                           "LUT_LO_INDEX_SELECT": field(cfg["lo_index_select"], 8)},
        "CDP.D_LRN_CFG": {"NORMALZ_LEN": cfg["normalz_len"]},
        "CDP.D_FUNC_BYPASS": {"SQSUM_BYPASS": cfg["sqsum_bypass"],
                              "MUL_BYPASS": cfg["mul_bypass"]},
        "CDP.D_NAN_FLUSH_TO_ZERO": {"NAN_TO_ZERO": cfg["nan_to_zero"]},
        "CDP.D_DST_BASE_ADDR_LOW": {"DST_BASE_ADDR_LOW": DST},
        "CDP.D_DST_LINE_STRIDE": {"DST_LINE_STRIDE": line},
        "CDP.D_DST_SURFACE_STRIDE": {"DST_SURFACE_STRIDE": surf},
        "CDP.D_DST_DMA_CFG": {"DST_RAM_TYPE": 1},
    }
    for t in ("LE", "LO"):
        p = t.lower()
        regs[f"CDP.S_LUT_{t}_START_LOW"] = {f"LUT_{t}_START_LOW": cfg[f"{p}_start"]}
        regs[f"CDP.S_LUT_{t}_END_LOW"] = {f"LUT_{t}_END_LOW": cfg[f"{p}_end"]}
        regs[f"CDP.S_LUT_{t}_SLOPE_SCALE"] = {
            f"LUT_{t}_SLOPE_UFLOW_SCALE": field(cfg[f"{p}_uflow_scale"], 16),
            f"LUT_{t}_SLOPE_OFLOW_SCALE": field(cfg[f"{p}_oflow_scale"], 16)}
    if converters:           # INT-only converters: FP16 ignores them
        regs.update({"CDP.D_DATIN_OFFSET": {"DATIN_OFFSET": 0x3C00},
                     "CDP.D_DATIN_SCALE": {"DATIN_SCALE": 7},
                     "CDP.D_DATIN_SHIFTER": {"DATIN_SHIFTER": 3},
                     "CDP.D_DATOUT_OFFSET": {"DATOUT_OFFSET": 0x4000},
                     "CDP.D_DATOUT_SCALE": {"DATOUT_SCALE": 3},
                     "CDP.D_DATOUT_SHIFTER": {"DATOUT_SHIFTER": 2}})
    program = RegisterProgram("cdp_fp16", [
        MemLoad("pri_mem", SRC, pack_cube(cube.view(np.float16), line, surf)), *lut,
        *reg_writes(regs, version=1), IntrNotify("CDP", 0, "cdp_done"),
        *reg_writes({"CDP_RDMA.D_OP_ENABLE": {"OP_EN": 1}, "CDP.D_OP_ENABLE": {"OP_EN": 1}},
                    version=1)])
    return program, line, surf


@pytest.mark.parametrize("exponent", [True, False])
def test_cdp_fp16_unit_lrn_and_status_registers(exponent):
    """20 FP16 channels (2 surfaces of 16) through CDP_RDMA and CDP: values within the threshold,
    every status register equal to the reference count."""
    rng = np.random.default_rng(21 + exponent)
    cfg, le, lo, cube = exact_case(rng, exponent)
    cube = cube[:, :2, :3].copy()
    channels = 20
    program, line, surf = cdp_fp16_program(cube[:channels], channels, cfg, le, lo)
    engine = Engine(load_hardware("nv_full"))
    engine.run(program)
    got = unpack_cube(engine.memory.space(1).read(DST, 2 * surf), np.uint16, 32, 2, 3, line, surf)
    full = cube.copy()
    full[channels:] = 0                                  # what pack_cube left in memory
    cand, wmax, lut, counts = lrn_fp16_reference(full, channels, cfg, le, lo)
    assert error_ratio(got, cand, wmax, lut) <= 1.0
    view = engine.regs["CDP"].view(0)
    registers = {"lut_uflow": "D_PERF_LUT_UFLOW", "lut_oflow": "D_PERF_LUT_OFLOW",
                 "lut_hybrid": "D_PERF_LUT_HYBRID", "lut_le_hit": "D_PERF_LUT_LE_HIT",
                 "lut_lo_hit": "D_PERF_LUT_LO_HIT", "nan_input": "D_NAN_INPUT_NUM",
                 "inf_input": "D_INF_INPUT_NUM", "nan_output": "D_NAN_OUTPUT_NUM",
                 "out_saturation": "D_OUT_SATURATION"}
    assert {k: view.word(r) for k, r in registers.items()} == counts
    assert counts["nan_input"] and counts["inf_input"] and counts["nan_output"]
    # the INT converters' registers change nothing in FP16
    program, _, _ = cdp_fp16_program(cube[:channels], channels, cfg, le, lo, converters=True)
    other = Engine(load_hardware("nv_full"))
    other.run(program)
    assert np.array_equal(other.memory.space(1).read(DST, 2 * surf),
                          engine.memory.space(1).read(DST, 2 * surf))


if __name__ == "__main__":
    import sys
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    print(f"CDP FP16 LRN, {n} random cases, worst error / allowed: {sweep(n):.3f}")
