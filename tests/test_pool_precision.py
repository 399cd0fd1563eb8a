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


# -- FP16: C-model arithmetic against float64, precision-document thresholds -----------------------
# PDP/CDP FP16 threshold (precision-preservation, "FP16 error threshold"): 0.0001 absolute and
# 0.001 relative to the largest magnitude in the window.  An FP16 result is itself rounded to 11
# significant bits (2^-11 ~ 4.9e-4 relative), so the absolute bound can only hold below ~0.2; an
# output passes when it meets either bound: error <= max(1e-4, 1e-3 * window max).
ABS_TOL = 1e-4
REL_TOL = 1e-3
FP16_MAX = 65504.0
FP17_MAX = (2 - 2 ** -10) * 2.0 ** 31


def fp16_value(bits: np.ndarray) -> np.ndarray:
    """FP16 bit patterns as the C model's arithmetic reads them: INF is 2^16, NaN stays NaN."""
    bits = np.asarray(bits, np.uint16)
    v = bits.view(np.float16).astype(np.float64)
    inf = (bits & 0x7FFF) == 0x7C00
    return np.where(inf, np.where(bits >> 15, -65536.0, 65536.0), v)


def fp17_bits(x: float) -> int:
    """A value of FP16 range as an FP17 pattern (6-bit exponent, bias 31, same mantissa)."""
    b = int(np.array(x, np.float16).view(np.uint16))
    sign, expo, mant = b >> 15, (b >> 10) & 0x1F, b & 0x3FF
    if expo == 0:
        return sign << 16 if mant == 0 else (sign << 16) | ((mant.bit_length() - 11 + 31) << 10) \
            | ((mant << (11 - mant.bit_length())) & 0x3FF)
    return (sign << 16) | ((expo - 15 + 31) << 10) | mant


def fp17_value(b: int) -> float:
    sign, expo, mant = b >> 16, (b >> 10) & 0x3F, b & 0x3FF
    if expo == 0 and mant == 0:
        return -0.0 if sign else 0.0
    return (-1) ** sign * 2.0 ** (expo - 31) * (1 + mant / 1024)


def random_fp16_cube(rng: np.random.Generator, shape) -> np.ndarray:
    """FP16 bits: mostly ordinary values, with zeros of both signs, denormals, values near 65504,
    infinities and NaNs mixed in."""
    n = int(np.prod(shape))
    kind = rng.random(n)
    vals = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 3, n)).astype(np.float16)
    bits = vals.view(np.uint16).copy()
    sign = rng.integers(0, 2, n).astype(np.uint16) << 15
    bits[kind < 0.04] = sign[kind < 0.04]                                           # +-0
    den = (kind >= 0.04) & (kind < 0.08)
    bits[den] = sign[den] | rng.integers(1, 0x400, den.sum()).astype(np.uint16)     # denormals
    big = (kind >= 0.08) & (kind < 0.12)
    bits[big] = sign[big] | rng.integers(0x7B00, 0x7C00, big.sum()).astype(np.uint16)  # ~65504
    inf = (kind >= 0.12) & (kind < 0.13)
    bits[inf] = sign[inf] | 0x7C00
    nan = (kind >= 0.13) & (kind < 0.14)
    bits[nan] = sign[nan] | 0x7C00 | rng.integers(1, 0x400, nan.sum()).astype(np.uint16)
    return bits.reshape(shape)


