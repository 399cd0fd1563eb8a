# cython: language_level=3
"""The NVDLA C model's float arithmetic (cmod hls/include/nvdla_float.h), bit for bit.

Every function works on bit patterns held in a uint64 (sign | exponent | mantissa, the sign at bit
`e + m`) of a format given by its exponent width `e` and mantissa width `m` (fp16 = (5, 10),
fp17 = (6, 10), fp32 = (8, 23)); the bias is 2^(e-1) - 1.  Mantissas up to 30 bits and exponents up
to 11 bits fit the 64-bit intermediates (the adder's aligned mantissa is 2m+4 bits wide).

Where the C model is not IEEE 754 (its own words are "INF", "NaN", "denorm"; deviations tested in
tests/test_nvfloat.py):
- No infinities come out: every overflow, and every conversion or add of an INF input that
  overflows, saturates to the largest finite value of the output format with the sign kept
  (exponent all ones minus one, mantissa all ones: fp16 0x7bff = 65504).  An INF input is otherwise
  an ordinary number 1.0 * 2^(emax - bias): INF + 1 stays the INF pattern, INF + INF saturates,
  INF * 0 = 0, INF * 2^-k is finite, INF + a same-exponent value can produce a NaN pattern.
- NaN: the first NaN operand (a before b) comes out unchanged, payload and sign; no quiet bit is
  set.  A narrowing conversion keeps the LOW mantissa bits of the payload (fp32 0x7fc00000 ->
  fp16 0x7c00, the INF pattern); a widening one keeps the payload in the low bits, unshifted
  (fp16 0x7e00 -> fp32 0x7f800200).  Float -> int gives the most negative integer for a NaN.
- Denormal inputs of add/sub/mul/compare are read with an implied 1 at exponent 0, i.e. as
  1.f * 2^-bias instead of 0.f * 2^(1-bias); add/sub/mul results below the smallest normal flush to
  a zero that keeps the result's sign.  fp16 -> fp17/fp32 converts denormals exactly; fp17 -> fp32
  reads an fp17 denormal like add does (1.f * 2^-31); narrowing to fp16 makes correctly rounded
  denormals, narrowing to fp17 flushes them to zero (unless they round up to the smallest normal).
- Zero signs: x + (-x) and 0 + (-0) give a zero with the sign of the operand of larger magnitude
  (the first one when equal), so (-3) + 3 = -0 and (-0) + (+0) = -0; int -> float 0 is +0.
- Rounding is to nearest, ties to even, everywhere except float -> int, which rounds the magnitude
  half away from zero (-2.5 -> -3) and saturates.  The adder keeps m+2 bits below the larger
  operand's LSB and truncates the smaller operand beyond them (no sticky bit); the multiplier
  rounds the exact product once.
"""
from libc.stdint cimport uint64_t, int64_t, uint32_t, int32_t, uint16_t, uint8_t


cdef extern from *:
    int __builtin_clzll(unsigned long long) nogil


# ---------------------------------------------------------------------------------------------
# Bit fields
# ---------------------------------------------------------------------------------------------

cdef inline uint64_t mask_bits(int n) noexcept nogil:
    """The low n bits set (n <= 64)."""
    if n >= 64:
        return <uint64_t>0xffffffffffffffff
    if n <= 0:
        return 0
    return (<uint64_t>1 << n) - 1


cdef inline int lead_zeros(uint64_t x, int width) noexcept nogil:
    """Leading zero bits of x as a `width`-bit unsigned number (`width` when x is 0)."""
    if x == 0:
        return width
    return __builtin_clzll(x) - (64 - width)


cdef inline uint64_t shl(uint64_t x, int s) noexcept nogil:
    """x << s, 0 when s >= 64; a negative s shifts right (the C model's signed shift amounts)."""
    if s >= 64 or s <= -64:
        return 0
    if s < 0:
        return x >> (-s)
    return x << s


cdef inline int fp_bias(int e) noexcept nogil:
    return (1 << (e - 1)) - 1


cdef inline uint64_t fp_pack(uint64_t sign, uint64_t expo, uint64_t mant, int e, int m) noexcept nogil:
    return ((sign & 1) << (e + m)) | ((expo & mask_bits(e)) << m) | (mant & mask_bits(m))


cdef inline bint fp_is_nan(uint64_t bits, int e, int m) noexcept nogil:
    return ((bits >> m) & mask_bits(e)) == mask_bits(e) and (bits & mask_bits(m)) != 0


cdef inline uint64_t fp_max_finite(uint64_t sign, int e, int m) noexcept nogil:
    """What the C model calls INF: the largest finite value with the given sign."""
    return fp_pack(sign, mask_bits(e) - 1, mask_bits(m), e, m)


# ---------------------------------------------------------------------------------------------
# Mantissa rounding
# ---------------------------------------------------------------------------------------------

cdef inline uint64_t mant_round_rne(uint64_t x, int in_bits, int out_bits, bint *carry_out) noexcept nogil:
    """Keep the top `out_bits` of an `in_bits`-wide mantissa, rounding to nearest even.

    The result wraps to `out_bits` bits; *carry_out tells that rounding carried out of them (the
    result is then 0 and the caller bumps the exponent).  A narrower input is shifted up exactly.
    """
    cdef int drop
    cdef uint64_t kept, guard, sticky, carry
    if in_bits <= out_bits:
        carry_out[0] = False
        return x << (out_bits - in_bits)
    drop = in_bits - out_bits
    kept = x >> drop
    guard = (x >> (drop - 1)) & 1
    sticky = (x & mask_bits(drop - 1)) != 0
    carry = guard & (sticky | (kept & 1))
    carry_out[0] = carry != 0 and kept == mask_bits(out_bits)
    return (kept + carry) & mask_bits(out_bits)


cdef inline uint64_t mant_round_denorm(uint64_t mant, int in_m, int shift, int out_m,
                                       bint *carry_out) noexcept nogil:
    """1.mant (in_m fraction bits) shifted right by `shift` >= 1, rounded RNE to out_m bits.

    The denormal result of a narrowing conversion; *carry_out says it rounded up to the smallest
    normal (the returned mantissa is then 0).
    """
    cdef int low = in_m - out_m
    cdef uint64_t p1 = mant | (<uint64_t>1 << in_m)
    cdef uint64_t guard = shl(p1, -(low + shift - 1)) & 1
    cdef uint64_t sticky = (p1 & mask_bits(low + shift - 1)) != 0
    cdef uint64_t least = shl(p1, -(low + shift)) & 1
    cdef uint64_t carry = guard & (sticky | least)
    cdef uint64_t total = ((shl(p1, -shift) >> low) & mask_bits(out_m + 1)) + carry
    total &= mask_bits(out_m + 1)
    carry_out[0] = (total >> out_m) & 1
    return total & mask_bits(out_m)


