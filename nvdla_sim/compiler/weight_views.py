"""Weights held as broadcast views: what a timing-only plan carries instead of weight arrays.

A timing-only run compiles with stand-in weights (`scenario/weights.stand_in_weights`): one value
per kernel broadcast over the kernel, a read-only view with stride 0 on every axis but the
kernels', so it costs no memory.  The plan's convolutions keep that form (`compact` drops the
broadcast axes, the element-wise steps run on what is left, `np.broadcast_to` restores the
shape), so no step of the compilation builds a (K, C, R, S) array: ResNet-50 held ~100 MiB of
float32 weights in its plan, an 8192-channel fully connected layer 4 GiB and more.  Every
number is the one the materialised array gives (element-wise steps see the same elements; sums
are multiplied by the repeat count), so the register program is identical
(tests/test_whole_weights.py compares it register by register and value by value).
"""
from __future__ import annotations

import numpy as np


def compact(w: np.ndarray) -> np.ndarray:
    """`w` with every broadcast axis after the kernels' (stride 0, length > 1) cut to length 1:
    the distinct values of each kernel, a view; an ordinary array comes back unchanged."""
    w = np.asarray(w)
    cut = [i > 0 and st == 0 and n > 1 for i, (st, n) in enumerate(zip(w.strides, w.shape))]
    if not any(cut):
        return w
    return w[tuple(slice(0, 1) if c else slice(None) for c in cut)]


def repeats_per_kernel(w: np.ndarray, small: np.ndarray) -> int:
    """How many elements of kernel k of `w` each element of kernel k of `compact(w)` stands for."""
    return int(np.prod(w.shape[1:], dtype=np.int64)) // max(1, int(np.prod(small.shape[1:],
                                                                            dtype=np.int64)))


def expand(small: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """`small` broadcast to `shape` (a read-only view; an array of that shape comes back as is)."""
    return small if small.shape == tuple(shape) else np.broadcast_to(small, shape)


def scale_kernels(w: np.ndarray, factor: np.ndarray) -> np.ndarray:
    """w * factor per kernel (float32), kept as a view of the compact product when `w` is one."""
    small = compact(w)
    f = np.asarray(factor).astype(np.float32).reshape((-1,) + (1,) * (w.ndim - 1))
    return expand(small * f, w.shape)


def kernels_in_window(w: np.ndarray, cols: np.ndarray, width: int,
                      kernel: tuple[int, int]) -> np.ndarray:
    """(K, width, R, S) float32: kernel k's input channels at `cols` of a window `width`
    channels wide, zeros in the other channels (holes, other groups).  A stand-in covering the
    whole window stays a view; with holes, a (K, width) plane broadcast over R x S."""
    small = compact(w)
    k = w.shape[0]
    if small.size != np.size(w) and small.shape[1] == 1 and len(cols) == width:
        return np.broadcast_to(small.astype(np.float32, copy=False), (k, width) + tuple(kernel))
    out = np.zeros((k, width) + small.shape[2:], np.float32)
    out[:, cols] = small
    return expand(out, (k, width) + tuple(kernel))


def kernels_at(w: np.ndarray, rows: np.ndarray, k_out: int) -> np.ndarray:
    """(k_out, C, R, S): kernel i of `w` at output channel rows[i], zero kernels elsewhere."""
    small = compact(w)
    out = np.zeros((k_out,) + small.shape[1:], np.float32)
    out[rows] = small
    return expand(out, (k_out,) + w.shape[1:])


def block_diagonal(w: np.ndarray, groups: int, rows: np.ndarray, cols: np.ndarray,
                   k_out: int, c_in: int) -> np.ndarray:
    """(k_out, c_in, R, S): group g's kernels (rows[g*kg:(g+1)*kg]) over its channels
    (cols[g*cg:(g+1)*cg]), zeros across groups (one convolution over all channels)."""
    small = compact(w)
    if small.shape[1] != 1:          # channels vary: the group's block is the full weights
        small = np.asarray(w)
    kg, cg = w.shape[0] // groups, len(cols) // groups
    out = np.zeros((k_out, c_in) + small.shape[2:], np.float32)
    for g in range(groups):
        out[np.ix_(rows[g * kg:(g + 1) * kg], cols[g * cg:(g + 1) * cg])] = \
            small[g * kg:(g + 1) * kg]
    return expand(out, (k_out, c_in) + w.shape[2:])
