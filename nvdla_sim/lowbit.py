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
form (no code for 0): `quantize_int8` refuses it; `requantize` (the unsigned form) takes 1..8.
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


def requantize(src, bits: int, rounding: str, rng: np.random.Generator | None = None,
               start: int = 0) -> np.ndarray:
    """gemmlowp's requantization of uint8 values src in [0, 255] to [0, 2^bits - 1] (int64)."""
    bits = check_bits(bits)
    src = np.asarray(src)
    if src.size and (src.min() < 0 or src.max() > UINT8_MAX):
        raise NvdlaSimError("requantize: source values must lie in [0, 255]")
    maxval = (1 << bits) - 1
    offsets = rounding_offsets(src.shape, rounding, UINT8_MAX, rng, start)
    return (src.astype(np.int64) * maxval + offsets) // UINT8_MAX


def unpack(dst, bits: int) -> np.ndarray:
    """Codes [0, 2^bits - 1] back on the 8-bit scale: round(dst * 255 / maxval), ties up."""
    maxval = (1 << check_bits(bits)) - 1
    return (np.asarray(dst, np.int64) * UINT8_MAX * 2 + maxval) // (2 * maxval)


def quantize_int8(q, bits: int, rounding: str, rng: np.random.Generator | None = None,
                  start: int = 0) -> tuple[np.ndarray, float]:
    """Symmetric INT8 values q (|q| <= 127) -> (N-bit codes as int8, scale factor f): a tensor of
    scale s becomes codes of scale s * f.  8 bits returns q unchanged (f = 1) in every mode."""
    bits = check_bits(bits)
    if bits == 1:
        raise NvdlaSimError("bits: 1 has no symmetric signed form (no code for 0); "
                            "use 2..8 bits, or lowbit.requantize for unsigned data")
    q = np.asarray(q)
    if q.size and (q.min() < -INT8_SYMMETRIC_MAX or q.max() > INT8_SYMMETRIC_MAX):
        raise NvdlaSimError("quantize_int8: values must lie in [-127, 127] (symmetric INT8)")
    half = (1 << (bits - 1)) - 1
    divisor = 2 * INT8_SYMMETRIC_MAX
    offsets = rounding_offsets(q.shape, rounding, divisor, rng, start)
    dst = ((q.astype(np.int64) + INT8_SYMMETRIC_MAX) * (2 * half) + offsets) // divisor
    return (dst - half).astype(np.int8), INT8_SYMMETRIC_MAX / half


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
