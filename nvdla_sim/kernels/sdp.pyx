# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""SDP datapath of one hardware layer: X1 (BS) -> X2 (BN) -> Y (EW, with LUT) -> C.

INT8 and INT16 share the integer datapath below (32-bit internal); only the C converter's output
width differs (8 or 16 bits).  Every element of the (lanes, H, W) int32 input cube, padding lanes
included, goes through
(NVDLA reference map 5.6, 5.7; widths from the C model's HLS types):

X1 / X2 (skipped when BYPASS):
  ALU   op' = sat32(op16 << ALU_SHIFT); MAX / MIN / SUM (EQL sums too) into 33 bits, no saturation
  MUL   v * op16 into 49 bits; with PRELU a non-negative input passes unchanged instead
  TRT   sat32(round(v / 2^MUL_SHIFT)), also when MUL is bypassed; a PReLU pass-through keeps
        the low 32 bits instead (wraps)
  RELU  max(v, 0)
Y (skipped when BYPASS), MUL before ALU:
  operand converters (memory operands only, unless CVT_BYPASS):
        sat32(round((op16 - CVT_OFFSET32) * CVT_SCALE16 / 2^CVT_TRUNCATE))
  MUL   sat32(round(v * op32 / 2^EW_TRUNCATE)); PReLU passes non-negative inputs
  ALU   sat32(MAX / MIN / SUM), or EQL: 0 when equal else 1
  LUT   LE (65 entries, exponent or linear index) and LO (257, linear) lookups, one result chosen
        by the underflow / overflow / hybrid priorities; a hit interpolates two entries with a
        35-bit fraction, a miss extrapolates from the end entry with the slope registers
C:      sat8/16(sat17(round((v - CVT_OFFSET32) * CVT_SCALE16 / 2^CVT_SHIFT)))
All rounding is half away from zero (fixedpoint.pxd).

FP16 (PROC_PRECISION = FP16) runs the same stages on FP32 bit patterns with the C model's float
arithmetic (nvfloat.pxd), in the C model's order:
  input  FP32 (FP16 from memory widened); a NaN input becomes +0 with NAN_TO_ZERO
  X      ALU op: FP16 operand (NaN -> 0 with NAN_TO_ZERO) widened to FP32, no shift; SUM FpAdd,
         MAX / MIN FpMax / FpMin, EQL the integer 0 when the bits are equal else 1
         MUL FpMul by the widened FP16 operand (PReLU passes inputs whose sign bit is 0); no
         truncation; RELU FpRelu
  Y      memory operands FP16 (NaN -> 0) widened, register operands FP32 as is; converters off;
         MUL then ALU as in X; LUT: x - START in FP32 picks the entry (LE exponent: its octave,
         the mantissa the fraction; linear: FpFloatToIntFrac by INDEX_SELECT); a hit blends the
         two FP16 entries in FP17 (y0 * (1 - f) + y1 * f); a miss extrapolates in FP17:
         y0 + FP17(x - (START/END + bias)) * SLOPE_SCALE (FP16), bias = 2^LE_INDEX_OFFSET for an
         LE exponent underflow; the FP17 result widens to FP32
  C      FP32 -> FP16 (RNE, saturating to +-65504; CVT registers unused), -> INT16 for an INT16
         output (round half away, saturate)
An INT16 proc with FP16 output converts C's 17-bit result to FP16.  With an FP16 output the
saturation counter counts results of magnitude 65504, and NaN results are counted.
"""
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint64_t
from libc.math cimport ldexp
from .fixedpoint cimport saturate, shift_left_sat, shift_right_round, signed_shift_round, wrap
from .nvfloat cimport (fp16_to_fp17, fp16_to_fp32, fp17_to_fp32, fp32_to_fp16, fp32_to_fp17,
                       fp_add, fp_from_fraction, fp_from_int, fp_is_nan, fp_max, fp_min, fp_mul,
                       fp_relu, fp_sub, fp_to_int, fp_to_int_frac)

cdef enum:
    ALU_MAX = 0
    ALU_MIN = 1
    ALU_SUM = 2
    ALU_EQL = 3
    DATA_BITS = 32               # X/Y datapath width
    C_TRUNCATED_BITS = 17        # C converter: rounded result saturates to 17 bits first
    EQL_OUT_BITS = 16            # EQL mode: the C stage passes its input on as 16 bits
    PRECISION_INT8 = 0           # D_DATA_FORMAT encodings
    PRECISION_INT16 = 1
    PRECISION_FP16 = 2
    E32 = 8                      # FP32 / FP17 / FP16 exponent and mantissa widths
    M32 = 23
    E17 = 6
    M17 = 10
    E16 = 5
    M16 = 10
    FP17_ONE = 0x7c00
    FP16_MAX_MAGNITUDE = 0x7bff  # 65504
    FRACTION_BITS = 35           # LUT interpolation fraction (Q0.35)
    INDEX_LIMIT = 511            # linear LUT indices saturate to 9 bits
    LE_LAST = 64                 # LE table: entries 0..64
    LO_LAST = 256                # LO table: entries 0..256

cdef enum Flow:
    HIT = 0
    UNDERFLOW = 1
    OVERFLOW = 2

cdef uint64_t FRACTION_MASK = (<uint64_t>1 << FRACTION_BITS) - 1
cdef uint64_t BITS16 = 0xFFFF
cdef uint64_t BITS32 = 0xFFFFFFFF

LE_ENTRIES = LE_LAST + 1
LO_ENTRIES = LO_LAST + 1
# ALU_ALGO register encodings, for the unit module
ALGO_MAX = ALU_MAX
ALGO_MIN = ALU_MIN
ALGO_SUM = ALU_SUM
ALGO_EQL = ALU_EQL


cdef struct XStage:
    bint bypass
    bint alu_bypass
    int alu_algo
    int alu_shift                # 0..63
    bint mul_bypass
    bint mul_prelu
    int mul_shift                # 0..63 (the low 6 bits of MUL_SHIFT_VALUE)
    bint relu_bypass


cdef struct YStage:
    bint bypass
    bint alu_bypass
    int alu_algo
    bint mul_bypass
    bint mul_prelu
    int truncate                 # EW_TRUNCATE, 0..1023
    bint lut_bypass
    bint alu_cvt                 # convert the ALU operand (memory operand, CVT not bypassed)
    int64_t alu_cvt_offset
    int64_t alu_cvt_scale
    int alu_cvt_truncate
    bint alu_mem                 # the ALU operand comes from memory (FP16: widened, NaN flush)
    bint mul_mem
    bint mul_cvt
    int64_t mul_cvt_offset
    int64_t mul_cvt_scale
    int mul_cvt_truncate


cdef struct LutTable:
    bint exponent                # LE only: index = floor(log2(x - start)) - index_offset
    int index_offset             # int8
    int index_select             # int8; linear index = (x - start) >> index_select
    int64_t start
    int64_t end
    int64_t uflow_scale          # int16
    int uflow_shift              # signed 5-bit: negative = left shift
    int64_t oflow_scale
    int oflow_shift


cdef struct LutPriority:
    bint uflow_lo                # both underflow: 1 = take LO
    bint oflow_lo                # both overflow
    bint hybrid_lo               # both hit, or one under- and the other overflows


cdef struct CStage:
    int64_t offset
    int64_t scale
    int shift                    # 0..63
    bint eql                     # EW ALU in EQL mode: nothing is converted or written
    int proc_precision           # D_DATA_FORMAT.PROC_PRECISION: 0 INT8, 1 INT16, 2 FP16
    int out_precision            # D_DATA_FORMAT.OUT_PRECISION
    bint nan_to_zero             # D_FEATURE_MODE_CFG.NAN_TO_ZERO (FP16 only)


ctypedef fused out_t:            # output element: INT8, or 16 bits (INT16 / FP16 bit patterns)
    int8_t
    int16_t


cdef struct LutStats:
    int64_t uflow
    int64_t oflow
    int64_t hybrid               # elements whose chosen table hit
    int64_t le_hit
    int64_t lo_hit


# -- X (BS / BN) -------------------------------------------------------------------------------
cdef inline int64_t x_stage(int64_t v, int64_t alu_op, int64_t mul_op,
                            const XStage *s) noexcept nogil:
    cdef int64_t op
    cdef bint keep_low_bits = False
    if not s.alu_bypass:
        op = shift_left_sat(alu_op, s.alu_shift, DATA_BITS)
        if s.alu_algo == ALU_MAX:
            v = v if v > op else op
        elif s.alu_algo == ALU_MIN:
            v = v if v < op else op
        else:
            v = v + op
    if not s.mul_bypass:
        if s.mul_prelu and v >= 0:
            keep_low_bits = True
        else:
            v = v * mul_op
    if keep_low_bits:
        v = wrap(v, DATA_BITS)
    else:
        v = saturate(shift_right_round(v, s.mul_shift), DATA_BITS)
    if not s.relu_bypass and v < 0:
        v = 0
    return v


# -- Y (EW) ------------------------------------------------------------------------------------
cdef inline int64_t convert_operand(int64_t op, bint enabled, int64_t offset, int64_t scale,
                                    int truncate) noexcept nogil:
    if not enabled:
        return op
    return saturate(shift_right_round((op - offset) * scale, truncate), DATA_BITS)


cdef inline int lut_exponent_index(int64_t x, const LutTable *t, int *index,
                                   uint64_t *fraction) noexcept nogil:
    """LE exponent mode: the octave of x - start picks the entry, the rest is the fraction."""
    cdef uint64_t d
    cdef int e = 0, s
    index[0] = 0
    fraction[0] = 0
    if x <= t.start:
        return UNDERFLOW
    d = <uint64_t>(x - t.start)          # 1 .. 2^32-1
    while (d >> (e + 1)) != 0:
        e += 1
    if e < t.index_offset:
        return UNDERFLOW
    s = e - t.index_offset
    if s >= LE_LAST:
        index[0] = LE_LAST
        return OVERFLOW
    index[0] = s
    fraction[0] = (d - (<uint64_t>1 << e)) << (FRACTION_BITS - e)
    return HIT


cdef inline int lut_linear_index(int64_t x, const LutTable *t, int last, int *index,
                                 uint64_t *fraction) noexcept nogil:
    """Linear mode: index = (x - start) >> select (<< when select < 0), saturated to 9 bits."""
    cdef uint64_t u, q, f
    cdef int sel = t.index_select, k
    index[0] = 0
    fraction[0] = 0
    if x <= t.start:
        return UNDERFLOW
    u = <uint64_t>(x - t.start)          # 1 .. 2^32-1
    if sel >= 0:
        q = u >> sel if sel < 64 else 0
    elif -sel >= 32:
        q = INDEX_LIMIT
    else:
        q = u << (-sel)
    if q > INDEX_LIMIT:
        q = INDEX_LIMIT
    if q >= <uint64_t>last:
        index[0] = last
        return OVERFLOW
    index[0] = <int>q
    # The hardware masks the low `select` bits into a signed 32-bit value, widens it to the
    # 35-bit fraction and aligns it by select - 35 (a left shift when negative, truncated).
    if 0 <= sel < 32:
        f = u & ((<uint64_t>1 << sel) - 1)
    else:
        f = u
    f = (<uint64_t>wrap(<int64_t>f, DATA_BITS)) & FRACTION_MASK
    k = sel - FRACTION_BITS
    if k >= 0:
        fraction[0] = f >> k if k < 64 else 0
    else:
        fraction[0] = (f << (-k)) & FRACTION_MASK if -k < 64 else 0
    return HIT


cdef inline bint choose_lo(int le_flow, int lo_flow, const LutPriority *pri) noexcept nogil:
    """Which table's result is taken: a hit beats a miss, else the priority registers decide."""
    if le_flow == UNDERFLOW and lo_flow == UNDERFLOW:
        return pri.uflow_lo
    if le_flow == OVERFLOW and lo_flow == OVERFLOW:
        return pri.oflow_lo
    if (le_flow == HIT) == (lo_flow == HIT):
        return pri.hybrid_lo
    return lo_flow == HIT


cdef inline void count_lut(int le_flow, int lo_flow, int flow, LutStats *stats) noexcept nogil:
    stats.le_hit += le_flow == HIT
    stats.lo_hit += lo_flow == HIT
    stats.hybrid += flow == HIT
    stats.uflow += flow == UNDERFLOW
    stats.oflow += flow == OVERFLOW


cdef inline int64_t lut_lookup(int64_t x, const LutTable *le, const LutTable *lo,
                               const LutPriority *pri, const int64_t *le_values,
                               const int64_t *lo_values, LutStats *stats) noexcept nogil:
    cdef int le_index, lo_index, index, flow, le_flow, lo_flow
    cdef uint64_t le_frac, lo_frac, frac
    cdef bint use_lo
    cdef const LutTable *t
    cdef const int64_t *values
    cdef int64_t y0, bias, offset, scale
    cdef int shift
    if le.exponent:
        le_flow = lut_exponent_index(x, le, &le_index, &le_frac)
    else:
        le_flow = lut_linear_index(x, le, LE_LAST, &le_index, &le_frac)
    lo_flow = lut_linear_index(x, lo, LO_LAST, &lo_index, &lo_frac)

    use_lo = choose_lo(le_flow, lo_flow, pri)
    if use_lo:
        t = lo
        values = lo_values
        index, frac, flow = lo_index, lo_frac, lo_flow
    else:
        t = le
        values = le_values
        index, frac, flow = le_index, le_frac, le_flow

    count_lut(le_flow, lo_flow, flow, stats)
    if flow == HIT:
        return saturate(shift_right_round(
            values[index] * <int64_t>((<uint64_t>1 << FRACTION_BITS) - frac)
            + values[index + 1] * <int64_t>frac, FRACTION_BITS), DATA_BITS)

    y0 = values[index]
    bias = 0
    if flow == UNDERFLOW:
        offset, scale, shift = t.start, t.uflow_scale, t.uflow_shift
        # An LE exponent table starts at start + 2^offset.  (The C model shifts a 32-bit 1, so
        # offsets >= 32 wrap the shift count as x86 does.)
        if not use_lo and t.exponent and t.index_offset > 0:
            bias = <int64_t>1 << (t.index_offset & 31)
    else:
        offset, scale, shift = t.end, t.oflow_scale, t.oflow_shift
    return saturate(y0 + signed_shift_round((x - (bias + offset)) * scale, shift, DATA_BITS),
                    DATA_BITS)


cdef inline int64_t y_stage(int64_t v, int64_t alu_op, int64_t mul_op, const YStage *s,
                            const LutTable *le, const LutTable *lo, const LutPriority *pri,
                            const int64_t *le_values, const int64_t *lo_values,
                            LutStats *stats) noexcept nogil:
    cdef int64_t op
    if not s.mul_bypass:
        op = convert_operand(mul_op, s.mul_cvt, s.mul_cvt_offset, s.mul_cvt_scale,
                             s.mul_cvt_truncate)
        if not (s.mul_prelu and v >= 0):
            v = saturate(shift_right_round(v * op, s.truncate), DATA_BITS)
    if not s.alu_bypass:
        op = convert_operand(alu_op, s.alu_cvt, s.alu_cvt_offset, s.alu_cvt_scale,
                             s.alu_cvt_truncate)
        if s.alu_algo == ALU_MAX:
            v = v if v > op else op
        elif s.alu_algo == ALU_MIN:
            v = v if v < op else op
        elif s.alu_algo == ALU_EQL:
            v = 0 if v == op else 1
        else:
            v = saturate(v + op, DATA_BITS)
    if not s.lut_bypass:
        v = lut_lookup(v, le, lo, pri, le_values, lo_values, stats)
    return v



# -- FP16 processing (FP32 datapath) ------------------------------------------------------------
cdef inline uint64_t fp16_operand(int64_t op, bint nan_to_zero) noexcept nogil:
    """An FP16 operand widened to FP32; a NaN is +0 first with NAN_TO_ZERO."""
    cdef uint64_t bits = <uint64_t>op & BITS16
    if nan_to_zero and fp_is_nan(bits, E16, M16):
        bits = 0
    return fp16_to_fp32(bits)


cdef inline uint64_t fp_alu(int algo, uint64_t a, uint64_t b) noexcept nogil:
    if algo == ALU_SUM:
        return fp_add(a, b, E32, M32)
    if algo == ALU_MAX:
        return fp_max(a, b, E32, M32)
    if algo == ALU_EQL:
        return 0 if a == b else 1           # an integer, not a float
    return fp_min(a, b, E32, M32)


cdef inline bint fp_sign(uint64_t v) noexcept nogil:
    return (v >> 31) & 1


cdef inline uint64_t fp_x_stage(uint64_t v, int64_t alu_op, int64_t mul_op, const XStage *s,
                                bint nan_to_zero) noexcept nogil:
    if not s.alu_bypass:
        v = fp_alu(s.alu_algo, v, fp16_operand(alu_op, nan_to_zero))
    if not s.mul_bypass and not (s.mul_prelu and not fp_sign(v)):
        v = fp_mul(v, fp16_operand(mul_op, nan_to_zero), E32, M32)
    if not s.relu_bypass:
        v = fp_relu(v, E32, M32)
    return v


cdef inline int fp_lut_index(uint64_t x, const LutTable *t, int last, bint exponent, int *index,
                             uint64_t *fraction) noexcept nogil:
    """Entry and fraction of x in an FP table: x - START in FP32; negative, zero or NaN
    underflows."""
    cdef uint64_t d = fp_sub(x, <uint64_t>t.start & BITS32, E32, M32)
    cdef uint64_t expo = (d >> M32) & 0xFF, mant = d & 0x7FFFFF
    cdef uint64_t i, f
    cdef int octave
    index[0] = 0
    fraction[0] = 0
    if fp_sign(d) or (expo == 0 and mant == 0) or fp_is_nan(d, E32, M32):
        return UNDERFLOW
    if exponent:
        octave = <int>expo - 127
        if octave < t.index_offset:
            return UNDERFLOW
        if octave - t.index_offset >= last:
            index[0] = last
            return OVERFLOW
        index[0] = octave - t.index_offset
        fraction[0] = mant << (FRACTION_BITS - M32)
        return HIT
    fp_to_int_frac(d, E32, M32, t.index_select, 8, 9, FRACTION_BITS, &i, &f)
    if i >= <uint64_t>last:
        index[0] = last
        return OVERFLOW
    index[0] = <int>i
    fraction[0] = f
    return HIT


cdef inline uint64_t fp32_power_of_two(int k) noexcept nogil:
    """2^k as FP32 bits (k from -149 to 127; denormal below -126)."""
    if k >= -126:
        return <uint64_t>(k + 127) << M32
    return <uint64_t>1 << (k + 149)


cdef inline uint64_t fp_lut_lookup(uint64_t x, const LutTable *le, const LutTable *lo,
                                   const LutPriority *pri, const int64_t *le_values,
                                   const int64_t *lo_values, LutStats *stats) noexcept nogil:
    cdef int le_index, lo_index, index, flow, le_flow, lo_flow
    cdef uint64_t le_frac, lo_frac, frac, a0, a1, b0, b1, bias, offset, scale, y0
    cdef bint use_lo
    cdef const LutTable *t
    cdef const int64_t *values
    le_flow = fp_lut_index(x, le, LE_LAST, le.exponent, &le_index, &le_frac)
    lo_flow = fp_lut_index(x, lo, LO_LAST, False, &lo_index, &lo_frac)
    use_lo = choose_lo(le_flow, lo_flow, pri)
    if use_lo:
        t, values, index, frac, flow = lo, lo_values, lo_index, lo_frac, lo_flow
    else:
        t, values, index, frac, flow = le, le_values, le_index, le_frac, le_flow
    count_lut(le_flow, lo_flow, flow, stats)
    y0 = fp16_to_fp17(<uint64_t>values[index] & BITS16)
    if flow == HIT:
        a0 = FP17_ONE if frac == 0 else fp_from_fraction(
            ((<uint64_t>1 << FRACTION_BITS) - frac), FRACTION_BITS, E17, M17)
        a1 = fp_from_fraction(frac, FRACTION_BITS, E17, M17)
        b0 = fp_mul(a0, y0, E17, M17)
        b1 = fp_mul(a1, fp16_to_fp17(<uint64_t>values[index + 1] & BITS16), E17, M17)
        return fp17_to_fp32(fp_add(b0, b1, E17, M17))
    bias = 0
    if flow == UNDERFLOW:
        offset, scale = <uint64_t>t.start & BITS32, <uint64_t>t.uflow_scale & BITS16
        if not use_lo and t.exponent:
            bias = fp32_power_of_two(t.index_offset)
    else:
        offset, scale = <uint64_t>t.end & BITS32, <uint64_t>t.oflow_scale & BITS16
    a0 = fp32_to_fp17(fp_sub(x, fp_add(offset, bias, E32, M32), E32, M32))
    b0 = fp_mul(a0, fp16_to_fp17(scale), E17, M17)
    return fp17_to_fp32(fp_add(y0, b0, E17, M17))


cdef inline uint64_t fp_y_stage(uint64_t v, int64_t alu_op, int64_t mul_op, const YStage *s,
                                bint nan_to_zero, const LutTable *le, const LutTable *lo,
                                const LutPriority *pri, const int64_t *le_values,
                                const int64_t *lo_values, LutStats *stats) noexcept nogil:
    cdef uint64_t op
    if not s.mul_bypass:
        op = fp16_operand(mul_op, nan_to_zero) if s.mul_mem else <uint64_t>mul_op & BITS32
        if not (s.mul_prelu and not fp_sign(v)):
            v = fp_mul(v, op, E32, M32)
    if not s.alu_bypass:
        op = fp16_operand(alu_op, nan_to_zero) if s.alu_mem else <uint64_t>alu_op & BITS32
        v = fp_alu(s.alu_algo, v, op)
    if not s.lut_bypass:
        v = fp_lut_lookup(v, le, lo, pri, le_values, lo_values, stats)
    return v


def fp16_input(const int16_t[:, :, ::1] x, int32_t[:, :, ::1] out):
    """Widen an FP16 cube (bit patterns) to FP32 bit patterns as SDP takes it from SDP_RDMA;
    returns the (NaN, INF) input counts of D_STATUS_NAN_INPUT_NUM / INF_INPUT_NUM."""
    cdef Py_ssize_t ch, h, w
    cdef uint64_t bits
    cdef int64_t nan = 0, inf = 0
    if not same_shape(x.shape, out.shape):
        raise ValueError("fp16_input: output shape differs from the input cube")
    with nogil:
        for ch in range(x.shape[0]):
            for h in range(x.shape[1]):
                for w in range(x.shape[2]):
                    bits = <uint64_t>x[ch, h, w] & BITS16
                    if (bits >> M16) & 0x1F == 0x1F:
                        if bits & 0x3FF:
                            nan += 1
                        else:
                            inf += 1
                    out[ch, h, w] = <int32_t>fp16_to_fp32(bits)
    return nan, inf

# -- the layer ---------------------------------------------------------------------------------
cdef inline bint same_shape(const Py_ssize_t *a, const Py_ssize_t *b) noexcept:
    return a[0] == b[0] and a[1] == b[1] and a[2] == b[2]


cdef inline int64_t c_stage(int64_t v, const CStage *c, bint *saturated) noexcept nogil:
    """The output converter: the 16-bit output word (INT8 sign-extended, INT16, FP16 bits)."""
    cdef int64_t t, r, q
    cdef uint64_t o
    saturated[0] = False
    if c.proc_precision == PRECISION_FP16:
        o = fp32_to_fp16(<uint64_t>v & BITS32)
        if c.out_precision == PRECISION_INT16:
            return fp_to_int(o, E16, M16, 16)
        return wrap(<int64_t>o, 16)
    t = (v - c.offset) * c.scale
    r = saturate(shift_right_round(t, c.shift), C_TRUNCATED_BITS)
    # The saturation flag compares with the truncated quotient, within 1.
    q = t >> c.shift
    saturated[0] = q != r and q != r + 1 and q != r - 1
    if c.out_precision == PRECISION_FP16:
        return wrap(<int64_t>fp_from_int(r, C_TRUNCATED_BITS, E16, M16), 16)
    return saturate(r, 16 if c.out_precision == PRECISION_INT16 else 8)


def sdp_layer(const int32_t[:, :, ::1] x,
             const int32_t[:, :, :] x1_alu, const int32_t[:, :, :] x1_mul,
             const int32_t[:, :, :] x2_alu, const int32_t[:, :, :] x2_mul,
             const int32_t[:, :, :] y_alu, const int32_t[:, :, :] y_mul,
             const int64_t[::1] le_values, const int64_t[::1] lo_values,
             dict cfg, out_t[:, :, ::1] out):
    """Run the SDP datapath over the cube `x` (lanes, H, W) into `out` (same shape).

    `x` holds int32 values (INT8 / INT16 processing) or FP32 bit patterns (FP16).  The six
    operand arrays are indexed like `x` (broadcast views are fine); each holds what the stage
    uses for that operand (register value, or the 16-bit memory operand before the EW converter;
    FP values as bit patterns).  `cfg` has the keys x1, x2 (XStage), y (YStage), le, lo
    (LutTable), priority (LutPriority) and c (CStage), each a dict of the struct's fields.
    `out` is int8 for an INT8 output, int16 for INT16 and FP16 (bit patterns).
    Returns the counters: lut_uflow, lut_oflow, lut_hybrid, lut_le_hit, lut_lo_hit,
    out_saturation, nan_output (NaN results of an FP16 output) and unequal (EQL mode: some result
    was not 0).
    """
    cdef XStage x1 = cfg["x1"], x2 = cfg["x2"]
    cdef YStage y = cfg["y"]
    cdef LutTable le = cfg["le"], lo = cfg["lo"]
    cdef LutPriority pri = cfg["priority"]
    cdef CStage c = cfg["c"]
    cdef LutStats stats
    cdef Py_ssize_t lanes = x.shape[0], height = x.shape[1], width = x.shape[2]
    cdef Py_ssize_t ch, h, w
    cdef int64_t v, o
    cdef int64_t saturations = 0, nan_output = 0
    cdef bint unequal = False, saturated
    cdef bint fp = c.proc_precision == PRECISION_FP16
    cdef bint ntz = fp and c.nan_to_zero
    cdef bint fp_out = c.out_precision == PRECISION_FP16
    cdef int out_bits = 8 if c.out_precision == PRECISION_INT8 else 16
    if not (same_shape(x1_alu.shape, x.shape) and same_shape(x1_mul.shape, x.shape)
            and same_shape(x2_alu.shape, x.shape) and same_shape(x2_mul.shape, x.shape)
            and same_shape(y_alu.shape, x.shape) and same_shape(y_mul.shape, x.shape)
            and same_shape(out.shape, x.shape)):
        raise ValueError("sdp_layer: operand or output shape differs from the input cube")
    if le_values.shape[0] != LE_ENTRIES or lo_values.shape[0] != LO_ENTRIES:
        raise ValueError("sdp_layer: the LUTs must have 65 (LE) and 257 (LO) entries")
    if c.proc_precision not in (PRECISION_INT8, PRECISION_INT16, PRECISION_FP16) or \
            c.out_precision not in (PRECISION_INT8, PRECISION_INT16, PRECISION_FP16):
        raise ValueError("sdp_layer: precisions are 0 (INT8), 1 (INT16) or 2 (FP16)")
    if out_bits != <int>(8 * sizeof(out_t)):
        raise ValueError(f"sdp_layer: {out_bits}-bit output into a {8 * sizeof(out_t)}-bit array")
    stats.uflow = stats.oflow = stats.hybrid = stats.le_hit = stats.lo_hit = 0
    with nogil:
        for ch in range(lanes):
            for h in range(height):
                for w in range(width):
                    v = x[ch, h, w]
                    if fp:
                        v = <int64_t>(<uint64_t>v & BITS32)
                        if ntz and fp_is_nan(<uint64_t>v, E32, M32):
                            v = 0
                        if not x1.bypass:
                            v = <int64_t>fp_x_stage(<uint64_t>v, x1_alu[ch, h, w],
                                                    x1_mul[ch, h, w], &x1, ntz)
                        if not x2.bypass:
                            v = <int64_t>fp_x_stage(<uint64_t>v, x2_alu[ch, h, w],
                                                    x2_mul[ch, h, w], &x2, ntz)
                        if not y.bypass:
                            v = <int64_t>fp_y_stage(<uint64_t>v, y_alu[ch, h, w],
                                                    y_mul[ch, h, w], &y, ntz, &le, &lo, &pri,
                                                    &le_values[0], &lo_values[0], &stats)
                    else:
                        if not x1.bypass:
                            v = x_stage(v, x1_alu[ch, h, w], x1_mul[ch, h, w], &x1)
                        if not x2.bypass:
                            v = x_stage(v, x2_alu[ch, h, w], x2_mul[ch, h, w], &x2)
                        if not y.bypass:
                            v = y_stage(v, y_alu[ch, h, w], y_mul[ch, h, w], &y, &le, &lo,
                                        &pri, &le_values[0], &lo_values[0], &stats)
                    o = c_stage(v, &c, &saturated)
                    if c.eql:
                        # C passes its input on unconverted; nothing is written
                        o = wrap(v, EQL_OUT_BITS)
                        if o != 0:
                            unequal = True
                        out[ch, h, w] = 0
                    else:
                        out[ch, h, w] = <out_t>o
                    if fp_out:
                        # counted on the output word: a magnitude of 65504, a NaN
                        saturated = (o & 0x7FFF) == FP16_MAX_MAGNITUDE
                        nan_output += fp_is_nan(<uint64_t>o & BITS16, E16, M16)
                    saturations += saturated
    return {"lut_uflow": stats.uflow, "lut_oflow": stats.oflow, "lut_hybrid": stats.hybrid,
            "lut_le_hit": stats.le_hit, "lut_lo_hit": stats.lo_hit,
            "out_saturation": saturations, "nan_output": nan_output, "unequal": unequal}


def output_converter(const int64_t[::1] v, int64_t offset, int64_t scale, int shift,
                     bint int16_out, int64_t[::1] out):
    """The integer C stage (`c_stage`) alone on 32-bit datapath values `v` into `out`: what an
    INT8 (or INT16) SDP writes for them.  The compiler inverts it (monotonic for scale >= 0) to
    place an ALU bound in front of it (emit_sdp.converter_preimage)."""
    cdef CStage c
    cdef bint saturated
    cdef Py_ssize_t i
    if out.shape[0] != v.shape[0]:
        raise ValueError("output_converter: `out` and `v` differ in length")
    c.offset, c.scale, c.shift, c.eql = offset, scale, shift, False
    c.proc_precision = PRECISION_INT16 if int16_out else PRECISION_INT8
    c.out_precision = c.proc_precision
    c.nan_to_zero = False
    for i in range(v.shape[0]):
        out[i] = c_stage(v[i], &c, &saturated)
