# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False
"""Convolution-pipeline arithmetic: CDMA input converters, the CMAC multiply-accumulate of a whole
layer, and the CACC output stage.  One kernel per operation, specialised for INT8 and INT16 elements
by the fused type `elem_t` (the arithmetic is the same shape; only widths differ).

Convolution works on *lines*: rows of elements the CSC has already padded (padding positions
hold the CSC pad value, channels beyond the kernel's are absent).  Output (k, oy, ox) sums, over
kernel rows r and kernel columns s, the dot product of `kernel_c` elements starting at

    lines[oy * y_step + r * r_step, ox * x_step + s * s_step]

with weights[k, r, s * kernel_c : (s + 1) * kernel_c].  Direct convolution uses lines of
(width x channels) elements (x_step = stride_x * C, s_step = dilation_x * C); image input uses the
CDMA's pixel lines with a kernel one column wide whose channel count is the pre-extended
S * C_pixel (x_step = stride_x * C_pixel).

Exactness, INT8: each product is at most 2^14 in magnitude, so an int32 sum of up to 2^16 products
is exact; dot products are cut into such chunks and added in int64.  A CACC sum (C <= 8192
channels, R, S <= 32) stays below 2^37, far from the 48-bit accumulator limit, so the hardware's
saturating 48-bit accumulation in its own order gives the same value as this exact int64 sum.

INT16: a product reaches 2^30, a whole layer's sum 2^53, so the order matters.  As the hardware
does, each atomic operation (one kernel position, `block_c` channels: the CSC's ATOMIC_C
"super channel") is summed exactly (at most 2^36: the CMAC's 44-bit cell result) and the CACC adds
those partial sums into its 48-bit accumulator saturating at every step, channel blocks outermost,
then kernel rows, then kernel columns (the CSC's issue order).

FP16 (elements as uint16 binary16 patterns): the C model's own number formats, not IEEE ones,
from nvfloat.pxd (cmac_fp16_dot, cacc_fp48_add, cacc_fp48_to_fp32):
  - CMAC atomic operation (`fp16_atomic`): channels where data or weight is +-0 are skipped (the
    CSC's masks).  Each product is formed in fixed point against the largest exponent of the
    operation: exponents split into a 3-bit "group" (e >> 2) and a 0..3 pre-shift of the 11-bit
    mantissa (denormals: exponent 1, no implicit bit), a radix-4 Booth multiplier with a carry-save
    tree whose sum and carry are each shifted right by 4 x (group distance) and summed with a
    sign-compensation constant (so truncation differs from exact by up to one unit), products summed
    exactly into 38 bits; the result is 44 bits: a 6-bit exponent (4 x max group) over that 38-bit
    two's complement sum, value = sum x 2^(exp - 50).  INF is an ordinary exponent 31 (+-65536);
    a NaN (the first NaN weight, else the first NaN data) gives exponent 63 carrying its sign and
    fraction.
  - CACC accumulator: 8-bit exponent (bias 63) over a 40-bit two's complement
    mantissa, value = mantissa x 2^(exp - 101); the 44-bit MAC result is normalised, the smaller
    operand shifted right (bits kept for rounding; dropped whole beyond 40), the sum normalised
    and rounded half away from zero; NaN (exponent 255) sticks.
  - Delivery: sign-magnitude, the 24 top bits rounded half up in magnitude on the
    next bit alone, exponent + 64; NaN keeps 10 fraction bits in the low bits.
`conv_lines` on FP16 writes the accumulator's 48-bit pattern into its int64 output; the CACC stage
(`accumulator_output_fp16`) turns it into FP32 bit patterns.
"""
cimport cython
from cython.parallel cimport prange
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from .fixedpoint cimport saturate, shift_right_round
from . cimport nvfloat as nf

ctypedef fused elem_t:             # converter outputs: INT8, INT16, or the converter's 17-bit
    signed char                    # integer (int32) that becomes FP16 by round-to-nearest-even
    short
    int

ctypedef unsigned short fp16_bits   # an FP16 element as its binary16 pattern

