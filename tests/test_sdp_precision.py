"""SDP in INT16 and FP16 (NVDLA v1 nv_full).

INT16: the kernel and the units against an integer numpy reference written from the datapath
description (round half away from zero, 32-bit saturation, 17-bit C truncation, 16-bit output).
FP16: the kernel against a reference that follows the C model's order of operations on FP32 bit
patterns, its float steps done by the C-model float primitives (nvfloat_py, tested on their own
in test_nvfloat.py); on ordinary values (normal, in range) the same path in plain numpy float32
must give the same bits.  Counters (saturation, NaN output, NaN / INF input, LUT) are checked.
"""
from __future__ import annotations

import numpy as np
import pytest

from nvdla_sim.config import load_hardware
from nvdla_sim.engine import Engine
from nvdla_sim.kernels import nvfloat_py as nf
from nvdla_sim.kernels.sdp import ALGO_EQL, ALGO_MAX, ALGO_MIN, ALGO_SUM, LE_ENTRIES, LO_ENTRIES
from nvdla_sim.kernels.sdp import sdp_layer
from nvdla_sim.layout import read_cube, write_cube
from nvdla_sim.program import IntrNotify, MemLoad, RegisterProgram, RegWrite

from program_helpers import reg_writes

INT8, INT16, FP16 = 0, 1, 2
ATOM = 32                                # nv_full memory atom
SRC, OPS, DST = 0x80000000, 0x80100000, 0x80200000
F32_NAN_MASK = 0x7FFFFFFF

X_OFF = {"bypass": 1, "alu_bypass": 1, "alu_algo": 0, "alu_shift": 0, "mul_bypass": 1,
         "mul_prelu": 0, "mul_shift": 0, "relu_bypass": 1}
Y_OFF = {"bypass": 1, "alu_bypass": 1, "alu_algo": 0, "mul_bypass": 1, "mul_prelu": 0,
         "truncate": 0, "lut_bypass": 1, "alu_mem": 0, "mul_mem": 0,
         "alu_cvt": 0, "alu_cvt_offset": 0, "alu_cvt_scale": 1, "alu_cvt_truncate": 0,
         "mul_cvt": 0, "mul_cvt_offset": 0, "mul_cvt_scale": 1, "mul_cvt_truncate": 0}
TABLE = {"exponent": 0, "index_offset": 0, "index_select": 0, "start": 0, "end": 0,
         "uflow_scale": 0, "uflow_shift": 0, "oflow_scale": 0, "oflow_shift": 0}
OPERAND_NAMES = ("x1_alu", "x1_mul", "x2_alu", "x2_mul", "y_alu", "y_mul")


def config(proc: int, out: int, **stages) -> dict:
    cfg = {"x1": dict(X_OFF), "x2": dict(X_OFF), "y": dict(Y_OFF), "le": dict(TABLE),
           "lo": dict(TABLE), "priority": {"uflow_lo": 0, "oflow_lo": 0, "hybrid_lo": 0},
           "c": {"offset": 0, "scale": 1, "shift": 0, "eql": 0, "proc_precision": proc,
                 "out_precision": out, "nan_to_zero": 0}}
    for name, fields in stages.items():
        cfg[name].update(fields)
    return cfg


def run_kernel(x, cfg, ops=None, le=None, lo=None):
    """The kernel over a (N, 1, 1) cube; ops maps x1_alu .. y_mul to scalars or (N,) arrays."""
    x = np.asarray(x).astype(np.int64).astype(np.int32).reshape(-1, 1, 1)   # bits wrap to int32
    arrays = [np.broadcast_to(np.asarray((ops or {}).get(n, 0)).astype(np.int64)
                              .astype(np.int32).reshape(-1, 1, 1), x.shape) for n in OPERAND_NAMES]
    le = np.zeros(LE_ENTRIES, np.int64) if le is None else np.asarray(le, np.int64)
    lo = np.zeros(LO_ENTRIES, np.int64) if lo is None else np.asarray(lo, np.int64)
    out = np.empty(x.shape, np.int8 if cfg["c"]["out_precision"] == INT8 else np.int16)
    counters = sdp_layer(x, *arrays, le, lo, cfg, out)
    return out.reshape(-1), counters


# == INT16: integer reference ================================================================
def rnd(v: np.ndarray, shift) -> np.ndarray:
    """v / 2^shift rounded half away from zero (Python ints: no overflow)."""
    v = np.asarray(v, object)
    shift = np.broadcast_to(np.asarray(shift, object), v.shape)
    out = np.empty(v.shape, object)
    for i, (a, s) in enumerate(zip(v.flat, shift.flat)):
        a, s = int(a), int(s)
        q = (abs(a) + (1 << (s - 1))) >> s if s > 0 else abs(a)
        out.flat[i] = -q if a < 0 else q
    return out