# ---------------------------------------------------------------------------------------------
# Width conversions
# ---------------------------------------------------------------------------------------------

cdef inline uint64_t fp_widen(uint64_t bits, int ie, int im, int oe, int om, bint denorm) noexcept nogil:
    """To a format at least as wide in both fields (FpWidthInc: mantissa first, then exponent).

    denorm: convert input denormals exactly (fp16 -> fp17/fp32); otherwise a denormal is read as
    1.f * 2^-bias (fp17 -> fp32).  INF saturates, a NaN keeps its payload unshifted.
    """
    cdef uint64_t sign = (bits >> (ie + im)) & 1
    cdef uint64_t expo = (bits >> im) & mask_bits(ie)
    cdef uint64_t imant = bits & mask_bits(im)
    cdef uint64_t mant = imant << (om - im)
    cdef bint is_nan = expo == mask_bits(ie) and imant != 0
    cdef int zc
    cdef uint64_t o_expo
    if is_nan:
        mant = imant
    if ie == oe:
        return fp_pack(sign, expo, mant, oe, om)
    if expo == 0 and mant == 0:
        return fp_pack(sign, 0, 0, oe, om)
    o_expo = expo + <uint64_t>(fp_bias(oe) - fp_bias(ie))
    if denorm and expo == 0:
        zc = lead_zeros(mant, om)
        o_expo = <uint64_t>(fp_bias(oe) - fp_bias(ie) - zc)
        mant = (mant << (zc + 1)) & mask_bits(om)
    if expo == mask_bits(ie):
        if mant == 0:
            return fp_max_finite(sign, oe, om)
        return fp_pack(sign, mask_bits(oe), mant, oe, om)
    return fp_pack(sign, o_expo, mant, oe, om)


cdef inline uint64_t fp_narrow(uint64_t bits, int ie, int im, int oe, int om, bint denorm) noexcept nogil:
    """To a format with a narrower exponent and no wider mantissa (FpWidthDec; FpExpoWidthDec
    when im == om).  With ie == oe its exponent-0 handling is meaningless (as in the C model).

    Rounds to nearest even; too large saturates; denorm: produce output denormals (fp16),
    otherwise flush them to zero unless they round up to the smallest normal (fp17).  A NaN keeps
    the low `om` bits of its payload.
    """
    cdef uint64_t sign = (bits >> (ie + im)) & 1
    cdef int64_t expo = <int64_t>((bits >> im) & mask_bits(ie))
    cdef uint64_t mant = bits & mask_bits(im)
    cdef int64_t delta = fp_bias(ie) - fp_bias(oe)
    cdef uint64_t o_mant = 0
    cdef int64_t o_expo = 0
    cdef bint carry = False
    if expo == <int64_t>mask_bits(ie) and mant != 0:
        return fp_pack(sign, mask_bits(oe), mant, oe, om)
    if expo >= <int64_t>mask_bits(oe) + delta:
        return fp_max_finite(sign, oe, om)
    if expo < delta - om:
        return fp_pack(sign, 0, 0, oe, om)
    if expo <= delta:
        o_mant = mant_round_denorm(mant, im, <int>(delta - expo + 1), om, &carry)
        if carry:
            return fp_pack(sign, 1, o_mant, oe, om)
        if not denorm:
            return fp_pack(sign, 0, 0, oe, om)
        return fp_pack(sign, 0, o_mant, oe, om)
    o_expo = expo - delta
    o_mant = mant_round_rne(mant | (<uint64_t>1 << im), im + 1, om + 1, &carry) & mask_bits(om)
    if carry:
        o_expo += 1
        if o_expo == <int64_t>mask_bits(oe):
            return fp_max_finite(sign, oe, om)
    return fp_pack(sign, <uint64_t>o_expo, o_mant, oe, om)


# ---------------------------------------------------------------------------------------------
# Arithmetic
# ---------------------------------------------------------------------------------------------

cdef inline uint64_t fp_add(uint64_t a, uint64_t b, int e, int m) noexcept nogil:
    """a + b (FpAdd): align on the larger operand with m+2 guard bits, add, normalise, RNE."""
    cdef uint64_t emax = mask_bits(e)
    cdef int extra = m + 2                # bits kept below the larger operand's LSB
    cdef int width = 2 * m + 3            # aligned mantissa width
    cdef uint64_t a_sign = (a >> (e + m)) & 1, b_sign = (b >> (e + m)) & 1
    cdef uint64_t a_expo = (a >> m) & emax, b_expo = (b >> m) & emax
    cdef uint64_t a_mant = a & mask_bits(m), b_mant = b & mask_bits(m)
    cdef uint64_t a_p1 = a_mant, b_p1 = b_mant
    cdef bint a_larger, is_inf = False, carry = False
    cdef uint64_t o_sign, o_expo, big, small, total, o_mant
    cdef int diff, zc
    if fp_is_nan(a, e, m):
        return a & mask_bits(1 + e + m)
    if fp_is_nan(b, e, m):
        return b & mask_bits(1 + e + m)
    if a_expo != 0 or a_mant != 0:
        a_p1 |= <uint64_t>1 << m         # implied 1, also on denormals
    if b_expo != 0 or b_mant != 0:
        b_p1 |= <uint64_t>1 << m
    a_larger = a_expo > b_expo or (a_expo == b_expo and a_mant >= b_mant)
    if a_larger:
        o_sign = a_sign
        o_expo = a_expo
        diff = <int>(a_expo - b_expo)
        big = a_p1 << extra
        small = shl(b_p1, extra - diff)  # bits beyond the guard bits are truncated
    else:
        o_sign = b_sign
        o_expo = b_expo
        diff = <int>(b_expo - a_expo)
        big = b_p1 << extra
        small = shl(a_p1, extra - diff)
    if a_sign == b_sign:
        total = big + small
    else:
        total = big - small
    if (total >> width) & 1:
        if o_expo < emax - 1:
            o_expo += 1
            total >>= 1
        else:
            is_inf = True
            total = 0
    else:
        zc = lead_zeros(total, width)
        if o_expo <= <uint64_t>zc or total == 0:
            o_expo = 0                   # below the smallest normal: signed zero
            total = 0
        else:
            o_expo -= zc
            total <<= zc
    o_mant = mant_round_rne(total, width, m + 1, &carry)
    if carry:
        if o_expo < emax - 1:
            o_expo += 1
        else:
            is_inf = True
    if is_inf:
        return fp_max_finite(o_sign, e, m)
    return fp_pack(o_sign, o_expo, o_mant, e, m)