ctypedef fused conv_t:             # elements the MACs take: INT8, INT16, FP16 bit patterns
    signed char
    short
    fp16_bits

cdef enum:
    DOT_CHUNK = 65536            # products per exact int32 partial sum (65536 * 2^14 = 2^30)
    ACCUMULATOR_BITS = 48        # CACC assembly accumulator
    DELIVERY_BITS = 32           # CACC -> SDP values
    CONVERTER_BITS = 17          # CDMA converter result before the INT8/INT16/FP16 output stage


cdef inline int element_bits(elem_t* unused) noexcept nogil:
    if elem_t is int:
        return CONVERTER_BITS
    if elem_t is short:
        return 16
    return 8


cdef inline int64_t dot(const conv_t* a, const conv_t* b, Py_ssize_t n) noexcept nogil:
    cdef int64_t total = 0
    cdef int32_t part
    cdef Py_ssize_t i, start = 0, stop
    if conv_t is fp16_bits:
        return 0                     # FP16 goes through fp16_atomic
    if conv_t is short:
        for i in range(n):
            total += <int64_t>(<int32_t>a[i] * <int32_t>b[i])
        return total
    while start < n:
        stop = start + DOT_CHUNK if n - start > DOT_CHUNK else n
        part = 0
        for i in range(start, stop):
            part += <int32_t>a[i] * <int32_t>b[i]
        total += part
        start = stop
    return total



# -- FP16: CMAC atomic operation, CACC accumulator and delivery ---------------------------------
# The C model's float formats live in nvfloat.pxd (one implementation of each rule); conv adds the
# CSC's sparsity masks and the CACC's issue order.
cdef enum:
    FP16_BLOCK_MAX = 64              # channels of one CMAC cell


cdef inline uint64_t fp16_atomic(const unsigned short* dat, const unsigned short* wt,
                                 Py_ssize_t n) noexcept nogil:
    """44-bit CMAC cell result of n <= 64 FP16 channel pairs; a channel whose data or weight is
    +-0 is masked off (the CSC's masks) and takes no part in the cell exponent."""
    cdef uint8_t enable[FP16_BLOCK_MAX]
    cdef Py_ssize_t i
    for i in range(n):
        enable[i] = (dat[i] & 0x7fff) != 0 and (wt[i] & 0x7fff) != 0
    return nf.cmac_fp16_dot(<const uint16_t*>dat, <const uint16_t*>wt, enable, <int>n)


def accumulator_output_fp16(const int64_t[:, :, ::1] acc, uint32_t[:, :, ::1] out):
    """CACC delivery for FP16 layers: FP48 accumulators to FP32 bit patterns.  Returns how many
    are NaN (D_NAN_OUTPUT_NUM)."""
    cdef Py_ssize_t k, y, x
    cdef uint32_t v
    cdef int64_t nans = 0
    if out.shape[0] < acc.shape[0] or out.shape[1] != acc.shape[1] or out.shape[2] != acc.shape[2]:
        raise ValueError("accumulator_output_fp16: output cube too small")
    with nogil:
        for k in range(acc.shape[0]):
            for y in range(acc.shape[1]):
                for x in range(acc.shape[2]):
                    v = <uint32_t>nf.cacc_fp48_to_fp32(<uint64_t>acc[k, y, x])
                    if (v & 0x7f800000) == 0x7f800000 and (v & 0x7fffff) != 0:
                        nans += 1
                    out[k, y, x] = v
    return nans


cdef _decode_fp16(const unsigned short[:, ::1] bits, uint32_t[:, ::1] out):
    """Every element decoded once for the CMAC cells (nvfloat.cmac_fp16_operand)."""
    cdef Py_ssize_t i, j
    with nogil:
        for i in range(bits.shape[0]):
            for j in range(bits.shape[1]):
                out[i, j] = nf.cmac_fp16_operand(bits[i, j])


