# cython: language_level=3
"""numpy wrappers of nvfloat.pxd (the C model's float arithmetic) for tests and Python-level units.

Arrays of bit patterns in (any integer dtype, broadcast against each other), arrays of bit
patterns out: uint16 for fp16, uint32 for fp17 and fp32, the smallest of uint16/32/64 holding
1+e+m bits for the generic (e, m) functions.  Integers come out as int64.  The float bits of a
numpy float16/float32 array `x` are `x.view(np.uint16)` / `x.view(np.uint32)`.
"""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport uint64_t, int64_t, uint32_t, uint16_t, uint8_t

from . cimport nvfloat as nf

cnp.import_array()

# operation codes of the loops below
cdef enum:
    OP_ADD = 0
    OP_SUB = 1
    OP_MUL = 2
    OP_MAX = 3
    OP_MIN = 4


def _bits_dtype(int total_bits):
    if total_bits <= 16:
        return np.uint16
    if total_bits <= 32:
        return np.uint32
    return np.uint64


def _as_u64(a):
    arr = np.asarray(a)
    if arr.dtype.kind not in "iub":
        raise TypeError(f"bit patterns must be integers, got {arr.dtype}")
    return arr.astype(np.uint64)


def _check_format(int e, int m):
    if not (2 <= e <= 11 and 1 <= m <= 30):
        raise ValueError(f"float format (e={e}, m={m}) outside 2..11 exponent / 1..30 mantissa bits")


def _binary(int op, a, b, int e, int m):
    _check_format(e, m)
    xa, xb = np.broadcast_arrays(_as_u64(a), _as_u64(b))
    shape = xa.shape
    cdef const uint64_t[::1] va = np.ascontiguousarray(xa).reshape(-1)
    cdef const uint64_t[::1] vb = np.ascontiguousarray(xb).reshape(-1)
    out = np.empty(va.shape[0], dtype=np.uint64)
    cdef uint64_t[::1] vo = out
    cdef Py_ssize_t i, n = va.shape[0]
    cdef uint64_t fmask = nf.mask_bits(1 + e + m)
    if op < OP_ADD or op > OP_MIN:
        raise ValueError(f"unknown float operation {op}")
    with nogil:
        for i in range(n):
            if op == OP_ADD:
                vo[i] = nf.fp_add(va[i] & fmask, vb[i] & fmask, e, m)
            elif op == OP_SUB:
                vo[i] = nf.fp_sub(va[i] & fmask, vb[i] & fmask, e, m)
            elif op == OP_MUL:
                vo[i] = nf.fp_mul(va[i] & fmask, vb[i] & fmask, e, m)
            elif op == OP_MAX:
                vo[i] = nf.fp_max(va[i] & fmask, vb[i] & fmask, e, m)
            else:
                vo[i] = nf.fp_min(va[i] & fmask, vb[i] & fmask, e, m)
    return out.reshape(shape).astype(_bits_dtype(1 + e + m))


def fp_add(a, b, int e, int m):
    return _binary(OP_ADD, a, b, e, m)


def fp_sub(a, b, int e, int m):
    return _binary(OP_SUB, a, b, e, m)


def fp_mul(a, b, int e, int m):
    return _binary(OP_MUL, a, b, e, m)


def fp_max(a, b, int e, int m):
    return _binary(OP_MAX, a, b, e, m)


def fp_min(a, b, int e, int m):
    return _binary(OP_MIN, a, b, e, m)


def fp_relu(a, int e, int m):
    """max(x, 0) as the C model's FpRelu (NaN passes, -0 -> +0)."""
    _check_format(e, m)
    x = _as_u64(a)
    cdef const uint64_t[::1] vi = np.ascontiguousarray(x).reshape(-1)
    out = np.empty(vi.shape[0], dtype=np.uint64)
    cdef uint64_t[::1] vo = out
    cdef Py_ssize_t i
    cdef uint64_t fmask = nf.mask_bits(1 + e + m)
    with nogil:
        for i in range(vi.shape[0]):
            vo[i] = nf.fp_relu(vi[i] & fmask, e, m)
    return out.reshape(x.shape).astype(_bits_dtype(1 + e + m))


