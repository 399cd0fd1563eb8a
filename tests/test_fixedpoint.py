"""The fixed-point primitives on hand-computed cases (NVDLA precision rules)."""
from nvdla_sim.kernels.fixed import (saturate, shift_left_sat, shift_right_round, sign_extend,
                                     signed_shift_round, wrap)


def test_round_half_away_from_zero():
    assert shift_right_round(5, 1) == 3        # 2.5 -> 3
    assert shift_right_round(-5, 1) == -3      # -2.5 -> -3
    assert shift_right_round(7, 2) == 2        # 1.75 -> 2
    assert shift_right_round(-6, 2) == -2      # -1.5 -> -2
    assert shift_right_round(-5, 2) == -1      # -1.25 -> -1
    assert shift_right_round(1, 1) == 1        # 0.5 -> 1
    assert shift_right_round(-1, 1) == -1
    assert shift_right_round(123, 0) == 123
    assert shift_right_round(1 << 40, 63) == 0


def test_saturate_and_wrap():
    assert saturate(300, 8) == 127
    assert saturate(-300, 8) == -128
    assert saturate(-128, 8) == -128
    assert saturate(1 << 40, 32) == 2**31 - 1
    assert wrap(0x1_8000_0000, 32) == -(2**31)
    assert wrap(255, 8) == -1
    assert sign_extend(0x80, 8) == -128
    assert sign_extend(0x7F, 8) == 127


def test_shifts_with_saturation():
    assert shift_left_sat(3, 2, 8) == 12
    assert shift_left_sat(40, 2, 8) == 127
    assert shift_left_sat(-40, 2, 8) == -128
    assert signed_shift_round(10, -1, 8) == 20
    assert signed_shift_round(10, 2, 8) == 3     # 2.5 -> 3
    assert signed_shift_round(1000, 1, 8) == 127