cdef _conv_lines_fp16(const unsigned short[:, ::1] lines, const unsigned short[:, :, ::1] weights,
                      int64_t[:, :, ::1] out, int kernel_w, int kernel_c, int x_step, int s_step,
                      int y_step, int r_step, int block_c):
    """conv_lines for FP16 (arguments already checked): lines and weights decoded once, kernels
    shared out between threads (each output is computed whole by one thread, in the CACC's order,
    so the result does not depend on the thread count)."""
    import numpy as np
    cdef Py_ssize_t n_k = weights.shape[0], n_r = weights.shape[1], span = weights.shape[2]
    cdef Py_ssize_t out_h = out.shape[1], out_w = out.shape[2]
    cdef Py_ssize_t k, oy, ox
    dec_lines_arr = np.empty((lines.shape[0], lines.shape[1]), np.uint32)
    dec_wt_arr = np.empty((n_k * n_r, span), np.uint32)
    wt_masks_arr = np.empty((n_k * n_r, span), np.uint32)
    cdef uint32_t[:, ::1] dec_lines = dec_lines_arr
    cdef uint32_t[:, ::1] dec_wt = dec_wt_arr
    cdef uint32_t[:, ::1] wt_masks = wt_masks_arr
    cdef Py_ssize_t i, j
    _decode_fp16(lines, dec_lines)
    _decode_fp16(np.asarray(weights).reshape(n_k * n_r, span), dec_wt)
    with nogil:
        for i in range(n_k * n_r):
            for j in range(span):
                wt_masks[i, j] = nf.cmac_fp16_booth_masks(dec_wt[i, j])
    with nogil:
        for k in prange(n_k, schedule="dynamic"):
            for oy in range(out_h):
                for ox in range(out_w):
                    out[k, oy, ox] = <int64_t>_fp16_output(
                        &dec_lines[0, 0], &dec_wt[k * n_r, 0], &wt_masks[k * n_r, 0],
                        &lines[0, 0], &weights[k, 0, 0],
                        dec_lines.shape[1], span, n_r, oy * y_step, ox * x_step, kernel_w,
                        kernel_c, s_step, r_step, block_c)


cdef inline uint64_t _fp16_output(const uint32_t* dec_lines, const uint32_t* dec_wt,
                                  const uint32_t* wt_masks, const unsigned short* lines,
                                  const unsigned short* wt,
                                  Py_ssize_t line_len, Py_ssize_t span, Py_ssize_t n_r,
                                  Py_ssize_t line0, Py_ssize_t col0, int kernel_w, int kernel_c,
                                  int s_step, int r_step, int block_c) noexcept nogil:
    """The FP48 accumulator of one output: channel blocks outermost, then kernel rows, then
    kernel columns (the CSC's issue order); `dec_wt`/`wt_masks`/`wt` point at this kernel's
    rows."""
    cdef uint64_t acc = 0
    cdef Py_ssize_t c0 = 0, n, r, s, d_at, w_at
    while c0 < kernel_c:
        n = block_c if kernel_c - c0 > block_c else kernel_c - c0
        for r in range(n_r):
            for s in range(kernel_w):
                d_at = (line0 + r * r_step) * line_len + col0 + c0 + s * s_step
                w_at = r * span + c0 + s * kernel_c
                acc = nf.cacc_fp48_add(acc, nf.cmac_fp16_dot_fast(
                    dec_lines + d_at, dec_wt + w_at, wt_masks + w_at,
                    <const uint16_t*>(lines + d_at), <const uint16_t*>(wt + w_at), <int>n))
        c0 += n
    return acc


def fp16_booth_mismatches(const uint32_t[::1] wt_mant, const uint32_t[::1] dat_mant,
                           bint cross=True):
    """How many (negative, shift) products of the fast CMAC product (nvfloat.cmac_fp16_booth_fast)
    differ from the reference (cmac_fp16_booth), over every (wt_mant[i], dat_mant[j]) pair
    (cross) or the pairs (wt_mant[i], dat_mant[i]), both signs and shifts 0, 4, ..., 36.
    Returns (mismatches, products compared)."""
    cdef Py_ssize_t i, j, j0, j1
    cdef uint32_t neg, shift
    cdef int64_t bad = 0, seen = 0
    if not cross and wt_mant.shape[0] != dat_mant.shape[0]:
        raise ValueError("fp16_booth_mismatches: pairwise arrays differ in length")
    with nogil:
        for i in range(wt_mant.shape[0]):
            j0 = 0 if cross else i
            j1 = dat_mant.shape[0] if cross else i + 1
            for j in range(j0, j1):
                for neg in range(2):
                    for shift in range(0, 40, 4):
                        seen += 1
                        if nf.cmac_fp16_booth_fast(neg, wt_mant[i], dat_mant[j], shift) != \
                                nf.cmac_fp16_booth(neg, wt_mant[i], dat_mant[j], shift):
                            bad += 1
    return bad, seen


