"""The C model's float library (kernels/nvfloat.pxd) against independent references.

Where the C model is IEEE 754 (normal operands and results, round to nearest even) the reference is
numpy float16/float32 arithmetic or float64 arithmetic rounded explicitly; its deviations (no INF
out, NaN payloads, denormal reading and flushing, zero signs, float -> int ties) are tested on
hand-computed bit patterns, each with the reason.
"""
import numpy as np
import pytest

from nvdla_sim.kernels import nvfloat_py as nf

RNG = np.random.default_rng(20240917)
N = 200_000

FP16 = (5, 10)
FP17 = (6, 10)
FP32 = (8, 23)


# ---- independent references -------------------------------------------------------------------

def bias(e):
    return (1 << (e - 1)) - 1


def decode(bits, e, m):
    """IEEE meaning of finite (e, m) bit patterns as float64 (exact for e <= 8, m <= 23)."""
    bits = np.asarray(bits, dtype=np.uint64)
    sign = np.where((bits >> np.uint64(e + m)) & np.uint64(1), -1.0, 1.0)
    expo = ((bits >> np.uint64(m)) & np.uint64((1 << e) - 1)).astype(np.int64)
    mant = (bits & np.uint64((1 << m) - 1)).astype(np.float64)
    normal = np.ldexp(1.0 + mant / 2.0**m, expo - bias(e))
    denormal = np.ldexp(mant / 2.0**m, 1 - bias(e))
    return sign * np.where(expo == 0, denormal, normal)


def encode_normal(values, e, m):
    """float64 values to (e, m) bits, rounding to m+1 significant bits (ties to even); the
    rounded values must be normal and finite in the format (callers filter)."""
    values = np.asarray(values, dtype=np.float64)
    frac, exp2 = np.frexp(np.abs(values))            # |v| = frac * 2^exp2, frac in [0.5, 1)
    sig = np.rint(np.ldexp(frac, m + 1))             # m+1 bit significand, RNE
    exp2 = exp2 + (sig == 2.0 ** (m + 1))            # rounding carried into the next binade
    sig = np.where(sig == 2.0 ** (m + 1), 2.0 ** m, sig)
    expo = (exp2 - 1 + bias(e)).astype(np.int64)
    assert np.all((expo >= 1) & (expo <= (1 << e) - 2)), "reference value outside the normal range"
    sign = (values < 0).astype(np.uint64)
    return ((sign << np.uint64(e + m)) | (expo.astype(np.uint64) << np.uint64(m))
            | (sig.astype(np.uint64) - np.uint64(1 << m)))


def normal_range(values, e, m, margin=2.0):
    """Exact results safely inside the normal range (away from the flush and overflow edges)."""
    mag = np.abs(values)
    lo = margin * 2.0 ** (1 - bias(e))
    hi = (2.0 - 2.0 ** -m) * 2.0 ** bias(e) / margin
    return (mag >= lo) & (mag <= hi)


def random_normals(n, e, m, expo_lo=1, expo_hi=None):
    expo_hi = (1 << e) - 2 if expo_hi is None else expo_hi
    sign = RNG.integers(0, 2, n, dtype=np.uint64)
    expo = RNG.integers(expo_lo, expo_hi + 1, n, dtype=np.uint64)
    mant = RNG.integers(0, 1 << m, n, dtype=np.uint64)
    return (sign << np.uint64(e + m)) | (expo << np.uint64(m)) | mant


def assert_bits_equal(got, want, inputs=()):
    got = np.asarray(got, dtype=np.uint64)
    want = np.asarray(want, dtype=np.uint64)
    bad = np.nonzero(got != want)[0]
    if len(bad):
        i = bad[0]
        detail = ", ".join(f"{int(np.asarray(x).reshape(-1)[i]):#x}" for x in inputs)
        raise AssertionError(f"{len(bad)} of {len(got)} differ; first: inputs ({detail}) "
                             f"got {int(got[i]):#x} want {int(want[i]):#x}")


def f16(values):
    return np.asarray(values, dtype=np.float16).view(np.uint16)


def f32(values):
    return np.asarray(values, dtype=np.float32).view(np.uint32)


# ---- conversions where the C model is IEEE ------------------------------------------------------

def test_fp16_to_fp32_is_exact_for_every_finite_fp16():
    bits = np.arange(1 << 16, dtype=np.uint16)
    finite = np.isfinite(bits.view(np.float16))
    want = bits[finite].view(np.float16).astype(np.float32).view(np.uint32)   # incl. denormals, -0
    assert_bits_equal(nf.fp16_to_fp32(bits[finite]), want, [bits[finite]])


