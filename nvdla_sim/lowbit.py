"""Sub-8-bit what-if: requantize INT8 data to 1..8 bits with gemmlowp's rounding modes.

The gemmlowp document (`../shared/docs/sources/gemmlowp-less-than-8-bits.txt`, "Requantization
details") maps an 8-bit value src in [0, 255] to N bits, [0, maxval] with maxval = 2^N - 1, by

    dst = (src * maxval + rounding_offset) // 255

with one of three rounding offsets:
  "nearest"        rounding_offset = 127 (round to nearest);
  "probabilistic"  rounding_offset uniform in [0, 254], drawn independently per element (unbiased
                   on any input distribution, twice the error variance of "nearest");
  "addmod97"       the deterministic low-discrepancy dither x <- (x + 97) % 255: element k of the
                   array (C order) takes x_k = (start + 97 * k') % 255 with k' = k + 1, i.e. the
                   generator is advanced before each use, starting from x_0 = `start`.
`requantize` is that formula as written.  The way back (the document's unpacking) multiplies by
255 / maxval and rounds to nearest.

NVDLA has no zero point for weights, and ReLU and zero padding need a real 0, so a signed INT8
tensor (q in [-127, 127], real value s * q) is requantized in its *symmetric* form: the same
formula on src = q + 127 in [0, 254] with divisor 254 and maxval = 2^N - 2, which maps q = 0
exactly onto the middle code for every rounding offset (nearest: 127; probabilistic: [0, 253];
add-mod: % 254).  The N-bit code c = dst - (2^(N-1) - 1) lies in [-(2^(N-1) - 1), 2^(N-1) - 1] and
is stored as it is in the INT8 container, with the scale s * 127 / (2^(N-1) - 1): the hardware
multiplies the small integers and the SDP scale absorbs the factor.  One bit has no symmetric
form with a 0: maxval 1, codes -1 / +1 (the sign, scale s * 127).  Non-negative data (q in
[0, 127], e.g. after ReLU) uses the unsigned form: src = q over divisor 127 to
maxval = min(2^N - 1, 127).  All forms are `_requantize`, the document's formula; `Rounder` keeps
one offset source across tensors (a seeded generator; the add-mod sequence continued).
"""
from __future__ import annotations

import numpy as np

from .errors import NvdlaSimError

ROUNDING_MODES = ("nearest", "probabilistic", "addmod97")
ADDMOD_STEP = 97
UINT8_MAX = 255
INT8_SYMMETRIC_MAX = 127


def check_bits(bits: int, low: int = 1, where: str = "bits") -> int:
    """`bits` as an int in [low, 8], else a one-line error."""
    if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or not low <= bits <= 8:
        raise NvdlaSimError(f"{where}: {bits!r} is not a bit width in {low}..8 (the INT8 "
                            "container holds at most 8 bits)")
    return int(bits)


def check_rounding(rounding: str, where: str = "rounding") -> str:
    if rounding not in ROUNDING_MODES:
        raise NvdlaSimError(f"{where}: unknown rounding mode {rounding!r} "
                            f"(known: {', '.join(ROUNDING_MODES)})")
    return rounding


def addmod_offsets(n: int, modulus: int = UINT8_MAX, start: int = 0,
                   step: int = ADDMOD_STEP) -> np.ndarray:
    """The first n values of x <- (x + step) % modulus from x_0 = start (x_0 itself not used)."""
    k = np.arange(1, n + 1, dtype=np.int64)
    return (start + step * k) % modulus


