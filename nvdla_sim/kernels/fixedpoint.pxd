# Fixed-point primitives of the NVDLA integer datapaths (cmod hls/include/nvdla_int.h semantics).
# Each rule exists here once; kernels cimport these inline functions.
from libc.stdint cimport int64_t

cdef inline int64_t saturate(int64_t x, int bits) noexcept nogil:
    """Clamp x to the signed range of `bits` bits (bits <= 63)."""
    cdef int64_t hi = (<int64_t>1 << (bits - 1)) - 1
    cdef int64_t lo = -hi - 1
    if x > hi:
        return hi
    if x < lo:
        return lo
    return x

cdef inline int64_t wrap(int64_t x, int bits) noexcept nogil:
    """Keep the low `bits` bits of x as a two's-complement value (no saturation)."""
    cdef int64_t m = (<int64_t>1 << bits) - 1
    x = x & m
    if x >> (bits - 1):
        x -= (<int64_t>1 << bits)
    return x

cdef inline int64_t shift_right_round(int64_t x, int s) noexcept nogil:
    """x / 2^s rounded to nearest, ties away from zero (AC_RND_INF); s >= 0."""
    cdef int64_t a, q
    if s <= 0:
        return x
    if s >= 63:
        return 0
    a = -x if x < 0 else x
    q = (a >> s) + ((a >> (s - 1)) & 1)
    return -q if x < 0 else q

cdef inline int64_t shift_left_sat(int64_t x, int s, int bits) noexcept nogil:
    """x * 2^s saturated to `bits` bits."""
    cdef int64_t hi = (<int64_t>1 << (bits - 1)) - 1
    if s <= 0 or x == 0:
        return saturate(x, bits)
    if s >= 62:
        return hi if x > 0 else -hi - 1
    if x > (hi >> s):
        return hi
    if x < ((-hi - 1) >> s):
        return -hi - 1
    return x << s

cdef inline int64_t signed_shift_round(int64_t x, int s, int bits) noexcept nogil:
    """Shift right with rounding by s, or left (saturating to `bits`) when s is negative."""
    if s >= 0:
        return saturate(shift_right_round(x, s), bits)
    return shift_left_sat(x, -s, bits)

cdef inline int64_t sign_extend(int64_t v, int bits) noexcept nogil:
    """Interpret the low `bits` bits of v as two's complement."""
    return wrap(v, bits)