def fp_convert(a, int ie, int im, int oe, int om, bint denorm):
    """(ie, im) -> (oe, om): fp_widen when both fields grow, fp_narrow when both shrink."""
    _check_format(ie, im)
    _check_format(oe, om)
    cdef bint widen
    if oe >= ie and om >= im:
        widen = True
    elif oe < ie and om <= im:
        widen = False   # (FpWidthDec reads exponent 0 as a denormal only when the bias shrinks)
    else:
        raise ValueError(f"conversion ({ie}, {im}) -> ({oe}, {om}) is neither a widening nor a "
                         f"narrowing with a smaller exponent")
    x = _as_u64(a)
    cdef const uint64_t[::1] vi = np.ascontiguousarray(x).reshape(-1)
    out = np.empty(vi.shape[0], dtype=np.uint64)
    cdef uint64_t[::1] vo = out
    cdef Py_ssize_t i
    cdef uint64_t fmask = nf.mask_bits(1 + ie + im)
    with nogil:
        for i in range(vi.shape[0]):
            if widen:
                vo[i] = nf.fp_widen(vi[i] & fmask, ie, im, oe, om, denorm)
            else:
                vo[i] = nf.fp_narrow(vi[i] & fmask, ie, im, oe, om, denorm)
    return out.reshape(x.shape).astype(_bits_dtype(1 + oe + om))


def int_to_fp(a, int int_bits, int e, int m):
    """Signed `int_bits`-bit integers (values, or their two's-complement bits) to (e, m) floats."""
    _check_format(e, m)
    if not 2 <= int_bits <= 63:
        raise ValueError(f"integer width {int_bits} outside 2..63")
    x = np.asarray(a)
    if x.dtype.kind not in "iub":
        raise TypeError(f"integers expected, got {x.dtype}")
    x = x.astype(np.int64)
    cdef const int64_t[::1] vi = np.ascontiguousarray(x).reshape(-1)
    out = np.empty(vi.shape[0], dtype=np.uint64)
    cdef uint64_t[::1] vo = out
    cdef Py_ssize_t i
    with nogil:
        for i in range(vi.shape[0]):
            vo[i] = nf.fp_from_int(vi[i], int_bits, e, m)
    return out.reshape(x.shape).astype(_bits_dtype(1 + e + m))


def fp_to_int(a, int e, int m, int int_bits):
    """(e, m) floats to signed `int_bits`-bit integers (half away from zero, saturating; NaN -> min)."""
    _check_format(e, m)
    if not 2 <= int_bits <= 63:
        raise ValueError(f"integer width {int_bits} outside 2..63")
    x = _as_u64(a)
    cdef const uint64_t[::1] vi = np.ascontiguousarray(x).reshape(-1)
    out = np.empty(vi.shape[0], dtype=np.int64)
    cdef int64_t[::1] vo = out
    cdef Py_ssize_t i
    cdef uint64_t fmask = nf.mask_bits(1 + e + m)
    with nogil:
        for i in range(vi.shape[0]):
            vo[i] = nf.fp_to_int(vi[i] & fmask, e, m, int_bits)
    return out.reshape(x.shape)


def fraction_to_fp(a, int frac_bits, int e, int m):
    """Unsigned fractions a * 2^-frac_bits to (e, m) floats (FpFractionToFloat)."""
    _check_format(e, m)
    if not 1 <= frac_bits <= 62:
        raise ValueError(f"fraction width {frac_bits} outside 1..62")
    x = _as_u64(a)
    cdef const uint64_t[::1] vi = np.ascontiguousarray(x).reshape(-1)
    out = np.empty(vi.shape[0], dtype=np.uint64)
    cdef uint64_t[::1] vo = out
    cdef Py_ssize_t i
    cdef uint64_t fmask = nf.mask_bits(frac_bits)
    with nogil:
        for i in range(vi.shape[0]):
            vo[i] = nf.fp_from_fraction(vi[i] & fmask, frac_bits, e, m)
    return out.reshape(x.shape).astype(_bits_dtype(1 + e + m))


