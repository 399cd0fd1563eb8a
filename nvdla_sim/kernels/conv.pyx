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

FP16 (elements as uint16 binary16 patterns): the C model's own number formats, not IEEE ones.
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
  - CACC accumulator (`fp48_add`): 8-bit exponent (bias 63) over a 40-bit two's complement
    mantissa, value = mantissa x 2^(exp - 101); the 44-bit MAC result is normalised, the smaller
    operand shifted right (bits kept for rounding; dropped whole beyond 40), the sum normalised
    and rounded half away from zero; NaN (exponent 255) sticks.
  - Delivery (`fp48_to_fp32`): sign-magnitude, the 24 top bits rounded half up in magnitude on the
    next bit alone, exponent + 64; NaN keeps 10 fraction bits in the low bits.
`conv_lines` on FP16 writes the accumulator's 48-bit pattern into its int64 output; the CACC stage
(`accumulator_output_fp16`) turns it into FP32 bit patterns.
"""
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from .fixedpoint cimport saturate, shift_right_round, wrap

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
cdef enum:
    FP16_BLOCK_MAX = 64              # channels of one CMAC cell
    MAC_MANT_BITS = 38
    ACC_MANT_BITS = 40

# Booth sign compensation added after shifting sum and carry right by 4*i bits (i = 0..7).
cdef uint32_t BOOTH_SIGN_COMP[8]
BOOTH_SIGN_COMP[:] = [0xaaab0000, 0xfaaab000, 0xffaaab00, 0xfffaaab0, 0xffffaaab, 0xfffffaab,
                      0xffffffab, 0xfffffffb]


cdef inline void csa_compress(uint32_t* c, int start, int n) noexcept nogil:
    """Carry-save reduction of c[start:start+n] to two words in c[start], c[start+1]: the first
    three become sum and carry, the rest move down one place, until two remain."""
    cdef uint32_t x, y, z
    cdef int j
    while n >= 3:
        x, y, z = c[start], c[start + 1], c[start + 2]
        c[start] = x ^ y ^ z
        c[start + 1] = ((x & y) | (y & z) | (x & z)) << 1
        for j in range(3, n):
            c[start + j - 1] = c[start + j]
        n -= 1


cdef inline int64_t booth_product(bint negative, uint32_t wt, uint32_t dat,
                                  uint32_t shift) noexcept nogil:
    """Signed wt x dat (mantissas of up to 14 bits) shifted right by `shift`, as the CMAC's Booth
    multiplier forms it (radix-4 digits of wt, negated digits for a negative product)."""
    cdef uint32_t pp[8]
    cdef uint32_t inv[8]
    cdef uint32_t c[10]
    cdef uint32_t flip = 7 if negative else 0
    cdef uint32_t digits = wt << 1, code, total
    cdef int i
    if shift >= 32:
        return 0
    for i in range(8):
        code = (digits & 7) ^ flip
        digits >>= 2
        inv[i] = 0
        if code == 0 or code == 7:
            pp[i] = 0x10000
        elif code == 1 or code == 2:
            pp[i] = dat | 0x10000
        elif code == 3:
            pp[i] = (dat << 1) | 0x10000
        elif code == 4:
            pp[i] = ~(dat << 1) & 0xffff
            inv[i] = 1
        else:
            pp[i] = ~dat & 0xffff
            inv[i] = 1
    c[0] = pp[0]
    c[1] = (pp[1] << 2) | inv[0]
    c[2] = (pp[2] << 4) | (inv[1] << 2)
    c[3] = (pp[3] << 6) | (inv[2] << 4)
    c[4] = inv[3] << 6
    c[5] = pp[4] << 8
    c[6] = (pp[5] << 10) | (inv[4] << 8)
    c[7] = (pp[6] << 12) | (inv[5] << 10)
    c[8] = (pp[7] << 14) | (inv[6] << 12)
    c[9] = inv[7] << 14
    csa_compress(c, 0, 5)
    csa_compress(c, 5, 5)
    c[2] = c[5]
    c[3] = c[6]
    csa_compress(c, 0, 4)
    total = (c[0] >> shift) + (c[1] >> shift) + BOOTH_SIGN_COMP[shift >> 2]
    return <int32_t>total


cdef inline bint fp16_is_nan(uint32_t v) noexcept nogil:
    return (v & 0x7c00) == 0x7c00 and (v & 0x3ff) != 0


cdef inline int64_t fp16_nan44(uint32_t v) noexcept nogil:
    return (<int64_t>0x3f << 38) | (<int64_t>((v >> 15) & 1) << 37) | (<int64_t>(v & 0x3ff) << 27)


cdef inline int64_t fp16_atomic(const unsigned short* dat, const unsigned short* wt,
                                Py_ssize_t n) noexcept nogil:
    """44-bit CMAC cell result of n <= 64 FP16 channel pairs (see the module notes)."""
    cdef int group[FP16_BLOCK_MAX]
    cdef Py_ssize_t i
    cdef uint32_t d, w, ed, ew, md, mw
    cdef int top = 0
    cdef int64_t total = 0
    for i in range(n):
        if fp16_is_nan(wt[i]):
            return fp16_nan44(wt[i])
    for i in range(n):
        if fp16_is_nan(dat[i]):
            return fp16_nan44(dat[i])
    for i in range(n):
        d, w = dat[i], wt[i]
        if (d & 0x7fff) == 0 or (w & 0x7fff) == 0:
            group[i] = -1                            # masked: +-0 takes no part
            continue
        group[i] = ((d >> 12) & 7) + ((w >> 12) & 7)
        if group[i] > top:
            top = group[i]
    for i in range(n):
        if group[i] < 0:
            continue
        d, w = dat[i], wt[i]
        ed, ew = (d >> 10) & 31, (w >> 10) & 31
        md = ((d & 0x3ff) | (0x400 if ed else 0)) << (ed & 3 if ed else 1)
        mw = ((w & 0x3ff) | (0x400 if ew else 0)) << (ew & 3 if ew else 1)
        total += booth_product(((d ^ w) >> 15) & 1, mw, md, <uint32_t>(4 * (top - group[i])))
    return (<int64_t>((4 * top) & 0x3f) << 38) | (total & ((<int64_t>1 << MAC_MANT_BITS) - 1))


cdef inline int bit(int64_t v, int i) noexcept nogil:
    return <int>((v >> i) & 1)


cdef inline int64_t fp48_add(int64_t acc, int64_t mac) noexcept nogil:
    """CACC FP48 accumulator + 44-bit CMAC result (see the module notes)."""
    cdef int64_t mask40 = (<int64_t>1 << ACC_MANT_BITS) - 1
    cdef int mexp = <int>((mac >> 38) & 0x3f)
    cdef int64_t mman = wrap(mac & ((<int64_t>1 << MAC_MANT_BITS) - 1), MAC_MANT_BITS)
    cdef int aexp = <int>((acc >> 40) & 0xff)
    cdef int64_t aman = wrap(acc & mask40, ACC_MANT_BITS)
    cdef int i, sign, shift, exp, bigger, d, overflow = 0, high = 0, neg, rnd
    cdef int64_t mext, aext, total, s, r, out
    cdef int64_t spill = 0                            # bits shifted out of the smaller operand
    if mman == 0:
        return acc
    if aexp == 0xff:
        return (<int64_t>0xff << 40) | (((acc >> 29) & 0x7ff) << 29)
    if mexp == 0x3f:
        return (<int64_t>0xff << 40) | (((mac >> 27) & 0x7ff) << 29)
    sign = bit(mman, 37)
    i = 36
    if bit(mman, 36) == sign:
        while i >= 0 and bit(mman, i) == sign:
            i -= 1
    shift = 36 - i
    mext = wrap(mman << shift, MAC_MANT_BITS) << 2
    exp = (mexp - shift + 49) & 0xff
    if aman == 0:
        aexp = 0
    aext = aman
    bigger = exp
    if exp > aexp:
        d = exp - aexp
        if d <= 40:
            spill = (aext & ((<int64_t>1 << d) - 1)) << (40 - d)
            aext >>= d
        else:
            aext = 0
    elif exp < aexp:
        bigger = aexp
        d = aexp - exp
        if d <= 40:
            spill = (mext & ((<int64_t>1 << d) - 1)) << (40 - d)
            mext >>= d
        else:
            mext = 0
    total = wrap(aext + mext, ACC_MANT_BITS)
    if (mext < 0) == (aext < 0) and (mext < 0) != (total < 0):
        high = <int>(total & 1)
        overflow = 1
        s = wrap((<int64_t>(mext < 0) << 39) | ((total & mask40) >> 1), ACC_MANT_BITS)
        exp = bigger + 1
    elif bit(total, 38) == bit(total, 39):
        i = 38
        while i >= 0 and bit(total, i) == bit(total, 39):
            i -= 1
        shift = 38 - i
        s = wrap(((total << shift) | (spill >> (40 - shift))) & mask40, ACC_MANT_BITS)
        spill = (spill << shift) & mask40
        exp = bigger - shift
    else:
        s = total
        exp = bigger
    neg = s < 0
    if overflow:
        rnd = high and (not neg or spill != 0)
    else:
        rnd = bit(spill, 39) and (not neg or (spill & ((<int64_t>1 << 39) - 1)) != 0)
    r = wrap(s + rnd, ACC_MANT_BITS)
    if (r < 0) != neg:
        r = wrap((<int64_t>neg << 39) | ((r & mask40) >> 1), ACC_MANT_BITS)
        exp += 1
    exp &= 0xff
    if r == 0:
        exp = 0
    return (<int64_t>exp << 40) | (r & mask40)


cdef inline uint32_t fp48_to_fp32(int64_t acc) noexcept nogil:
    """CACC delivery of an FP48 accumulator as FP32 bits (see the module notes)."""
    cdef uint32_t exp = <uint32_t>((acc >> 40) & 0xff)
    cdef uint64_t pattern = <uint64_t>(acc & ((<int64_t>1 << 40) - 1))
    cdef uint32_t sign = <uint32_t>(pattern >> 39)
    cdef uint64_t low39 = (<uint64_t>1 << 39) - 1
    cdef uint64_t mag, o, mt
    cdef uint32_t e, frac
    if exp == 0xff:
        return (sign << 31) | (0xff << 23) | <uint32_t>((pattern >> 29) & 0x3ff)
    if sign and (pattern & low39) == 0:
        return (sign << 31) | (((exp + 65) & 0xff) << 23)
    mag = pattern & low39
    if sign:
        mag = (~mag + 1) & low39
    o = (<uint64_t>sign << 39) | mag
    e = 0 if pattern == 0 else (exp + 64) & 0xff
    if (o >> 14) & 1:
        mt = (((o >> 15) & ((1 << 25) - 1)) + 1) & ((1 << 25) - 1)
        if ((mt >> 24) & 1) != sign:
            mt = mt >> 1
            e = (e + 1) & 0xff
        frac = <uint32_t>(mt & ((1 << 23) - 1))
    else:
        frac = <uint32_t>((o >> 15) & ((1 << 23) - 1))
    return (sign << 31) | (e << 23) | frac


def fp16_mac_cell(const unsigned short[::1] data, const unsigned short[::1] weights) -> int:
    """One CMAC FP16 atomic operation (<= 64 channels): its 44-bit result pattern."""
    if data.shape[0] != weights.shape[0] or data.shape[0] > FP16_BLOCK_MAX:
        raise ValueError("fp16_mac_cell: up to 64 data and weight elements, as many of each")
    return fp16_atomic(&data[0], &weights[0], data.shape[0])


def fp48_accumulate(int64_t acc, int64_t mac) -> int:
    """The CACC accumulator after adding one 44-bit CMAC result."""
    return fp48_add(acc, mac)


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
                    v = fp48_to_fp32(acc[k, y, x])
                    if (v & 0x7f800000) == 0x7f800000 and (v & 0x7fffff) != 0:
                        nans += 1
                    out[k, y, x] = v
    return nans


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
    with nogil:
        for oy in range(out_h):
            for ox in range(out_w):
                base = ox * x_step
                for k in range(n_k):
                    acc = 0
                    if conv_t is fp16_bits:
                        c0 = 0
                        while c0 < kernel_c:
                            n = block_c if kernel_c - c0 > block_c else kernel_c - c0
                            for r in range(n_r):
                                row = &lines[oy * y_step + r * r_step, base + c0]
                                w = &weights[k, r, c0]
                                for s in range(kernel_w):
                                    acc = fp48_add(acc, fp16_atomic(row + s * s_step,
                                                                    w + s * kernel_c, n))
                            c0 += n
                    elif conv_t is short:
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


def convert_pixels(const unsigned char[:, :, ::1] pixels, elem_t[:, :, ::1] out,
                   const int64_t[::1] means, int64_t scale, int truncate, bint signed_input):
    """CDMA image-input converter on (H, W, elements) bytes already in R,G,B,A order, to INT8,
    INT16 or (int32 `out`) the 17-bit integer an FP16 output is rounded from:
    sat(round((p - mean[element]) * scale / 2^truncate)); p unsigned unless `signed_input`."""
    cdef Py_ssize_t y, x, e
    cdef int64_t p
    cdef int bits = element_bits(<elem_t*>NULL)
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
                    if signed_input and p >= 128:
                        p -= 256
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
