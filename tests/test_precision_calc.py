"""Convertor / truncate / shifter calculator (nvdla_sim.precision) against the precision
document's formulas, evaluated independently in float64 and integers."""
import math

import numpy as np
import pytest

from nvdla_sim import precision
from nvdla_sim.datatype import FP16, INT8, INT16
from nvdla_sim.errors import NvdlaSimError


def rha_shift(v, shift):
    """round half away from zero of v / 2^shift, in integers."""
    v = np.asarray(v, np.int64)
    if shift == 0:
        return v
    q = (np.abs(v) + (1 << (shift - 1))) >> shift
    return np.where(v >= 0, q, -q)


@pytest.mark.parametrize("ratio", [0.013, 0.5, 1.0, 3.7, 127 / 32767, 1e-9, 20000.0, -0.3])
def test_fixed_point_keeps_the_largest_shift_that_fits(ratio):
    scale, shift, fits = precision.fixed_point(ratio)
    assert fits and abs(scale) <= 32767 and 0 <= shift <= 63
    assert shift == 63 or abs(round(ratio * 2.0 ** (shift + 1))) > 32767
    if abs(ratio) >= 2.0 ** -48:               # representable with >= 14 significant bits
        assert abs(scale) >= 1 << 14
        assert scale / 2.0 ** shift == pytest.approx(ratio, rel=2.0 ** -14)


def test_converter_applied_in_integers_matches_the_ratio():
    s = precision.converter(0.0123, offset=7, out_bits=8, max_input=5000)
    x = np.arange(-3000, 3001)
    y = np.clip(rha_shift((x - 7) * s.scale, s.shift), -128, 127)
    ideal = np.clip((x - 7) * 0.0123, -128, 127)
    assert np.abs(y - ideal).max() <= s.max_error_lsb + 1e-9
    assert s.registers == {"OFFSET": 7, "SCALE": s.scale, "SHIFT": s.shift}
    # 5000 * 0.0123 = 61.5 fits int8: no warning;  20000 would not
    assert not s.warnings
    bad = precision.converter(0.0123, max_input=20000, out_bits=8)
    assert bad.warnings and "saturates" in bad.warnings[0]


def test_expected_rounding_error_is_one_over_sqrt12():
    s = precision.converter(0.25)               # exact: only the rounding error
    assert s.relative_error == 0 and s.rms_error_lsb == pytest.approx(1 / math.sqrt(12))
    rng = np.random.default_rng(0)
    x = rng.integers(-(1 << 20), 1 << 20, 100_000)
    err = rha_shift(x * s.scale, s.shift) - x * 0.25
    # x * 0.25 has 4 fractional parts (errors 0, 1/4, 1/2, 1/4): RMS sqrt(3/32)
    assert np.sqrt(np.mean(err ** 2.0)) == pytest.approx(math.sqrt(3 / 32), rel=0.02)


def test_unrepresentable_ratio_warns():
    s = precision.converter(1e6, out_bits=32)
    assert s.scale == 32767 and s.shift == 0 and "outside" in s.warnings[0]


def test_cacc_truncate_keeps_the_accumulator_in_32_bits():
    s = precision.cacc_truncate(1000, INT8)     # 127 * 1000 fits: no truncation
    assert s.registers == {"CACC.D_CLIP_CFG.CLIP_TRUNCATE": 0} and not s.warnings
    s = precision.cacc_truncate(3e7, INT8)      # 127 * 3e7 = 3.81e9 > 2^31: t = 1
    t = s.registers["CACC.D_CLIP_CFG.CLIP_TRUNCATE"]
    assert t == 1 and 127 * 3e7 / 2 ** t <= 2 ** 31 - 1
    s = precision.cacc_truncate(5e8, INT16)     # 32767 * 5e8 = 1.6e13: 2^44 -> t = 13
    t = s.registers["CACC.D_CLIP_CFG.CLIP_TRUNCATE"]
    assert 32767 * 5e8 / 2 ** t <= 2 ** 31 - 1 < 32767 * 5e8 / 2 ** (t - 1)