def rounding_offsets(shape, rounding: str, divisor: int = UINT8_MAX,
                     rng: np.random.Generator | None = None, start: int = 0) -> np.ndarray:
    """The rounding_offset of each element of an array of `shape` for a division by `divisor`."""
    check_rounding(rounding)
    n = int(np.prod(shape, dtype=np.int64))
    if rounding == "nearest":
        return np.full(shape, divisor // 2, np.int64)
    if rounding == "probabilistic":
        rng = rng if rng is not None else np.random.default_rng(0)
        return rng.integers(0, divisor, size=shape, dtype=np.int64)     # [0, divisor - 1]
    return addmod_offsets(n, divisor, start).reshape(shape)


class Rounder:
    """One rounding-offset source used tensor after tensor, like gemmlowp's generator object that
    lives across packing calls: the probabilistic mode draws from one seeded generator, the
    add-mod dither continues its sequence (x_0 = seed) from one tensor to the next."""

    def __init__(self, rounding: str, seed: int = 0):
        self.rounding = check_rounding(rounding)
        self.rng = np.random.default_rng(seed)
        self.seed = int(seed)
        self.used = 0                       # offsets handed out so far (the add-mod position)

    def offsets(self, shape, divisor: int) -> np.ndarray:
        start = (self.seed + ADDMOD_STEP * self.used) % divisor
        self.used += int(np.prod(shape, dtype=np.int64))
        return rounding_offsets(shape, self.rounding, divisor, self.rng, start)


def _requantize(src: np.ndarray, src_max: int, maxval: int, offsets: np.ndarray) -> np.ndarray:
    """The document's requantization, dst = (src * maxval + rounding_offset) // src_max, on
    integers src in [0, src_max] (the one implementation of the rule; int64)."""
    return (src.astype(np.int64) * maxval + offsets) // src_max


def requantize(src, bits: int, rounding: str, rng: np.random.Generator | None = None,
               start: int = 0) -> np.ndarray:
    """gemmlowp's requantization of uint8 values src in [0, 255] to [0, 2^bits - 1] (int64)."""
    bits = check_bits(bits)
    src = np.asarray(src)
    if src.size and (src.min() < 0 or src.max() > UINT8_MAX):
        raise NvdlaSimError("requantize: source values must lie in [0, 255]")
    offsets = rounding_offsets(src.shape, rounding, UINT8_MAX, rng, start)
    return _requantize(src, UINT8_MAX, (1 << bits) - 1, offsets)


def unpack(dst, bits: int) -> np.ndarray:
    """Codes [0, 2^bits - 1] back on the 8-bit scale: round(dst * 255 / maxval), ties up."""
    maxval = (1 << check_bits(bits)) - 1
    return (np.asarray(dst, np.int64) * UINT8_MAX * 2 + maxval) // (2 * maxval)


def grid_max(bits: int, signed: bool = True) -> int:
    """The largest code of an N-bit tensor in the INT8 container: 2^(N-1) - 1 for signed data
    (symmetric, 0 exact), min(2^N - 1, 127) for non-negative data (unsigned N bits; 8 and 7
    bits are both NVDLA's 0..127).  1-bit signed data has no grid with a 0: 1 (codes +-1)."""
    bits = check_bits(bits)
    if not signed:
        return min((1 << bits) - 1, INT8_SYMMETRIC_MAX)
    return max((1 << (bits - 1)) - 1, 1)


def _rounder(rounding: str, rng, start: int, rounder: Rounder | None):
    if rounder is not None:
        return rounder.offsets
    check_rounding(rounding)
    return lambda shape, divisor: rounding_offsets(shape, rounding, divisor, rng, start)


def quantize_int8(q, bits: int, rounding: str = "nearest",
                  rng: np.random.Generator | None = None, start: int = 0,
                  rounder: Rounder | None = None) -> tuple[np.ndarray, float]:
    """Symmetric INT8 values q (|q| <= 127) -> (N-bit codes as int8, scale factor f): a tensor of
    scale s becomes codes of scale s * f.  8 bits returns q unchanged (f = 1) in every mode.
    src = q + 127 in [0, 254] is requantized over divisor 254 to maxval = 2^N - 2 (even, so q = 0
    lands on the middle code in every mode); 1 bit has maxval 1 and codes -1 / +1 (sign, no 0).
    `rounder` (a Rounder) replaces rounding / rng / start when given."""
    bits = check_bits(bits)
    q = np.asarray(q)
    if q.size and (q.min() < -INT8_SYMMETRIC_MAX or q.max() > INT8_SYMMETRIC_MAX):
        raise NvdlaSimError("quantize_int8: values must lie in [-127, 127] (symmetric INT8)")
    divisor = 2 * INT8_SYMMETRIC_MAX
    maxval = 1 if bits == 1 else (1 << bits) - 2
    offsets = _rounder(rounding, rng, start, rounder)(q.shape, divisor)
    dst = _requantize(q.astype(np.int64) + INT8_SYMMETRIC_MAX, divisor, maxval, offsets)
    if bits == 1:
        return (2 * dst - 1).astype(np.int8), float(INT8_SYMMETRIC_MAX)
    half = maxval // 2
    return (dst - half).astype(np.int8), INT8_SYMMETRIC_MAX / half


def quantize_uint7(q, bits: int, rounding: str = "nearest",
                   rng: np.random.Generator | None = None, start: int = 0,
                   rounder: Rounder | None = None) -> tuple[np.ndarray, float]:
    """Non-negative INT8 values q in [0, 127] -> (codes in [0, grid_max(bits, False)], factor):
    the same formula with src = q over divisor 127 (NVDLA's INT8 holds 7 unsigned bits)."""
    q = np.asarray(q)
    if q.size and (q.min() < 0 or q.max() > INT8_SYMMETRIC_MAX):
        raise NvdlaSimError("quantize_uint7: values must lie in [0, 127]")
    maxval = grid_max(bits, signed=False)
    offsets = _rounder(rounding, rng, start, rounder)(q.shape, INT8_SYMMETRIC_MAX)
    dst = _requantize(q, INT8_SYMMETRIC_MAX, maxval, offsets)
    return dst.astype(np.int8), INT8_SYMMETRIC_MAX / maxval


def quantize(x, bits: int, rounding: str, scale: float | None = None,
             rng: np.random.Generator | None = None, start: int = 0
             ) -> tuple[np.ndarray, float]:
    """Float tensor -> (N-bit codes in int8, their scale): symmetric INT8 first (scale
    max|x| / 127 unless given, round half away from zero), then `quantize_int8`."""
    x = np.asarray(x, np.float64)
    if not np.all(np.isfinite(x)):
        raise NvdlaSimError("quantize: the tensor has NaN or infinite values")
    if scale is None:
        amax = float(np.max(np.abs(x))) if x.size else 0.0
        scale = (amax if amax > 0 else 1.0) / INT8_SYMMETRIC_MAX
    v = x / scale
    q8 = np.clip(np.trunc(v + np.copysign(0.5, v)), -INT8_SYMMETRIC_MAX, INT8_SYMMETRIC_MAX)
    codes, factor = quantize_int8(q8.astype(np.int64), bits, rounding, rng, start)
    return codes, scale * factor


def sqnr_db(reference, approx) -> float:
    """Signal-to-quantisation-noise ratio of `approx` against `reference`, in dB (inf if equal)."""
    ref = np.asarray(reference, np.float64)
    err = np.asarray(approx, np.float64) - ref
    noise = float(np.sum(err * err))
    signal = float(np.sum(ref * ref))
    if noise == 0.0:
        return float("inf")
    if signal == 0.0:
        return float("-inf")
    return 10.0 * np.log10(signal / noise)