def conv_lines_fp16_reference(const unsigned short[:, ::1] lines,
                              const unsigned short[:, :, ::1] weights, int64_t[:, :, ::1] out,
                              int kernel_w, int kernel_c, int x_step, int s_step, int y_step,
                              int r_step, int block_c=0):
    """FP16 conv_lines through the readable reference cell (nvfloat.cmac_fp16_dot: Booth rows and
    carry-save tree with loops), one thread: what tests and benchmarks compare the fast path with.
    Same arguments as conv_lines (shapes trusted)."""
    cdef Py_ssize_t n_k = weights.shape[0], n_r = weights.shape[1]
    cdef Py_ssize_t out_h = out.shape[1], out_w = out.shape[2]
    cdef Py_ssize_t k, r, s, oy, ox, base, c0, n
    cdef int64_t acc
    cdef const unsigned short* row
    cdef const unsigned short* w
    if block_c <= 0 or block_c > kernel_c:
        block_c = kernel_c
    if block_c > FP16_BLOCK_MAX:
        raise ValueError("conv_lines: FP16 atomic operations hold at most 64 channels")
    with nogil:
        for oy in range(out_h):
            for ox in range(out_w):
                base = ox * x_step
                for k in range(n_k):
                    acc = 0
                    c0 = 0
                    while c0 < kernel_c:
                        n = block_c if kernel_c - c0 > block_c else kernel_c - c0
                        for r in range(n_r):
                            row = &lines[oy * y_step + r * r_step, base + c0]
                            w = &weights[k, r, c0]
                            for s in range(kernel_w):
                                acc = <int64_t>nf.cacc_fp48_add(
                                    <uint64_t>acc, fp16_atomic(row + s * s_step,
                                                               w + s * kernel_c, n))
                        c0 += n
                    out[k, oy, ox] = acc


def conv_lines(const conv_t[:, ::1] lines, const conv_t[:, :, ::1] weights,
               int64_t[:, :, ::1] out, int kernel_w, int kernel_c, int x_step, int s_step,
               int y_step, int r_step, int block_c=0):
    """Sums of one layer into `out` (K, OH, OW); `weights` is (K, R, kernel_w * kernel_c).
    INT8: exact.  INT16: atomic operations of `block_c` channels (0: all) accumulated with 48-bit
    saturation in the hardware's order.  FP16 (uint16 patterns): the CACC's FP48 accumulator
    pattern of the same operations in the same order (see the module notes)."""
    cdef Py_ssize_t n_k = weights.shape[0], n_r = weights.shape[1], span = weights.shape[2]
    cdef Py_ssize_t out_h = out.shape[1], out_w = out.shape[2]
    cdef Py_ssize_t k, r, s, oy, ox, base, c0, n
    cdef int64_t acc
    cdef const conv_t* row
    cdef const conv_t* w
    cdef bint contiguous = s_step == kernel_c
    if out.shape[0] != n_k:
        raise ValueError("conv_lines: output and weight kernel counts differ")
    if span != <Py_ssize_t>kernel_w * kernel_c:
        raise ValueError("conv_lines: weight rows must hold kernel_w * kernel_c elements")
    if n_k == 0 or out_h == 0 or out_w == 0:
        return
    if n_r == 0 or span == 0:
        out[:, :, :] = 0
        return
    if (out_h - 1) * y_step + (n_r - 1) * r_step >= lines.shape[0] or \
            (out_w - 1) * x_step + (kernel_w - 1) * s_step + kernel_c > lines.shape[1]:
        raise ValueError("conv_lines: the lines do not cover every kernel position")
    if block_c <= 0 or block_c > kernel_c:
        block_c = kernel_c
    if conv_t is fp16_bits:
        if block_c > FP16_BLOCK_MAX:
            raise ValueError("conv_lines: FP16 atomic operations hold at most 64 channels")
        _conv_lines_fp16(lines, weights, out, kernel_w, kernel_c, x_step, s_step, y_step, r_step,
                         block_c)
        return
    with nogil:
        for oy in range(out_h):
            for ox in range(out_w):
                base = ox * x_step
                for k in range(n_k):
                    acc = 0
                    if conv_t is short:
                        c0 = 0
                        while c0 < kernel_c:
                            n = block_c if kernel_c - c0 > block_c else kernel_c - c0
                            for r in range(n_r):
                                row = &lines[oy * y_step + r * r_step, base + c0]
                                w = &weights[k, r, c0]
                                for s in range(kernel_w):
                                    acc = saturate(acc + dot(row + s * s_step, w + s * kernel_c, n),
                                                   ACCUMULATOR_BITS)
                            c0 += n
                    else:
                        for r in range(n_r):
                            row = &lines[oy * y_step + r * r_step, base]
                            w = &weights[k, r, 0]
                            if contiguous:
                                acc += dot(row, w, span)
                            else:
                                for s in range(kernel_w):
                                    acc += dot(row + s * s_step, w + s * kernel_c, kernel_c)
                    out[k, oy, ox] = acc


