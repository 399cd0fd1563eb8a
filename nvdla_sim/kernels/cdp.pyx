# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""CDP local response normalisation (LRN) of one INT8 or INT16 cube (NVDLA reference map 5.9).

Per pixel and per channel c of the padded channel range [0, surfaces*atom), with b the element
bits (8 or 16):
  1. input convert  xc = sat(b+1)(round((x - DATIN_OFFSET) * DATIN_SCALE / 2^DATIN_SHIFTER));
     channels at or beyond the cube's channel count are fed DATIN_OFFSET, i.e. xc = 0, and so are
     neighbours outside [0, padded channels);
  2. square sum     ss = sum of xc[j]^2 over j in [c - (n+1), c + (n+1)], n = NORMALZ_LEN
                    (SQSUM_BYPASS: ss = xc[c]);
  3. LUT            both tables (LE "raw", LO "density") are looked up, one result is chosen by
                    the hit/underflow/overflow priorities;
  4. multiply       v = lut * xc[c] (MUL_BYPASS: v = lut), 25 bits (INT8) or 33 bits (INT16);
  5. output convert satb(round((v - DATOUT_OFFSET) * DATOUT_SCALE / 2^DATOUT_SHIFTER)).
DATIN_OFFSET is b bits wide, DATOUT_OFFSET 25 (INT8) or 32 bits (INT16): the unit decodes them.
All rounding is half away from zero.
"""
from libc.stdint cimport int64_t, uint64_t
from .fixedpoint cimport saturate, shift_right_round, signed_shift_round

import numpy as np

cdef enum:
    LE_LAST = 64                 # LE table: 65 entries, index 0..64
    LO_LAST = 256                # LO table: 257 entries
    FRACTION_BITS = 16           # the interpolation fraction is kept to 16 bits
    INTERMEDIATE_BITS = 56       # slope and interpolation terms saturate to 56 bits
    LUT_RESULT_BITS = 16

ctypedef fused int_element:
    signed char
    short

cdef enum Outcome:
    HIT = 0
    UNDERFLOW = 1
    OVERFLOW = 2

LE_ENTRIES = LE_LAST + 1
LO_ENTRIES = LO_LAST + 1


cdef struct LutTable:
    const int64_t *values
    int last                     # index of the last entry (64 or 256)
    bint exponent                # LE exponent mode (index = floor(log2(ss - start)) - offset)
    int index_offset             # LE exponent: LE_INDEX_OFFSET (int8)
    int index_select             # linear: fraction bits (negative = index is scaled up)
    int64_t start
    int64_t end
    int64_t uflow_scale
    int64_t oflow_scale
    int uflow_shift              # signed: negative means a left shift
    int oflow_shift


cdef struct LrnConfig:
    int64_t datin_offset
    int64_t datin_scale
    int datin_shift
    int half_window              # n + 1: neighbours on each side
    bint sqsum_bypass
    bint mul_bypass
    bint uflow_priority_lo
    bint oflow_priority_lo
    bint hybrid_priority_lo
    int64_t datout_offset
    int64_t datout_scale
    int datout_shift


cdef inline int floor_log2(int64_t v) noexcept nogil:
    """floor(log2(v)) for v > 0."""
    cdef int n = 0
    while v > 1:
        v >>= 1
        n += 1
    return n


cdef inline int64_t mul_wrap(int64_t a, int64_t b) noexcept nogil:
    """a * b in 64-bit two's complement, as the C model's int64 arithmetic (wraps, no trap)."""
    return <int64_t>(<uint64_t>a * <uint64_t>b)


cdef inline int64_t extrapolate(int64_t y0, int64_t dx, int64_t scale, int shift) noexcept nogil:
    """Outside a table: y0 + dx * scale / 2^shift."""
    return saturate(y0 + signed_shift_round(mul_wrap(dx, scale), shift, INTERMEDIATE_BITS),
                    LUT_RESULT_BITS)


cdef inline int64_t interpolate(int64_t y0, int64_t y1, int64_t fraction16) noexcept nogil:
    """Between entries y0 and y1 at fraction16 / 2^16."""
    return saturate(y0 + signed_shift_round((y1 - y0) * fraction16, FRACTION_BITS,
                                            INTERMEDIATE_BITS), LUT_RESULT_BITS)


cdef inline int64_t to_fraction16(int64_t fraction, int bits) noexcept nogil:
    """A `bits`-bit fraction rescaled to 16 bits (truncating when it has more)."""
    if bits > FRACTION_BITS:
        return fraction >> (bits - FRACTION_BITS)
    return fraction << (FRACTION_BITS - bits)


cdef int64_t lookup(int64_t ss, const LutTable *t, Outcome *outcome) noexcept nogil:
    cdef int64_t d = ss - t.start
    cdef int64_t idx, bias, fraction
    cdef int log2_d, fb
    if t.exponent:
        log2_d = floor_log2(d) if d > 0 else 0
        idx = log2_d - t.index_offset
        if d <= 0 or idx < 0:
            outcome[0] = UNDERFLOW
            # the underflow line starts at START + 2^offset (where index 0 begins)
            bias = 0 if t.index_offset < 0 else (<int64_t>1 << t.index_offset)
            return extrapolate(t.values[0], d - bias, t.uflow_scale, t.uflow_shift)
        if idx >= t.last:
            outcome[0] = OVERFLOW
            return extrapolate(t.values[t.last], ss - t.end, t.oflow_scale, t.oflow_shift)
        outcome[0] = HIT
        fraction = to_fraction16(d - (<int64_t>1 << log2_d), log2_d)
        return interpolate(t.values[idx], t.values[idx + 1], fraction)

    fb = t.index_select
    if fb < 0:
        idx = <int64_t>(<uint64_t>d << (-fb))
    else:
        idx = d >> fb
    if d <= 0 or idx < 0:
        outcome[0] = UNDERFLOW
        return extrapolate(t.values[0], d, t.uflow_scale, t.uflow_shift)
    if idx >= t.last:
        outcome[0] = OVERFLOW
        return extrapolate(t.values[t.last], ss - t.end, t.oflow_scale, t.oflow_shift)
    outcome[0] = HIT
    fraction = 0 if fb < 0 else to_fraction16(d & ((<int64_t>1 << fb) - 1), fb)
    return interpolate(t.values[idx], t.values[idx + 1], fraction)


cdef LutTable make_table(dict cfg, str prefix, const int64_t[::1] values, int last,
                         bint exponent) except *:
    cdef LutTable t
    if values.shape[0] != last + 1:
        raise ValueError(f"lrn_int: the {prefix} table needs {last + 1} entries")
    t.values = &values[0]
    t.last = last
    t.exponent = exponent
    t.index_offset = cfg.get(f"{prefix}_index_offset", 0)
    t.index_select = cfg[f"{prefix}_index_select"]
    t.start = cfg[f"{prefix}_start"]
    t.end = cfg[f"{prefix}_end"]
    t.uflow_scale = cfg[f"{prefix}_uflow_scale"]
    t.oflow_scale = cfg[f"{prefix}_oflow_scale"]
    t.uflow_shift = cfg[f"{prefix}_uflow_shift"]
    t.oflow_shift = cfg[f"{prefix}_oflow_shift"]
    if exponent and not -128 <= t.index_offset <= 62:
        raise ValueError("lrn_int: LE exponent index offset must be in [-128, 62]")
    if not exponent and not -64 <= t.index_select <= 63:
        raise ValueError("lrn_int: index select must be a signed 7-bit value")
    return t


def lrn_int(const int_element[:, :, ::1] cube, int channels, dict cfg,
            const int64_t[::1] le_table, const int64_t[::1] lo_table):
    """LRN of a whole (surfaces*atom, H, W) cube whose first `channels` lanes are real.

    `cfg` keys (register values already decoded, signed where the field is signed):
      datin_offset (element bits), datin_scale, datin_shift, normalz_len (0..3 for 3/5/7/9),
      sqsum_bypass, mul_bypass, le_exponent, uflow_priority, oflow_priority, hybrid_priority
      (1 = LO), datout_offset (25 or 32 bits), datout_scale, datout_shift,
      le_/lo_ start, end (38-bit), index_select, uflow_scale, oflow_scale, uflow_shift,
      oflow_shift, and le_index_offset.
    Returns (out of the cube's type (surfaces*atom, H, W), counters dict: lut_uflow, lut_oflow, lut_hybrid,
    lut_le_hit, lut_lo_hit, out_saturation), counting every lane of every pixel.
    """
    cdef Py_ssize_t lanes = cube.shape[0], height = cube.shape[1], width = cube.shape[2]
    cdef Py_ssize_t c, y, x, j, j_lo, j_hi
    cdef LrnConfig k
    cdef LutTable le, lo
    cdef int64_t ss, le_y, lo_y, lut_y, v, r, o
    cdef Outcome le_out, lo_out
    cdef int64_t n_uflow = 0, n_oflow = 0, n_hybrid = 0, n_le_hit = 0, n_lo_hit = 0, n_sat = 0
    cdef int out_bits = 8 * sizeof(int_element)
    cdef int icvt_bits = out_bits + 1

    if not 0 < channels <= lanes:
        raise ValueError("lrn_int: channel count outside the cube")
    if not 0 <= cfg["normalz_len"] <= 3:
        raise ValueError("lrn_int: NORMALZ_LEN must be 0..3")
    k.datin_offset = cfg["datin_offset"]
    k.datin_scale = cfg["datin_scale"]
    k.datin_shift = cfg["datin_shift"]
    k.half_window = cfg["normalz_len"] + 1
    k.sqsum_bypass = cfg["sqsum_bypass"]
    k.mul_bypass = cfg["mul_bypass"]
    k.uflow_priority_lo = cfg["uflow_priority"]
    k.oflow_priority_lo = cfg["oflow_priority"]
    k.hybrid_priority_lo = cfg["hybrid_priority"]
    k.datout_offset = cfg["datout_offset"]
    k.datout_scale = cfg["datout_scale"]
    k.datout_shift = cfg["datout_shift"]
    le = make_table(cfg, "le", le_table, LE_LAST, cfg["le_exponent"])
    lo = make_table(cfg, "lo", lo_table, LO_LAST, False)

    out_arr = np.empty((lanes, height, width), np.int8 if out_bits == 8 else np.int16)
    xc_arr = np.zeros(lanes, np.int64)
    cdef int_element[:, :, ::1] out = out_arr
    cdef int64_t[::1] xc = xc_arr

    with nogil:
        for y in range(height):
            for x in range(width):
                for c in range(lanes):
                    if c < channels:
                        xc[c] = saturate(shift_right_round(
                            (cube[c, y, x] - k.datin_offset) * k.datin_scale, k.datin_shift),
                            icvt_bits)
                    else:
                        xc[c] = 0      # fed DATIN_OFFSET: converts to exactly 0
                for c in range(lanes):
                    if k.sqsum_bypass:
                        ss = xc[c]
                    else:
                        ss = 0
                        j_lo = c - k.half_window if c >= k.half_window else 0
                        j_hi = c + k.half_window if c + k.half_window < lanes else lanes - 1
                        for j in range(j_lo, j_hi + 1):
                            ss = ss + xc[j] * xc[j]
                    le_y = lookup(ss, &le, &le_out)
                    lo_y = lookup(ss, &lo, &lo_out)
                    if le_out == UNDERFLOW and lo_out == UNDERFLOW:
                        lut_y = lo_y if k.uflow_priority_lo else le_y
                        n_uflow += 1
                    elif le_out == OVERFLOW and lo_out == OVERFLOW:
                        lut_y = lo_y if k.oflow_priority_lo else le_y
                        n_oflow += 1
                    elif (le_out == HIT) != (lo_out == HIT):
                        if le_out == HIT:
                            lut_y = le_y
                            n_le_hit += 1
                        else:
                            lut_y = lo_y
                            n_lo_hit += 1
                    else:
                        lut_y = lo_y if k.hybrid_priority_lo else le_y
                        n_hybrid += 1
                    v = lut_y if k.mul_bypass else lut_y * xc[c]
                    r = shift_right_round((v - k.datout_offset) * k.datout_scale, k.datout_shift)
                    o = saturate(r, out_bits)
                    if o != r:
                        n_sat += 1
                    out[c, y, x] = <int_element>o
    counters = {"lut_uflow": n_uflow, "lut_oflow": n_oflow, "lut_hybrid": n_hybrid,
                "lut_le_hit": n_le_hit, "lut_lo_hit": n_lo_hit, "out_saturation": n_sat}
    return out_arr, counters
