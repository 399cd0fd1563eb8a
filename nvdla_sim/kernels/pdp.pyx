# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""PDP pooling of one INT8 or INT16 cube (or one split-width strip of it): MAX, MIN or AVERAGE.

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
from libc.stdint cimport int64_t
from .fixedpoint cimport shift_right_round, wrap

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
    if out.shape[0] != channels:
        raise ValueError("pool_int: input and output channel counts differ")
    if pad_values.shape[0] < 7:
        raise ValueError("pool_int: need 7 padding values (1X..7X)")
    with nogil:
        for oy in range(out_h):
            y0 = oy * stride_h - pad_top
            y_lo = y0 if y0 > 0 else 0
            y_hi = y0 + kernel_h if y0 + kernel_h < height else height
            for ox in range(out_w):
                x0 = ox * stride_w - pad_left
                x_lo = x0 if x0 > 0 else 0
                x_hi = x0 + kernel_w if x0 + kernel_w < width else width
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


def pool_fp16(*args):
    raise NotImplementedError("FP16 pooling: waiting for kernels/nvfloat.pxd")