# -- Winograd F(2x2, 3x3): CSC pre-addition, CMAC 4x4-domain cell, CACC accumulation -------------
# A Winograd layer works on 4x4 tiles of the (channel-extended, padded) input, one tile per 2x2
# output block, tiles 2 apart.  Elements of one tile and one "super channel" of 4 channels are
# kept as 64 elements [pos * 4 + c], pos = y * 4 + x (the CMAC cell's operand order).
cdef enum:
    WINO_POS = 16                    # positions of a 4x4 tile
    WINO_CELL = 64                   # elements of one cell operation: 16 positions x 4 channels
    WINO_SUPER_C = 4                 # channels of one cell operation


cdef inline void pra_rows_cols_int(const int64_t* d, int64_t* t) noexcept nogil:
    """B^T d B exactly (18-bit results): rows first, then columns (the C model's order)."""
    cdef int64_t m[16]
    cdef int x, y
    for x in range(4):
        m[x] = d[x] - d[8 + x]
        m[4 + x] = d[4 + x] + d[8 + x]
        m[8 + x] = d[8 + x] - d[4 + x]
        m[12 + x] = d[4 + x] - d[12 + x]
    for y in range(4):
        t[4 * y] = m[4 * y] - m[4 * y + 2]
        t[4 * y + 1] = m[4 * y + 1] + m[4 * y + 2]
        t[4 * y + 2] = m[4 * y + 2] - m[4 * y + 1]
        t[4 * y + 3] = m[4 * y + 1] - m[4 * y + 3]


cdef inline void pra_rows_cols_fp16(const uint64_t* d, uint64_t* o) noexcept nogil:
    """B^T d B of FP16 patterns: each operand widened to FP17, every add/sub an FP17 operation in
    the same order as the integer path, the result narrowed back to FP16."""
    cdef uint64_t f[16]
    cdef uint64_t m[16]
    cdef int i, x, y
    for i in range(16):
        f[i] = nf.fp16_to_fp17(d[i])
    for x in range(4):
        m[x] = nf.fp17_sub(f[x], f[8 + x])
        m[4 + x] = nf.fp17_add(f[4 + x], f[8 + x])
        m[8 + x] = nf.fp17_sub(f[8 + x], f[4 + x])
        m[12 + x] = nf.fp17_sub(f[4 + x], f[12 + x])
    for y in range(4):
        o[4 * y] = nf.fp17_to_fp16(nf.fp17_sub(m[4 * y], m[4 * y + 2]))
        o[4 * y + 1] = nf.fp17_to_fp16(nf.fp17_add(m[4 * y + 1], m[4 * y + 2]))
        o[4 * y + 2] = nf.fp17_to_fp16(nf.fp17_sub(m[4 * y + 2], m[4 * y + 1]))
        o[4 * y + 3] = nf.fp17_to_fp16(nf.fp17_sub(m[4 * y + 1], m[4 * y + 3]))