def fp_to_int_frac(a, int e, int m, int64_t right_shift, int shift_bits, int int_bits, int frac_bits):
    """(|x| * 2^-right_shift) split into (integer part saturated to int_bits, frac_bits fraction
    bits), both uint64 arrays (FpFloatToIntFrac, the SDP LUT index)."""
    _check_format(e, m)
    if not (1 <= int_bits <= 63 and 1 <= frac_bits <= 63 and 2 <= shift_bits <= 32):
        raise ValueError(f"widths int={int_bits} frac={frac_bits} shift={shift_bits} out of range")
    x = _as_u64(a)
    cdef const uint64_t[::1] vi = np.ascontiguousarray(x).reshape(-1)
    ints = np.empty(vi.shape[0], dtype=np.uint64)
    fracs = np.empty(vi.shape[0], dtype=np.uint64)
    cdef uint64_t[::1] vint = ints
    cdef uint64_t[::1] vfrac = fracs
    cdef Py_ssize_t i
    cdef uint64_t fmask = nf.mask_bits(1 + e + m)
    with nogil:
        for i in range(vi.shape[0]):
            nf.fp_to_int_frac(vi[i] & fmask, e, m, right_shift, shift_bits, int_bits, frac_bits,
                              &vint[i], &vfrac[i])
    return ints.reshape(x.shape), fracs.reshape(x.shape)


# --- the named formats: fp16 = (5, 10), fp17 = (6, 10), fp32 = (8, 23) -------------------------

def fp16_to_fp32(a):
    return fp_convert(a, 5, 10, 8, 23, True)


def fp32_to_fp16(a):
    return fp_convert(a, 8, 23, 5, 10, True)


def fp16_to_fp17(a):
    return fp_convert(a, 5, 10, 6, 10, True)


def fp17_to_fp16(a):
    return fp_convert(a, 6, 10, 5, 10, True)


def fp17_to_fp32(a):
    return fp_convert(a, 6, 10, 8, 23, False)


def fp32_to_fp17(a):
    return fp_convert(a, 8, 23, 6, 10, False)


def fp16_add(a, b):
    return _binary(OP_ADD, a, b, 5, 10)


def fp16_sub(a, b):
    return _binary(OP_SUB, a, b, 5, 10)


def fp16_mul(a, b):
    return _binary(OP_MUL, a, b, 5, 10)


def fp16_max(a, b):
    return _binary(OP_MAX, a, b, 5, 10)


def fp16_min(a, b):
    return _binary(OP_MIN, a, b, 5, 10)


def fp17_add(a, b):
    return _binary(OP_ADD, a, b, 6, 10)


def fp17_sub(a, b):
    return _binary(OP_SUB, a, b, 6, 10)


def fp17_mul(a, b):
    return _binary(OP_MUL, a, b, 6, 10)


def fp17_max(a, b):
    return _binary(OP_MAX, a, b, 6, 10)


def fp17_min(a, b):
    return _binary(OP_MIN, a, b, 6, 10)


def fp32_add(a, b):
    return _binary(OP_ADD, a, b, 8, 23)


def fp32_sub(a, b):
    return _binary(OP_SUB, a, b, 8, 23)


def fp32_mul(a, b):
    return _binary(OP_MUL, a, b, 8, 23)


def fp32_max(a, b):
    return _binary(OP_MAX, a, b, 8, 23)


def fp32_min(a, b):
    return _binary(OP_MIN, a, b, 8, 23)


def int_to_fp16(a, int int_bits=16):
    """Int16ToFp16 (int_bits 16) / Int17ToFp16 (int_bits 17)."""
    return int_to_fp(a, int_bits, 5, 10)


def int_to_fp17(a, int int_bits=17):
    return int_to_fp(a, int_bits, 6, 10)


def int_to_fp32(a, int int_bits=32):
    return int_to_fp(a, int_bits, 8, 23)


def fp16_to_int(a, int int_bits=16):
    return fp_to_int(a, 5, 10, int_bits)


def fp17_to_int(a, int int_bits=32):
    return fp_to_int(a, 6, 10, int_bits)


def fp32_to_int(a, int int_bits=32):
    return fp_to_int(a, 8, 23, int_bits)


def fp_eql(a, b):
    """FpEql: 1 where the bit patterns are equal."""
    xa, xb = np.broadcast_arrays(_as_u64(a), _as_u64(b))
    return (xa == xb).astype(np.uint64)


# --- the convolution pipeline's FP16 formats: FP44 (CMAC) and FP48 (CACC) ----------------------

