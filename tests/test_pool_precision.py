"""PDP and CDP in INT16 (and FP16) on nv_full: kernels against independent references written from
the C model's rules, the units through the engine, the official v1 trace, timing per element size.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from nvdla_sim.config import load_hardware
from nvdla_sim.datatype import INT16
from nvdla_sim.engine import Engine
from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.kernels.cdp import LE_ENTRIES, LO_ENTRIES, lrn_int
from nvdla_sim.kernels.pdp import POOL_AVERAGE, POOL_MAX, POOL_MIN, pool_int
from nvdla_sim.program import IntrNotify, MemLoad, RegisterProgram, RegWrite
from nvdla_sim.regs import register_map
from nvdla_sim.units.pdp import pad_value

from program_helpers import reg_writes

SRC = 0x8000_0000
DST = 0x8010_0000
ATOM_BYTES = 32                    # nv_full memory atom


# -- independent references --------------------------------------------------------------------
def round_half_away(num: int, shift: int) -> int:
    """num / 2^shift to the nearest integer, ties away from zero (exact integers)."""
    if shift <= 0:
        return num << -shift
    q, r = divmod(abs(num), 1 << shift)
    q += 2 * r >= 1 << shift
    return q if num >= 0 else -q


def wrap(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def clamp(v: int, bits: int) -> int:
    hi = (1 << (bits - 1)) - 1
    return max(-hi - 1, min(hi, v))


def pdp_reference(cube, out_h, out_w, method, kw, kh, sw, sh, pad_left, pad_top, pads, rw, rh,
                  bits):
    """Pool a (C, H, W) integer cube; the average's accumulator is 2*bits wide and wraps."""
    c_n, h, w = cube.shape
    out = np.zeros((c_n, out_h, out_w), np.int64)
    for oy in range(out_h):
        for ox in range(out_w):
            y0, x0 = oy * sh - pad_top, ox * sw - pad_left
            ys = [y for y in range(y0, y0 + kh) if 0 <= y < h]
            xs = [x for x in range(x0, x0 + kw) if 0 <= x < w]
            win = cube[:, ys][:, :, xs].astype(np.int64)
            if method == POOL_MAX:
                out[:, oy, ox] = win.max(axis=(1, 2))
            elif method == POOL_MIN:
                out[:, oy, ox] = win.min(axis=(1, 2))
            else:
                for c in range(c_n):
                    s = int(win[c].sum())
                    if kw > len(xs):
                        s += len(ys) * pads[kw - len(xs) - 1]
                    if kh > len(ys):
                        s += pads[kh - len(ys) - 1] * kw
                    s = wrap(s, 2 * bits)
                    v = round_half_away(round_half_away(s * rw, 16) * rh, 16)
                    out[c, oy, ox] = wrap(v, bits)
    return out


def lut_reference(ss, table, start, end, select, uscale, ushift, oscale, oshift, last,
                  exponent=False, index_offset=0):
    """One LUT lookup as the C model's integer path does it: (value, 'hit'|'under'|'over')."""
    def edge(y0, dx, scale, shift):
        return clamp(y0 + clamp(round_half_away(dx * scale, shift), 56), 16)
    d = ss - start
    if exponent:
        log2_d = d.bit_length() - 1 if d > 0 else 0
        idx = log2_d - index_offset
        if d <= 0 or idx < 0:
            bias = 0 if index_offset < 0 else 1 << index_offset
            return edge(table[0], d - bias, uscale, ushift), "under"
        if idx >= last:
            return edge(table[last], ss - end, oscale, oshift), "over"
        frac = d - (1 << log2_d)
        frac = frac >> (log2_d - 16) if log2_d > 16 else frac << (16 - log2_d)
    else:
        idx = d << -select if select < 0 else d >> select
        if d <= 0 or idx < 0:
            return edge(table[0], d, uscale, ushift), "under"
        if idx >= last:
            return edge(table[last], ss - end, oscale, oshift), "over"
        if select < 0:
            frac = 0
        else:
            frac = d & ((1 << select) - 1)
            frac = frac >> (select - 16) if select > 16 else frac << (16 - select)
    y0, y1 = table[idx], table[idx + 1]
    return clamp(y0 + clamp(round_half_away((y1 - y0) * frac, 16), 56), 16), "hit"