def winograd_pra(const conv_t[:, :, ::1] cube, conv_t[:, :, :, ::1] out, int truncate):
    """CSC pre-addition (PRA) of every input tile: out[ty, tx, c // 4, pos * 4 + c % 4] is
    element pos of B^T d B for the 4x4 tile of channel c at rows 2ty.., columns 2tx.. of `cube`
    (C, H, W).  INT8/INT16: exact 18-bit sums, then shifted right by PRA_TRUNCATE rounding half
    away from zero and saturated to the element width; FP16: FP17 arithmetic (see above)."""
    cdef Py_ssize_t n_c = cube.shape[0], tiles_h = out.shape[0], tiles_w = out.shape[1]
    cdef Py_ssize_t ty, tx, c, y, x, pos
    cdef int bits = 8
    cdef int64_t d[16]
    cdef int64_t t[16]
    cdef uint64_t fd[16]
    cdef uint64_t fo[16]
    if conv_t is short:
        bits = 16
    if n_c % WINO_SUPER_C or out.shape[2] * WINO_SUPER_C != n_c or out.shape[3] != WINO_CELL:
        raise ValueError("winograd_pra: out must be (tiles_h, tiles_w, C / 4, 64), C a multiple of 4")
    if 2 * tiles_h + 2 > cube.shape[1] or 2 * tiles_w + 2 > cube.shape[2]:
        raise ValueError("winograd_pra: the cube does not cover every tile")
    with nogil:
        for ty in range(tiles_h):
            for tx in range(tiles_w):
                for c in range(n_c):
                    if conv_t is fp16_bits:
                        for y in range(4):
                            for x in range(4):
                                fd[4 * y + x] = cube[c, 2 * ty + y, 2 * tx + x]
                        pra_rows_cols_fp16(fd, fo)
                        for pos in range(WINO_POS):
                            out[ty, tx, c >> 2, pos * 4 + (c & 3)] = <conv_t>fo[pos]
                    else:
                        for y in range(4):
                            for x in range(4):
                                d[4 * y + x] = cube[c, 2 * ty + y, 2 * tx + x]
                        pra_rows_cols_int(d, t)
                        for pos in range(WINO_POS):
                            out[ty, tx, c >> 2, pos * 4 + (c & 3)] = <conv_t>saturate(
                                shift_right_round(t[pos], truncate), bits)


cdef inline void wino_post_add(const int64_t* m, int64_t* r) noexcept nogil:
    """A^T m A of the 16 position sums: r[row * 2 + col] of the 2x2 outputs (exact)."""
    cdef int64_t p[8]
    cdef int i
    for i in range(4):
        p[i] = m[i] + m[4 + i] + m[8 + i]
        p[4 + i] = m[4 + i] - m[8 + i] - m[12 + i]
    for i in range(2):
        r[2 * i] = p[4 * i] + p[4 * i + 1] + p[4 * i + 2]
        r[2 * i + 1] = p[4 * i + 1] - p[4 * i + 2] - p[4 * i + 3]


cdef inline void wino_cell_fp16(const unsigned short* dat, const unsigned short* wt,
                                uint64_t* r) noexcept nogil:
    """The four FP44 results of one FP16 Winograd cell: products aligned to the cell exponent
    (zero operands masked), summed per position, A^T . A in 38 bits, all with the cell exponent;
    a NaN operand gives the NaN in all four."""
    cdef uint8_t enable[WINO_CELL]
    cdef int32_t products[WINO_CELL]
    cdef int64_t m[16]
    cdef int64_t s[4]
    cdef uint64_t nan
    cdef int i, exponent
    if nf.cmac_fp16_nan(<const uint16_t*>dat, <const uint16_t*>wt, WINO_CELL, &nan):
        for i in range(4):
            r[i] = nan
        return
    for i in range(WINO_CELL):
        enable[i] = (dat[i] & 0x7fff) != 0 and (wt[i] & 0x7fff) != 0
    exponent = nf.cmac_fp16_products(<const uint16_t*>dat, <const uint16_t*>wt, enable,
                                     WINO_CELL, products)
    for i in range(WINO_POS):
        m[i] = <int64_t>products[4 * i] + products[4 * i + 1] + products[4 * i + 2] \
            + products[4 * i + 3]
    wino_post_add(m, s)
    for i in range(4):
        r[i] = nf.fp44_pack(exponent, s[i])


