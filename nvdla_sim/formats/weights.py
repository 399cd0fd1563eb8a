"""Weight formats: direct convolution, image input (channel pre- and post-extension), Winograd.

Weights are (K, C, R, S) arrays (kernels, channels, rows, columns) of the layer's element type.
All three formats put kernels in groups of `kernel_group` (INT8: ATOMIC_K = 32 on nv_full,
INT16/FP16: 16; the last group may be short), map the groups compactly one after another and
pad the whole image with zeros to 128 bytes (the alignment table's data size).

Direct convolution: a kernel is cut into 1x1xC' small cubes, C' = `atomic_c` (64) channels (the
last block of a kernel may be narrower; no zeros appended); in a group they are scanned
C' -> K -> S -> R -> C (block), so element (k, c, r, s) of group g, block b is at
    g*(K_g*R*S*C) ... + b*(atomic_c*R*S*K_g) + (r*S + s)*C_b*K_g + (k % kernel_group)*C_b + c % atomic_c
with K_g the group's kernels and C_b the block's channels.

Image input: channel pre-extension turns a kernel row into channels ((K, C, R, S) ->
(K, S*c_pixel, R, 1): column s, channel c -> channel s*c_pixel + c), then the direct format.
Post-extension by P = 2 or 4 (kernels of at most atomic_c/P extended channels) puts P kernel rows
side by side: per group, stripes of P rows (the last has R % P rows if R is not a multiple of
P; no zeros appended), in a stripe the kernels one after another, each with its P rows' channels.

Winograd: channels are zero-padded to 32 bytes, a strided kernel is channel-extended to 3x3
(channel (sy*stride_x + sx)*C + c of extended position (r', s') is w[c, r'*sy_stride + sy,
s'*stride_x + sx]), each 3x3 plane becomes 4x4 by G g G^T (G below, times `scale`), and the
4x4xC kernels are cut into 4x4x4 small cubes (row, column, channel; channel fastest) scanned
channel-block -> kernel inside a group.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..datatype import DataType
from ..errors import NvdlaSimError
from .alignment import align_up, check_alignment
from .common import as_bytes, as_elements, element_bytes, element_type, from_bytes, need

WEIGHT_ALIGN_BYTES = 128
ATOMIC_C = 64                  # nv_full channels per direct-convolution block
ATOMIC_K = 32                  # nv_full INT8 kernels per group
WINOGRAD_CUBE_CHANNELS = 4
G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])
# A left inverse of G (rows 0, 1 - 2, 3) recovers g from G g G^T.
G_INV = np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, -1.0, 0.0], [0.0, 0.0, 0.0, 1.0]])


def kernel_group(atomic_k: int, dtype: DataType) -> int:
    """Kernels of one weight group: ATOMIC_K for INT8, half of it for 16-bit weights."""
    return max(1, atomic_k // dtype.bytes)


def _group(kernel_group_: int | None, dtype: DataType) -> int:
    return kernel_group(ATOMIC_K, dtype) if kernel_group_ is None else kernel_group_


def _weights(weights: np.ndarray, dtype: DataType | None, what: str) -> tuple[np.ndarray,
                                                                             DataType]:
    weights = np.asarray(weights)
    if weights.ndim != 4 or 0 in weights.shape:
        raise NvdlaSimError(f"{what}: weights of shape {weights.shape}, expected (K, C, R, S)")
    dtype = element_type(weights, dtype, what)
    return as_elements(weights, dtype, what), dtype


def _pad_image(image: np.ndarray) -> np.ndarray:
    out = np.zeros(align_up(image.size, WEIGHT_ALIGN_BYTES), np.uint8)
    out[:image.size] = image
    return out


# -- direct convolution ------------------------------------------------------------------------
def direct_weight_offsets(kernels: int, channels: int, rows: int, cols: int, atomic_c: int,
                          kernel_group_: int) -> np.ndarray:
    """Element offset of weight (k, c, r, s) in the direct-convolution format, shape (K, C, R, S)."""
    k = np.arange(kernels, dtype=np.int64)[:, None, None, None]
    c = np.arange(channels, dtype=np.int64)[None, :, None, None]
    r = np.arange(rows, dtype=np.int64)[None, None, :, None]
    s = np.arange(cols, dtype=np.int64)[None, None, None, :]
    group, cell = k // kernel_group_, k % kernel_group_
    group_kernels = np.minimum(kernel_group_, kernels - group * kernel_group_)
    block, lane = c // atomic_c, c % atomic_c
    block_channels = np.minimum(atomic_c, channels - block * atomic_c)
    positions = rows * cols
    return (group * (kernel_group_ * positions * channels)
            + block * (atomic_c * positions * group_kernels)
            + (r * cols + s) * block_channels * group_kernels
            + cell * block_channels + lane)


def pack_direct_weights(weights: np.ndarray, dtype: DataType | None = None,
                        atomic_c: int = ATOMIC_C, kernel_group_: int | None = None,
                        address: int | None = None) -> np.ndarray:
    """The direct-convolution image (uint8, padded to 128 bytes) of (K, C, R, S) weights."""
    w, dtype = _weights(weights, dtype, "direct weight format")
    check_alignment("weight", start=address)
    group = _group(kernel_group_, dtype)
    flat = np.empty(w.size, w.dtype)
    for (k0, k1, c0, c1, blocks), at, size in _direct_pieces(w.shape, atomic_c, group):
        flat[at:at + size] = _piece(w[k0:k1, c0:c1], blocks).ravel()
    return _pad_image(element_bytes(flat).reshape(-1))


def unpack_direct_weights(raw, shape: tuple[int, int, int, int], dtype: DataType,
                          atomic_c: int = ATOMIC_C, kernel_group_: int | None = None) -> np.ndarray:
    """(K, C, R, S) weights of `dtype` from a direct-convolution image."""
    raw = as_bytes(raw, "direct weight format")
    n = int(np.prod(shape))
    need(raw, n * dtype.bytes, "direct weight format")
    flat = from_bytes(raw[:n * dtype.bytes], dtype)
    k, c, r, s = shape
    w = np.empty(shape, flat.dtype)
    for (k0, k1, c0, c1, blocks), at, size in _direct_pieces(shape, atomic_c,
                                                             _group(kernel_group_, dtype)):
        w[k0:k1, c0:c1] = _unpiece(flat[at:at + size], k1 - k0, c1 - c0, r, s, blocks)
    return w


# The direct format as whole pieces instead of per-element offsets (the same order as
# direct_weight_offsets, one transpose per piece): a piece is one kernel group's run of equal
# channel blocks (all full blocks of the group, then the short last block if any), stored block
# by block as (R, S, kernels of the group, channels of the block).
def _direct_pieces(shape: tuple[int, int, int, int], atomic_c: int, group: int):
    """((k0, k1, c0, c1, blocks), element offset, elements) of each piece in image order."""
    kernels, channels, rows, cols = shape
    full = channels // atomic_c * atomic_c
    at = 0
    for k0 in range(0, kernels, group):
        k1 = min(kernels, k0 + group)
        for c0, c1, blocks in ((0, full, full // atomic_c), (full, channels, 1)):
            if c1 > c0:
                size = (k1 - k0) * (c1 - c0) * rows * cols
                yield (k0, k1, c0, c1, blocks), at, size
                at += size


def _piece(w: np.ndarray, blocks: int) -> np.ndarray:
    """(Kg, blocks * Cb, R, S) weights -> (blocks, R, S, Kg, Cb) in image order."""
    kg, c, r, s = w.shape
    return w.reshape(kg, blocks, c // blocks, r, s).transpose(1, 3, 4, 0, 2)


def _unpiece(flat: np.ndarray, kg: int, c: int, r: int, s: int, blocks: int) -> np.ndarray:
    """The inverse of _piece: image elements -> (Kg, blocks * Cb, R, S)."""
    return flat.reshape(blocks, r, s, kg, c // blocks).transpose(3, 0, 4, 1, 2).reshape(kg, c,
                                                                                         r, s)


# -- image input -------------------------------------------------------------------------------
def pre_extend(weights: np.ndarray, c_pixel: int) -> np.ndarray:
    """Channel pre-extension: (K, C, R, S) -> (K, S * c_pixel, R, 1), column s and channel c
    at channel s * c_pixel + c (channels c >= C zero)."""
    w = np.asarray(weights)
    k, c, r, s = w.shape
    if c > c_pixel:
        raise NvdlaSimError(f"image weight format: {c} channels do not fit {c_pixel}-component "
                            "pixels")
    ext = np.zeros((k, s, c_pixel, r), w.dtype)
    ext[:, :, :c, :] = w.transpose(0, 3, 1, 2)
    return ext.reshape(k, s * c_pixel, r, 1)


def pre_extend_inverse(extended: np.ndarray, channels: int, cols: int) -> np.ndarray:
    """(K, S * c_pixel, R, 1) -> (K, channels, R, S): the weights `pre_extend` was given."""
    k, ext_c, r, _ = extended.shape
    c_pixel = ext_c // cols
    return extended[:, :, :, 0].reshape(k, cols, c_pixel, r)[:, :, :channels, :] \
        .transpose(0, 2, 3, 1)


def _post_extended_offsets(kernels: int, ext_channels: int, rows: int, post: int,
                           kernel_group_: int) -> np.ndarray:
    """Element offset of pre-extended weight (k, c, r) with post-extension `post` (K, C', R)."""
    k = np.arange(kernels, dtype=np.int64)[:, None, None]
    c = np.arange(ext_channels, dtype=np.int64)[None, :, None]
    r = np.arange(rows, dtype=np.int64)[None, None, :]
    group, cell = k // kernel_group_, k % kernel_group_
    group_kernels = np.minimum(kernel_group_, kernels - group * kernel_group_)
    stripe, row_in = r // post, r % post
    stripe_rows = np.minimum(post, rows - stripe * post)
    return (group * (kernel_group_ * rows * ext_channels)
            + stripe * (post * ext_channels) * group_kernels
            + cell * stripe_rows * ext_channels + row_in * ext_channels + c)


def _check_post(post_extension: int, ext_channels: int, atomic_c: int) -> None:
    if post_extension not in (1, 2, 4):
        raise NvdlaSimError(f"image weight format: post-extension {post_extension} (1, 2 or 4)")
    if post_extension > 1 and ext_channels * post_extension > atomic_c:
        raise NvdlaSimError(f"image weight format: post-extension {post_extension} needs at most "
                            f"{atomic_c // post_extension} pre-extended channels, not "
                            f"{ext_channels}")


def pack_image_weights(weights: np.ndarray, c_pixel: int, dtype: DataType | None = None,
                       post_extension: int = 1, atomic_c: int = ATOMIC_C,
                       kernel_group_: int | None = None,
                       address: int | None = None) -> np.ndarray:
    """The image-input image (uint8, padded to 128 bytes) of (K, C, R, S) weights read with
    `c_pixel`-component pixels, optionally post-extended by 2 or 4 lines."""
    w, dtype = _weights(weights, dtype, "image weight format")
    ext = pre_extend(w, c_pixel)
    _check_post(post_extension, ext.shape[1], atomic_c)
    if post_extension == 1:
        return pack_direct_weights(ext, dtype, atomic_c, kernel_group_, address)
    check_alignment("weight", start=address)
    k, c_ext, r, _ = ext.shape
    flat = np.zeros(ext.size, ext.dtype)
    flat[_post_extended_offsets(k, c_ext, r, post_extension, _group(kernel_group_, dtype))] = \
        ext[:, :, :, 0]
    return _pad_image(element_bytes(flat).reshape(-1))


def unpack_image_weights(raw, shape: tuple[int, int, int, int], c_pixel: int, dtype: DataType,
                         post_extension: int = 1, atomic_c: int = ATOMIC_C,
                         kernel_group_: int | None = None) -> np.ndarray:
    """(K, C, R, S) weights from an image-input image (`shape` of the original weights)."""
    k, c, r, s = shape
    c_ext = s * c_pixel
    _check_post(post_extension, c_ext, atomic_c)
    if post_extension == 1:
        ext = unpack_direct_weights(raw, (k, c_ext, r, 1), dtype, atomic_c, kernel_group_)
    else:
        raw = as_bytes(raw, "image weight format")
        n = k * c_ext * r
        need(raw, n * dtype.bytes, "image weight format")
        flat = from_bytes(raw[:n * dtype.bytes], dtype)
        ext = flat[_post_extended_offsets(k, c_ext, r, post_extension,
                                          _group(kernel_group_, dtype))][:, :, :, None]
    return pre_extend_inverse(ext, c, s)


# -- Winograd ----------------------------------------------------------------------------------
def winograd_channels(channels: int, dtype: DataType, stride: tuple[int, int] = (1, 1)) -> int:
    """Channels of a Winograd kernel: padded to 32 bytes, times stride_y * stride_x."""
    atom = dtype.elements_per_atom(32)
    return align_up(channels, atom) * stride[0] * stride[1]


def winograd_channel_extend(weights: np.ndarray, dtype: DataType,
                            stride: tuple[int, int] = (1, 1)) -> np.ndarray:
    """(K, C, R, S) -> (K, C', 3, 3): channels zero-padded to 32 bytes, then a (stride_y,
    stride_x)-strided kernel folded into 3x3 with C' = C_pad * stride_y * stride_x."""
    w = np.asarray(weights)
    k, c, r, s = w.shape
    sy, sx = stride
    if -(-r // sy) != 3 or -(-s // sx) != 3:
        raise NvdlaSimError(f"Winograd weight format: a {r}x{s} kernel with stride {sy}x{sx} is "
                            "not 3x3 after channel extension")
    c_pad = align_up(c, dtype.elements_per_atom(32))
    padded = np.zeros((k, c_pad, 3 * sy, 3 * sx), w.dtype)
    padded[:, :c, :r, :s] = w
    # (K, C, 3, sy, 3, sx) -> (K, sy, sx, C, 3, 3)
    ext = padded.reshape(k, c_pad, 3, sy, 3, sx).transpose(0, 3, 5, 1, 2, 4)
    return ext.reshape(k, sy * sx * c_pad, 3, 3)


def winograd_channel_unextend(extended: np.ndarray, shape: tuple[int, int, int, int],
                              stride: tuple[int, int] = (1, 1)) -> np.ndarray:
    """The (K, C, R, S) weights `winograd_channel_extend` was given."""
    k, c, r, s = shape
    sy, sx = stride
    c_pad = extended.shape[1] // (sy * sx)
    w = extended.reshape(k, sy, sx, c_pad, 3, 3).transpose(0, 3, 4, 1, 5, 2)
    return w.reshape(k, c_pad, 3 * sy, 3 * sx)[:, :c, :r, :s]


def winograd_transform(weights3: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """scale * G g G^T of every 3x3 plane of (K, C, 3, 3) weights, in float64 (exact for
    integer or FP16 weights and a power-of-two scale: entries are multiples of 1/4)."""
    g = np.asarray(weights3, dtype=np.float64)
    return scale * np.einsum("ij,kcjl,ml->kcim", G, g, G)


def winograd_inverse(weights4: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """The 3x3 weights whose `winograd_transform` (with `scale`) is `weights4`."""
    t = np.asarray(weights4, dtype=np.float64) / scale
    return np.einsum("ij,kcjl,ml->kcim", G_INV, t, G_INV)


def winograd_max_scale(weights: np.ndarray, dtype: DataType,
                       stride: tuple[int, int] = (1, 1)) -> float:
    """The largest power-of-two scale (at most 4, which makes integer weights exact) whose
    transformed weights fit `dtype`."""
    t = np.abs(winograd_transform(winograd_channel_extend(weights, dtype, stride))).max()
    limit = 65504.0 if dtype.is_float else float(dtype.integer_range()[1])
    scale = 4.0
    while scale * t > limit:
        scale /= 2
    return scale


@dataclass(frozen=True)
class WinogradWeights:
    image: np.ndarray            # uint8, padded to 128 bytes
    transformed: np.ndarray      # (K, C', 4, 4) of the element type, as packed
    scale: float                 # the convolution result is `scale` times the 3x3 one
    exact: bool                  # no rounding in the transform


def _winograd_quantise(t: np.ndarray, dtype: DataType) -> np.ndarray:
    if dtype.is_float:
        out = t.astype(np.float16)
        if np.any(np.isinf(out)):
            raise NvdlaSimError("Winograd weight format: transformed weights overflow FP16 "
                                "(use a smaller scale)")
        return out
    lo, hi = dtype.integer_range()
    rounded = np.rint(t)                 # round half to even
    if rounded.size and (rounded.min() < lo or rounded.max() > hi):
        raise NvdlaSimError(f"Winograd weight format: transformed weights overflow {dtype} "
                            f"(use a smaller scale, see winograd_max_scale)")
    return rounded.astype(dtype.numpy)


def winograd_offsets(kernels: int, channels: int, kernel_group_: int) -> np.ndarray:
    """Element offset of transformed weight (k, c, y, x), shape (K, C', 4, 4)."""
    k = np.arange(kernels, dtype=np.int64)[:, None, None, None]
    c = np.arange(channels, dtype=np.int64)[None, :, None, None]
    y = np.arange(4, dtype=np.int64)[None, None, :, None]
    x = np.arange(4, dtype=np.int64)[None, None, None, :]
    cube = 16 * WINOGRAD_CUBE_CHANNELS
    group, cell = k // kernel_group_, k % kernel_group_
    group_kernels = np.minimum(kernel_group_, kernels - group * kernel_group_)
    block, lane = c // WINOGRAD_CUBE_CHANNELS, c % WINOGRAD_CUBE_CHANNELS
    return (group * (kernel_group_ * 16 * channels) + block * cube * group_kernels
            + cell * cube + (y * 4 + x) * WINOGRAD_CUBE_CHANNELS + lane)


def pack_winograd_weights(weights: np.ndarray, dtype: DataType, stride: tuple[int, int] = (1, 1),
                          scale: float | None = None, kernel_group_: int | None = None,
                          address: int | None = None) -> WinogradWeights:
    """Phase 1 (pad, channel-extend, G g G^T times `scale`, rounded to nearest even for integer
    types / to FP16) and phase 2 (4x4x4 small cubes by groups) of (K, C, R, S) weights (any real
    values).  `scale` defaults to 4 for integer types when that fits (exact), else to
    `winograd_max_scale`; 1 for FP16."""
    w = np.asarray(weights)
    if w.ndim != 4:
        raise NvdlaSimError(f"Winograd weight format: weights of shape {w.shape}, expected "
                            "(K, C, R, S)")
    check_alignment("weight", start=address)
    ext = winograd_channel_extend(w.astype(np.float64), dtype, stride)
    if scale is None:
        scale = 1.0 if dtype.is_float else winograd_max_scale(w, dtype, stride)
    t = winograd_transform(ext, scale)
    q = _winograd_quantise(t, dtype)
    exact = bool(np.array_equal(q.astype(np.float64), t))
    flat = np.zeros(q.size, q.dtype)
    flat[winograd_offsets(q.shape[0], q.shape[1], _group(kernel_group_, dtype))] = q
    return WinogradWeights(_pad_image(element_bytes(flat).reshape(-1)), q, scale, exact)


def unpack_winograd_weights(raw, kernels: int, channels: int, dtype: DataType,
                            kernel_group_: int | None = None) -> np.ndarray:
    """The (K, C', 4, 4) transformed weights of a Winograd image (C' extended channels)."""
    if channels % WINOGRAD_CUBE_CHANNELS:
        raise NvdlaSimError(f"Winograd weight format: {channels} channels is not a multiple of 4")
    raw = as_bytes(raw, "Winograd weight format")
    n = kernels * channels * 16
    need(raw, n * dtype.bytes, "Winograd weight format")
    flat = from_bytes(raw[:n * dtype.bytes], dtype)
    return flat[winograd_offsets(kernels, channels, _group(kernel_group_, dtype))]