def test_fp32_to_fp16_rounds_like_ieee_including_denormals():
    x = np.concatenate([
        RNG.integers(0, 1 << 32, N, dtype=np.uint64),
        random_normals(N, 8, 23, 127 - 30, 127 + 15),          # the fp16 range and its denormals
        np.arange(0x477FE000 - 64, 0x477FE000 + 64),            # around 65504 and half an ulp above
        np.arange(0x33000000 - 64, 0x33000000 + 64),            # around half the smallest denormal
        np.arange(0x387FC000 - 64, 0x387FC000 + 64),            # denormal -> smallest normal carry
    ]).astype(np.uint32)
    v = x.view(np.float32)
    ok = np.isfinite(v) & (np.abs(v) < 65520)                   # 65520 rounds to IEEE INF
    want = v[ok].astype(np.float16).view(np.uint16)
    assert_bits_equal(nf.fp32_to_fp16(x[ok]), want, [x[ok]])


def test_fp16_fp17_round_trip_and_values():
    bits = np.arange(1 << 16, dtype=np.uint16)
    finite = np.isfinite(bits.view(np.float16))
    b17 = nf.fp16_to_fp17(bits[finite])
    assert b17.dtype == np.uint32
    # every finite fp16, denormals included, is a normal fp17 of the same value (or a signed zero)
    assert np.array_equal(decode(b17, *FP17), bits[finite].view(np.float16).astype(np.float64))
    assert_bits_equal(nf.fp17_to_fp16(b17), bits[finite], [b17])


def test_fp17_to_fp16_rounds_like_ieee():
    x = random_normals(N, 6, 10, 31 - 26, 31 + 15)             # covers fp16 denormals exactly
    v = decode(x, *FP17)
    ok = np.abs(v) <= 65504
    want = v[ok].astype(np.float16).view(np.uint16)             # exact values: one rounding
    assert_bits_equal(nf.fp17_to_fp16(x[ok]), want, [x[ok]])


def test_fp17_fp32_conversions():
    x = random_normals(N, 6, 10)
    b32 = nf.fp17_to_fp32(x)
    assert np.array_equal(b32.view(np.float32).astype(np.float64), decode(x, *FP17))
    assert_bits_equal(nf.fp32_to_fp17(b32), x, [b32])
    y = random_normals(N, 8, 23, 127 - 29, 127 + 30)
    v = y.astype(np.uint32).view(np.float32).astype(np.float64)
    want = encode_normal(v, *FP17)
    assert_bits_equal(nf.fp32_to_fp17(y), want, [y])


# ---- arithmetic where the C model is IEEE -------------------------------------------------------

@pytest.mark.parametrize("op", ["add", "sub", "mul"])
def test_fp32_arithmetic_matches_numpy_float32(op):
    a = random_normals(N, 8, 23).astype(np.uint32)
    b = random_normals(N, 8, 23).astype(np.uint32)
    close = random_normals(N, 8, 23, 120, 134).astype(np.uint32)   # cancellation and carries
    a = np.concatenate([a, close, close])
    b = np.concatenate([b, close ^ RNG.integers(0, 1 << 12, N).astype(np.uint32),
                        (close ^ np.uint32(1 << 31)) + RNG.integers(0, 1 << 25, N).astype(np.uint32)])
    fa, fb = a.view(np.float32), b.view(np.float32)
    exact = {"add": fa.astype(np.float64) + fb, "sub": fa.astype(np.float64) - fb,
             "mul": fa.astype(np.float64) * fb}[op]
    with np.errstate(over="ignore", under="ignore"):
        want = {"add": fa + fb, "sub": fa - fb, "mul": fa * fb}[op]
    ok = normal_range(exact, *FP32)
    got = getattr(nf, f"fp32_{op}")(a[ok], b[ok])
    assert got.dtype == np.uint32
    assert_bits_equal(got, want[ok].view(np.uint32), [a[ok], b[ok]])