def winograd_mac(const conv_t[:, :, :, ::1] tiles, const conv_t[:, :, ::1] weights,
                 int64_t[:, :, ::1] out):
    """Sums of a Winograd layer into `out` (K, 2 * tiles_h, 2 * tiles_w).  `tiles` is the PRA
    output (tiles_h, tiles_w, C / 4, 64), `weights` the 4x4-domain kernels (K, C / 4, 64).  Each
    cell operation (one tile, one super channel) multiplies 64 element pairs, sums them per
    position and post-adds A^T . A (INT8/INT16 exact); the CACC adds the operations of a tile's
    super channels in order: INT8/INT16 into the 48-bit saturating accumulator, FP16 into FP48."""
    cdef Py_ssize_t n_k = weights.shape[0], n_s = weights.shape[1]
    cdef Py_ssize_t tiles_h = tiles.shape[0], tiles_w = tiles.shape[1]
    cdef Py_ssize_t k, ty, tx, sc, i, pos
    cdef int64_t acc[4]
    cdef int64_t m[16]
    cdef int64_t r[4]
    cdef uint64_t fr[4]
    cdef const conv_t* d
    cdef const conv_t* w
    if tiles.shape[2] != n_s or tiles.shape[3] != WINO_CELL or weights.shape[2] != WINO_CELL:
        raise ValueError("winograd_mac: tiles (H, W, S, 64) and weights (K, S, 64) differ")
    if out.shape[0] != n_k or out.shape[1] != 2 * tiles_h or out.shape[2] != 2 * tiles_w:
        raise ValueError("winograd_mac: out must be (K, 2 * tiles_h, 2 * tiles_w)")
    with nogil:
        for k in range(n_k):
            for ty in range(tiles_h):
                for tx in range(tiles_w):
                    for i in range(4):
                        acc[i] = 0
                    for sc in range(n_s):
                        d = &tiles[ty, tx, sc, 0]
                        w = &weights[k, sc, 0]
                        if conv_t is fp16_bits:
                            wino_cell_fp16(d, w, fr)
                            for i in range(4):
                                acc[i] = <int64_t>nf.cacc_fp48_add(<uint64_t>acc[i], fr[i])
                        else:
                            for pos in range(WINO_POS):
                                m[pos] = <int64_t>d[4 * pos] * w[4 * pos] \
                                    + <int64_t>d[4 * pos + 1] * w[4 * pos + 1] \
                                    + <int64_t>d[4 * pos + 2] * w[4 * pos + 2] \
                                    + <int64_t>d[4 * pos + 3] * w[4 * pos + 3]
                            wino_post_add(m, r)
                            for i in range(4):
                                acc[i] = saturate(acc[i] + r[i], ACCUMULATOR_BITS)
                    for i in range(4):
                        out[k, 2 * ty + (i >> 1), 2 * tx + (i & 1)] = acc[i]


def accumulator_output(const int64_t[:, :, ::1] acc, int32_t[:, :, ::1] out, int clip_truncate):
    """CACC delivery: sat48 accumulator, round half away from zero by CLIP_TRUNCATE bits, sat32.
    Returns how many outputs saturated to 32 bits (D_OUT_SATURATION)."""
    cdef Py_ssize_t n_k = acc.shape[0], h = acc.shape[1], w = acc.shape[2]
    cdef Py_ssize_t k, y, x
    cdef int64_t v, sat
    cdef int64_t saturated = 0
    if out.shape[0] < n_k or out.shape[1] != h or out.shape[2] != w:
        raise ValueError("accumulator_output: output cube too small")
    with nogil:
        for k in range(n_k):
            for y in range(h):
                for x in range(w):
                    v = shift_right_round(saturate(acc[k, y, x], ACCUMULATOR_BITS), clip_truncate)
                    sat = saturate(v, DELIVERY_BITS)
                    if sat != v:
                        saturated += 1
                    out[k, y, x] = <int32_t>sat
    return saturated