cdef inline uint64_t fp_sub(uint64_t a, uint64_t b, int e, int m) noexcept nogil:
    """a - b (FpSub): a + b with b's sign flipped (a NaN b keeps its flipped sign)."""
    return fp_add(a, b ^ (<uint64_t>1 << (e + m)), e, m)


cdef inline uint64_t fp_mul(uint64_t a, uint64_t b, int e, int m) noexcept nogil:
    """a * b (FpMul): exact (2m+2)-bit product, one RNE to m bits; no denormal results."""
    cdef uint64_t emax = mask_bits(e)
    cdef uint64_t bias = <uint64_t>fp_bias(e)
    cdef int pw = 2 * m + 1               # product fraction width
    cdef uint64_t a_expo = (a >> m) & emax, b_expo = (b >> m) & emax
    cdef uint64_t a_mant = a & mask_bits(m), b_mant = b & mask_bits(m)
    cdef uint64_t sign = ((a ^ b) >> (e + m)) & 1
    cdef uint64_t prod, p_expo, p_mant, o_mant
    cdef bint carry = False
    if fp_is_nan(a, e, m):
        return a & mask_bits(1 + e + m)
    if fp_is_nan(b, e, m):
        return b & mask_bits(1 + e + m)
    if (a_expo == 0 and a_mant == 0) or (b_expo == 0 and b_mant == 0) or a_expo + b_expo < bias:
        return fp_pack(sign, 0, 0, e, m)
    if a_expo + b_expo >= emax + bias:
        return fp_max_finite(sign, e, m)
    prod = (a_mant | (<uint64_t>1 << m)) * (b_mant | (<uint64_t>1 << m))
    p_expo = a_expo + b_expo - bias
    if (prod >> pw) & 1:
        if p_expo >= emax - 1:
            return fp_max_finite(sign, e, m)
        p_expo += 1
        p_mant = prod & mask_bits(pw)
    else:
        p_mant = (prod << 1) & mask_bits(pw)
    o_mant = mant_round_rne(p_mant | (<uint64_t>1 << pw), pw + 1, m + 1, &carry) & mask_bits(m)
    if carry:
        p_expo += 1
        if p_expo == emax:
            return fp_max_finite(sign, e, m)
    if p_expo == 0:
        return fp_pack(sign, 0, 0, e, m)
    return fp_pack(sign, p_expo, o_mant, e, m)


cdef inline bint fp_greater(uint64_t a, uint64_t b, int e, int m) noexcept nogil:
    """a > b as FpCmp decides it: by sign, then exponent and mantissa fields (+0 > -0)."""
    cdef uint64_t a_sign = (a >> (e + m)) & 1, b_sign = (b >> (e + m)) & 1
    cdef uint64_t a_mag = a & mask_bits(e + m), b_mag = b & mask_bits(e + m)
    if a_sign == 0:
        return b_sign == 1 or a_mag > b_mag
    return b_sign == 1 and not (a_mag > b_mag)


cdef inline uint64_t fp_max(uint64_t a, uint64_t b, int e, int m) noexcept nogil:
    """max(a, b) (FpMax): the first NaN operand wins; equal values give b."""
    if fp_is_nan(a, e, m):
        return a
    if fp_is_nan(b, e, m):
        return b
    return a if fp_greater(a, b, e, m) else b


cdef inline uint64_t fp_min(uint64_t a, uint64_t b, int e, int m) noexcept nogil:
    """min(a, b) (FpMin): the first NaN operand wins; equal values give a."""
    if fp_is_nan(a, e, m):
        return a
    if fp_is_nan(b, e, m):
        return b
    return b if fp_greater(a, b, e, m) else a


cdef inline uint64_t fp_relu(uint64_t x, int e, int m) noexcept nogil:
    """max(x, 0) (FpRelu): a negative (including -0) gives +0, a NaN passes."""
    if fp_is_nan(x, e, m) or ((x >> (e + m)) & 1) == 0:
        return x
    return 0


# ---------------------------------------------------------------------------------------------
# Integer <-> float
# ---------------------------------------------------------------------------------------------

cdef inline uint64_t fp_from_int(int64_t value, int int_bits, int e, int m) noexcept nogil:
    """A two's-complement `int_bits`-bit integer to float (FpIntToFloat): RNE, saturating."""
    cdef uint64_t emax = mask_bits(e)
    cdef uint64_t raw = <uint64_t>value & mask_bits(int_bits)
    cdef uint64_t sign = (raw >> (int_bits - 1)) & 1
    cdef uint64_t mag, o_expo, o_mant
    cdef int zc
    cdef bint carry = False
    if raw == 0:
        return 0
    mag = ((~raw + 1) if sign else raw) & mask_bits(int_bits)
    zc = lead_zeros(mag, int_bits)
    # the exponent register is e bits wide and wraps (never reached by the cmod's formats)
    o_expo = <uint64_t>(int_bits - 1 - zc + fp_bias(e)) & emax
    o_mant = mant_round_rne((mag << zc) & mask_bits(int_bits), int_bits, m + 1, &carry)
    if o_expo == emax:
        return fp_max_finite(sign, e, m)
    if carry:
        if o_expo >= emax - 1:
            return fp_max_finite(sign, e, m)
        o_expo += 1
    return fp_pack(sign, o_expo, o_mant, e, m)


cdef inline int64_t fp_to_int(uint64_t bits, int e, int m, int int_bits) noexcept nogil:
    """Float to a signed `int_bits`-bit integer (FpFloatToInt, int_bits <= 63).

    The magnitude rounds half up (so ties go away from zero) and saturates; a NaN gives the most
    negative integer.  Zero and denormals read with an implied 1 are far below 1/2 and give 0.
    """
    cdef uint64_t sign = (bits >> (e + m)) & 1
    cdef int64_t expo = <int64_t>((bits >> m) & mask_bits(e))
    cdef uint64_t p1 = (bits & mask_bits(m)) | (<uint64_t>1 << m)
    cdef int64_t hi = <int64_t>mask_bits(int_bits - 1)
    cdef int64_t shift = m - (expo - fp_bias(e))
    cdef uint64_t mag
    if fp_is_nan(bits, e, m):
        return -hi - 1
    if shift <= 0:
        if m - shift >= int_bits - 1:
            return -hi - 1 if sign else hi
        mag = p1 << (-shift)
    else:
        mag = shl(p1, -shift) + (shl(p1, -(shift - 1)) & 1)
    if mag > <uint64_t>hi:
        return -hi - 1 if sign else hi
    return -<int64_t>mag if sign else <int64_t>mag