@pytest.mark.parametrize("op", ["add", "sub", "mul"])
def test_fp16_arithmetic_matches_numpy_float16(op):
    a = random_normals(N, 5, 10).astype(np.uint16)
    b = random_normals(N, 5, 10).astype(np.uint16)
    ha, hb = a.view(np.float16), b.view(np.float16)
    exact = {"add": ha.astype(np.float64) + hb, "sub": ha.astype(np.float64) - hb,
             "mul": ha.astype(np.float64) * hb}[op]
    with np.errstate(over="ignore", under="ignore"):
        want = {"add": ha + hb, "sub": ha - hb, "mul": ha * hb}[op]
    ok = normal_range(exact, *FP16)
    assert ok.sum() > N // 4
    got = getattr(nf, f"fp16_{op}")(a[ok], b[ok])
    assert got.dtype == np.uint16
    assert_bits_equal(got, want[ok].view(np.uint16), [a[ok], b[ok]])


@pytest.mark.parametrize("op", ["add", "sub", "mul"])
def test_fp17_arithmetic_matches_float64_rounded(op):
    # float64 holds fp17 products exactly and sums correctly rounded (53 >= 2 * 11 + 2 bits)
    a = random_normals(N, 6, 10)
    b = np.concatenate([random_normals(N // 2, 6, 10),
                        a[N // 2:] ^ RNG.integers(0, 1 << 10, N - N // 2, dtype=np.uint64)])
    va, vb = decode(a, *FP17), decode(b, *FP17)
    exact = {"add": va + vb, "sub": va - vb, "mul": va * vb}[op]
    ok = normal_range(exact, *FP17)
    got = getattr(nf, f"fp17_{op}")(a[ok], b[ok])
    assert_bits_equal(got, encode_normal(exact[ok], *FP17), [a[ok], b[ok]])


@pytest.mark.parametrize("fmt,name", [(FP16, "fp16"), (FP17, "fp17"), (FP32, "fp32")])
def test_max_min_order_like_float(fmt, name):
    e, m = fmt
    a = random_normals(N, e, m)
    b = np.concatenate([random_normals(N // 2, e, m), a[N // 2:] ^ np.uint64(1 << (e + m))])
    b[:1000] = a[:1000]
    va, vb = decode(a, e, m), decode(b, e, m)
    assert_bits_equal(getattr(nf, f"{name}_max")(a, b), np.where(va > vb, a, b), [a, b])
    assert_bits_equal(getattr(nf, f"{name}_min")(a, b), np.where(va > vb, b, a), [a, b])


# ---- integer <-> float --------------------------------------------------------------------------

def test_int16_and_int17_to_fp16_every_value():
    i16 = np.arange(-(1 << 15), 1 << 15)
    assert_bits_equal(nf.int_to_fp16(i16, 16), f16(i16), [i16])         # numpy: one RNE rounding
    i17 = np.arange(-65504, 65505)
    assert_bits_equal(nf.int_to_fp16(i17, 17), f16(i17), [i17])


def test_int17_beyond_fp16_saturates_instead_of_inf():
    # 65520 and up round to IEEE INF; the C model gives +-65504 (0x7bff / 0xfbff)
    assert list(nf.int_to_fp16([65519, 65520, 65535, -65536], 17)) == [0x7BFF, 0x7BFF, 0x7BFF, 0xFBFF]


def test_int32_to_fp32_matches_numpy():
    x = np.concatenate([RNG.integers(-(1 << 31), 1 << 31, N),
                        [0, 1, -1, -(1 << 31), (1 << 31) - 1, (1 << 24) + 1, (1 << 24) + 3,
                         -(1 << 24) - 1, (1 << 25) + 2, (1 << 25) + 6]]).astype(np.int64)
    assert_bits_equal(nf.int_to_fp32(x, 32), f32(x.astype(np.int32)), [x])


def test_int_to_fp_accepts_two_complement_bits():
    assert nf.int_to_fp16(np.uint16(0xFFFF), 16) == 0xBC00                  # -1.0
    assert nf.int_to_fp17(np.uint32(0x10000), 17) == nf.int_to_fp17(-65536, 17)
    assert nf.int_to_fp16(0, 16) == 0                                        # +0, never -0


def test_float_to_int_rounds_half_away_from_zero_and_saturates():
    x = np.concatenate([random_normals(N, 8, 23, 100, 160),
                        f32(np.arange(-64, 64) / 4.0).astype(np.uint64)]).astype(np.uint32)
    v = x.view(np.float32).astype(np.float64)
    want = np.clip(np.sign(v) * np.floor(np.abs(v) + 0.5), -(1 << 31), (1 << 31) - 1)
    assert np.array_equal(nf.fp32_to_int(x, 32), want.astype(np.int64))
    want16 = np.clip(want, -(1 << 15), (1 << 15) - 1)
    assert np.array_equal(nf.fp32_to_int(x, 16), want16.astype(np.int64))
    # IEEE would round the ties -2.5 -> -2 and 2.5 -> 2 (to even)
    assert list(nf.fp32_to_int(f32([-2.5, 2.5, 0.5, -0.5, 0.49999997]), 32)) == [-3, 3, 1, -1, 0]
    h = np.arange(1 << 16, dtype=np.uint16)
    hv = h.view(np.float16).astype(np.float64)
    fin = np.isfinite(hv)
    want_h = np.clip(np.sign(hv[fin]) * np.floor(np.abs(hv[fin]) + 0.5), -32768, 32767)
    assert np.array_equal(nf.fp16_to_int(h[fin], 16), want_h.astype(np.int64))


def test_float_to_int_nan_and_inf():
    # a NaN gives the most negative integer; INF reads as 2^(emax-bias) and saturates
    assert list(nf.fp32_to_int([0x7FC00000, 0xFF800001, 0x7F800000, 0xFF800000], 32)) == \
        [-(1 << 31), -(1 << 31), (1 << 31) - 1, -(1 << 31)]
    assert list(nf.fp16_to_int([0x7E00, 0x7C00, 0xFC00], 16)) == [-32768, 32767, -32768]


def test_fraction_to_fp17():
    # FpFractionToFloat: an unsigned fraction f * 2^-bits, RNE to fp17, below 2^-30 -> +0
    for bits in (16, 35):
        f = np.concatenate([RNG.integers(1, 1 << bits, N // 2, dtype=np.uint64),
                            RNG.integers(1, 1 << 13, N // 2, dtype=np.uint64)
                            << RNG.integers(0, bits - 12, N // 2, dtype=np.uint64)])
        v = f.astype(np.float64) * 2.0 ** -bits                 # exact: < 53 significant bits
        sig = encode_normal(np.maximum(v, 2.0 ** -30), *FP17)
        want = np.where(v >= 2.0 ** -30, sig, 0)
        ok = (v >= 2.0 ** -30) | (v < 2.0 ** -31)               # skip the flush boundary
        assert_bits_equal(nf.fraction_to_fp(f[ok], bits, 6, 10), want[ok], [f[ok]])
    assert nf.fraction_to_fp(0, 16, 6, 10) == 0
    assert nf.fraction_to_fp(1, 35, 6, 10) == 0                           # 2^-35: flushed
    assert nf.fraction_to_fp(1 << 15, 16, 6, 10) == 30 << 10              # 0.5


def test_fp_to_int_frac_splits_the_lut_index():
    x = random_normals(20_000, 8, 23, 100, 140).astype(np.uint32)
    for rshift in (-20, -3, 0, 5, 17):
        ints, fracs = nf.fp_to_int_frac(x, 8, 23, rshift, 8, 9, 35)
        for bits, i, fr in zip(x[:2000], ints[:2000], fracs[:2000]):
            num, den = abs(float(np.uint32(bits).view(np.float32))).as_integer_ratio()
            den = den << rshift if rshift >= 0 else den
            num = num if rshift >= 0 else num << -rshift
            assert int(i) == min(num // den, 511)
            assert int(fr) == ((num % den) << 35) // den
    # NaN: 0, 0
    assert [int(v[0]) for v in nf.fp_to_int_frac([0x7FC00000], 8, 23, 0, 8, 9, 35)] == [0, 0]


# ---- deviations from IEEE 754, bit patterns computed by hand ------------------------------------

def test_no_infinity_comes_out_overflow_saturates():
    # overflow gives the largest finite value, sign kept, never the INF pattern
    assert nf.fp16_add(0x7BFF, 0x7BFF) == 0x7BFF             # 65504 + 65504
    assert nf.fp16_mul(0xFBFF, 0x4000) == 0xFBFF             # -65504 * 2
    assert nf.fp16_add(0x7BFF, 0x5000) == 0x7BFF             # 65504 + 32: rounds up, saturates
    assert nf.fp32_mul(0x7F000000, 0x40000000) == 0x7F7FFFFF # 2^127 * 2
    assert nf.fp32_to_fp16(f32(65520.0)) == 0x7BFF           # IEEE: INF (ties to even carries)
    assert nf.fp32_to_fp16(f32(-1e30)) == 0xFBFF
    assert nf.fp32_to_fp17(0x7F000000) == (62 << 10) | 0x3FF # fp17 largest: (2 - 2^-10) * 2^31
    assert nf.fp17_to_fp16((47 << 10)) == 0x7BFF             # 2^16 > 65504


def test_inf_inputs_are_ordinary_numbers():
    # conversions saturate INF
    assert nf.fp16_to_fp32(0x7C00) == 0x7F7FFFFF
    assert nf.fp16_to_fp32(0xFC00) == 0xFF7FFFFF
    assert nf.fp16_to_fp17(0x7C00) == (62 << 10) | 0x3FF
    assert nf.fp32_to_fp16(0xFF800000) == 0xFBFF
    # add reads INF as 1.0 * 2^16: INF + 1 keeps the INF pattern, INF + INF overflows (saturates),
    # INF + 2^15 gives 1.5 * 2^16 with exponent 31: a NaN pattern
    assert nf.fp16_add(0x7C00, 0x3C00) == 0x7C00
    assert nf.fp16_add(0x7C00, 0x7C00) == 0x7BFF
    assert nf.fp16_add(0x7C00, 0x7800) == 0x7E00
    # mul: INF * 0 = 0 (IEEE: NaN); INF * 2^-14 = 2^(16-14) = 4
    assert nf.fp16_mul(0x7C00, 0x0000) == 0x0000
    assert nf.fp16_mul(0x7C00, 0x8000) == 0x8000
    assert nf.fp16_mul(0x7C00, 0x0400) == 0x4400
    assert nf.fp16_max(0x7C00, 0x7BFF) == 0x7C00


def test_nan_propagation_keeps_the_first_payload():
    qa, qb = 0x7E01, 0xFD55
    for op in ("add", "mul", "max", "min"):
        f = getattr(nf, f"fp16_{op}")
        assert f(qa, qb) == qa                 # a wins over b
        assert f(0x3C00, qb) == qb
        assert f(qb, 0x3C00) == qb
    assert nf.fp16_sub(0x3C00, 0x7E01) == 0xFE01  # sub flips b's sign first, NaN included
    assert nf.fp_relu(0xFE00, 5, 10) == 0xFE00    # ReLU passes a negative NaN
    # widening keeps the payload in the low bits, unshifted (IEEE: 0x7fc00000)
    assert nf.fp16_to_fp32(0x7E00) == 0x7F800200
    assert nf.fp16_to_fp17(0xFE01) == (1 << 16) | (63 << 10) | 0x201
    assert nf.fp17_to_fp32((63 << 10) | 0x3FF) == 0x7F8003FF
    # narrowing keeps the LOW payload bits: the quiet NaN 0x7fc00000 becomes the INF pattern
    assert nf.fp32_to_fp16(0x7FC00000) == 0x7C00
    assert nf.fp32_to_fp16(0xFFC00123) == 0xFD23
    assert nf.fp32_to_fp17(0x7F8003FF) == (63 << 10) | 0x3FF
    assert nf.fp17_to_fp16((63 << 10) | 1) == 0x7C01


def test_denormal_inputs_read_with_an_implied_one():
    # add/mul/compare read an fp16 denormal 0.f * 2^-14 as 1.f * 2^-15
    assert nf.fp16_add(0x0200, 0x3C00) == 0x3C00       # 1 + 1.5 * 2^-15 -> 1 (rounded)
    assert nf.fp16_mul(0x0001, 0x7800) == 0x3C01       # (1 + 2^-10) * 2^-15 * 2^15 (IEEE: 2^-9)
    assert nf.fp16_mul(0x0200, 0x4000) == 0x0600       # 1.5 * 2^-15 * 2 = 1.5 * 2^-14
    assert nf.fp16_add(0x0001, 0x0001) == 0x0401       # 2 * (1 + 2^-10) * 2^-15
    # fp17 -> fp32 reads a denormal the same way: 1.f * 2^-31 (IEEE: 0.f * 2^-30)
    assert nf.fp17_to_fp32(0x0001) == ((127 - 31) << 23) | (1 << 13)
    # fp16 -> fp17 / fp32 convert denormals exactly
    assert nf.fp16_to_fp32(0x0001) == f32(2.0 ** -24)
    assert nf.fp16_to_fp17(0x8001) == (1 << 16) | (7 << 10)


def test_results_below_the_smallest_normal_flush_to_signed_zero():
    assert nf.fp16_mul(0x0400, 0x3800) == 0x0000       # 2^-14 * 0.5: a denormal in IEEE
    assert nf.fp16_mul(0x8400, 0x3800) == 0x8000
    assert nf.fp16_sub(0x0401, 0x0400) == 0x0000       # 2^-24 difference
    assert nf.fp16_sub(0x8401, 0x8400) == 0x8000
    assert nf.fp32_mul(0x00800000, 0x3F000000) == 0    # fp32 too
    # fp32 -> fp17 flushes denormals, except what rounds up to the smallest normal 2^-30
    assert nf.fp32_to_fp17(f32(2.0 ** -31)) == 0
    assert nf.fp32_to_fp17(f32(-(2.0 ** -31))) == 1 << 16
    assert nf.fp32_to_fp17(f32(2.0 ** -30 * (1 - 2.0 ** -12))) == 1 << 10
    # exponent sum at the flush edge, saved by the product's carry: (2 - 2^-10) * 1.5 * 2^-15
    assert nf.fp16_mul(0x3FFF, 0x0200) == 0x05FF


def test_zero_signs():
    # x + (-x): the zero takes the sign of the larger operand (the first when equal); IEEE: +0
    assert nf.fp16_add(0xC200, 0x4200) == 0x8000       # (-3) + 3 = -0
    assert nf.fp16_add(0x4200, 0xC200) == 0x0000
    assert nf.fp16_sub(0xC200, 0xC200) == 0x8000       # (-3) - (-3) = -0
    assert nf.fp16_add(0x8000, 0x0000) == 0x8000       # (-0) + (+0) = -0
    assert nf.fp16_add(0x0000, 0x8000) == 0x0000
    assert nf.fp32_add(0xBF800000, 0x3F800000) == 0x80000000
    assert nf.fp16_mul(0x8000, 0x3C00) == 0x8000       # products keep the XOR sign, like IEEE
    assert nf.fp16_max(0x8000, 0x0000) == 0x0000 and nf.fp16_min(0x8000, 0x0000) == 0x8000
    assert nf.fp16_max(0x0000, 0x8000) == 0x0000 and nf.fp16_min(0x0000, 0x8000) == 0x8000
    assert nf.fp_relu(0x8000, 5, 10) == 0 and nf.fp_relu(0xBC00, 5, 10) == 0


def test_rounding_ties_to_even():
    # 1 + 2^-11 is half an ulp above 1 -> 1 (even); 1 + 3 * 2^-11 -> 1 + 2^-9
    assert nf.fp16_add(0x3C00, 0x1000) == 0x3C00
    assert nf.fp16_add(0x3C01, 0x1000) == 0x3C02
    assert nf.fp32_to_fp16(f32(1 + 2.0 ** -11)) == 0x3C00
    assert nf.fp32_to_fp16(f32(1 + 3 * 2.0 ** -11)) == 0x3C02
    assert nf.fp32_to_fp16(f32(2.0 ** -25)) == 0x0000   # half the smallest denormal -> 0 (even)
    assert nf.fp32_to_fp16(f32(3 * 2.0 ** -25)) == 0x0002
    assert nf.int_to_fp16(2049, 16) == 0x6800            # 2049 -> 2048
    assert nf.int_to_fp16(2051, 16) == 0x6802            # 2051 -> 2052


def test_generic_formats_and_shapes():
    a = np.array([[0x3C00, 0x4000], [0x4200, 0x4400]], dtype=np.uint16)
    out = nf.fp16_add(a, 0x3C00)                          # broadcasts, keeps the shape
    assert out.shape == (2, 2) and out.dtype == np.uint16
    assert out.tolist() == [[0x4000, 0x4200], [0x4400, 0x4500]]
    # a bfloat16-like (8, 7) format through the generic entry points
    assert nf.fp_add(0x3F80, 0x3F80, 8, 7) == 0x4000
    assert nf.fp_convert(0x3FC0, 8, 7, 8, 23, True) == 0x3FC00000
    assert nf.fp_convert(0x3FC00000, 8, 23, 5, 10, True) == 0x3E00     # 1.5 to fp16
    with pytest.raises(ValueError):
        nf.fp_convert(0x3C00, 5, 10, 8, 7, True)
    with pytest.raises(ValueError):
        nf.fp_convert(0x3FC0_8000, 8, 23, 8, 7, True)                  # same exponent width
    with pytest.raises(TypeError):
        nf.fp16_add(np.float16(1.0), 0x3C00)


def test_eql_compares_bit_patterns():
    assert list(nf.fp_eql([0x3C00, 0x0000, 0x7E00], [0x3C00, 0x8000, 0x7E00])) == [1, 0, 1]


# ---- the convolution pipeline: CMAC FP44 partial sums, CACC FP48 accumulator --------------------

def fp44_value(bits):
    """Exact value of FP44 bits as a Fraction: two's-complement [37:0] * 2^([43:38] - 50)."""
    from fractions import Fraction
    bits = int(bits)
    mant = bits & ((1 << 38) - 1)
    mant -= (mant >> 37) << 38
    return Fraction(mant) * Fraction(2) ** (((bits >> 38) & 0x3F) - 50)


def fp48_value(bits):
    """Exact value of FP48 bits: two's-complement [39:0] * 2^([47:40] - 101)."""
    from fractions import Fraction
    bits = int(bits)
    mant = bits & ((1 << 40) - 1)
    mant -= (mant >> 39) << 40
    return Fraction(mant) * Fraction(2) ** (((bits >> 40) & 0xFF) - 101)


def random_fp16_finite(n, expo_lo=0, expo_hi=30):
    sign = RNG.integers(0, 2, n, dtype=np.uint16)
    expo = RNG.integers(expo_lo, expo_hi + 1, n).astype(np.uint16)
    mant = RNG.integers(0, 1 << 10, n).astype(np.uint16)
    return (sign << 15) | (expo << 10) | mant


def test_booth_product_is_exact_unshifted_and_within_one_when_shifted():
    n = 50_000
    neg = RNG.integers(0, 2, n)
    wt = (RNG.integers(0, 1 << 11, n) << RNG.integers(0, 4, n)).astype(np.uint64)
    dat = (RNG.integers(0, 1 << 11, n) << RNG.integers(0, 4, n)).astype(np.uint64)
    exact = np.where(neg == 1, -1, 1) * wt.astype(np.int64) * dat.astype(np.int64)
    assert np.array_equal(nf.cmac_fp16_booth(neg, wt, dat, 0), exact)
    shift = (RNG.integers(1, 8, n) * 4).astype(np.uint64)
    got = nf.cmac_fp16_booth(neg, wt, dat, shift)
    floor = exact >> shift.astype(np.int64)
    assert np.all(np.abs(got - floor) <= 1)       # the C model's own bound on its multiplier
    assert np.any(got != floor)                   # the separately truncated carry-save rows show
    assert np.all(nf.cmac_fp16_booth(neg, wt, dat, 32) == 0)


def test_cmac_fp16_dot_value():
    # 64 random fp16 pairs (denormals included): the FP44 value is the exact dot product up to
    # the alignment truncation, under 2 units of the cell exponent per product
    cells = 400
    d = random_fp16_finite(cells * 64).reshape(cells, 64)
    w = random_fp16_finite(cells * 64, 0, 20).reshape(cells, 64)
    d[:, ::7] = 0                                             # sparse zeros (masked products)
    fp44 = nf.cmac_fp16_dot(d, w)
    assert fp44.shape == (cells,)
    exact = (d.view(np.float16).astype(np.float64) * w.view(np.float16).astype(np.float64)).sum(1)
    unit = np.ldexp(1.0, ((fp44 >> np.uint64(38)) & np.uint64(0x3F)).astype(np.int64) - 50)
    got = np.array([float(fp44_value(b)) for b in fp44])
    assert np.all(np.abs(got - exact) <= 2 * 64 * unit)
    # the cell exponent is 4 * the largest (exp >> 2) + (exp >> 2) sum of enabled products
    de, we = (d >> 10) & 31, (w >> 10) & 31
    enabled = ((d & 0x7FFF) != 0) & ((w & 0x7FFF) != 0)
    coarse = np.where(enabled, (de >> 2) + (we >> 2), 0).max(1)
    assert np.array_equal((fp44 >> np.uint64(38)).astype(np.int64), 4 * coarse)


def test_cmac_fp16_dot_single_product_is_exact():
    d = random_fp16_finite(5000)
    w = random_fp16_finite(5000)
    fp44 = nf.cmac_fp16_dot(d[:, None], w[:, None])
    exact = d.view(np.float16).astype(np.float64) * w.view(np.float16).astype(np.float64)
    assert np.array_equal(np.array([float(fp44_value(b)) for b in fp44]), exact)


def test_cmac_fp16_masks_and_nan():
    one, big = 0x3C00, 0x7800                                 # 1.0 and 2^15
    # a disabled product neither adds nor raises the cell exponent
    fp44 = nf.cmac_fp16_dot([[one, big]], [[one, one]], enable=[[1, 0]])
    assert fp44_value(fp44[0]) == 1 and (int(fp44[0]) >> 38) == 4 * (3 + 3)
    # NaN: the first NaN weight wins over any data NaN: exponent 0x3f, sign, 10 payload bits
    fp44 = nf.cmac_fp16_dot([[0x7E01, one, 0xFC02]], [[one, 0xFD55, one]])
    assert int(fp44[0]) == (0x3F << 38) | (1 << 37) | (0x155 << 27)
    fp44 = nf.cmac_fp16_dot([[one, 0xFC02, 0x7E01]], [[one, one, one]])
    assert int(fp44[0]) == (0x3F << 38) | (1 << 37) | (0x002 << 27)


def test_cacc_fp48_accumulates_fp44_sums():
    from fractions import Fraction
    cells = 300
    d = random_fp16_finite(cells * 8 * 64, 0, 24).reshape(cells, 8, 64)
    w = random_fp16_finite(cells * 8 * 64, 0, 24).reshape(cells, 8, 64)
    parts = nf.cmac_fp16_dot(d, w)                            # (cells, 8) FP44
    acc = np.zeros(cells, dtype=np.uint64)
    exact = [Fraction(0)] * cells
    for k in range(8):
        acc = nf.cacc_fp48_add(acc, parts[:, k])
        exact = [x + fp44_value(p) for x, p in zip(exact, parts[:, k])]
        for a, x in zip(acc, exact):
            if x != 0:
                # each add rounds once to a 40-bit mantissa: relative error < 2^-37 per step
                assert abs(fp48_value(a) - x) <= abs(x) * Fraction(k + 1, 2 ** 37)
    # the first add into a zero accumulator is exact
    first = nf.cacc_fp48_add(0, parts[:, 0])
    assert all(fp48_value(a) == fp44_value(p) for a, p in zip(first, parts[:, 0]))
    # delivered fp32: 24 significant bits, magnitude rounded half away from zero
    out = nf.cacc_fp48_to_fp32(acc)
    assert out.dtype == np.uint32
    for a, o in zip(acc, out.view(np.float32)):
        v = fp48_value(a)
        if v == 0:
            assert o == 0
            continue
        frac, exp2 = np.frexp(float(abs(v)))                  # float64 holds 40 bits exactly
        want = np.ldexp(np.floor(np.ldexp(frac, 24) + 0.5), exp2 - 24) * (1 if v > 0 else -1)
        assert float(o) == want


def test_cacc_fp48_rounding_ties_and_specials():
    e101 = 101 << 40                                          # unit exponent: value = mantissa
    half = (49 << 38) | 1                                     # FP44 +0.5
    minus_half = (49 << 38) | ((1 << 38) - 1)                 # FP44 -0.5
    acc_pos = e101 | (1 << 38)                                # +2^38 (1 ulp = 1)
    acc_neg = e101 | ((1 << 40) - (1 << 38) - 1)              # -(2^38 + 1)
    # ties: a positive result rounds up, a negative one down (magnitudes away from zero)
    assert fp48_value(nf.cacc_fp48_add(acc_pos, half)) == 2 ** 38 + 1
    assert fp48_value(nf.cacc_fp48_add(acc_neg, minus_half)) == -(2 ** 38 + 2)
    # a zero FP44 leaves the accumulator; x + (-x) gives the all-zero accumulator
    assert nf.cacc_fp48_add(acc_pos, 17 << 38) == acc_pos
    assert nf.cacc_fp48_add(nf.cacc_fp48_add(0, half), minus_half) == 0
    # NaN: an FP44 NaN replaces the accumulator, a NaN accumulator stays; fp32 keeps 10 bits
    nan44 = (0x3F << 38) | (1 << 37) | (0x155 << 27)
    nan48 = nf.cacc_fp48_add(acc_pos, nan44)
    assert nan48 == (0xFF << 40) | (((1 << 10) | 0x155) << 29)
    assert nf.cacc_fp48_add(nan48, half) == nan48
    assert nf.cacc_fp48_to_fp32(nan48) == 0xFF800155
    # the most negative mantissa -2^39 converts exactly: -2^(e - 62)
    assert nf.cacc_fp48_to_fp32((100 << 40) | (1 << 39)) == f32(-(2.0 ** 38))
    assert nf.cacc_fp48_to_fp32(0) == 0