def lrn_reference(cube, channels, cfg, le, lo, bits):
    """INT8/INT16 LRN per the C model (see kernels/cdp.pyx); returns (out, counters)."""
    lanes, h, w = cube.shape
    out = np.zeros(cube.shape, np.int64)
    n = dict.fromkeys(("lut_uflow", "lut_oflow", "lut_hybrid", "lut_le_hit", "lut_lo_hit",
                       "out_saturation"), 0)
    half = cfg["normalz_len"] + 1
    for y in range(h):
        for x in range(w):
            xc = [clamp(round_half_away((int(cube[c, y, x]) - cfg["datin_offset"])
                                        * cfg["datin_scale"], cfg["datin_shift"]), bits + 1)
                  if c < channels else 0 for c in range(lanes)]
            for c in range(lanes):
                if cfg["sqsum_bypass"]:
                    ss = xc[c]
                else:
                    ss = sum(xc[j] ** 2 for j in range(max(0, c - half), min(lanes, c + half + 1)))
                le_y, le_o = lut_reference(
                    ss, le, cfg["le_start"], cfg["le_end"], cfg["le_index_select"],
                    cfg["le_uflow_scale"], cfg["le_uflow_shift"], cfg["le_oflow_scale"],
                    cfg["le_oflow_shift"], 64, cfg["le_exponent"], cfg["le_index_offset"])
                lo_y, lo_o = lut_reference(
                    ss, lo, cfg["lo_start"], cfg["lo_end"], cfg["lo_index_select"],
                    cfg["lo_uflow_scale"], cfg["lo_uflow_shift"], cfg["lo_oflow_scale"],
                    cfg["lo_oflow_shift"], 256)
                if le_o == lo_o == "under":
                    lut, key = (lo_y if cfg["uflow_priority"] else le_y), "lut_uflow"
                elif le_o == lo_o == "over":
                    lut, key = (lo_y if cfg["oflow_priority"] else le_y), "lut_oflow"
                elif (le_o == "hit") != (lo_o == "hit"):
                    lut, key = (le_y, "lut_le_hit") if le_o == "hit" else (lo_y, "lut_lo_hit")
                else:
                    lut, key = (lo_y if cfg["hybrid_priority"] else le_y), "lut_hybrid"
                n[key] += 1
                v = lut if cfg["mul_bypass"] else lut * xc[c]
                r = round_half_away((v - cfg["datout_offset"]) * cfg["datout_scale"],
                                    cfg["datout_shift"])
                out[c, y, x] = clamp(r, bits)
                n["out_saturation"] += out[c, y, x] != r
    return out, n


# -- PDP INT16 kernel --------------------------------------------------------------------------
def random_pdp_case(rng: np.random.Generator, bits: int):
    kw, kh = (int(v) for v in rng.integers(1, 9, 2))
    sw, sh = (int(v) for v in rng.integers(1, 5, 2))
    pl, pt = int(rng.integers(0, min(kw, 8))), int(rng.integers(0, min(kh, 8)))
    w, h = (int(v) for v in rng.integers(max(kw, kh), 12, 2))
    out_w, out_h = (w + pl - kw) // sw + 1, (h + pt - kh) // sh + 1
    c = int(rng.integers(1, 20))
    lo, hi = -(1 << (bits - 1)), 1 << (bits - 1)
    cube = rng.integers(lo, hi, (c, h, w)).astype(np.int16 if bits == 16 else np.int8)
    pads = [int(v) for v in rng.integers(-(1 << 18), 1 << 18, 7)]
    recip = [int(v) for v in rng.integers(0, 1 << 17, 2)]
    return cube, out_h, out_w, kw, kh, sw, sh, pl, pt, pads, recip


