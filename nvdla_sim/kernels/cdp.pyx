# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""CDP local response normalisation (LRN) of one INT8, INT16 or FP16 cube (NVDLA reference map 5.9).

`lrn_int` (INT8/INT16) and `lrn_fp16` share the window, the LUT pair and its choice by the
hit/underflow/overflow priorities; the arithmetic differs (integers here, the C model's float
formats in `lrn_fp16`, whose docstring lists its steps).

INT8/INT16:
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
from libc.math cimport isnan, ldexp
from libc.stdint cimport int64_t, uint64_t, uint16_t, uint32_t
from libc.string cimport memcpy
from .fixedpoint cimport saturate, shift_right_round, signed_shift_round
from . cimport nvfloat as nf

import numpy as np

cdef enum:
    LE_LAST = 64                 # LE table: 65 entries, index 0..64
    LO_LAST = 256                # LO table: 257 entries
    FRACTION_BITS = 16           # the interpolation fraction is kept to 16 bits
    INTERMEDIATE_BITS = 56       # slope and interpolation terms saturate to 56 bits
    LUT_RESULT_BITS = 16
    INT_SELECT_BITS = 7          # LUT_*_INDEX_SELECT as the integer datapath reads it
    FP_SELECT_BITS = 8           # ... and as the FP16 one does (the whole field)

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


cdef struct LutCounts:
    int64_t uflow
    int64_t oflow
    int64_t hybrid
    int64_t le_hit
    int64_t lo_hit


cdef inline bint choose_lo(Outcome le_out, Outcome lo_out, const LrnConfig *k,
                           LutCounts *n) noexcept nogil:
    """Which table's result is used (True = LO), counting the case: both under- or both
    overflowing, exactly one hit, or anything else (hybrid)."""
    if le_out == UNDERFLOW and lo_out == UNDERFLOW:
        n.uflow += 1
        return k.uflow_priority_lo
    if le_out == OVERFLOW and lo_out == OVERFLOW:
        n.oflow += 1
        return k.oflow_priority_lo
    if (le_out == HIT) != (lo_out == HIT):
        if le_out == HIT:
            n.le_hit += 1
            return False
        n.lo_hit += 1
        return True
    n.hybrid += 1
    return k.hybrid_priority_lo


cdef dict lut_counters(const LutCounts *n):
    return {"lut_uflow": n.uflow, "lut_oflow": n.oflow, "lut_hybrid": n.hybrid,
            "lut_le_hit": n.le_hit, "lut_lo_hit": n.lo_hit}


