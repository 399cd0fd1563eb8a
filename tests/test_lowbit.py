"""Sub-8-bit requantization (nvdla_sim/lowbit.py) against the gemmlowp document's definitions,
computed by hand."""
import numpy as np
import pytest

from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.lowbit import (Rounder, addmod_offsets, grid_max, quantize, quantize_int8,
                              quantize_uint7, requantize, rounding_offsets, sqnr_db, unpack)


def test_round_to_nearest_is_the_documents_formula():
    # dst = (src * 31 + 127) // 255 for 5 bits
    src = np.array([0, 4, 5, 200, 255])
    # 0; 251//255=0; 282//255=1; 6327//255=24; 8032//255=31
    assert requantize(src, 5, "nearest").tolist() == [0, 0, 1, 24, 31]
    assert requantize(src, 8, "nearest").tolist() == src.tolist()       # 8 bits: identity


def test_addmod97_sequence_and_its_rounding():
    assert addmod_offsets(8).tolist() == [97, 194, 36, 133, 230, 72, 169, 11]
    assert addmod_offsets(3, start=200).tolist() == [42, 139, 236]       # (200+97)%255 = 42
    # 1 bit: dst = (128 + x) // 255 with the offsets above
    assert requantize(np.full(8, 128), 1, "addmod97").tolist() == [0, 1, 0, 1, 1, 0, 1, 0]
    # over one period the offsets are a permutation of 0..254: the mean is exact
    period = addmod_offsets(255)
    assert sorted(period.tolist()) == list(range(255))
    dst = requantize(np.full(255, 200), 3, "addmod97")
    assert dst.sum() == 200 * 7                                            # mean 200*7/255


def test_probabilistic_rounding_is_unbiased_and_nearest_is_not():
    rng = np.random.default_rng(7)
    n = 200_000
    exact = 200 * 7 / 255                                                  # 5.490...
    prob = requantize(np.full(n, 200), 3, "probabilistic", rng=rng)
    assert set(np.unique(prob).tolist()) == {5, 6}
    assert abs(prob.mean() - exact) < 4 * 0.5 / np.sqrt(n)
    assert requantize(np.full(4, 200), 3, "nearest").tolist() == [5] * 4   # bias -0.49
    # 8 bits stays the identity: (src * 255 + u) // 255 = src for every u in [0, 254]
    assert requantize(np.full(n, 1), 8, "probabilistic", rng=rng).tolist() == [1] * n


def test_unpack_scales_back_to_eight_bits():
    assert unpack([0, 1, 2, 3], 2).tolist() == [0, 85, 170, 255]
    assert unpack([1], 3).tolist() == [36]                                 # 255/7 = 36.4


def test_symmetric_int8_keeps_zero_and_is_identity_at_8_bits():
    q = np.arange(-127, 128)
    for mode in ("nearest", "probabilistic", "addmod97"):
        codes, factor = quantize_int8(q, 8, mode)
        assert codes.tolist() == q.tolist() and factor == 1.0
        for bits in range(2, 8):
            codes, factor = quantize_int8(np.zeros(50, np.int64), bits, mode)
            assert not codes.any()
    # 4 bits: ((q + 127) * 14 + 127) // 254 - 7;  100 -> 3305 // 254 - 7 = 6, -100 -> -6
    codes, factor = quantize_int8(np.array([100, -100, 127, -127, 9, 10]), 4, "nearest")
    assert codes.tolist() == [6, -6, 7, -7, 0, 1]      # 9*7/127 = 0.496, 10*7/127 = 0.551
    same, _ = quantize_int8(np.array([100, -100, 127, -127, 9, 10], np.int8), 4, "nearest")
    assert same.tolist() == codes.tolist()             # int8 input: no overflow of q + 127
    assert factor == pytest.approx(127 / 7)


def test_quantize_float_sqnr_falls_with_bits():
    rng = np.random.default_rng(1)
    x = rng.normal(size=10_000)
    sqnr = []
    for bits in (8, 6, 4, 2):
        codes, scale = quantize(x, bits, "nearest")
        assert codes.dtype == np.int8 and np.abs(codes).max() <= (1 << (bits - 1)) - 1
        sqnr.append(sqnr_db(x, codes * scale))
    assert sqnr == sorted(sqnr, reverse=True)
    assert sqnr[0] > 30 and sqnr[-1] < 10
    assert sqnr_db(x, x) == float("inf")


@pytest.mark.parametrize("bits", [0, 9, -1, 2.5, True])
def test_bad_bit_widths_are_one_line_errors(bits):
    with pytest.raises(NvdlaSimError, match="bit width in 1..8"):
        requantize([1, 2], bits, "nearest")