cdef inline uint64_t fp_from_fraction(uint64_t frac, int frac_bits, int e, int m) noexcept nogil:
    """An unsigned fraction frac * 2^-frac_bits to float (FpFractionToFloat), RNE; 0 -> +0."""
    cdef int zc
    cdef uint64_t o_expo = <uint64_t>fp_bias(e)
    cdef uint64_t shifted, o_mant
    cdef bint carry = False
    if frac == 0:
        return 0
    zc = lead_zeros(frac, frac_bits)
    shifted = (frac << (zc + 1)) & mask_bits(frac_bits + 1)   # leading 1 at bit frac_bits
    if frac_bits <= m:
        # the C model shifts within frac_bits bits here (unused by the cmod's instances)
        o_mant = ((shifted & mask_bits(frac_bits)) << (m - frac_bits)) & mask_bits(frac_bits)
        return fp_pack(0, o_expo - zc - 1, o_mant, e, m)
    o_mant = mant_round_rne(shifted, frac_bits + 1, m + 1, &carry)
    if carry:
        return fp_pack(0, o_expo - zc, 0, e, m)
    if o_expo <= <uint64_t>(zc + 1):
        return 0
    return fp_pack(0, o_expo - zc - 1, o_mant, e, m)


cdef inline void fp_to_int_frac(uint64_t bits, int e, int m, int64_t right_shift, int shift_bits,
                                int int_bits, int frac_bits, uint64_t *int_out,
                                uint64_t *frac_out) noexcept nogil:
    """|x| * 2^-right_shift split into an unsigned integer part saturated to `int_bits` bits and
    the `frac_bits` fraction bits below it (FpFloatToIntFrac, the SDP LUT index; frac_bits <= 63).

    The sign is ignored and the implied 1 always added; the unbiased exponent wraps to e signed
    bits (an INF/NaN exponent reads as -2^(e-1)); a NaN gives 0, 0.  Reads `right_shift` as a
    `shift_bits`-bit signed register value.
    """
    cdef uint64_t p1 = (bits & mask_bits(m)) | (<uint64_t>1 << m)
    cdef int64_t expo = <int64_t>((bits >> m) & mask_bits(e))
    cdef int64_t unbiased = (expo - fp_bias(e)) & <int64_t>mask_bits(e)
    cdef int64_t rshift = right_shift & <int64_t>mask_bits(shift_bits)
    cdef int64_t lshift
    cdef uint64_t int_max = mask_bits(int_bits)
    if fp_is_nan(bits, e, m):
        int_out[0] = 0
        frac_out[0] = 0
        return
    if unbiased >= (<int64_t>1 << (e - 1)):
        unbiased -= <int64_t>1 << e
    if rshift >= (<int64_t>1 << (shift_bits - 1)):
        rshift -= <int64_t>1 << shift_bits
    lshift = unbiased - rshift - m
    if lshift >= 0:
        frac_out[0] = 0
        # p1 >= 2^m: any left shift that keeps it in 64 bits is compared exactly
        if lshift + m + 1 > 63 or (p1 << lshift) > int_max:
            int_out[0] = int_max
        else:
            int_out[0] = p1 << lshift
        return
    int_out[0] = shl(p1, <int>lshift)
    if int_out[0] > int_max:
        int_out[0] = int_max
    frac_out[0] = shl(p1 & mask_bits(frac_bits), <int>(frac_bits + lshift)) & mask_bits(frac_bits)


# ---------------------------------------------------------------------------------------------
# The named formats of the C model's units
# ---------------------------------------------------------------------------------------------

cdef inline uint64_t fp16_to_fp32(uint64_t x) noexcept nogil:
    return fp_widen(x, 5, 10, 8, 23, True)

cdef inline uint64_t fp32_to_fp16(uint64_t x) noexcept nogil:
    return fp_narrow(x, 8, 23, 5, 10, True)

cdef inline uint64_t fp16_to_fp17(uint64_t x) noexcept nogil:
    return fp_widen(x, 5, 10, 6, 10, True)

cdef inline uint64_t fp17_to_fp16(uint64_t x) noexcept nogil:
    return fp_narrow(x, 6, 10, 5, 10, True)

cdef inline uint64_t fp17_to_fp32(uint64_t x) noexcept nogil:
    return fp_widen(x, 6, 10, 8, 23, False)

cdef inline uint64_t fp32_to_fp17(uint64_t x) noexcept nogil:
    return fp_narrow(x, 8, 23, 6, 10, False)

cdef inline uint64_t fp16_add(uint64_t a, uint64_t b) noexcept nogil:
    return fp_add(a, b, 5, 10)

cdef inline uint64_t fp16_sub(uint64_t a, uint64_t b) noexcept nogil:
    return fp_sub(a, b, 5, 10)

cdef inline uint64_t fp16_mul(uint64_t a, uint64_t b) noexcept nogil:
    return fp_mul(a, b, 5, 10)

cdef inline uint64_t fp16_max(uint64_t a, uint64_t b) noexcept nogil:
    return fp_max(a, b, 5, 10)

cdef inline uint64_t fp16_min(uint64_t a, uint64_t b) noexcept nogil:
    return fp_min(a, b, 5, 10)

cdef inline uint64_t fp17_add(uint64_t a, uint64_t b) noexcept nogil:
    return fp_add(a, b, 6, 10)

cdef inline uint64_t fp17_sub(uint64_t a, uint64_t b) noexcept nogil:
    return fp_sub(a, b, 6, 10)

cdef inline uint64_t fp17_mul(uint64_t a, uint64_t b) noexcept nogil:
    return fp_mul(a, b, 6, 10)

cdef inline uint64_t fp17_max(uint64_t a, uint64_t b) noexcept nogil:
    return fp_max(a, b, 6, 10)

cdef inline uint64_t fp17_min(uint64_t a, uint64_t b) noexcept nogil:
    return fp_min(a, b, 6, 10)

cdef inline uint64_t fp32_add(uint64_t a, uint64_t b) noexcept nogil:
    return fp_add(a, b, 8, 23)

cdef inline uint64_t fp32_sub(uint64_t a, uint64_t b) noexcept nogil:
    return fp_sub(a, b, 8, 23)