def pdp_fp16_reference(cube_bits, out_h, out_w, method, kw, kh, sw, sh, pl, pt, pads17, rw17,
                       rh17):
    """float64 pooling of an FP16 cube: (value, window max magnitude) per output.  Padding and
    reciprocals are the registers' FP17 values; the result saturates to +-65504 like the C
    model's (it makes no infinities).  The C model's FP17 sum reads an FP16 infinity as the
    largest FP17 value (its conversions saturate INF), so an average over one saturates; windows
    holding infinities of both signs are no number either way and are left out (marked by
    ref NaN and scale -1)."""
    x = fp16_value(cube_bits)
    inf = np.abs(x) == 65536.0
    if method == POOL_AVERAGE:
        x = np.where(inf, np.sign(x) * FP17_MAX, x)
    c_n, h, w = x.shape
    ref = np.zeros((c_n, out_h, out_w))
    scale = np.zeros((c_n, out_h, out_w))
    pads = [fp17_value(p) for p in pads17]
    for oy in range(out_h):
        for ox in range(out_w):
            y0, x0 = oy * sh - pt, ox * sw - pl
            ys = [y for y in range(y0, y0 + kh) if 0 <= y < h]
            xs = [xx for xx in range(x0, x0 + kw) if 0 <= xx < w]
            win = x[:, ys][:, :, xs].reshape(c_n, -1)
            nan = np.isnan(win).any(axis=1)
            win_inf = inf[:, ys][:, :, xs].reshape(c_n, -1)
            mag = np.abs(np.where(np.isnan(win) | win_inf, 0, win)).max(axis=1)
            both = (win_inf & (win > 0)).any(axis=1) & (win_inf & (win < 0)).any(axis=1)
            if method == POOL_MAX:
                v = win.max(axis=1)
            elif method == POOL_MIN:
                v = win.min(axis=1)
            else:
                s = win.sum(axis=1)
                extra = []
                if kw > len(xs):
                    extra.append(len(ys) * pads[kw - len(xs) - 1])
                if kh > len(ys):
                    extra.append(pads[kh - len(ys) - 1] * kw)
                s = s + sum(extra)
                mag = np.maximum(mag, max([abs(e) for e in extra], default=0.0))
                v = np.clip(s * fp17_value(rw17) * fp17_value(rh17), -FP16_MAX, FP16_MAX)
            ref[:, oy, ox] = np.where(nan, np.nan, v)
            scale[:, oy, ox] = mag
            if method == POOL_AVERAGE:
                ref[both & ~nan, oy, ox] = np.nan
                scale[both & ~nan, oy, ox] = -1
    return ref, scale


def error_ratio(got_bits: np.ndarray, ref: np.ndarray, window_max: np.ndarray) -> float:
    """Largest error / allowed error over the outputs; NaN must match NaN exactly (inf if not)."""
    got = fp16_value(got_bits)
    skip = window_max < 0
    if not np.array_equal(np.isnan(got) & ~skip, np.isnan(ref) & ~skip):
        return float("inf")
    ok = ~np.isnan(ref)
    allowed = np.maximum(ABS_TOL, REL_TOL * window_max[ok])
    return float((np.abs(got[ok] - ref[ok]) / allowed).max(initial=0.0))


def pdp_fp16_case(rng: np.random.Generator, method: int) -> float:
    """One random FP16 pooling case through the kernel; returns its error ratio."""
    from nvdla_sim.kernels.pdp import pool_fp16
    kw, kh = (int(v) for v in rng.integers(1, 9, 2))
    sw, sh = (int(v) for v in rng.integers(1, 5, 2))
    pl, pt = int(rng.integers(0, min(kw, 8))), int(rng.integers(0, min(kh, 8)))
    w, h = (int(v) for v in rng.integers(max(kw, kh), 10, 2))
    ow, oh = (w + pl - kw) // sw + 1, (h + pt - kh) // sh + 1
    cube = random_fp16_cube(rng, (int(rng.integers(1, 17)), h, w))
    pads = [fp17_bits(float(v)) for v in rng.standard_normal(7)]
    rw, rh = fp17_bits(1.0 / kw), fp17_bits(1.0 / kh)
    out = np.zeros((cube.shape[0], oh, ow), np.uint16)
    pool_fp16(cube, out, method, kw, kh, sw, sh, pl, pt, np.array(pads, np.int64), rw, rh)
    with np.errstate(invalid="ignore"):          # +-inf sums of the left-out windows
        ref, scale = pdp_fp16_reference(cube, oh, ow, method, kw, kh, sw, sh, pl, pt, pads, rw,
                                        rh)
    if method != POOL_AVERAGE:                 # MAX/MIN pick an input: exact, NaN and all
        got = fp16_value(out)
        same = (got == ref) | (np.isnan(got) & np.isnan(ref))
        return 0.0 if same.all() else float("inf")
    return error_ratio(out, ref, scale)


