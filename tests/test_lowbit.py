"""Sub-8-bit requantization (nvdla_sim/lowbit.py) against the gemmlowp document's definitions,
computed by hand."""
import numpy as np
import pytest

from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.lowbit import (addmod_offsets, quantize, quantize_int8, requantize, sqnr_db,
                              unpack)


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
    # the offsets are uniform over [0, 254]
    offs = requantize(np.full(n, 1), 8, "probabilistic", rng=rng)          # (255 + u)//255
    assert offs.tolist() == [1] * n


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


def test_one_bit_symmetric_and_unknown_modes_are_errors():
    with pytest.raises(NvdlaSimError, match="no symmetric"):
        quantize_int8([1], 1, "nearest")
    with pytest.raises(NvdlaSimError, match="unknown rounding mode 'stochastic'"):
        requantize([1], 4, "stochastic")
    with pytest.raises(NvdlaSimError, match=r"\[0, 255\]"):
        requantize([256], 4, "nearest")
    with pytest.raises(NvdlaSimError, match="NaN"):
        quantize([1.0, np.nan], 4, "nearest")