cdef inline uint64_t fp32_mul(uint64_t a, uint64_t b) noexcept nogil:
    return fp_mul(a, b, 8, 23)

cdef inline uint64_t fp32_max(uint64_t a, uint64_t b) noexcept nogil:
    return fp_max(a, b, 8, 23)

cdef inline uint64_t fp32_min(uint64_t a, uint64_t b) noexcept nogil:
    return fp_min(a, b, 8, 23)

cdef inline uint64_t int16_to_fp16(int64_t x) noexcept nogil:
    return fp_from_int(x, 16, 5, 10)

cdef inline uint64_t int17_to_fp16(int64_t x) noexcept nogil:
    return fp_from_int(x, 17, 5, 10)

cdef inline int64_t fp16_to_int16(uint64_t x) noexcept nogil:
    return fp_to_int(x, 5, 10, 16)

cdef inline uint64_t uint16_to_fp17(uint64_t x) noexcept nogil:
    """x * 2^-16 as fp17 (the PDP/CDP's reciprocal and LUT fractions)."""
    return fp_from_fraction(x & 0xffff, 16, 6, 10)


cdef inline uint64_t fp_eql(uint64_t a, uint64_t b) noexcept nogil:
    """1 when the bit patterns are equal (FpEql: +0 != -0, a NaN equals its own pattern)."""
    return 1 if a == b else 0


# ---------------------------------------------------------------------------------------------
# The convolution pipeline's FP16 formats (cmod cmac/NV_NVDLA_cmac.h, cacc/NV_NVDLA_cacc.cpp)
#
# FP44, a CMAC cell's FP16 partial sum: bits [43:38] an exponent (the largest exponent sum of the
# cell's products, times 4), [37:0] a two's-complement mantissa; value = mant * 2^(exp - 50).
# NaN: exponent 0x3f, bit 37 the sign, [36:27] the fp16 payload.
# FP48, the CACC's FP16 accumulator (assembly SRAM): bits [47:40] an exponent, [39:0] a
# two's-complement mantissa, normalised (bit 38 differs from the sign bit 39); value =
# mant * 2^(exp - 101); 0 is all zeros.  NaN: exponent 0xff, [39:29] sign and payload.
# ---------------------------------------------------------------------------------------------

cdef inline int64_t sign_extend_bits(uint64_t x, int bits) noexcept nogil:
    x &= mask_bits(bits)
    if (x >> (bits - 1)) & 1:
        return <int64_t>(x | ~mask_bits(bits))
    return <int64_t>x


cdef inline int redundant_sign_bits(uint64_t x, int bits) noexcept nogil:
    """How many bits below the sign bit of a `bits`-wide two's-complement x repeat the sign."""
    x &= mask_bits(bits)
    if (x >> (bits - 1)) & 1:
        x = ~x & mask_bits(bits)
    return lead_zeros(x, bits) - 1


cdef inline uint32_t _csa_sum(uint32_t a, uint32_t b, uint32_t c) noexcept nogil:
    return a ^ b ^ c


cdef inline uint32_t _csa_carry(uint32_t a, uint32_t b, uint32_t c) noexcept nogil:
    return ((a & b) | (b & c) | (a & c)) << 1


cdef inline void _csa_reduce(uint32_t *rows, int n) noexcept nogil:
    """Carry-save reduce rows[0:n] (n <= 5) to two rows in rows[0], rows[1], three at a time in
    order, uncombined rows moving down behind the new sum/carry pairs (the CMAC's tree)."""
    cdef uint32_t tmp[5]
    cdef int groups, j, k
    while n >= 3:
        groups = n // 3
        k = 0
        for j in range(groups):
            tmp[k] = _csa_sum(rows[3 * j], rows[3 * j + 1], rows[3 * j + 2])
            tmp[k + 1] = _csa_carry(rows[3 * j], rows[3 * j + 1], rows[3 * j + 2])
            k += 2
        for j in range(3 * groups, n):
            tmp[k] = rows[j]
            k += 1
        for j in range(k):
            rows[j] = tmp[j]
        n = k


cdef inline uint32_t _booth_sign_compensation(uint32_t shift) noexcept nogil:
    """The constant that completes the sign extensions of the shifted Booth rows."""
    if shift > 28:
        return 0
    if shift == 28:
        return 0xfffffffb
    if shift == 24:
        return 0xffffffab
    if shift == 20:
        return 0xfffffaab
    # 0..16: the pattern 0xaaab0000 shifted, sign-filled from the top
    return (<uint32_t>0xaaab0000 >> shift) | ~(<uint32_t>0xffffffff >> shift)


cdef inline int32_t cmac_fp16_booth(bint negative, uint32_t wt_mant, uint32_t dat_mant,
                                    uint32_t shift) noexcept nogil:
    """+-(wt_mant * dat_mant) >> shift as the CMAC computes it (shift a multiple of 4, < 32 or 0
    out): radix-4 Booth rows of dat_mant selected by wt_mant's bits, reduced by carry-save adders
    to two vectors that are shifted (truncated) separately, plus a sign-compensation constant.
    Exact when shift is 0; otherwise within 1 of the floor of the exact quotient."""
    cdef uint32_t flip = 7 if negative else 0
    cdef uint32_t w = wt_mant << 1
    cdef uint32_t pp[8]
    cdef uint32_t inv[8]
    cdef uint32_t rows[10]
    cdef uint32_t code, total
    cdef int i
    if shift >= 32:
        return 0
    for i in range(8):
        code = (w & 7) ^ flip
        w >>= 2
        if code == 0 or code == 7:
            pp[i] = 0x10000
            inv[i] = 0
        elif code == 1 or code == 2:
            pp[i] = dat_mant | 0x10000
            inv[i] = 0
        elif code == 3:
            pp[i] = (dat_mant << 1) | 0x10000
            inv[i] = 0
        elif code == 4:
            pp[i] = ~(dat_mant << 1) & 0xffff
            inv[i] = 1
        else:
            pp[i] = ~dat_mant & 0xffff
            inv[i] = 1
    rows[0] = pp[0]
    rows[1] = (pp[1] << 2) | inv[0]
    rows[2] = (pp[2] << 4) | (inv[1] << 2)
    rows[3] = (pp[3] << 6) | (inv[2] << 4)
    rows[4] = inv[3] << 6
    rows[5] = pp[4] << 8
    rows[6] = (pp[5] << 10) | (inv[4] << 8)
    rows[7] = (pp[6] << 12) | (inv[5] << 10)
    rows[8] = (pp[7] << 14) | (inv[6] << 12)
    rows[9] = inv[7] << 14
    _csa_reduce(rows, 5)
    _csa_reduce(&rows[5], 5)
    rows[2] = rows[5]
    rows[3] = rows[6]
    _csa_reduce(rows, 4)
    total = (rows[0] >> shift) + (rows[1] >> shift) + _booth_sign_compensation(shift)
    return <int32_t>total