@pytest.mark.parametrize("method", [POOL_MAX, POOL_MIN, POOL_AVERAGE])
def test_pdp_int16_kernel_matches_reference(method):
    rng = np.random.default_rng(16 + method)
    for _ in range(40):
        cube, oh, ow, kw, kh, sw, sh, pl, pt, pads, (rw, rh) = random_pdp_case(rng, 16)
        out = np.zeros((cube.shape[0], oh, ow), np.int16)
        pool_int(cube, out, method, kw, kh, sw, sh, pl, pt, np.array(pads, np.int64), rw, rh)
        ref = pdp_reference(cube, oh, ow, method, kw, kh, sw, sh, pl, pt, pads, rw, rh, 16)
        assert np.array_equal(out, ref), (kw, kh, sw, sh, pl, pt)


def test_pdp_int16_average_wraps_in_32_bits_and_keeps_16():
    # 4 x 30000 = 120000 does not fit 16 bits but does 32: x 1/4 gives 30000 back.
    cube = np.full((1, 2, 2), 30000, np.int16)
    out = np.zeros((1, 1, 1), np.int16)
    pool_int(cube, out, POOL_AVERAGE, 2, 2, 1, 1, 0, 0, np.zeros(7, np.int64), 0x8000, 0x8000)
    assert out[0, 0, 0] == 30000
    # Q16 "1" twice on a 32-bit sum keeps only its low 16 bits (no saturation).
    pool_int(cube, out, POOL_AVERAGE, 2, 2, 1, 1, 0, 0, np.zeros(7, np.int64), 0x10000, 0x10000)
    assert out[0, 0, 0] == wrap(120000, 16)


@pytest.mark.parametrize("raw, sign_bit, value", [
    (0x7FFF, 15, 0x7FFF),
    (0x8000, 15, -0x8000),            # sign bit 15 set: ones above it
    (0x48000, 15, -0x8000),
    (0x40000, 15, 0x40000),           # sign clear: the upper bits stay as written
    (0x7FFFF, 18, -1),
    (0x10000, 16, -0x10000),
])
def test_pdp_int16_pad_values_sign_extend_into_32_bits(raw, sign_bit, value):
    assert pad_value(raw, sign_bit, 32) == value


