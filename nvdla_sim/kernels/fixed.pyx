# cython: language_level=3
"""Python access to the fixed-point primitives, for tests and tools (same code as the kernels)."""
from libc.stdint cimport int64_t
from . cimport fixedpoint as fp


def saturate(int64_t x, int bits):
    return fp.saturate(x, bits)


def wrap(int64_t x, int bits):
    return fp.wrap(x, bits)


def shift_right_round(int64_t x, int s):
    return fp.shift_right_round(x, s)


def shift_left_sat(int64_t x, int s, int bits):
    return fp.shift_left_sat(x, s, bits)


def signed_shift_round(int64_t x, int s, int bits):
    return fp.signed_shift_round(x, s, bits)


def sign_extend(int64_t v, int bits):
    return fp.sign_extend(v, bits)