def pdp_fp16_sweep(cases: int, seed: int = 0) -> dict[str, float]:
    """Worst error ratio per pooling method over `cases` random cases each (>= 1000 from the
    command line: python tests/test_pool_precision.py 1000)."""
    rng = np.random.default_rng(seed)
    names = {POOL_MAX: "max", POOL_MIN: "min", POOL_AVERAGE: "average"}
    return {names[m]: max(pdp_fp16_case(rng, m) for _ in range(cases)) for m in names}


def test_pdp_fp16_kernel_within_the_precision_threshold():
    worst = pdp_fp16_sweep(60, seed=1)             # 180 random cubes (tests/..py N runs N each)
    assert all(r <= 1.0 for r in worst.values()), worst
    assert worst["average"] > 0                    # the sums really are rounded in FP17


def test_pdp_fp16_average_adds_in_fp17_without_overflow():
    from nvdla_sim.kernels.pdp import pool_fp16
    cube = np.full((1, 2, 2), 0x7BFF, np.uint16)          # 4 x 65504 overflows FP16, not FP17
    out = np.zeros((1, 1, 1), np.uint16)
    pool_fp16(cube, out, POOL_AVERAGE, 2, 2, 1, 1, 0, 0, np.zeros(7, np.int64),
              fp17_bits(0.5), fp17_bits(0.5))
    assert out[0, 0, 0] == 0x7BFF
    # 1 + 2^-11 + 2^-11: the second small term is only kept because the sum is wider than FP16
    # in exponent only; in mantissa it is FP16's 10 bits, so each tie rounds to even.
    cube = np.array([[[0x3C00, 0x1000, 0x1000]]], np.uint16)      # 1, 2^-11, 2^-11
    pool_fp16(cube, out, POOL_AVERAGE, 3, 1, 1, 1, 0, 0, np.zeros(7, np.int64),
              fp17_bits(1.0), fp17_bits(1.0))
    assert out[0, 0, 0] == 0x3C00                          # each add rounds back to 1.0