cdef inline int cmac_fp16_products(const uint16_t *data, const uint16_t *weight,
                                   const uint8_t *enable, int n, int32_t *products) noexcept nogil:
    """The n (<= 64) fp16 products of one CMAC cell, aligned to the cell's exponent.

    Each exponent splits into a coarse part (exp >> 2) and a 0..3 pre-shift of the 11-bit
    mantissa (denormals: mantissa without the implied 1, pre-shift 1); products are shifted right
    by 4 * (largest coarse sum - their coarse sum).  enable[i] = 0 (a zero operand, from the
    CSC's sparsity masks) gives a 0 product that takes no part in the largest sum.  Returns the
    FP44 exponent (4 * largest coarse sum, 0..56).
    """
    cdef int i, max_sum = 0, coarse
    cdef uint32_t d_exp, w_exp, d_mant, w_mant
    for i in range(n):
        if enable[i]:
            coarse = ((data[i] >> 12) & 7) + ((weight[i] >> 12) & 7)
            if coarse > max_sum:
                max_sum = coarse
    for i in range(n):
        if not enable[i]:
            products[i] = 0
            continue
        d_exp = (data[i] >> 10) & 31
        w_exp = (weight[i] >> 10) & 31
        d_mant = data[i] & 0x3ff
        w_mant = weight[i] & 0x3ff
        if d_exp:
            d_mant = (d_mant | 0x400) << (d_exp & 3)
        else:
            d_mant <<= 1
        if w_exp:
            w_mant = (w_mant | 0x400) << (w_exp & 3)
        else:
            w_mant <<= 1
        coarse = <int>(d_exp >> 2) + <int>(w_exp >> 2)
        products[i] = cmac_fp16_booth(((data[i] ^ weight[i]) >> 15) & 1, w_mant, d_mant,
                                      <uint32_t>((max_sum - coarse) << 2))
    return max_sum << 2


cdef inline bint cmac_fp16_nan(const uint16_t *data, const uint16_t *weight, int n,
                               uint64_t *fp44) noexcept nogil:
    """The FP44 NaN of a cell: the first NaN weight, else the first NaN data element."""
    cdef int i
    cdef uint16_t x = 0
    cdef bint found = False
    for i in range(n):
        if (weight[i] & 0x7c00) == 0x7c00 and (weight[i] & 0x3ff):
            x = weight[i]
            found = True
            break
    if not found:
        for i in range(n):
            if (data[i] & 0x7c00) == 0x7c00 and (data[i] & 0x3ff):
                x = data[i]
                found = True
                break
    if found:
        fp44[0] = (<uint64_t>0x3f << 38) | (<uint64_t>((x >> 15) & 1) << 37) | (<uint64_t>(x & 0x3ff) << 27)
    return found


cdef inline uint64_t fp44_pack(int exponent, int64_t mantissa) noexcept nogil:
    return ((<uint64_t>exponent & 0x3f) << 38) | (<uint64_t>mantissa & mask_bits(38))


cdef inline uint64_t cmac_fp16_dot(const uint16_t *data, const uint16_t *weight,
                                   const uint8_t *enable, int n) noexcept nogil:
    """One CMAC cell's direct-convolution FP16 result (<= 64 products summed) as FP44 bits."""
    cdef int32_t products[64]
    cdef uint64_t nan
    cdef int64_t total = 0
    cdef int i, exponent
    if n > 64:
        n = 64
    if cmac_fp16_nan(data, weight, n, &nan):
        return nan
    exponent = cmac_fp16_products(data, weight, enable, n, products)
    for i in range(n):
        total += products[i]
    return fp44_pack(exponent, total)


# -- The same cell, fast: operands decoded once per layer, branch-free Booth rows -------------
# cmac_fp16_booth above stays the readable reference; tests/test_fp16_conv_fast.py checks that
# cmac_fp16_booth_fast equals it (every shift, exhaustive on the low mantissa bits, >= 10^7 random
# products) and that whole layers give identical FP48 patterns.

cdef inline uint32_t cmac_fp16_operand(uint16_t x) noexcept nogil:
    """An fp16 element as a CMAC cell uses it: bits [13:0] the mantissa pre-shifted by the two low
    exponent bits (denormals: no implied 1, shift 1; +-0: 0), [18:16] the coarse exponent
    (exp >> 2), bit 30 set for a NaN, bit 31 the sign."""
    cdef uint32_t e = (x >> 10) & 31
    cdef uint32_t m = x & 0x3ff
    cdef uint32_t nan = 1 if (e == 31 and m != 0) else 0
    if e:
        m = (m | 0x400) << (e & 3)
    else:
        m <<= 1
    return m | ((e >> 2) << 16) | (nan << 30) | ((<uint32_t>x >> 15) << 31)