def sat(v, bits: int) -> np.ndarray:
    hi = (1 << (bits - 1)) - 1
    return np.clip(np.asarray(v, object), -hi - 1, hi)


def int_reference(x, x1_alu, x1_shift, x1_mul, x1_mul_shift, x1_prelu, bn_relu,
                  y_mul, y_trunc, y_alu, offset, scale, shift, out_bits):
    """BS: ALU SUM of the shifted operand, MUL (PReLU) and truncate; BN: ReLU only;
    EW: MUL (register, truncate), ALU MAX (register); C: offset, scale, shift."""
    v = np.asarray(x, object) + sat(np.asarray(x1_alu, object) * (1 << x1_shift), 32)
    keep = x1_prelu & (v >= 0)
    wrapped = (v + 2**31) % 2**32 - 2**31          # a PReLU pass-through keeps the low 32 bits
    v = np.where(keep, wrapped, sat(rnd(v * np.asarray(x1_mul, object), x1_mul_shift), 32))
    if bn_relu:
        v = np.maximum(v, 0)
    v = sat(rnd(v * y_mul, y_trunc), 32)
    v = np.maximum(v, y_alu)
    t = (v - offset) * scale
    r17 = sat(rnd(t, shift), 17)
    out = sat(r17, out_bits)
    # the C model flags a saturation when the truncated quotient is not within 1 of the result
    saturations = int(np.count_nonzero(np.abs((t // 2**shift) - r17) > 1))
    return out.astype(np.int64), saturations


@pytest.mark.parametrize("prelu", [0, 1])
def test_int16_kernel_matches_integer_reference(prelu):
    rng = np.random.default_rng(11 + prelu)
    n = 4000
    x = rng.integers(-2**31, 2**31, n) >> rng.integers(0, 31, n)      # all magnitudes
    x1_alu = rng.integers(-2**15, 2**15, n)
    x1_mul = rng.integers(-2**15, 2**15, n)
    cfg = config(INT16, INT16,
                 x1={"bypass": 0, "alu_bypass": 0, "alu_algo": ALGO_SUM, "alu_shift": 3,
                     "mul_bypass": 0, "mul_prelu": prelu, "mul_shift": 9},
                 x2={"bypass": 0, "relu_bypass": 0},
                 y={"bypass": 0, "mul_bypass": 0, "truncate": 4, "alu_bypass": 0,
                    "alu_algo": ALGO_MAX},
                 c={"offset": -1234, "scale": -3, "shift": 5})
    out, counters = run_kernel(x, cfg, {"x1_alu": x1_alu, "x1_mul": x1_mul, "y_mul": 7,
                                        "y_alu": -5000})
    expected, saturations = int_reference(x, x1_alu, 3, x1_mul, 9, prelu, True, 7, 4, -5000,
                                          -1234, -3, 5, 16)
    assert np.array_equal(out, expected)
    assert counters["out_saturation"] == saturations > 0
    assert counters["nan_output"] == 0


def test_int16_output_saturates_to_16_bits_and_counts_17_bit_overflow():
    x = [40000, -40000, 70000, -70000, 32767, -32768, 5]
    out, counters = run_kernel(x, config(INT16, INT16))
    assert out.tolist() == [32767, -32768, 32767, -32768, 32767, -32768, 5]
    assert counters["out_saturation"] == 2            # only |x| >= 2^16 passes 17 bits


def test_int16_processing_with_fp16_output_converts_the_17_bit_result():
    x = np.array([0, 1, -1, 2049, 65535, -65536, 100000, 3], np.int64)
    out, counters = run_kernel(x, config(INT16, FP16))
    r17 = np.clip(x, -2**16, 2**16 - 1)
    expected = np.clip(r17.astype(np.float32), -65504, 65504).astype(np.float16)
    assert np.array_equal(out.view(np.float16), expected)     # RNE: 2049 -> 2048
    assert counters["out_saturation"] == np.count_nonzero(np.abs(expected) == 65504)


# == FP16: reference following the C model's order ==========================================
def f16(values) -> np.ndarray:
    return np.asarray(values, np.float16).view(np.uint16).astype(np.int64)


def f32(values) -> np.ndarray:
    return np.asarray(values, np.float32).view(np.uint32).astype(np.int64)


def is_nan16(b):
    return ((b >> 10) & 0x1F == 0x1F) & (b & 0x3FF != 0)


def is_nan32(b):
    return ((b >> 23) & 0xFF == 0xFF) & (b & 0x7FFFFF != 0)


def widen_op(op16, ntz):
    op16 = np.asarray(op16, np.int64) & 0xFFFF
    if ntz:
        op16 = np.where(is_nan16(op16), 0, op16)
    return nf.fp16_to_fp32(op16).astype(np.int64)


def alu_ref(algo, a, b):
    if algo == ALGO_SUM:
        return nf.fp32_add(a, b).astype(np.int64)
    if algo == ALGO_MAX:
        return nf.fp32_max(a, b).astype(np.int64)
    if algo == ALGO_MIN:
        return nf.fp32_min(a, b).astype(np.int64)
    return (np.asarray(a) != np.asarray(b)).astype(np.int64)        # EQL: integer 0 / 1


def fp_reference(x32, cfg, ops, le=None, lo=None):
    """The C model's FP16 path, stage by stage, on FP32 bit patterns; returns output words."""
    ntz = bool(cfg["c"]["nan_to_zero"])
    v = np.asarray(x32, np.int64) & 0xFFFFFFFF
    if ntz:
        v = np.where(is_nan32(v), 0, v)
    for name in ("x1", "x2"):
        s = cfg[name]
        if s["bypass"]:
            continue
        if not s["alu_bypass"]:
            v = alu_ref(s["alu_algo"], v, widen_op(ops.get(f"{name}_alu", 0), ntz))
        if not s["mul_bypass"]:
            product = nf.fp32_mul(v, widen_op(ops.get(f"{name}_mul", 0), ntz)).astype(np.int64)
            v = np.where(bool(s["mul_prelu"]) & (v >> 31 == 0), v, product)
        if not s["relu_bypass"]:
            v = nf.fp_relu(v, 8, 23).astype(np.int64)
    y = cfg["y"]
    if not y["bypass"]:
        for kind in ("mul", "alu"):
            if y[f"{kind}_bypass"]:
                continue
            raw = np.asarray(ops.get(f"y_{kind}", 0), np.int64)
            op = widen_op(raw, ntz) if y[f"{kind}_mem"] else raw & 0xFFFFFFFF
            if kind == "mul":
                v = np.where(bool(y["mul_prelu"]) & (v >> 31 == 0), v,
                             nf.fp32_mul(v, op).astype(np.int64))
            else:
                v = alu_ref(y["alu_algo"], v, op)
        if not y["lut_bypass"]:
            v = lut_reference(v, cfg, le, lo)
    o = nf.fp32_to_fp16(v).astype(np.int64)
    if cfg["c"]["out_precision"] == INT16:
        o = nf.fp16_to_int(o) & 0xFFFF
    return o


def lut_reference(v, cfg, le, lo):
    """LUT of the FP path: index from x - start, hit = FP17 blend, miss = FP17 slope."""
    v = np.asarray(v, np.int64)
    tables = {}
    for name, t, values, last in (("le", cfg["le"], le, 64), ("lo", cfg["lo"], lo, 256)):
        d = nf.fp32_sub(v, t["start"] & 0xFFFFFFFF).astype(np.int64)
        under = (d >> 31 == 1) | (d & 0x7FFFFFFF == 0) | is_nan32(d)
        if t["exponent"]:
            octave = ((d >> 23) & 0xFF) - 127 - t["index_offset"]
            under |= octave < 0
            index, frac = octave, (d & 0x7FFFFF) << 12
        else:
            index, frac = nf.fp_to_int_frac(d, 8, 23, t["index_select"], 8, 9, 35)
            index, frac = index.astype(np.int64), frac.astype(np.int64)
        over = ~under & (index >= last)
        hit = ~under & ~over
        tables[name] = (np.where(hit, index, np.where(over, last, 0)), np.where(hit, frac, 0),
                        under, over, hit, t, np.asarray(values, np.int64) & 0xFFFF)
    le_t, lo_t = tables["le"], tables["lo"]
    pri = cfg["priority"]
    use_lo = np.where(le_t[2] & lo_t[2], bool(pri["uflow_lo"]),
                      np.where(le_t[3] & lo_t[3], bool(pri["oflow_lo"]),
                               np.where(le_t[4] == lo_t[4], bool(pri["hybrid_lo"]), lo_t[4])))
    out = np.empty(v.shape, np.int64)
    for i in range(v.size):
        index, frac, under, over, hit, t, values = (a[i] if isinstance(a, np.ndarray) and
                                                    a.shape == v.shape else a
                                                    for a in (lo_t if use_lo[i] else le_t))
        y0 = nf.fp16_to_fp17(values[index]).astype(np.int64)
        if hit:
            a0 = 0x7C00 if frac == 0 else int(nf.fraction_to_fp((1 << 35) - int(frac), 35, 6, 10))
            a1 = int(nf.fraction_to_fp(int(frac), 35, 6, 10))
            b0 = nf.fp17_mul(a0, y0)
            b1 = nf.fp17_mul(a1, nf.fp16_to_fp17(values[index + 1]))
            out[i] = nf.fp17_to_fp32(nf.fp17_add(b0, b1))
            continue
        bias = 0
        if under and not use_lo[i] and t["exponent"]:
            bias = int(f32(np.float32(2.0 ** t["index_offset"])))
        offset = (t["start"] if under else t["end"]) & 0xFFFFFFFF
        scale = (t["uflow_scale"] if under else t["oflow_scale"]) & 0xFFFF
        a = nf.fp32_to_fp17(nf.fp32_sub(v[i], nf.fp32_add(offset, bias)))
        out[i] = nf.fp17_to_fp32(nf.fp17_add(y0, nf.fp17_mul(a, nf.fp16_to_fp17(scale))))
    return out


SPECIALS16 = [0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, -65504.0, 65472.0, 6e-8, -6e-8,
              6.1e-5, 1e-7, 1.0, -1.0, 0.5, 2049.0, 32000.0]


def random_fp16_bits(rng, n):
    """FP16 bit patterns: any pattern (NaNs, INFs, denormals included) and special values."""
    bits = rng.integers(0, 1 << 16, n)
    specials = f16(SPECIALS16)
    pick = rng.random(n) < 0.25
    bits[pick] = rng.choice(specials, pick.sum())
    return bits


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_fp16_x_and_y_stages_match_the_c_model_order(seed):
    """>= 1000 random elements per run through X1 (algo varies), X2 MUL / PReLU / ReLU, Y MUL
    (memory operand) and ALU (register FP32), C to FP16, with NaN flushing on odd seeds."""
    rng = np.random.default_rng(seed)
    n = 3000
    x16 = random_fp16_bits(rng, n)
    x32 = nf.fp16_to_fp32(x16).astype(np.int64)
    if seed == 3:    # from CACC: any FP32 bit pattern
        x32 = rng.integers(0, 1 << 32, n)
        x32[:200] = f32(np.float32([np.inf, -np.inf, np.nan, 3.4e38, -3.4e38, 1e-40, 65504.5,
                                    65520.0, 70000.0, -1e6] * 20))
    algo = [ALGO_SUM, ALGO_MAX, ALGO_MIN][seed % 3]
    ops = {"x1_alu": random_fp16_bits(rng, n), "x1_mul": random_fp16_bits(rng, n),
           "x2_mul": random_fp16_bits(rng, n), "y_mul": random_fp16_bits(rng, n),
           "y_alu": int(f32(np.float32(-1.5)))}
    cfg = config(FP16, FP16,
                 x1={"bypass": 0, "alu_bypass": 0, "alu_algo": algo, "alu_shift": 7,
                     "mul_bypass": 0},
                 x2={"bypass": 0, "mul_bypass": 0, "mul_prelu": 1, "relu_bypass": seed != 2},
                 y={"bypass": 0, "mul_bypass": 0, "mul_mem": 1, "alu_bypass": 0,
                    "alu_algo": ALGO_SUM},
                 c={"nan_to_zero": seed % 2, "offset": 99, "scale": 5, "shift": 3})  # unused
    out, counters = run_kernel(x32, cfg, ops)
    expected = fp_reference(x32, cfg, ops)
    assert np.array_equal(out.view(np.uint16), expected.astype(np.uint16))
    words = expected & 0xFFFF
    assert counters["out_saturation"] == np.count_nonzero(words & 0x7FFF == 0x7BFF) > 0
    assert counters["nan_output"] == np.count_nonzero(is_nan16(words))
    if seed % 2 == 0:
        assert counters["nan_output"] > 0
    assert counters["lut_hybrid"] == counters["lut_uflow"] == 0


def test_fp16_ordinary_values_give_the_float32_results():
    """Normal in-range values: BS adds and multiplies FP16 operands, BN applies ReLU, C rounds
    to FP16 -- the same bits as plain float32 arithmetic rounded to float16."""
    rng = np.random.default_rng(7)
    n = 2000
    x = (rng.uniform(0.25, 4, n) * rng.choice([-1, 1], n)).astype(np.float16)
    alu = (rng.uniform(0.25, 4, n) * rng.choice([-1, 1], n)).astype(np.float16)
    mul = (rng.uniform(0.25, 4, n) * rng.choice([-1, 1], n)).astype(np.float16)
    cfg = config(FP16, FP16, x1={"bypass": 0, "alu_bypass": 0, "alu_algo": ALGO_SUM,
                                 "mul_bypass": 0},
                 x2={"bypass": 0, "relu_bypass": 0})
    out, _ = run_kernel(f32(x.astype(np.float32)), cfg, {"x1_alu": f16(alu), "x1_mul": f16(mul)})
    v = (x.astype(np.float32) + alu.astype(np.float32)) * mul.astype(np.float32)
    expected = np.maximum(v, np.float32(0)).astype(np.float16)
    assert np.array_equal(out.view(np.float16), expected)


def test_fp16_to_int16_output_rounds_half_away_and_saturates():
    x = np.float32([2.5, -2.5, 3.49, 40000.0, -40000.0, np.inf, 0.0, -7.75])
    out, counters = run_kernel(f32(x), config(FP16, INT16))
    assert out.tolist() == [3, -3, 3, 32767, -32768, 32767, 0, -8]
    assert counters["out_saturation"] == 0            # counted for FP16 outputs only


def test_fp16_eql_gives_integer_flags():
    x = f32(np.float32([1.0, 2.0, -0.0, 0.0]))
    cfg = config(FP16, FP16, y={"bypass": 0, "alu_bypass": 0, "alu_algo": ALGO_EQL},
                 c={"eql": 1})
    out, counters = run_kernel(x, cfg, {"y_alu": int(f32(np.float32(2.0)))})
    assert counters["unequal"] and not out.any()
    out, counters = run_kernel(x[1:2], cfg, {"y_alu": int(f32(np.float32(2.0)))})
    assert not counters["unequal"]


@pytest.mark.parametrize("exponent, priorities", [(1, (0, 0, 0)), (0, (1, 1, 1)), (1, (1, 0, 1))])
def test_fp16_lut_matches_the_c_model_order(exponent, priorities):
    """LE (exponent or linear) and LO tables of FP16 entries: hits blend in FP17, misses
    extrapolate with FP16 slopes; counters per table."""
    rng = np.random.default_rng(20 + exponent)
    n = 1200
    x = np.concatenate([rng.uniform(-40, 300, n - 12),
                        [-np.inf, np.inf, np.nan, 0, 1e-30, 1e30, 4, 8, 16, 2.0**-3, 1000, -1]])
    x32 = f32(x.astype(np.float32))
    le = f16(rng.uniform(-8, 8, LE_ENTRIES))
    lo = f16(rng.uniform(-100, 100, LO_ENTRIES))
    cfg = config(FP16, FP16, y={"bypass": 0, "lut_bypass": 0})
    cfg["le"].update(exponent=exponent, index_offset=-2 if exponent else 0, index_select=-1,
                     start=int(f32(np.float32(1.0 if exponent else -16.0))),
                     end=int(f32(np.float32(2.0**30))), uflow_scale=int(f16(0.25)),
                     oflow_scale=int(f16(-0.5)))
    cfg["lo"].update(index_select=0, start=int(f32(np.float32(-20.0))),
                     end=int(f32(np.float32(236.0))), uflow_scale=int(f16(2.0)),
                     oflow_scale=int(f16(0.125)))
    cfg["priority"].update(uflow_lo=priorities[0], oflow_lo=priorities[1],
                           hybrid_lo=priorities[2])
    out, counters = run_kernel(x32, cfg, le=le, lo=lo)
    expected = fp_reference(x32, cfg, {}, le, lo)
    assert np.array_equal(out.view(np.uint16), expected.astype(np.uint16))
    assert counters["lut_hybrid"] + counters["lut_uflow"] + counters["lut_oflow"] == n
    assert counters["lut_uflow"] > 0 and counters["lut_oflow"] > 0
    assert counters["lut_le_hit"] > 0 and counters["lut_lo_hit"] > 0


# == the units on nv_full ======================================================================
def _program(width, height, channels, sdp, rdma, loads, proc, out, in_precision=None):
    cube = {"D_DATA_CUBE_WIDTH": {"WIDTH": width - 1},
            "D_DATA_CUBE_HEIGHT": {"HEIGHT": height - 1},
            "D_DATA_CUBE_CHANNEL": {"CHANNEL": channels - 1}}
    lanes = ATOM // (1 if proc == INT8 else 2)
    line, surf = width * ATOM, width * height * ATOM
    regs = {f"SDP.{k}": v for k, v in cube.items()}
    regs.update({f"SDP_RDMA.{k}": v for k, v in cube.items()})
    regs.update({"SDP.D_DATA_FORMAT": {"PROC_PRECISION": proc, "OUT_PRECISION": out},
                 "SDP.D_CVT_SCALE": {"CVT_SCALE": 1},
                 "SDP.D_DST_BASE_ADDR_LOW": {"DST_BASE_ADDR_LOW": DST},
                 "SDP.D_DST_DMA_CFG": {"DST_RAM_TYPE": 1},
                 "SDP.D_DST_LINE_STRIDE": {"DST_LINE_STRIDE": line},
                 "SDP.D_DST_SURFACE_STRIDE": {"DST_SURFACE_STRIDE": surf},
                 "SDP_RDMA.D_FEATURE_MODE_CFG": {
                     "IN_PRECISION": proc if in_precision is None else in_precision,
                     "PROC_PRECISION": proc},
                 "SDP_RDMA.D_SRC_BASE_ADDR_LOW": {"SRC_BASE_ADDR_LOW": SRC},
                 "SDP_RDMA.D_SRC_DMA_CFG": {"SRC_RAM_TYPE": 1},
                 "SDP_RDMA.D_SRC_LINE_STRIDE": {"SRC_LINE_STRIDE": line},
                 "SDP_RDMA.D_SRC_SURFACE_STRIDE": {"SRC_SURFACE_STRIDE": surf}})
    regs.update({f"SDP.{k}": v for k, v in sdp.items()})
    regs.update({f"SDP_RDMA.{k}": v for k, v in rdma.items()})
    enable = reg_writes({"SDP_RDMA.D_OP_ENABLE": {"OP_EN": 1}, "SDP.D_OP_ENABLE": {"OP_EN": 1}},
                    1)
    return RegisterProgram("sdp_precision", [
        *[MemLoad("pri_mem", a, d) for a, d in loads], *reg_writes(regs, 1),
        IntrNotify("SDP", 0, "sdp_done"), *enable]), lanes, line, surf


class _Space:
    """A bytearray address space for building memory images with layout.write_cube."""
    def __init__(self, size):
        self.data = np.zeros(size, np.uint8)

    def read(self, addr, n):
        return self.data[addr:addr + n].copy()

    def write(self, addr, values):
        self.data[addr:addr + len(values)] = values


def _image(cube, lanes, line, surf):
    space = _Space(surf * cube.shape[0] // lanes)
    write_cube(space, 0, cube, line, surf, lanes)
    return space.data


@pytest.mark.parametrize("op_size", [1, 2])
def test_int16_units_memory_operands_in_surfaces_of_16(op_size):
    """INT16 in and out on nv_full: BS adds a per-element operand (1 or 2 bytes, 16 per surface
    whatever its size), BN multiplies by a per-channel INT16 operand; 20 channels = 2 surfaces."""
    width, height, channels = 3, 2, 20
    rng = np.random.default_rng(5)
    shape = (32, height, width)
    x = rng.integers(-2**15, 2**15, shape).astype(np.int16)
    bs = rng.integers(-128, 128, shape).astype(np.int8 if op_size == 1 else np.int16)
    bn = rng.integers(-300, 300, 32).astype(np.int16)
    bs_line, bs_surf = width * 16 * op_size, width * height * 16 * op_size
    program, lanes, line, surf = _program(
        width, height, channels,
        {"D_DP_BS_CFG": {"BS_BYPASS": 0, "BS_ALU_BYPASS": 0, "BS_ALU_ALGO": ALGO_SUM,
                         "BS_MUL_BYPASS": 1, "BS_RELU_BYPASS": 1},
         "D_DP_BS_ALU_CFG": {"BS_ALU_SRC": 1, "BS_ALU_SHIFT_VALUE": 2},
         "D_DP_BN_CFG": {"BN_BYPASS": 0, "BN_ALU_BYPASS": 1, "BN_MUL_BYPASS": 0,
                         "BN_RELU_BYPASS": 0},
         "D_DP_BN_MUL_CFG": {"BN_MUL_SRC": 1, "BN_MUL_SHIFT_VALUE": 6},
         "D_PERF_ENABLE": {"PERF_SAT_EN": 1}},
        {"D_BRDMA_CFG": {"BRDMA_DISABLE": 0, "BRDMA_DATA_USE": 1, "BRDMA_DATA_SIZE": op_size - 1,
                         "BRDMA_DATA_MODE": 1, "BRDMA_RAM_TYPE": 1},
         "D_BS_BASE_ADDR_LOW": {"BS_BASE_ADDR_LOW": OPS},
         "D_BS_LINE_STRIDE": {"BS_LINE_STRIDE": bs_line},
         "D_BS_SURFACE_STRIDE": {"BS_SURFACE_STRIDE": bs_surf},
         "D_NRDMA_CFG": {"NRDMA_DISABLE": 0, "NRDMA_DATA_USE": 0, "NRDMA_DATA_SIZE": 1,
                         "NRDMA_DATA_MODE": 0, "NRDMA_RAM_TYPE": 1},
         "D_BN_BASE_ADDR_LOW": {"BN_BASE_ADDR_LOW": OPS + 0x10000},
         "D_ERDMA_CFG": {"ERDMA_DISABLE": 1}},
        [], INT16, INT16)
    program.commands[0:0] = [MemLoad("pri_mem", SRC, _image(x, 16, line, surf)),
                             MemLoad("pri_mem", OPS, _image(bs, 16, bs_line, bs_surf)),
                             MemLoad("pri_mem", OPS + 0x10000, bn.view(np.uint8))]
    engine = Engine(load_hardware("nv_full"))
    engine.run(program)
    got = read_cube(engine.memory.space(1), DST, width, height, channels, line, surf, 16,
                    np.int16)
    v = x.astype(object) + bs.astype(object) * 4
    v = sat(rnd(v * bn.astype(object).reshape(-1, 1, 1), 6), 32)
    expected = sat(np.maximum(v, 0), 16)
    assert np.array_equal(got, expected.astype(np.int64))
    view = engine.regs["SDP"].view(0)
    assert view.word("D_PERF_OUT_SATURATION") == np.count_nonzero(np.maximum(v, 0) >= 2**16)


def test_fp16_units_count_nan_and_inf_inputs_and_nan_outputs():
    """FP16 in memory through BS MUL by a register FP16 operand to FP16 out: SDP_RDMA's NaN /
    INF input counters and SDP's NaN output and saturation counters."""
    width, height, channels = 2, 2, 16
    rng = np.random.default_rng(9)
    bits = rng.integers(0, 1 << 16, (16, height, width))
    bits.flat[:6] = f16([np.inf, -np.inf, np.nan, 65504, -30000, 3.0])
    x = bits.astype(np.uint16).view(np.float16)
    program, lanes, line, surf = _program(
        width, height, channels,
        {"D_DP_BS_CFG": {"BS_BYPASS": 0, "BS_ALU_BYPASS": 1, "BS_MUL_BYPASS": 0,
                         "BS_RELU_BYPASS": 1},
         "D_DP_BS_MUL_SRC_VALUE": {"BS_MUL_OPERAND": int(f16(2.0))},
         "D_PERF_ENABLE": {"PERF_SAT_EN": 1, "PERF_NAN_INF_COUNT_EN": 1}},
        {"D_PERF_ENABLE": {"PERF_NAN_INF_COUNT_EN": 1}},
        [(SRC, _image(x, 16, 2 * 32, 4 * 32))], FP16, FP16)
    engine = Engine(load_hardware("nv_full"))
    engine.run(program)
    got = read_cube(engine.memory.space(1), DST, width, height, channels, line, surf, 16,
                    np.int16).view(np.uint16).astype(np.int64)
    cfg = config(FP16, FP16, x1={"bypass": 0, "mul_bypass": 0})
    expected = fp_reference(nf.fp16_to_fp32(bits.reshape(-1)), cfg,
                            {"x1_mul": int(f16(2.0))}).reshape(bits.shape)
    assert np.array_equal(got, expected)
    nan_in = np.count_nonzero(is_nan16(bits))
    inf_in = np.count_nonzero(((bits >> 10) & 0x1F == 0x1F) & (bits & 0x3FF == 0))
    rdma = engine.regs["SDP_RDMA"].view(0)
    assert rdma.word("D_STATUS_NAN_INPUT_NUM") == nan_in > 0
    assert rdma.word("D_STATUS_INF_INPUT_NUM") == inf_in >= 2
    sdp = engine.regs["SDP"].view(0)
    assert sdp.word("D_STATUS_NAN_OUTPUT_NUM") == np.count_nonzero(is_nan16(expected)) > 0
    assert sdp.word("D_PERF_OUT_SATURATION") == np.count_nonzero(expected & 0x7FFF == 0x7BFF) > 0


def test_fp16_flying_input_is_fp32_bit_patterns_from_cacc():
    """Flying mode: CACC hands FP32 bit patterns (uint32); SDP adds a register FP16 bias and
    writes FP16 (the C stage rounds FP32 to FP16)."""
    shape = (16, 2, 2)
    rng = np.random.default_rng(4)
    x = rng.integers(0, 1 << 32, shape, dtype=np.uint64).astype(np.uint32)
    x.flat[:4] = f32(np.float32([np.inf, 70000.0, 1.0000001, -3.0]))
    program, lanes, line, surf = _program(
        2, 2, 16, {"D_FEATURE_MODE_CFG": {"FLYING_MODE": 1},
                   "D_DP_BS_CFG": {"BS_BYPASS": 0, "BS_ALU_BYPASS": 0, "BS_ALU_ALGO": ALGO_SUM,
                                   "BS_MUL_BYPASS": 1, "BS_RELU_BYPASS": 1},
                   "D_DP_BS_ALU_SRC_VALUE": {"BS_ALU_OPERAND": int(f16(0.5))}},
        {}, [], FP16, FP16)
    program.commands = [c for c in program.commands
                        if getattr(c, "name", "") != "SDP_RDMA.D_OP_ENABLE"]
    engine = Engine(load_hardware("nv_full"))
    engine.channel("cacc->sdp").put(x)
    engine.run(program)
    got = read_cube(engine.memory.space(1), DST, 2, 2, 16, line, surf, 16, np.int16)
    cfg = config(FP16, FP16, x1={"bypass": 0, "alu_bypass": 0, "alu_algo": ALGO_SUM})
    expected = fp_reference(x.reshape(-1), cfg, {"x1_alu": int(f16(0.5))}).reshape(shape)
    assert np.array_equal(got.view(np.uint16).astype(np.int64), expected)


@pytest.mark.parametrize("out", [INT16, FP16])
def test_int8_processing_written_as_16_bit_splits_each_surface_in_two(out):
    """PROC INT8 with an INT16 / FP16 output: 40 channels are 2 INT8 surfaces in, 4 surfaces of
    16 out (channels 0-15, 16-31, 32-47, 48-63 with the padding lanes)."""
    width, height, channels = 3, 2, 40
    rng = np.random.default_rng(8)
    x = rng.integers(-128, 128, (64, height, width)).astype(np.int8)
    program, lanes, line, surf = _program(
        width, height, channels,
        {"D_DP_BS_CFG": {"BS_BYPASS": 0, "BS_ALU_BYPASS": 1, "BS_MUL_BYPASS": 0,
                         "BS_RELU_BYPASS": 1},
         "D_DP_BS_MUL_SRC_VALUE": {"BS_MUL_OPERAND": 1000},
         "D_CVT_SHIFT": {"CVT_SHIFT": 2},
         "D_DST_LINE_STRIDE": {"DST_LINE_STRIDE": width * ATOM},
         "D_DST_SURFACE_STRIDE": {"DST_SURFACE_STRIDE": width * height * ATOM}},
        {}, [], INT8, out)
    program.commands[0:0] = [MemLoad("pri_mem", SRC, _image(x, 32, line, surf))]
    engine = Engine(load_hardware("nv_full"))
    engine.run(program)
    got = read_cube(engine.memory.space(1), DST, width, height, 64, width * ATOM,
                    width * height * ATOM, 16, np.int16)
    r17 = sat(rnd(x.astype(object) * 1000, 2), 17)
    if out == INT16:
        expected = sat(r17, 16).astype(np.int16)
    else:
        expected = np.clip(r17.astype(np.float32), -65504, 65504).astype(np.float16)
    assert np.array_equal(got.view(expected.dtype), expected)


@pytest.mark.parametrize("compute_values", [True, False])
def test_int16_input_processed_as_int8(compute_values):
    """SDP_RDMA IN_PRECISION INT16 with PROC_PRECISION INT8: 16-bit surfaces are read in pairs
    (40 channels: 4 surfaces of 16, the last all padding) and processed 32 channels at a time with
    their 16-bit values; C shifts them into INT8."""
    width, height, channels = 2, 3, 40
    rng = np.random.default_rng(12)
    x = rng.integers(-2**15, 2**15, (64, height, width)).astype(np.int16)
    program, lanes, line, surf = _program(
        width, height, channels, {"D_CVT_SHIFT": {"CVT_SHIFT": 7},
                                  "D_DST_LINE_STRIDE": {"DST_LINE_STRIDE": width * ATOM},
                                  "D_DST_SURFACE_STRIDE": {"DST_SURFACE_STRIDE": 0x400}},
        {"D_SRC_LINE_STRIDE": {"SRC_LINE_STRIDE": width * ATOM},
         "D_SRC_SURFACE_STRIDE": {"SRC_SURFACE_STRIDE": 0x200}},
        [], INT8, INT8, in_precision=INT16)
    program.commands[0:0] = [MemLoad("pri_mem", SRC, _image(x, 16, width * ATOM, 0x200))]
    engine = Engine(load_hardware("nv_full"), compute_values=compute_values)
    result = engine.run(program)
    assert result.cycles > 0
    if not compute_values:
        return
    got = read_cube(engine.memory.space(1), DST, width, height, 64, width * ATOM, 0x400, 32)
    assert np.array_equal(got, sat(rnd(x.astype(object), 7), 8).astype(np.int8))


def test_mixed_precisions_that_change_surface_size_are_unsupported():
    from nvdla_sim.errors import UnsupportedError
    program, *_ = _program(1, 1, 16, {}, {}, [], INT16, INT8)
    with pytest.raises(UnsupportedError, match="OUT_PRECISION INT8 .a 16-bit cube written"):
        Engine(load_hardware("nv_full")).run(program)
    program, *_ = _program(1, 1, 16, {}, {}, [], INT16, INT16, in_precision=INT8)
    with pytest.raises(UnsupportedError, match="IN_PRECISION INT8 processed as INT16"):
        Engine(load_hardware("nv_full")).run(program)


def test_timing_only_runs_for_every_precision():
    """The core takes 16 elements a cycle on nv_full: an INT16 / FP16 cube has twice the atoms
    of an INT8 one and each takes half the time, so the layer takes about as long."""
    cycles = {}
    for proc in (INT8, INT16, FP16):
        program, *_ = _program(32, 32, 64, {}, {}, [], proc, proc)
        engine = Engine(load_hardware("nv_full"), compute_values=False)
        cycles[proc] = engine.run(program).cycles
    assert cycles[INT16] == cycles[FP16]
    assert cycles[INT8] > 4096 and abs(cycles[INT16] - cycles[INT8]) < 0.05 * cycles[INT8]