def pdp_fp16_unit_run(cube_bits, method, nan_to_zero=0):
    program, geom = pdp_program(cube_bits.view(np.float16), 2, method, pads=(0,) * 7,
                                recip=(fp17_bits(1 / 3), fp17_bits(1 / 3)))
    program.commands[1:1] = reg_writes({"PDP.D_NAN_FLUSH_TO_ZERO": {"NAN_TO_ZERO": nan_to_zero}},
                                       version=1)
    engine = Engine(load_hardware("nv_full"))
    engine.run(program)
    lanes = -(-cube_bits.shape[0] // 16) * 16
    return engine, pdp_output(engine, np.uint16, lanes, geom), geom


@pytest.mark.parametrize("method", [POOL_MAX, POOL_AVERAGE])
def test_pdp_fp16_units_and_nan_inf_counters(method):
    rng = np.random.default_rng(11)
    cube = random_fp16_cube(rng, (20, 5, 6))
    engine, got, (oh, ow, _, _) = pdp_fp16_unit_run(cube, method)
    full = np.zeros((32, 5, 6), np.uint16)
    full[:20] = cube
    ref, scale = pdp_fp16_reference(full, oh, ow, method, 3, 3, 2, 2, 1, 1, [0] * 7,
                                    fp17_bits(1 / 3), fp17_bits(1 / 3))
    assert error_ratio(got, ref, scale) <= (1.0 if method == POOL_AVERAGE else 0.0)
    view = engine.regs["PDP"].view(0)
    special = (full & 0x7C00) == 0x7C00
    assert view.word("D_NAN_INPUT_NUM") == np.count_nonzero(special & ((full & 0x3FF) != 0)) > 0
    assert view.word("D_INF_INPUT_NUM") == np.count_nonzero(special & ((full & 0x3FF) == 0)) > 0
    out_nan = ((got & 0x7C00) == 0x7C00) & ((got & 0x3FF) != 0)
    assert view.word("D_NAN_OUTPUT_NUM") == np.count_nonzero(out_nan) > 0


def test_pdp_fp16_nan_to_zero_flushes_inputs_read_from_memory():
    cube = np.full((16, 3, 3), 0x3C00, np.uint16)
    cube[0, 1, 1] = 0x7E00                                 # a NaN in the middle window
    _, got, _ = pdp_fp16_unit_run(cube, POOL_MAX)
    assert got[0, 0, 0] == 0x7E00
    engine, got, _ = pdp_fp16_unit_run(cube, POOL_MAX, nan_to_zero=1)
    assert got[0, 0, 0] == 0x3C00                          # 1.0 = max(1.0, +0)
    view = engine.regs["PDP"].view(0)
    assert view.word("D_NAN_INPUT_NUM") == 1 and view.word("D_NAN_OUTPUT_NUM") == 0


def test_cdp_fp16_timing_matches_values_and_int16():
    """An FP16 LRN layer takes as long as the INT16 layer of the same size (same bytes), with or
    without its values (tests/test_cdp_fp16.py checks the values)."""
    def program(code):
        rmap = register_map(1)
        regs = {
            "CDP_RDMA.D_DATA_CUBE_WIDTH": 3, "CDP_RDMA.D_DATA_CUBE_HEIGHT": 2,
            "CDP_RDMA.D_DATA_CUBE_CHANNEL": 19, "CDP_RDMA.D_SRC_BASE_ADDR_LOW": SRC,
            "CDP_RDMA.D_SRC_LINE_STRIDE": 4 * ATOM_BYTES,
            "CDP_RDMA.D_SRC_SURFACE_STRIDE": 12 * ATOM_BYTES, "CDP_RDMA.D_SRC_DMA_CFG": 1,
            "CDP_RDMA.D_DATA_FORMAT": code, "CDP.D_DATA_FORMAT": code,
            "CDP.D_DST_BASE_ADDR_LOW": DST, "CDP.D_DST_LINE_STRIDE": 4 * ATOM_BYTES,
            "CDP.D_DST_SURFACE_STRIDE": 12 * ATOM_BYTES, "CDP.D_DST_DMA_CFG": 1,
        }
        writes = []
        for name, value in list(regs.items()) + [("CDP_RDMA.D_OP_ENABLE", 1),
                                                 ("CDP.D_OP_ENABLE", 1)]:
            u, r = rmap.resolve(*name.split("."))
            writes.append(RegWrite(rmap.base(u.name) + r.offset, value, name))
        return RegisterProgram("cdp_fp16", [*writes[:-2], IntrNotify("CDP", 0, "done"),
                                            *writes[-2:]])

    def cycles(code, values):
        return Engine(load_hardware("nv_full"), compute_values=values).run(program(code)).cycles
    assert cycles(2, True) == cycles(2, False) == cycles(1, False)


def test_pdp_fp16_timing_only_matches_values_and_int16():
    cube = random_fp16_cube(np.random.default_rng(3), (20, 6, 6))

    def cycles(code, values):
        data = cube.view(np.float16) if code == 2 else cube.view(np.int16)
        program, _ = pdp_program(data, code, POOL_AVERAGE)
        return Engine(load_hardware("nv_full"), compute_values=values).run(program).cycles
    assert cycles(2, False) == cycles(2, True) == cycles(1, False)


if __name__ == "__main__":
    import sys
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    print(f"PDP FP16, {n} random cases per method, worst error / allowed:", pdp_fp16_sweep(n))