cdef extern from *:
    """
    /* nvdla-sim FP16 CMAC cell, fast form (see nvfloat.pxd).  The same Booth rows and carry-save
       tree as cmac_fp16_booth, written without branches so the compiler vectorises the loop over
       the cell's channels; an AVX2 clone is chosen at load time where the CPU has it. */
    #include <stdint.h>
    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
    #define NVSIM_FP16_CLONES __attribute__((target_clones("avx2", "default")))
    #else
    #define NVSIM_FP16_CLONES
    #endif
    #if defined(__GNUC__)
    #define NVSIM_INLINE static inline __attribute__((always_inline))   /* keeps the cell loop vectorisable */
    #else
    #define NVSIM_INLINE static inline
    #endif

    /* A weight mantissa's eight radix-4 Booth digits (codes from (w << 1), three bits each) as
       bit masks, one bit per digit: [7:0] |digit| = 1 (codes 1, 2, 5, 6), [15:8] |digit| = 2
       (codes 3, 4), [23:16] digit < 0 (codes 4, 5, 6), [31:24] digit > 0 (codes 1, 2, 3).  A
       negative product flips every code (c -> 7 - c): the magnitudes stay, the signs swap. */
    static inline uint32_t nvsim_booth_masks(uint32_t w_mant) {
        uint32_t w = w_mant << 1, one = 0, two = 0, neg = 0, pos = 0, code;
        int i;
        for (i = 0; i < 8; i++) {
            code = (w >> (2 * i)) & 7u;
            one |= (uint32_t)(code == 1 || code == 2 || code == 5 || code == 6) << i;
            two |= (uint32_t)(code == 3 || code == 4) << i;
            neg |= (uint32_t)(code >= 4 && code <= 6) << i;
            pos |= (uint32_t)(code >= 1 && code <= 3) << i;
        }
        return one | (two << 8) | (neg << 16) | (pos << 24);
    }

    /* Booth row i of d: 0 -> 0, +-1 -> d, +-2 -> 2d; negative rows inverted in 16 bits with
       inv = 1 (the +1 that completes the negation), other rows with bit 16 set. */
    #define NVSIM_ROW(i, p, inv) do { \
        uint32_t o_ = (uint32_t)((int32_t)(one << (31 - (i))) >> 31); \
        uint32_t t_ = (uint32_t)((int32_t)(two << (31 - (i))) >> 31); \
        uint32_t n_ = (uint32_t)((int32_t)(neg << (31 - (i))) >> 31); \
        (p) = ((d & o_) | (d2 & t_)) ^ (0x10000u ^ (n_ & 0x1ffffu)); \
        (inv) = n_ & 1u; } while (0)

    #define NVSIM_CSA(a, b, c, s, k) do { uint32_t a_ = (a), b_ = (b), c_ = (c); \
        (s) = a_ ^ b_ ^ c_; (k) = ((a_ & b_) | (b_ & c_) | (a_ & c_)) << 1; } while (0)

    /* +-(w * d) >> shift as the cell computes it, w given by its Booth masks; shift a multiple
       of 4 below 32, negative 0 or 1. */
    NVSIM_INLINE int32_t nvsim_booth_product(uint32_t negative, uint32_t masks, uint32_t d,
                                              uint32_t shift) {
        uint32_t one = masks & 0xffu, two = (masks >> 8) & 0xffu;
        uint32_t neg = (masks >> (16u + 8u * negative)) & 0xffu;
        uint32_t d2 = d << 1;
        uint32_t p0, p1, p2, p3, p4, p5, p6, p7, i0, i1, i2, i3, i4, i5, i6, i7;
        uint32_t s, c, s2, c2, a0, a1, b0, b1, x0, x1, r0, r1, comp;
        NVSIM_ROW(0, p0, i0);
        NVSIM_ROW(1, p1, i1);
        NVSIM_ROW(2, p2, i2);
        NVSIM_ROW(3, p3, i3);
        NVSIM_ROW(4, p4, i4);
        NVSIM_ROW(5, p5, i5);
        NVSIM_ROW(6, p6, i6);
        NVSIM_ROW(7, p7, i7);
        NVSIM_CSA(p0, (p1 << 2) | i0, (p2 << 4) | (i1 << 2), s, c);       /* rows 0-4 */
        NVSIM_CSA(s, c, (p3 << 6) | (i2 << 4), s2, c2);
        NVSIM_CSA(s2, c2, i3 << 6, a0, a1);
        NVSIM_CSA(p4 << 8, (p5 << 10) | (i4 << 8), (p6 << 12) | (i5 << 10), s, c);  /* rows 5-9 */
        NVSIM_CSA(s, c, (p7 << 14) | (i6 << 12), s2, c2);
        NVSIM_CSA(s2, c2, i7 << 14, b0, b1);
        NVSIM_CSA(a0, a1, b0, x0, x1);
        NVSIM_CSA(x0, x1, b1, r0, r1);
        /* sign compensation: 0xaaab0000 / 2^shift rounded up, sign-filled from the top */
        comp = ((0xaaab0000u + ((1u << shift) - 1u)) >> shift) | ~(0xffffffffu >> shift);
        return (int32_t)((r0 >> shift) + (r1 >> shift) + comp);
    }

    /* Sum of a cell's n products on decoded operands (cmac_fp16_operand); *exponent gets 4 x
       the largest coarse sum of the enabled channels, *flags the OR of every operand (bit 30:
       a NaN is present). */
    NVSIM_FP16_CLONES
    static int64_t nvsim_cmac_fp16_cell(const uint32_t *dat, const uint32_t *wt,
                                        const uint32_t *wt_masks, int n, int *exponent,
                                        uint32_t *flags) {
        uint32_t max_sum = 0, any = 0;
        int64_t total = 0;
        int i;
        for (i = 0; i < n; i++) {
            uint32_t d = dat[i], w = wt[i];
            uint32_t en = ((d & 0x3fffu) != 0) & ((w & 0x3fffu) != 0);
            uint32_t coarse = (((d >> 16) & 7u) + ((w >> 16) & 7u)) & (0u - en);
            max_sum = coarse > max_sum ? coarse : max_sum;
            any |= d | w;
        }
        for (i = 0; i < n; i++) {
            uint32_t d = dat[i], w = wt[i];
            uint32_t en = ((d & 0x3fffu) != 0) & ((w & 0x3fffu) != 0);
            uint32_t dist = max_sum - (((d >> 16) & 7u) + ((w >> 16) & 7u));
            uint32_t keep = en & (dist < 8u);            /* shifts of 32 and more give 0 */
            int32_t p = nvsim_booth_product((d ^ w) >> 31, wt_masks[i], d & 0x3fffu,
                                            (dist << 2) & 31u);
            total += (int64_t)(p & (int32_t)(0u - keep));
        }
        *exponent = (int)(max_sum << 2);
        *flags = any;
        return total;
    }
    """
    uint32_t nvsim_booth_masks(uint32_t w_mant) nogil
    int32_t nvsim_booth_product(uint32_t negative, uint32_t masks, uint32_t d,
                                uint32_t shift) nogil
    int64_t nvsim_cmac_fp16_cell(const uint32_t *dat, const uint32_t *wt,
                                 const uint32_t *wt_masks, int n, int *exponent,
                                 uint32_t *flags) nogil


cdef inline int32_t cmac_fp16_booth_fast(uint32_t negative, uint32_t wt_mant, uint32_t dat_mant,
                                         uint32_t shift) noexcept nogil:
    """cmac_fp16_booth without branches (negative 0 or 1): the same ten rows and carry-save
    tree, the two vectors truncated separately."""
    if shift >= 32:
        return 0
    return nvsim_booth_product(negative, nvsim_booth_masks(wt_mant), dat_mant, shift)


cdef inline uint32_t cmac_fp16_booth_masks(uint32_t wt_operand) noexcept nogil:
    """A decoded weight's Booth digits as the masks cmac_fp16_dot_fast takes (one per weight,
    computed once per layer)."""
    return nvsim_booth_masks(wt_operand & 0x3fff)