# -- PDP units in INT16 on nv_full -------------------------------------------------------------
def pack_cube(cube: np.ndarray, line_stride: int, surf_stride: int) -> np.ndarray:
    """A (C, H, W) cube as a memory image: surfaces of one 32-byte atom per pixel."""
    per_atom = ATOM_BYTES // cube.dtype.itemsize
    c_n, h, w = cube.shape
    n_surf = -(-c_n // per_atom)
    lanes = np.zeros((n_surf * per_atom, h, w), cube.dtype)
    lanes[:c_n] = cube
    image = np.zeros(n_surf * surf_stride, np.uint8)
    for s in range(n_surf):
        for y in range(h):
            atoms = lanes[s * per_atom:(s + 1) * per_atom, y].T.copy()      # (W, per_atom)
            start = s * surf_stride + y * line_stride
            image[start:start + w * ATOM_BYTES] = atoms.view(np.uint8).reshape(-1)
    return image


def unpack_cube(raw: np.ndarray, dtype, lanes: int, h: int, w: int, line_stride: int,
                surf_stride: int) -> np.ndarray:
    per_atom = ATOM_BYTES // np.dtype(dtype).itemsize
    out = np.zeros((lanes, h, w), dtype)
    for s in range(lanes // per_atom):
        for y in range(h):
            start = s * surf_stride + y * line_stride
            line = raw[start:start + w * ATOM_BYTES].view(dtype).reshape(w, per_atom)
            out[s * per_atom:(s + 1) * per_atom, y] = line.T
    return out


def pdp_program(cube: np.ndarray, input_data: int, method: int, kernel=(3, 3), stride=(2, 2),
                pad=(1, 1), pads=(0,) * 7, recip=(0x5555, 0x5555), flying_off=True):
    """A PDP layer on nv_full: kernel/stride/pad are (width, height); pads PAD_VALUE_1X..7X."""
    c_n, h, w = cube.shape
    (kw, kh), (sw, sh), (pl, pt) = kernel, stride, pad
    ow, oh = (w + pl - kw) // sw + 1, (h + pt - kh) // sh + 1
    pr, pb = max(0, (ow - 1) * sw + kw - w - pl), max(0, (oh - 1) * sh + kh - h - pt)
    line, surf = w * ATOM_BYTES + 64, (w * ATOM_BYTES + 64) * h + 32
    dst_line, dst_surf = ow * ATOM_BYTES, ow * ATOM_BYTES * oh
    regs = {
        "PDP.D_DATA_CUBE_IN_WIDTH": {"CUBE_IN_WIDTH": w - 1},
        "PDP.D_DATA_CUBE_IN_HEIGHT": {"CUBE_IN_HEIGHT": h - 1},
        "PDP.D_DATA_CUBE_IN_CHANNEL": {"CUBE_IN_CHANNEL": c_n - 1},
        "PDP.D_DATA_CUBE_OUT_WIDTH": {"CUBE_OUT_WIDTH": ow - 1},
        "PDP.D_DATA_CUBE_OUT_HEIGHT": {"CUBE_OUT_HEIGHT": oh - 1},
        "PDP.D_DATA_CUBE_OUT_CHANNEL": {"CUBE_OUT_CHANNEL": c_n - 1},
        "PDP.D_OPERATION_MODE_CFG": {"POOLING_METHOD": method, "FLYING_MODE": int(flying_off)},
        "PDP.D_POOLING_KERNEL_CFG": {"KERNEL_WIDTH": kw - 1, "KERNEL_HEIGHT": kh - 1,
                                     "KERNEL_STRIDE_WIDTH": sw - 1,
                                     "KERNEL_STRIDE_HEIGHT": sh - 1},
        "PDP.D_POOLING_PADDING_CFG": {"PAD_LEFT": pl, "PAD_TOP": pt, "PAD_RIGHT": pr,
                                      "PAD_BOTTOM": pb},
        "PDP.D_RECIP_KERNEL_WIDTH": {"RECIP_KERNEL_WIDTH": recip[0]},
        "PDP.D_RECIP_KERNEL_HEIGHT": {"RECIP_KERNEL_HEIGHT": recip[1]},
        "PDP.D_DST_BASE_ADDR_LOW": {"DST_BASE_ADDR_LOW": DST},
        "PDP.D_DST_LINE_STRIDE": {"DST_LINE_STRIDE": dst_line},
        "PDP.D_DST_SURFACE_STRIDE": {"DST_SURFACE_STRIDE": dst_surf},
        "PDP.D_DST_RAM_CFG": {"DST_RAM_TYPE": 1},
        "PDP.D_DATA_FORMAT": {"INPUT_DATA": input_data},
    }
    for n in range(1, 8):
        regs[f"PDP.D_POOLING_PADDING_VALUE_{n}_CFG"] = {f"PAD_VALUE_{n}X": pads[n - 1]}
    rdma = {
        "PDP_RDMA.D_DATA_CUBE_IN_WIDTH": {"CUBE_IN_WIDTH": w - 1},
        "PDP_RDMA.D_DATA_CUBE_IN_HEIGHT": {"CUBE_IN_HEIGHT": h - 1},
        "PDP_RDMA.D_DATA_CUBE_IN_CHANNEL": {"CUBE_IN_CHANNEL": c_n - 1},
        "PDP_RDMA.D_FLYING_MODE": {"FLYING_MODE": 1},
        "PDP_RDMA.D_SRC_BASE_ADDR_LOW": {"SRC_BASE_ADDR_LOW": SRC},
        "PDP_RDMA.D_SRC_LINE_STRIDE": {"SRC_LINE_STRIDE": line},
        "PDP_RDMA.D_SRC_SURFACE_STRIDE": {"SRC_SURFACE_STRIDE": surf},
        "PDP_RDMA.D_SRC_RAM_CFG": {"SRC_RAM_TYPE": 1},
        "PDP_RDMA.D_DATA_FORMAT": {"INPUT_DATA": input_data},
        "PDP_RDMA.D_POOLING_KERNEL_CFG": {"KERNEL_WIDTH": kw - 1, "KERNEL_STRIDE_WIDTH": sw - 1},
    }
    enables = {"PDP.D_OP_ENABLE": {"OP_EN": 1}}
    if flying_off:
        regs.update(rdma)
        enables["PDP_RDMA.D_OP_ENABLE"] = {"OP_EN": 1}
    program = RegisterProgram("pdp_precision", [
        MemLoad("pri_mem", SRC, pack_cube(cube, line, surf)), *reg_writes(regs, version=1),
        IntrNotify("PDP", 0, "pdp_done"), *reg_writes(enables, version=1)])
    return program, (oh, ow, dst_line, dst_surf)


def pdp_output(engine: Engine, dtype, lanes: int, geometry) -> np.ndarray:
    oh, ow, dst_line, dst_surf = geometry
    raw = engine.memory.space(1).read(DST, (lanes * np.dtype(dtype).itemsize // ATOM_BYTES)
                                      * dst_surf)
    return unpack_cube(raw, dtype, lanes, oh, ow, dst_line, dst_surf)


@pytest.mark.parametrize("method", [POOL_MAX, POOL_MIN, POOL_AVERAGE])
def test_pdp_int16_units_read_16_channels_per_atom(method):
    rng = np.random.default_rng(7)
    cube = rng.integers(-32768, 32768, (20, 5, 6)).astype(np.int16)     # 2 surfaces of 16
    pads_raw = [0x7FF00 | n for n in range(7)]                            # negative INT16 pads
    program, geom = pdp_program(cube, INT16.code, method, pads=pads_raw)
    engine = Engine(load_hardware("nv_full"))
    engine.run(program)
    lanes = 32
    got = pdp_output(engine, np.int16, lanes, geom)
    full = np.zeros((lanes, 5, 6), np.int16)
    full[:20] = cube
    pads = [pad_value(r, b, 32) for r, b in zip(pads_raw, (15, 16, 17, 17, 18, 18, 18))]
    ref = pdp_reference(full, geom[0], geom[1], method, 3, 3, 2, 2, 1, 1, pads, 0x5555, 0x5555,
                        16)
    assert np.array_equal(got, ref)
    view = engine.regs["PDP"].view(0)
    assert view.word("D_NAN_INPUT_NUM") == view.word("D_NAN_OUTPUT_NUM") == 0


def test_pdp_int16_on_the_fly_takes_an_int16_cube_from_sdp():
    rng = np.random.default_rng(8)
    cube = rng.integers(-32768, 32768, (16, 4, 4)).astype(np.int16)
    program, geom = pdp_program(cube, INT16.code, POOL_MAX, flying_off=False)
    engine = Engine(load_hardware("nv_full"))
    engine.channel("sdp->pdp").put(cube)
    engine.run(program)
    ref = pdp_reference(cube, geom[0], geom[1], POOL_MAX, 3, 3, 2, 2, 1, 1, [0] * 7, 0, 0, 16)
    assert np.array_equal(pdp_output(engine, np.int16, 16, geom), ref)


def test_pdp_rdma_and_pdp_must_agree_on_the_element_type():
    cube = np.zeros((16, 4, 4), np.int16)
    program, _ = pdp_program(cube, INT16.code, POOL_MAX)
    # PDP_RDMA told INT8 after the fact: it reads 32 lanes of int8, PDP expects int16.
    extra = reg_writes({"PDP_RDMA.D_DATA_FORMAT": {"INPUT_DATA": 0}}, version=1)
    program.commands.insert(-2, extra[0])
    with pytest.raises(NvdlaSimError, match="does not match the PDP registers"):
        Engine(load_hardware("nv_full")).run(program)


def test_pdp_int16_timing_is_per_byte():
    """The v1 PDP datapath moves 8 bytes a cycle: 16 INT16 channels take as long as 32 INT8."""
    def cycles(cube, code):
        program, _ = pdp_program(cube, code, POOL_MAX)
        return Engine(load_hardware("nv_full"), compute_values=False).run(program).cycles
    int16 = cycles(np.zeros((16, 6, 6), np.int16), INT16.code)
    int8 = cycles(np.zeros((32, 6, 6), np.int8), 0)
    assert int16 == int8
    assert cycles(np.zeros((32, 6, 6), np.int16), INT16.code) > int16


# -- CDP INT16 ---------------------------------------------------------------------------------
def random_lrn_case(rng: np.random.Generator, bits: int, exponent: bool):
    lo_sel = int(rng.integers(-3, 30))
    le_sel = int(rng.integers(-3, 30))
    lo_start = int(rng.integers(-1000, 1 << 20))
    le_start = int(rng.integers(-1000, 1 << 20))
    cfg = {
        "datin_offset": int(rng.integers(-(1 << (bits - 1)), 1 << (bits - 1))),
        "datin_scale": int(rng.integers(-(1 << 15), 1 << 15)),
        "datin_shift": int(rng.integers(0, 32)),
        "normalz_len": int(rng.integers(0, 4)),
        "sqsum_bypass": int(rng.random() < 0.15), "mul_bypass": int(rng.random() < 0.3),
        "le_exponent": int(exponent), "uflow_priority": int(rng.integers(0, 2)),
        "oflow_priority": int(rng.integers(0, 2)), "hybrid_priority": int(rng.integers(0, 2)),
        "datout_offset": int(rng.integers(-(1 << 31), 1 << 31)),
        "datout_scale": int(rng.integers(-(1 << 15), 1 << 15)),
        "datout_shift": int(rng.integers(0, 64)),
        "le_index_offset": int(rng.integers(-8, 30)),
        "le_start": le_start, "le_end": le_start + (1 << max(0, le_sel + 6)),
        "lo_start": lo_start, "lo_end": lo_start + (1 << max(0, lo_sel + 8)),
        "le_index_select": le_sel, "lo_index_select": lo_sel,
    }
    for p in ("le", "lo"):
        for edge in ("uflow", "oflow"):
            cfg[f"{p}_{edge}_scale"] = int(rng.integers(-(1 << 15), 1 << 15))
            cfg[f"{p}_{edge}_shift"] = int(rng.integers(-16, 16))
    le = rng.integers(-(1 << 15), 1 << 15, LE_ENTRIES).astype(np.int64)
    lo = rng.integers(-(1 << 15), 1 << 15, LO_ENTRIES).astype(np.int64)
    return cfg, le, lo


@pytest.mark.parametrize("exponent", [False, True])
def test_cdp_int16_kernel_matches_reference(exponent):
    rng = np.random.default_rng(160 + exponent)
    for _ in range(12):
        cfg, le, lo = random_lrn_case(rng, 16, exponent)
        channels = int(rng.integers(1, 33))
        lanes = -(-channels // 16) * 16
        cube = rng.integers(-32768, 32768, (lanes, 2, 3)).astype(np.int16)
        out, counters = lrn_int(cube, channels, cfg, le, lo)
        ref, ref_counters = lrn_reference(cube, channels, cfg, le, lo, 16)
        assert out.dtype == np.int16
        assert np.array_equal(out, ref)
        assert counters == ref_counters


def test_cdp_int16_units_lrn_on_nv_full():
    """LRN3 on 20 INT16 channels (2 surfaces of 16), LO[i] = 100*i linear from 0 with 2^10-wide
    entries, LE always underflowing, output = LO(square sum) * x >> 8."""
    rng = np.random.default_rng(5)
    cube = rng.integers(-300, 300, (20, 2, 3)).astype(np.int16)
    line, surf = 3 * ATOM_BYTES, 3 * ATOM_BYTES * 2
    rmap = register_map(1)

    def writes(values):
        out = []
        for name, value in values.items():
            unit, reg = name.split(".")
            u, r = rmap.resolve(unit, reg)
            out.append(RegWrite(rmap.base(u.name) + r.offset, value, name))
        return out

    lut = writes({"CDP.S_LUT_ACCESS_CFG": (1 << 17) | (1 << 16)})
    lut += [RegWrite(lut[0].addr + 4, 100 * i, "CDP.S_LUT_ACCESS_DATA") for i in range(257)]
    regs = writes({
        "CDP_RDMA.D_DATA_CUBE_WIDTH": 2, "CDP_RDMA.D_DATA_CUBE_HEIGHT": 1,
        "CDP_RDMA.D_DATA_CUBE_CHANNEL": 19, "CDP_RDMA.D_SRC_BASE_ADDR_LOW": SRC,
        "CDP_RDMA.D_SRC_LINE_STRIDE": line, "CDP_RDMA.D_SRC_SURFACE_STRIDE": surf,
        "CDP_RDMA.D_SRC_DMA_CFG": 1, "CDP_RDMA.D_DATA_FORMAT": 1,
        "CDP.S_LUT_CFG": 0x71, "CDP.S_LUT_INFO": 10 << 16,
        "CDP.S_LUT_LE_START_LOW": 0, "CDP.S_LUT_LE_START_HIGH": 0x1F,
        "CDP.S_LUT_LO_START_LOW": 0, "CDP.S_LUT_LO_END_LOW": 256 << 10,
        "CDP.D_LRN_CFG": 0, "CDP.D_FUNC_BYPASS": 0,
        "CDP.D_DATIN_SCALE": 1, "CDP.D_DATOUT_SCALE": 1, "CDP.D_DATOUT_SHIFTER": 8,
        "CDP.D_DST_BASE_ADDR_LOW": DST, "CDP.D_DST_LINE_STRIDE": line,
        "CDP.D_DST_SURFACE_STRIDE": surf, "CDP.D_DST_DMA_CFG": 1, "CDP.D_DATA_FORMAT": 1,
    })
    program = RegisterProgram("cdp_int16", [
        MemLoad("pri_mem", SRC, pack_cube(cube, line, surf)), *lut, *regs,
        IntrNotify("CDP", 0, "cdp_done"),
        *writes({"CDP_RDMA.D_OP_ENABLE": 1, "CDP.D_OP_ENABLE": 1})])
    engine = Engine(load_hardware("nv_full"))
    engine.run(program)
    got = unpack_cube(engine.memory.space(1).read(DST, 2 * surf), np.int16, 32, 2, 3, line, surf)
    full = np.zeros((32, 2, 3), np.int16)
    full[:20] = cube
    cfg = {"datin_offset": 0, "datin_scale": 1, "datin_shift": 0, "normalz_len": 0,
           "sqsum_bypass": 0, "mul_bypass": 0, "le_exponent": 0, "uflow_priority": 1,
           "oflow_priority": 1, "hybrid_priority": 1, "datout_offset": 0, "datout_scale": 1,
           "datout_shift": 8, "le_index_offset": 0, "le_start": 0x1F << 32, "le_end": 0,
           "lo_start": 0, "lo_end": 256 << 10, "le_index_select": 0, "lo_index_select": 10}
    for p in ("le", "lo"):
        for edge in ("uflow", "oflow"):
            cfg[f"{p}_{edge}_scale"] = cfg[f"{p}_{edge}_shift"] = 0
    ref, counters = lrn_reference(full, 20, cfg, np.zeros(65, np.int64),
                                  np.arange(257, dtype=np.int64) * 100, 16)
    assert np.array_equal(got, ref)
    view = engine.regs["CDP"].view(0)
    assert view.word("D_PERF_LUT_LO_HIT") == counters["lut_lo_hit"] > 0
    assert view.word("D_OUT_SATURATION") == counters["out_saturation"]


# -- the official v1 trace ---------------------------------------------------------------------
def _v1_traces() -> Path | None:
    root = os.environ.get("NVDLA_HW_V1")
    candidates = [Path(root)] if root else []
    candidates.append(Path(__file__).resolve().parents[2] / "shared" / "nvdla-hw-v1")
    for c in candidates:
        t = c / "verif" / "traces" / "traceplayer"
        if t.is_dir():
            return t
    return None


def test_official_trace_pdp_max_pooling_int16():
    traces = _v1_traces()
    if traces is None:
        pytest.skip("no nvdla/hw nvdlav1 checkout ($NVDLA_HW_V1 or ../shared/nvdla-hw-v1)")
    txn = pytest.importorskip("nvdla_sim.frontends.txn_trace",
                              reason="the input.txn frontend is not in this tree")
    folder = traces / "pdp_max_pooling_int16"
    engine = Engine(load_hardware("nv_full"))
    result = engine.run(txn.parse_txn(folder / "input.txn"))
    dumps = [c for c in result.checks if c.kind == "dump_mem"]
    assert dumps and all(c.diff_bytes == 0 and c.first_diff is None for c in dumps)
    golden = txn.load_txn_dat(folder / "output_feature_map.dat", 0x1880, None)
    assert np.array_equal(engine.memory.space(1).read(0x8010_0000, 0x1880), golden)
