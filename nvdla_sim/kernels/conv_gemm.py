"""INT8/INT16 direct convolution as a floating-point matrix product (BLAS), used where it is provably
the hardware's result; `kernels/conv.pyx` `conv_lines` stays the exact kernel (and the fallback).

Same arguments as conv_lines: `lines` (rows, elements) the CSC has padded, `weights`
(K, R, kernel_w * kernel_c); output (k, oy, ox) sums over r, s, c

    lines[oy * y_step + r * r_step, ox * x_step + s * s_step + c] * weights[k, r, s * kernel_c + c]

i.e. one row of W (K x N, N = R * kernel_w * kernel_c) times one column of the im2col matrix, which
is a strided view of `lines` (no copy until it is converted to float, band by band of output rows).

Why the result is the hardware's (all values are integers; M = max |line element|, A_k = the sum of
|w| over kernel k, B = M * max_k A_k):
  1. Hardware.  The CACC adds the CMAC's atomic partial sums into a 48-bit accumulator, saturating
     at every step.  Every prefix of that accumulation is a sum of a subset of the kernel's
     products, so its magnitude is at most B.  If B <= 2^47 - 1 no step saturates and the result is
     the exact integer sum, whatever the order (ATOMIC_C blocks, kernel rows and columns).  INT8:
     B <= 2^14 * N < 2^47 for any layer the registers can describe, so it always holds; INT16: the
     bound is checked per layer and the exact kernel runs the layer when it fails.
  2. BLAS.  However the library orders, blocks, vectorises or fuses (FMA) the sum of one output,
     every intermediate value it rounds is the exact sum of a subset of the products, of magnitude
     at most B; an integer of magnitude <= 2^p is a float with a p-bit significand, and rounding an
     exactly representable result returns it.  So a float64 product (p = 53) is exact when
     B <= 2^53 (implied by step 1), and a float32 product (p = 24) over a slice of the N columns
     is exact when the slice's products cannot exceed 2^24 in total.  INT8 products are at most
     2^14 ((-128)^2), so float32 slices of up to 1024 columns are exact whatever the data: INT8
     runs in float32 (twice BLAS's float64 rate) in such slices, each slice's result added in
     float64 (exact: totals <= B < 2^53).  INT16 products reach 2^30: INT16 runs in float64.
FP16 never comes here (the C model's float formats: conv_lines).  The products run on one BLAS
thread (kernels/blas.py).
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .blas import single_thread

ACCUMULATOR_LIMIT = (1 << 47) - 1     # CACC 48-bit accumulator: largest value kept unsaturated
INT8_SLICE = 1024                     # INT8 columns per float32 product: 1024 * 2^14 = 2^24
BAND_BYTES = 32 << 20                 # im2col matrix converted at a time


def int8_slices(n: int) -> list[tuple[int, int]]:
    """Column slices [a, b) of N, equal widths of at most INT8_SLICE, as few as possible."""
    count = -(-n // INT8_SLICE)
    width = -(-n // count)
    return [(a, min(n, a + width)) for a in range(0, n, width)]


def conv_lines_gemm(lines: np.ndarray, weights: np.ndarray, out: np.ndarray, kernel_w: int,
                    kernel_c: int, x_step: int, s_step: int, y_step: int, r_step: int) -> bool:
    """conv_lines' sums into `out` (K, OH, OW) int64 by BLAS when that is provably exact and the
    hardware's (module notes); returns False, leaving `out` untouched, when it is not (INT16
    whose 48-bit accumulation could saturate, other element types, arguments conv_lines would
    refuse): the caller then runs conv_lines."""
    if lines.dtype not in (np.int8, np.int16) or weights.dtype != lines.dtype:
        return False
    if lines.ndim != 2 or weights.ndim != 3 or out.ndim != 3 or out.dtype != np.int64:
        return False
    n_k, n_r, span = weights.shape
    _, out_h, out_w = out.shape
    if out.shape[0] != n_k or span != kernel_w * kernel_c or min(n_k, out_h, out_w) == 0 \
            or n_r == 0 or span == 0 or not out.flags.c_contiguous:
        return False
    rows, line_len = lines.shape
    if (out_h - 1) * y_step + (n_r - 1) * r_step >= rows or \
            (out_w - 1) * x_step + (kernel_w - 1) * s_step + kernel_c > line_len or \
            min(x_step, s_step, y_step, r_step) < 0:
        return False
    lines = np.ascontiguousarray(lines)
    n = n_r * span
    w = np.ascontiguousarray(weights).reshape(n_k, n)
    if lines.dtype == np.int8:
        ftype, slices = np.float32, int8_slices(n)
        wf = w.astype(ftype)
    else:                       # INT16: exact only while the accumulator cannot saturate
        ftype, slices = np.float64, [(0, n)]
        wf = w.astype(ftype)
        max_abs = max(-int(lines.min()), int(lines.max()))
        if max_abs * int(np.abs(wf).sum(axis=1).max()) > ACCUMULATOR_LIMIT:    # exact sums
            return False
    e = lines.itemsize
    cols = as_strided(lines, shape=(out_h, out_w, n_r, kernel_w, kernel_c),
                      strides=(y_step * line_len * e, x_step * e, r_step * line_len * e,
                               s_step * e, e), writeable=False)
    band = max(1, BAND_BYTES // (out_w * n * np.dtype(ftype).itemsize))
    with single_thread():
        for y0 in range(0, out_h, band):
            y1 = min(out_h, y0 + band)
            patches = np.empty(((y1 - y0) * out_w, n), ftype)
            patches.reshape(y1 - y0, out_w, n_r, kernel_w, kernel_c)[...] = cols[y0:y1]
            if len(slices) == 1:
                sums = wf @ patches.T
            else:
                sums = np.zeros((n_k, patches.shape[0]), np.float64)
                for a, b in slices:
                    sums += wf[:, a:b] @ patches[:, a:b].T
            out[:, y0:y1, :] = sums.reshape(n_k, y1 - y0, out_w)
    return True