def test_unknown_modes_and_out_of_range_values_are_errors():
    with pytest.raises(NvdlaSimError, match="unknown rounding mode 'stochastic'"):
        requantize([1], 4, "stochastic")
    with pytest.raises(NvdlaSimError, match=r"\[0, 255\]"):
        requantize([256], 4, "nearest")
    with pytest.raises(NvdlaSimError, match=r"\[-127, 127\]"):
        quantize_int8([-128], 4, "nearest")
    with pytest.raises(NvdlaSimError, match=r"\[0, 127\]"):
        quantize_uint7([-1], 4, "nearest")
    with pytest.raises(NvdlaSimError, match="NaN"):
        quantize([1.0, np.nan], 4, "nearest")


def test_probabilistic_offsets_are_uniform_over_0_to_254():
    offs = rounding_offsets((255 * 400,), "probabilistic", rng=np.random.default_rng(3))
    counts = np.bincount(offs, minlength=255)
    assert offs.min() == 0 and offs.max() == 254 and counts.size == 255
    # chi-square with 254 degrees of freedom: mean 254, sd 22.5; 6 sd is far out
    chi2 = float(((counts - 400) ** 2 / 400).sum())
    assert chi2 < 254 + 6 * 22.5


@pytest.mark.parametrize("src,bits", [(3, 2), (77, 4), (200, 3), (254, 5)])
def test_probabilistic_rounding_is_unbiased_for_every_source_value(src, bits):
    n = 100_000
    maxval = (1 << bits) - 1
    dst = requantize(np.full(n, src), bits, "probabilistic", rng=np.random.default_rng(src))
    frac = src * maxval / 255 - np.floor(src * maxval / 255)
    sd = np.sqrt(frac * (1 - frac) / n) + 1e-9
    assert abs(dst.mean() - src * maxval / 255) < 5 * sd + 1e-12


def test_symmetric_add_mod_uses_modulus_254_and_rounds_by_hand():
    # 2 bits: divisor 254, maxval 2, codes -1..1; q = 50 -> src = 177, 177 * 2 = 354
    # offsets (97 k) % 254 = 97, 194, 37, 134, 231, 74: 451, 548, 391, 488, 585, 428 // 254
    codes, factor = quantize_int8(np.full(6, 50), 2, "addmod97")
    assert codes.tolist() == [0, 1, 0, 0, 1, 0] and factor == 127.0
    # a Rounder continues the sequence: two halves give the same codes as one call
    r = Rounder("addmod97", seed=0)
    first = quantize_int8(np.full(3, 50), 2, rounder=r)[0]
    second = quantize_int8(np.full(3, 50), 2, rounder=r)[0]
    assert first.tolist() + second.tolist() == codes.tolist()
    # start x_0 = seed: seed 5 -> 102, 199, 42
    assert Rounder("addmod97", seed=5).offsets((3,), 254).tolist() == [102, 199, 42]


def test_symmetric_probabilistic_is_unbiased_on_the_int8_scale():
    n = 200_000
    codes, factor = quantize_int8(np.full(n, 40), 3, "probabilistic",
                                  rng=np.random.default_rng(11))
    # 3 bits: codes -3..3, factor 127/3; the mean code times the factor is 40
    assert abs(codes.mean() * factor - 40) < 5 * factor * 0.5 / np.sqrt(n)
    nearest = quantize_int8(np.full(4, 40), 3, "nearest")[0]
    assert nearest.tolist() == [1] * 4                       # 40 * 3 / 127 = 0.94 -> 1


def test_one_bit_is_the_sign_and_the_unsigned_form_keeps_seven_bits():
    codes, factor = quantize_int8(np.array([-127, -1, 0, 1, 127]), 1, "nearest")
    # src = q + 127 over 254 to maxval 1: (src + 127) // 254 -> 0 for q < 0, 1 for q >= 0
    assert codes.tolist() == [-1, -1, 1, 1, 1] and factor == 127.0
    assert grid_max(1) == 1 and grid_max(4) == 7 and grid_max(4, signed=False) == 15
    assert grid_max(8, signed=False) == grid_max(7, signed=False) == 127
    # unsigned: dst = (q * 15 + 63) // 127 for 4 bits; 50 -> 813 // 127 = 6, 127 -> 15
    codes, factor = quantize_uint7(np.array([0, 4, 5, 50, 127]), 4, "nearest")
    assert codes.tolist() == [0, 0, 1, 6, 15] and factor == pytest.approx(127 / 15)
    q = np.arange(128)
    assert quantize_uint7(q, 7, "addmod97")[0].tolist() == q.tolist()   # 7 bits: identity