cdef inline uint64_t cmac_fp16_dot_fast(const uint32_t *dat, const uint32_t *wt,
                                        const uint32_t *wt_masks, const uint16_t *dat_bits,
                                        const uint16_t *wt_bits, int n) noexcept nogil:
    """cmac_fp16_dot on operands decoded by cmac_fp16_operand, wt_masks[i] =
    cmac_fp16_booth_masks(wt[i]) (dat_bits / wt_bits: the same elements as fp16 patterns, read
    only when one is a NaN).  A channel with a zero operand is
    masked off, as the CSC does."""
    cdef int i, exponent = 0
    cdef uint32_t flags = 0
    cdef int64_t total
    cdef uint8_t enable[64]
    if n > 64:
        n = 64
    total = nvsim_cmac_fp16_cell(dat, wt, wt_masks, n, &exponent, &flags)
    if flags & (<uint32_t>1 << 30):           # a NaN: the reference cell (rare)
        for i in range(n):
            enable[i] = (dat_bits[i] & 0x7fff) != 0 and (wt_bits[i] & 0x7fff) != 0
        return cmac_fp16_dot(dat_bits, wt_bits, enable, n)
    return fp44_pack(exponent, total)


cdef inline uint64_t cacc_fp48_add(uint64_t acc, uint64_t fp44) noexcept nogil:
    """acc + fp44 in the CACC's FP48 accumulator (the first add of a stripe starts from acc 0).

    Aligns the smaller operand (bits shifted out kept for rounding; beyond 40 it is dropped),
    adds in 40 bits, renormalises, rounds the two's-complement mantissa half up for positive and
    above half for negative results (magnitude ties away from zero).  A NaN accumulator stays,
    a NaN product replaces it; a zero product leaves acc unchanged.
    """
    cdef uint64_t m40 = mask_bits(40)
    cdef int64_t mac_exp = <int64_t>((fp44 >> 38) & 0x3f)
    cdef int64_t mac_mant = sign_extend_bits(fp44, 38)
    cdef int64_t acc_exp = <int64_t>((acc >> 40) & 0xff)
    cdef int64_t acc_mant = sign_extend_bits(acc, 40)
    cdef int64_t mac_ext, acc_ext, big, d, e
    cdef uint64_t out_bits = 0, total, mant, rounded, final
    cdef int n0, n1
    cdef bint overflow = False, guard, sticky, up, neg, mac_neg
    cdef uint64_t low_bit = 0
    if mac_mant == 0:
        return acc & mask_bits(48)
    if acc_exp == 0xff:
        return (<uint64_t>0xff << 40) | (acc & (<uint64_t>0x7ff << 29))
    if mac_exp == 0x3f:
        return (<uint64_t>0xff << 40) | (((fp44 >> 27) & 0x7ff) << 29)
    # normalise the product sum, then widen it to 40 bits
    n0 = redundant_sign_bits(<uint64_t>mac_mant, 38)
    mac_ext = sign_extend_bits(<uint64_t>mac_mant << n0, 38) * 4
    mac_exp = (mac_exp - n0 + 49) & 0xff
    if acc_mant == 0:
        acc_exp = 0
    acc_ext = acc_mant
    big = mac_exp
    if mac_exp > acc_exp:
        d = mac_exp - acc_exp
        if d <= 40:
            out_bits = ((<uint64_t>acc_ext & mask_bits(<int>d)) << (40 - d)) & m40
            acc_ext >>= d
        else:
            acc_ext = 0
    elif mac_exp < acc_exp:
        big = acc_exp
        d = acc_exp - mac_exp
        if d <= 40:
            out_bits = ((<uint64_t>mac_ext & mask_bits(<int>d)) << (40 - d)) & m40
            mac_ext >>= d
        else:
            mac_ext = 0
    total = <uint64_t>(acc_ext + mac_ext) & m40
    mac_neg = mac_ext < 0
    if mac_neg == (acc_ext < 0) and mac_neg != <bint>((total >> 39) & 1):
        overflow = True
        low_bit = total & 1
        mant = (<uint64_t>mac_neg << 39) | (total >> 1)
        e = big + 1
    elif ((total >> 38) & 1) == ((total >> 39) & 1):
        n1 = redundant_sign_bits(total, 40)
        mant = ((total << n1) | (out_bits >> (40 - n1))) & m40
        out_bits = (out_bits << n1) & m40
        e = big - n1
    else:
        mant = total
        e = big
    if overflow:
        guard = low_bit != 0
        sticky = out_bits != 0
    else:
        guard = (out_bits >> 39) & 1
        sticky = (out_bits & mask_bits(39)) != 0
    neg = (mant >> 39) & 1
    up = (guard and sticky) if neg else guard
    rounded = (mant + <uint64_t>up) & m40
    if ((rounded >> 39) & 1) != <uint64_t>neg:
        final = (<uint64_t>neg << 39) | (rounded >> 1)
        e += 1
    else:
        final = rounded
    if final == 0:
        e = 0
    return ((<uint64_t>e & 0xff) << 40) | final


cdef inline uint64_t cacc_fp48_to_fp32(uint64_t acc) noexcept nogil:
    """An FP48 accumulator to the fp32 the CACC delivers to the SDP: the 24 bits below the sign
    rounded on the magnitude half up (no sticky bit: ties away from zero); NaN keeps 10 payload
    bits; the accumulator is assumed normalised (what cacc_fp48_add leaves)."""
    cdef uint64_t e = (acc >> 40) & 0xff
    cdef uint64_t mu = acc & mask_bits(40)
    cdef uint64_t neg = (mu >> 39) & 1
    cdef uint64_t mag, expo, t, frac
    if e == 0xff:
        return (neg << 31) | (<uint64_t>0xff << 23) | ((mu >> 29) & 0x3ff)
    if neg and (mu & mask_bits(39)) == 0:
        return (<uint64_t>1 << 31) | (((e + 65) & 0xff) << 23)
    mag = ((~mu + 1) if neg else mu) & mask_bits(39)
    expo = 0 if mu == 0 else (e + 64) & 0xff
    if (mag >> 14) & 1:
        t = ((neg << 24) | (mag >> 15)) + 1
        t &= mask_bits(25)
        if ((t >> 24) & 1) != neg:
            t = (neg << 24) | (t >> 1)
            expo = (expo + 1) & 0xff
        frac = t & mask_bits(23)
    else:
        frac = (mag >> 15) & mask_bits(23)
    return (neg << 31) | (expo << 23) | frac