def test_conv_layer_end_to_end_in_integers():
    """Quantised convolution outputs pushed through the computed settings land on the float
    result within the expected error."""
    rng = np.random.default_rng(3)
    s_x, s_y = 0.02, 0.05
    w = rng.normal(size=(4, 27)) * 0.2
    s_w = np.abs(w).max(axis=1) / 127
    q_w = np.round(w / s_w[:, None]).astype(np.int64)
    bias = rng.normal(size=4)
    p = precision.conv_layer(s_x, s_w, s_y, np.abs(q_w).sum(axis=1), bias, INT8,
                             max_abs_output=6.0)
    t = p.settings[0].registers["CACC.D_CLIP_CFG.CLIP_TRUNCATE"]
    shift_b = p.settings[1].registers["SDP.D_DP_BS_ALU_CFG.BS_ALU_SHIFT_VALUE"]
    mul_shift = p.settings[2].registers["SDP.D_DP_BS_MUL_CFG.BS_MUL_SHIFT_VALUE"]
    q_x = rng.integers(-127, 128, size=(27, 500))
    acc = rha_shift(q_w @ q_x, t)
    v = acc + (p.bias_operands[:, None] << shift_b)
    y = np.clip(rha_shift(v * p.multipliers[:, None], mul_shift), -128, 127)
    ideal = ((w @ (q_x * s_x)) + bias[:, None]) / s_y
    # output identity convertor (x1 targets s_y), so only the X1 rounding and input of weights
    ref = ((s_w[:, None] * q_w) @ (q_x * s_x) + bias[:, None]) / s_y
    assert np.abs(y - np.clip(ref, -128, 127)).max() <= 0.5 + 0.01 * np.abs(ref).max()
    assert np.abs(y - np.clip(ideal, -128, 127)).max() < 3
    assert p.settings[3].registers == {"SDP.D_CVT_OFFSET": 0, "SDP.D_CVT_SCALE": 1,
                                       "SDP.D_CVT_SHIFT": 0}
    assert not p.warnings


def test_conv_layer_fp16_has_no_convertors():
    p = precision.conv_layer(1.0, 1.0, 1.0, 10, dtype=FP16)
    assert p.settings[0].registers == {}


def test_sdp_output_convertor_saturation_warning():
    s = precision.sdp_output_converter(1e-4, 0.01, INT8, max_abs_real=2.0)   # 2.0/0.01 = 200
    assert s.warnings and "saturates" in s.warnings[0]
    assert s.scale / 2.0 ** s.shift == pytest.approx(0.01, rel=1e-4)


def test_bias_and_bn_mean_shifters():
    ops, s = precision.sdp_bias([1e6, -3.0], 1.0)
    a = s.registers["SDP.D_DP_BS_ALU_CFG.BS_ALU_SHIFT_VALUE"]
    assert a == 5 and np.all(np.abs(ops) <= 32767)           # 1e6 / 2^5 = 31250
    assert np.abs(ops * 2.0 ** a - [1e6, -3.0]).max() <= 2 ** (a - 1)
    ops, s = precision.sdp_bn_mean([0.5], 0.001)             # -500 fits with no shift
    assert ops.tolist() == [-500] and s.registers["SDP.D_DP_BN_ALU_CFG.BN_ALU_SHIFT_VALUE"] == 0


def test_ew_operand_convertor_aligns_scales():
    s = precision.sdp_ew_operand_converter(0.05, 0.05 / 256, "sum", operand_offset=3)
    assert s.scale / 2.0 ** s.shift == pytest.approx(256)
    assert s.registers["SDP.D_DP_EW_ALU_CVT_OFFSET_VALUE"] == 3
    with pytest.raises(NvdlaSimError, match="one of sum"):
        precision.sdp_ew_operand_converter(1, 1, "div")


def test_cdp_convertors_follow_the_document():
    cin, lut, cout = precision.cdp_converters(0.02, 0.03, 2.0 ** -14, m=6, dtype=INT8)
    assert cin.scale / 2.0 ** cin.shift == pytest.approx(0.02 * 64, rel=1e-4)
    assert cin.shift <= 31                                   # DATIN_SHIFTER is 5 bits
    assert cout.scale / 2.0 ** cout.shift == pytest.approx(2.0 ** -14 / 64 / 0.03, rel=1e-4)
    # SF_out = SF_lut * cdp_out_cvt * 2^M in the document's notation (scales as multipliers)
    assert not cin.warnings


def test_bad_scales_are_one_line_errors():
    with pytest.raises(NvdlaSimError, match="in_scale"):
        precision.conv_layer(0.0, 1.0, 1.0, 10)
    with pytest.raises(NvdlaSimError, match="weight_scale"):
        precision.conv_layer(1.0, [1.0, -1.0], 1.0, 10)
    with pytest.raises(NvdlaSimError, match="offset"):
        precision.converter(1.0, offset=1 << 20, offset_bits=16)


def test_cacc_truncate_is_the_smallest_that_fits_32_bits():
    # CACC: the smallest t with Q * sum|q_w| >> t below 2^31 (quantize.py: bit_length - 31)
    for bound_sum in (1000, 16_909_320, 16_909_321, 2 ** 31 // 127 + 1, 3 * 10 ** 7, 10 ** 9,
                      (2 ** 32 - 1) // 127 + 1):
        t = precision.cacc_truncate(bound_sum, INT8).shift
        assert t == max(0, (127 * bound_sum).bit_length() - 31)