cdef int set_window_and_priorities(LrnConfig *k, dict cfg) except -1:
    if not 0 <= cfg["normalz_len"] <= 3:
        raise ValueError("lrn: NORMALZ_LEN must be 0..3")
    k.half_window = cfg["normalz_len"] + 1
    k.sqsum_bypass = cfg["sqsum_bypass"]
    k.mul_bypass = cfg["mul_bypass"]
    k.uflow_priority_lo = cfg["uflow_priority"]
    k.oflow_priority_lo = cfg["oflow_priority"]
    k.hybrid_priority_lo = cfg["hybrid_priority"]
    return 0


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
                         bint exponent, int select_bits) except *:
    cdef LutTable t
    if values.shape[0] != last + 1:
        raise ValueError(f"lrn: the {prefix} table needs {last + 1} entries")
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
    if exponent and not -128 <= t.index_offset <= (62 if select_bits == INT_SELECT_BITS else 127):
        raise ValueError("lrn: LE exponent index offset outside the register's range")
    if not exponent and not -(1 << (select_bits - 1)) <= t.index_select < (1 << (select_bits - 1)):
        raise ValueError(f"lrn: index select must be a signed {select_bits}-bit value")
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
    Returns (out of the cube's type (surfaces*atom, H, W), counters dict: lut_uflow, lut_oflow,
    lut_hybrid, lut_le_hit, lut_lo_hit, out_saturation), counting every lane of every pixel.
    """
    cdef Py_ssize_t lanes = cube.shape[0], height = cube.shape[1], width = cube.shape[2]
    cdef Py_ssize_t c, y, x, j, j_lo, j_hi
    cdef LrnConfig k
    cdef LutTable le, lo
    cdef int64_t ss, le_y, lo_y, lut_y, v, r, o
    cdef Outcome le_out, lo_out
    cdef LutCounts counts = [0, 0, 0, 0, 0]
    cdef int64_t n_sat = 0
    cdef int out_bits = 8 * sizeof(int_element)
    cdef int icvt_bits = out_bits + 1

    if not 0 < channels <= lanes:
        raise ValueError("lrn_int: channel count outside the cube")
    k.datin_offset = cfg["datin_offset"]
    k.datin_scale = cfg["datin_scale"]
    k.datin_shift = cfg["datin_shift"]
    set_window_and_priorities(&k, cfg)
    k.datout_offset = cfg["datout_offset"]
    k.datout_scale = cfg["datout_scale"]
    k.datout_shift = cfg["datout_shift"]
    le = make_table(cfg, "le", le_table, LE_LAST, cfg["le_exponent"], INT_SELECT_BITS)
    lo = make_table(cfg, "lo", lo_table, LO_LAST, False, INT_SELECT_BITS)

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
                    lut_y = lo_y if choose_lo(le_out, lo_out, &k, &counts) else le_y
                    v = lut_y if k.mul_bypass else lut_y * xc[c]
                    r = shift_right_round((v - k.datout_offset) * k.datout_scale, k.datout_shift)
                    o = saturate(r, out_bits)
                    if o != r:
                        n_sat += 1
                    out[c, y, x] = <int_element>o
    counters = lut_counters(&counts)
    counters["out_saturation"] = n_sat
    return out_arr, counters


# -- FP16 ----------------------------------------------------------------------------------------
cdef enum:
    BITS16 = 0xFFFF
    BITS32 = 0xFFFFFFFF
    FP32_BIAS = 127
    FP32_MANT = 23


cdef inline float fp32_native(uint64_t bits) noexcept nogil:
    """FP32 bits as a C float: the C model compares and scales x - START with its own floats."""
    cdef uint32_t b = <uint32_t>(bits & BITS32)
    cdef float f
    memcpy(&f, &b, 4)
    return f


cdef inline uint64_t fp32_power_of_two(int k) noexcept nogil:
    """2^k as FP32 bits for the LE exponent underflow line; the C model takes 0 for k <= -127."""
    if k <= -FP32_BIAS:
        return 0
    return <uint64_t>(k + FP32_BIAS) << FP32_MANT


cdef inline uint64_t fp_extrapolate(uint64_t gap32, uint64_t y16, uint64_t slope16) noexcept nogil:
    """Outside a table: gap * slope + y in FP17 (gap an FP32 distance, y and slope FP16)."""
    return nf.fp17_add(nf.fp17_mul(nf.fp32_to_fp17(gap32), nf.fp16_to_fp17(slope16 & BITS16)),
                       nf.fp16_to_fp17(y16 & BITS16))


cdef uint64_t fp_lookup(uint64_t ss, const LutTable *t, Outcome *outcome) noexcept nogil:
    """One FP16 table at square sum `ss` (FP32 bits); the FP17 result.

    START/END are FP32 bit patterns, entries and slopes FP16; the shifts are unused.  d = ss -
    START in FP32; d <= 0 or NaN underflows.  Exponent mode: entry = exponent(d) - INDEX_OFFSET
    (below 0 underflows, from `last` on overflows), the fraction is d's top 16 mantissa bits.
    Linear mode: d / 2^INDEX_SELECT as a C float gives entry and fraction (truncated to 16 bits).
    Hit: (L1 - L0 in FP32, to FP17) * fraction + L0; underflow: (d, or ss - (START + 2^offset) in
    exponent mode) * UFLOW_SCALE + L0; overflow: (ss - END) * OFLOW_SCALE + L[last].
    """
    cdef uint64_t start = <uint64_t>t.start & BITS32
    cdef uint64_t d = nf.fp32_sub(ss, start)
    cdef float df = fp32_native(d)
    cdef float shifted
    cdef int index = 0
    cdef uint64_t fraction16 = 0, gap, diff
    if df <= 0 or isnan(df):
        outcome[0] = UNDERFLOW
    elif t.exponent:
        index = <int>((d >> FP32_MANT) & 0xFF) - FP32_BIAS - t.index_offset
        outcome[0] = UNDERFLOW if index < 0 else (OVERFLOW if index >= t.last else HIT)
        fraction16 = (d >> (FP32_MANT - 16)) & BITS16
    else:
        if t.index_select >= 0:
            shifted = <float>(<double>df / ldexp(1.0, t.index_select))
        else:
            shifted = <float>(<double>df * ldexp(1.0, -t.index_select))
        if shifted >= t.last:
            outcome[0] = OVERFLOW
        else:
            outcome[0] = HIT
            index = <int>shifted
            fraction16 = <uint64_t>((shifted - <float>index) * <float>65536.0)
    if outcome[0] == UNDERFLOW:
        gap = d
        if t.exponent:
            gap = nf.fp32_sub(ss, nf.fp32_add(start, fp32_power_of_two(t.index_offset)))
        return fp_extrapolate(gap, <uint64_t>t.values[0], <uint64_t>t.uflow_scale)
    if outcome[0] == OVERFLOW:
        return fp_extrapolate(nf.fp32_sub(ss, <uint64_t>t.end & BITS32),
                              <uint64_t>t.values[t.last], <uint64_t>t.oflow_scale)
    diff = nf.fp32_sub(nf.fp16_to_fp32(<uint64_t>t.values[index + 1] & BITS16),
                       nf.fp16_to_fp32(<uint64_t>t.values[index] & BITS16))
    return nf.fp17_add(nf.fp17_mul(nf.fp32_to_fp17(diff), nf.uint16_to_fp17(fraction16)),
                       nf.fp16_to_fp17(<uint64_t>t.values[index] & BITS16))


cdef inline bint fp16_is_nan(uint64_t bits) noexcept nogil:
    return (bits & 0x7C00) == 0x7C00 and (bits & 0x3FF) != 0


def lrn_fp16(const uint16_t[:, :, ::1] cube, int channels, dict cfg,
             const int64_t[::1] le_table, const int64_t[::1] lo_table):
    """LRN of a whole (surfaces*16, H, W) FP16 cube (bit patterns) whose first `channels` lanes
    are real, in the C model's float formats.  Per pixel and lane c:
      0. NAN_TO_ZERO: an FP16 NaN read becomes +0; lanes from `channels` on, and neighbours
         outside the lanes, are fed +0 (DATIN_OFFSET/SCALE/SHIFTER are ignored in FP16);
      1. x = FP16 -> FP17 (an INF becomes the largest FP17), then FP32; q = x * x in FP32
         (SQSUM_BYPASS: q = x);
      2. ss, in FP32 and this order: (q[c-1] + q[c+1]) + q[c], then + (q[c-k] + q[c+k]) for
         k = 2 .. NORMALZ_LEN+1 (SQSUM_BYPASS: ss = q[c]);
      3. both tables looked up (see `fp_lookup`), one chosen as in `lrn_int`;
      4. v = x * lut in FP17 (MUL_BYPASS: v = lut, or x itself when x is NaN);
      5. out = FP17 -> FP16 (saturating; DATOUT_* ignored, no saturation count).
    `cfg` keys: normalz_len, sqsum_bypass, mul_bypass, le_exponent, uflow/oflow/hybrid_priority,
    nan_to_zero, le_/lo_ start, end (FP32 bits), index_select (int8), uflow_scale, oflow_scale
    (FP16 bits), le_index_offset (int8).
    Returns (out uint16 bits (surfaces*16, H, W), counters: the LUT counters, out_saturation 0,
    nan_input, inf_input (every lane read, before the flush), nan_output (every lane written)).
    """
    cdef Py_ssize_t lanes = cube.shape[0], height = cube.shape[1], width = cube.shape[2]
    cdef Py_ssize_t c, y, x, j
    cdef LrnConfig k
    cdef LutTable le, lo
    cdef LutCounts counts = [0, 0, 0, 0, 0]
    cdef Outcome le_out, lo_out
    cdef uint64_t raw, ss, le_y, lo_y, lut_y, v, o
    cdef int64_t n_nan_in = 0, n_inf_in = 0, n_nan_out = 0
    cdef bint nan_to_zero = cfg["nan_to_zero"]

    if not 0 < channels <= lanes:
        raise ValueError("lrn_fp16: channel count outside the cube")
    set_window_and_priorities(&k, cfg)
    for key in ("le_start", "le_end", "lo_start", "lo_end"):
        cfg = dict(cfg, **{key: cfg[key] & BITS32})
    le = make_table(cfg, "le", le_table, LE_LAST, cfg["le_exponent"], FP_SELECT_BITS)
    lo = make_table(cfg, "lo", lo_table, LO_LAST, False, FP_SELECT_BITS)

    out_arr = np.empty((lanes, height, width), np.uint16)
    x17_arr = np.zeros(lanes, np.uint64)
    x32_arr = np.zeros(lanes, np.uint64)
    # squares with a zero on each side of the lanes: q[i + 4] is lane i's
    q_arr = np.zeros(lanes + 8, np.uint64)
    cdef uint16_t[:, :, ::1] out = out_arr
    cdef uint64_t[::1] x17 = x17_arr
    cdef uint64_t[::1] x32 = x32_arr
    cdef uint64_t[::1] q = q_arr

    with nogil:
        for y in range(height):
            for x in range(width):
                for c in range(lanes):
                    raw = cube[c, y, x]
                    if (raw & 0x7C00) == 0x7C00:
                        if raw & 0x3FF:
                            n_nan_in += 1
                        else:
                            n_inf_in += 1
                    if c >= channels or (nan_to_zero and fp16_is_nan(raw)):
                        raw = 0
                    x17[c] = nf.fp16_to_fp17(raw)
                    x32[c] = nf.fp17_to_fp32(x17[c])
                    q[c + 4] = x32[c] if k.sqsum_bypass else nf.fp32_mul(x32[c], x32[c])
                for c in range(lanes):
                    if k.sqsum_bypass:
                        ss = q[c + 4]
                    else:
                        ss = nf.fp32_add(nf.fp32_add(q[c + 3], q[c + 5]), q[c + 4])
                        for j in range(2, k.half_window + 1):
                            ss = nf.fp32_add(ss, nf.fp32_add(q[c + 4 - j], q[c + 4 + j]))
                    le_y = fp_lookup(ss, &le, &le_out)
                    lo_y = fp_lookup(ss, &lo, &lo_out)
                    lut_y = lo_y if choose_lo(le_out, lo_out, &k, &counts) else le_y
                    if k.mul_bypass:
                        v = x17[c] if nf.fp_is_nan(x32[c], 8, 23) else lut_y
                    else:
                        v = nf.fp17_mul(x17[c], lut_y)
                    o = nf.fp17_to_fp16(v)
                    if fp16_is_nan(o):
                        n_nan_out += 1
                    out[c, y, x] = <uint16_t>o
    counters = lut_counters(&counts)
    counters.update(out_saturation=0, nan_input=n_nan_in, inf_input=n_inf_in,
                    nan_output=n_nan_out)
    return out_arr, counters