def cmac_fp16_booth(negative, wt_mant, dat_mant, shift):
    """The CMAC's Booth product +-(wt_mant * dat_mant) >> shift (int64 array; see nvfloat.pxd)."""
    xs = np.broadcast_arrays(_as_u64(negative), _as_u64(wt_mant), _as_u64(dat_mant), _as_u64(shift))
    shape = xs[0].shape
    cdef const uint64_t[::1] vn = np.ascontiguousarray(xs[0]).reshape(-1)
    cdef const uint64_t[::1] vw = np.ascontiguousarray(xs[1]).reshape(-1)
    cdef const uint64_t[::1] vd = np.ascontiguousarray(xs[2]).reshape(-1)
    cdef const uint64_t[::1] vs = np.ascontiguousarray(xs[3]).reshape(-1)
    out = np.empty(vn.shape[0], dtype=np.int64)
    cdef int64_t[::1] vo = out
    cdef Py_ssize_t i
    with nogil:
        for i in range(vn.shape[0]):
            vo[i] = nf.cmac_fp16_booth(vn[i] != 0, <uint32_t>(vw[i] & 0x7fff),
                                       <uint32_t>(vd[i] & 0x7fff), <uint32_t>(vs[i] if vs[i] < 32 else 32))
    return out.reshape(shape)


def cmac_fp16_dot(data, weight, enable=None):
    """FP44 bits (uint64) of CMAC cells: data and weight are fp16 bit patterns of shape
    (..., n), n <= 64 channels per cell; enable (same shape, default: both operands nonzero, i.e.
    the CSC's sparsity masks) selects the products that take part."""
    d = np.ascontiguousarray(np.asarray(data).astype(np.uint16))
    w = np.ascontiguousarray(np.asarray(weight).astype(np.uint16))
    if d.shape != w.shape or d.ndim == 0 or d.shape[d.ndim - 1] > 64:
        raise ValueError(f"data {d.shape} and weight {w.shape} must be equal shapes (..., n <= 64)")
    if enable is None:
        en = ((d & 0x7fff) != 0) & ((w & 0x7fff) != 0)
    else:
        en = np.broadcast_to(np.asarray(enable, dtype=bool), d.shape)
    en = np.ascontiguousarray(en.astype(np.uint8))
    n = d.shape[d.ndim - 1]
    cdef const uint16_t[:, ::1] vd = d.reshape(-1, n)
    cdef const uint16_t[:, ::1] vw = w.reshape(-1, n)
    cdef const uint8_t[:, ::1] ve = en.reshape(-1, n)
    out = np.empty(vd.shape[0], dtype=np.uint64)
    cdef uint64_t[::1] vo = out
    cdef Py_ssize_t i
    cdef int cn = n
    with nogil:
        for i in range(vd.shape[0]):
            vo[i] = nf.cmac_fp16_dot(&vd[i, 0], &vw[i, 0], &ve[i, 0], cn)
    return out.reshape(d.shape[:d.ndim - 1])


def cacc_fp48_add(acc, fp44):
    """FP48 accumulators (uint64 bits) plus FP44 partial sums, elementwise."""
    xa, xb = np.broadcast_arrays(_as_u64(acc), _as_u64(fp44))
    shape = xa.shape
    cdef const uint64_t[::1] va = np.ascontiguousarray(xa).reshape(-1)
    cdef const uint64_t[::1] vb = np.ascontiguousarray(xb).reshape(-1)
    out = np.empty(va.shape[0], dtype=np.uint64)
    cdef uint64_t[::1] vo = out
    cdef Py_ssize_t i
    with nogil:
        for i in range(va.shape[0]):
            vo[i] = nf.cacc_fp48_add(va[i], vb[i])
    return out.reshape(shape)


def cacc_fp48_to_fp32(acc):
    """FP48 accumulators to the fp32 bits (uint32) the CACC delivers."""
    x = _as_u64(acc)
    cdef const uint64_t[::1] vi = np.ascontiguousarray(x).reshape(-1)
    out = np.empty(vi.shape[0], dtype=np.uint64)
    cdef uint64_t[::1] vo = out
    cdef Py_ssize_t i
    with nogil:
        for i in range(vi.shape[0]):
            vo[i] = nf.cacc_fp48_to_fp32(vi[i])
    return out.reshape(x.shape).astype(np.uint32)


def uint16_to_fp17(a):
    """HLS_uint16_to_fp17: unsigned 16-bit fractions a * 2^-16 to fp17 bits."""
    return fraction_to_fp(a, 16, 6, 10)
