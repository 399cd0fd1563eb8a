# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""PDP pooling of one INT8, INT16 or FP16 cube (or one split-width strip of it): MAX, MIN or AVERAGE.

Window of output (oy, ox): columns [ox*stride_w - pad_left, +kernel_w), rows
[oy*stride_h - pad_top, +kernel_h).  Only in-range elements take part; padding is a value only in
AVERAGE, where the hardware adds, in a wrapping accumulator twice as wide as the element (16 bits
for INT8, 32 for INT16):
  - for each in-range row, PAD_VALUE_{nw}X once (nw = window columns outside the cube),
  - once, PAD_VALUE_{nh}X * kernel_w (nh = window rows outside the cube),
then scales by the Q16 reciprocals, width first, each step rounded half away from zero, and keeps
the low element bits (no saturation).  Integer addition wraps, so the order of the additions
does not matter here (it does in FP16, see pool_fp16).
"""
from libc.stdint cimport int64_t, uint16_t, uint64_t
from .fixedpoint cimport shift_right_round, wrap
from .nvfloat cimport (fp16_to_fp17, fp17_to_fp16, fp_add, fp_from_int, fp_max, fp_min,
                       fp_mul)

cdef enum:
    AVERAGE = 0
    MAXIMUM = 1
    MINIMUM = 2
    RECIP_FRACTION_BITS = 16     # RECIP_KERNEL_WIDTH/HEIGHT are Q16 (0x10000 = 1)

ctypedef fused int_element:
    signed char
    short

# POOLING_METHOD register encodings, for the unit module
POOL_AVERAGE = AVERAGE
POOL_MAX = MAXIMUM
POOL_MIN = MINIMUM


cdef inline Py_ssize_t window(Py_ssize_t o, int stride, int pad, int kernel, Py_ssize_t size,
                              Py_ssize_t* lo, Py_ssize_t* hi) noexcept nogil:
    """Output position `o`'s window along one axis: returns its first input index (negative in
    the padding) and sets [lo, hi) to the part inside the cube (lo >= hi: none of it)."""
    cdef Py_ssize_t start = o * stride - pad
    lo[0] = start if start > 0 else 0
    hi[0] = start + kernel if start + kernel < size else size
    return start


cdef check_shapes(str kernel, Py_ssize_t channels, Py_ssize_t out_channels, Py_ssize_t n_pads):
    if out_channels != channels:
        raise ValueError(f"{kernel}: input and output channel counts differ")
    if n_pads < 7:
        raise ValueError(f"{kernel}: need 7 padding values (1X..7X)")


def pool_int(const int_element[:, :, ::1] cube, int_element[:, :, ::1] out, int method,
              int kernel_w, int kernel_h, int stride_w, int stride_h, int pad_left, int pad_top,
              const int64_t[::1] pad_values, int64_t recip_w, int64_t recip_h):
    """Pool `cube` (C, H, W) into `out` (C, OH, OW); returns how many windows held no input
    element (their output is written as 0: the hardware never completes such a window)."""
    cdef Py_ssize_t channels = cube.shape[0], height = cube.shape[1], width = cube.shape[2]
    cdef Py_ssize_t out_h = out.shape[1], out_w = out.shape[2]
    cdef Py_ssize_t c, oy, ox, y, x, y0, x0, y_lo, y_hi, x_lo, x_hi
    cdef int64_t acc, v, rows_in, cols_in, n_pad_w, n_pad_h, scaled
    cdef int empty = 0
    cdef int element_bits = 8 * sizeof(int_element)
    cdef int accumulator_bits = 2 * element_bits    # the line buffer's width
    check_shapes("pool_int", channels, out.shape[0], pad_values.shape[0])
    with nogil:
        for oy in range(out_h):
            y0 = window(oy, stride_h, pad_top, kernel_h, height, &y_lo, &y_hi)
            for ox in range(out_w):
                x0 = window(ox, stride_w, pad_left, kernel_w, width, &x_lo, &x_hi)
                if y_lo >= y_hi or x_lo >= x_hi:
                    empty += 1
                    for c in range(channels):
                        out[c, oy, ox] = 0
                    continue
                rows_in = y_hi - y_lo
                cols_in = x_hi - x_lo
                n_pad_w = kernel_w - cols_in
                n_pad_h = kernel_h - rows_in
                for c in range(channels):
                    if method == AVERAGE:
                        acc = 0
                        for y in range(y_lo, y_hi):
                            for x in range(x_lo, x_hi):
                                acc += cube[c, y, x]
                        if n_pad_w > 0:
                            acc += rows_in * pad_values[n_pad_w - 1]
                        if n_pad_h > 0:
                            acc += pad_values[n_pad_h - 1] * kernel_w
                        acc = wrap(acc, accumulator_bits)
                        scaled = shift_right_round(acc * recip_w, RECIP_FRACTION_BITS)
                        scaled = shift_right_round(scaled * recip_h, RECIP_FRACTION_BITS)
                        out[c, oy, ox] = <int_element>wrap(scaled, element_bits)
                    else:
                        acc = cube[c, y_lo, x_lo]
                        for y in range(y_lo, y_hi):
                            for x in range(x_lo, x_hi):
                                v = cube[c, y, x]
                                if method == MAXIMUM:
                                    if v > acc:
                                        acc = v
                                elif v < acc:
                                    acc = v
                        out[c, oy, ox] = <int_element>acc
    return empty



# -- FP16 ----------------------------------------------------------------------------------------
# MAX/MIN compare FP16 values; AVERAGE sums in FP17 (6-bit exponent, no overflow of a window of
# FP16 values), multiplies by the FP17 reciprocals and rounds to FP16 once at the end.  Float
# addition does not associate, so the additions follow the C model's order exactly:
#   width  (per window row): the row's elements left to right, the first one alone, then
#          acc + x; after each element the left and the right padding terms are added (FP17 zero
#          unless this element carries them: left padding at the window's last element, or at the
#          line's last element when the window also runs past the right edge, then counting all
#          of the window's padded columns; right padding at the line's last element);
#   height (per window): the rows top to bottom, the first row alone, then row + acc; after each
#          row the top and the bottom padding terms, PAD_VALUE_nX * kernel_w (FP17 products).
cdef enum:
    FP16_E = 5
    FP17_E = 6
    MANT = 10
    KERNEL_WIDTH_INT_BITS = 8


cdef inline uint64_t fp17_add(uint64_t a, uint64_t b) noexcept nogil:
    return fp_add(a, b, FP17_E, MANT)


cdef inline uint64_t fp17_mul(uint64_t a, uint64_t b) noexcept nogil:
    return fp_mul(a, b, FP17_E, MANT)


cdef inline uint64_t fp16_extreme(uint64_t acc, uint64_t v, int method) noexcept nogil:
    """MAX / MIN step with the accumulated value as the first operand (NaN and ties order)."""
    if method == MAXIMUM:
        return fp_max(acc, v, FP16_E, MANT)
    return fp_min(acc, v, FP16_E, MANT)


cdef inline uint64_t pad_term(const int64_t[::1] pads, int64_t n) noexcept nogil:
    """PAD_VALUE_{n}X as an FP17 pattern, FP17 +0 when n is 0."""
    return <uint64_t>pads[n - 1] if n > 0 else 0


def pool_fp16(const uint16_t[:, :, ::1] cube, uint16_t[:, :, ::1] out, int method,
              int kernel_w, int kernel_h, int stride_w, int stride_h, int pad_left, int pad_top,
              const int64_t[::1] pad_values, int64_t recip_w, int64_t recip_h):
    """Pool an FP16 cube (bit patterns) like `pool_int`; `pad_values` and the reciprocals are
    FP17 patterns.  Returns the number of windows that held no input element (written as 0)."""
    cdef Py_ssize_t channels = cube.shape[0], height = cube.shape[1], width = cube.shape[2]
    cdef Py_ssize_t out_h = out.shape[1], out_w = out.shape[2]
    cdef Py_ssize_t c, oy, ox, y, x, y0, x0, y_lo, y_hi, x_lo, x_hi, kwi, khi
    cdef uint64_t row, acc, v, left, right, top, bottom, kw_fp17
    cdef int empty = 0
    check_shapes("pool_fp16", channels, out.shape[0], pad_values.shape[0])
    # kernel_w as FP17 (the C model tabulates 1..7; 8 is read past its table's end, the RTL's
    # intent is 8.0).
    kw_fp17 = fp_from_int(kernel_w, KERNEL_WIDTH_INT_BITS, FP17_E, MANT)
    with nogil:
        for oy in range(out_h):
            y0 = window(oy, stride_h, pad_top, kernel_h, height, &y_lo, &y_hi)
            for ox in range(out_w):
                x0 = window(ox, stride_w, pad_left, kernel_w, width, &x_lo, &x_hi)
                if y_lo >= y_hi or x_lo >= x_hi:
                    empty += 1
                    for c in range(channels):
                        out[c, oy, ox] = 0
                    continue
                for c in range(channels):
                    acc = 0
                    for y in range(y_lo, y_hi):
                        # width: this window's part of line y
                        row = 0
                        for x in range(x_lo, x_hi):
                            v = cube[c, y, x]
                            kwi = x - x0
                            if method != AVERAGE:
                                row = v if x == x_lo else fp16_extreme(row, v, method)
                                continue
                            left = right = 0
                            if x + 1 < kernel_w and (kwi + 1 == kernel_w or (
                                    x + 1 == width and x < kwi and pad_left > 0)):
                                left = pad_term(pad_values, kernel_w - (x + 1))
                            elif x + kernel_w - kwi > width and x + 1 == width:
                                right = pad_term(pad_values, kernel_w - (kwi + 1))
                            v = fp16_to_fp17(v)
                            row = v if x == x_lo else fp17_add(row, v)
                            row = fp17_add(fp17_add(row, left), right)
                        # height: line y's window row into the window
                        khi = y - y0
                        if method != AVERAGE:
                            acc = row if y == y_lo else fp16_extreme(row, acc, method)
                            continue
                        top = bottom = 0
                        if y + 1 < kernel_h and (khi + 1 == kernel_h or (
                                y + 1 == height and y < khi)):
                            top = pad_term(pad_values, kernel_h - (y + 1))
                        elif y + kernel_h - khi > height and y + 1 == height:
                            bottom = pad_term(pad_values, kernel_h - (khi + 1))
                        top = fp17_mul(top, kw_fp17)
                        bottom = fp17_mul(bottom, kw_fp17)
                        acc = row if y == y_lo else fp17_add(row, acc)
                        acc = fp17_add(fp17_add(acc, top), bottom)
                    if method == AVERAGE:
                        acc = fp17_to_fp16(fp17_mul(fp17_mul(acc, <uint64_t>recip_w),
                                                    <uint64_t>recip_h))
                    out[c, oy, ox] = <uint16_t>acc
    return empty