def convert_feature(const elem_t[:, :, ::1] cube, elem_t[:, :, ::1] out, int64_t offset,
                    int64_t scale, int truncate):
    """CDMA feature-input converter (INT8/INT16 in = out):
    sat(round((x - offset) * scale / 2^truncate)) to the element width."""
    cdef Py_ssize_t c, y, x
    cdef int bits = element_bits(<elem_t*>NULL)
    if out.shape[0] != cube.shape[0] or out.shape[1] != cube.shape[1] or \
            out.shape[2] != cube.shape[2]:
        raise ValueError("convert_feature: shapes differ")
    with nogil:
        for c in range(cube.shape[0]):
            for y in range(cube.shape[1]):
                for x in range(cube.shape[2]):
                    out[c, y, x] = <elem_t>saturate(
                        shift_right_round((cube[c, y, x] - offset) * scale, truncate), bits)


ctypedef fused pixel_t:            # image components: 8-bit or 16-bit (10-bit ones widened)
    unsigned char
    unsigned short


def convert_pixels(const pixel_t[:, :, ::1] pixels, elem_t[:, :, ::1] out,
                   const int64_t[::1] means, int64_t scale, int truncate, bint signed_input):
    """CDMA image-input converter on (H, W, elements) 8- or 16-bit components already in
    R,G,B,A order, to INT8, INT16 or (int32 `out`) the 17-bit integer an FP16 output is rounded
    from: sat(round((p - mean[element]) * scale / 2^truncate)); p unsigned unless
    `signed_input`."""
    cdef Py_ssize_t y, x, e
    cdef int64_t p
    cdef int64_t half = 128
    cdef int bits = element_bits(<elem_t*>NULL)
    if pixel_t is cython.ushort:
        half = 32768
    if out.shape[0] != pixels.shape[0] or out.shape[1] != pixels.shape[1] or \
            out.shape[2] != pixels.shape[2]:
        raise ValueError("convert_pixels: shapes differ")
    if means.shape[0] < pixels.shape[2]:
        raise ValueError("convert_pixels: one mean per element needed")
    with nogil:
        for y in range(pixels.shape[0]):
            for x in range(pixels.shape[1]):
                for e in range(pixels.shape[2]):
                    p = pixels[y, x, e]
                    if signed_input and p >= half:
                        p -= 2 * half
                    out[y, x, e] = <elem_t>saturate(
                        shift_right_round((p - means[e]) * scale, truncate), bits)


def benchmark_direct_conv(data, weights, int atomic_c, int atomic_k):
    """Direct convolution as the pipeline runs it (stride 1, no padding): `data` (C, H, W) int8,
    `weights` (K, C, R, S) int8; the kernels are split between the two CMAC halves of each
    ATOMIC_K group.  Returns the (K, OH, OW) int64 sums.  (`atomic_c` only documents the
    configuration: the sums do not depend on how channels are blocked.)"""
    import numpy as np
    c, h, w = data.shape
    k, _, r, s = weights.shape
    lines = np.ascontiguousarray(np.transpose(data, (1, 2, 0))).reshape(h, w * c)
    wt = np.ascontiguousarray(np.transpose(weights, (0, 2, 3, 1))).reshape(k, r, s * c)
    out = np.empty((k, h - r + 1, w - s + 1), np.int64)
    cell = np.arange(k) % atomic_k
    for half in (cell < atomic_k // 2, cell >= atomic_k // 2):
        part = np.empty((int(half.sum()), out.shape[1], out.shape[2]), np.int64)
        conv_lines(lines, np.ascontiguousarray(wt[half]), part, s, c, c, c, 1, 1)
        out[half] = part
    return out
