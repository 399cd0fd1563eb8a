"""Float64 references of the up-sampling ops (deconvolution, resize), written from their
definitions (ONNX ConvTranspose and Resize), independent of how the compiler lowers them."""
from __future__ import annotations

import numpy as np


def deconv2d(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None, stride=(1, 1),
             pad=(0, 0, 0, 0), dilation=(1, 1), groups: int = 1) -> np.ndarray:
    """Transposed convolution of x (C, H, W) with weight (C, K/groups, R, S) (ONNX layout): every
    input pixel scatters its kernel-weighted values into the output at stride spacing; `pad`
    (top, left, bottom, right) crops the full result."""
    c, h, w = x.shape
    _, kg, r, s = weight.shape
    (sh, sw), (dh, dw) = stride, dilation
    full_h, full_w = (h - 1) * sh + dh * (r - 1) + 1, (w - 1) * sw + dw * (s - 1) + 1
    cg = c // groups
    out = np.zeros((kg * groups, full_h, full_w), np.float64)
    x64 = x.astype(np.float64)
    for g in range(groups):
        xg = x64[g * cg:(g + 1) * cg].reshape(cg, h * w)
        for i in range(r):
            for j in range(s):
                contrib = weight[g * cg:(g + 1) * cg, :, i, j].astype(np.float64).T @ xg
                out[g * kg:(g + 1) * kg, i * dh:i * dh + (h - 1) * sh + 1:sh,
                    j * dw:j * dw + (w - 1) * sw + 1:sw] += contrib.reshape(kg, h, w)
    if bias is not None:
        out += np.asarray(bias, np.float64)[:, None, None]
    pt, pl, pb, pr = pad
    return out[:, pt:full_h - pb, pl:full_w - pr].astype(np.float32)


def resize_nearest(x: np.ndarray, scale: tuple[int, int]) -> np.ndarray:
    """Integer-scale nearest neighbour: output pixel (y, x) is input pixel (y // sh, x // sw)
    (ONNX half_pixel + round_prefer_floor, asymmetric + floor: the same for integer scales)."""
    sh, sw = scale
    return np.repeat(np.repeat(x, sh, axis=1), sw, axis=2).astype(np.float32)


def _linear_taps(n: int, s: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Source index pairs and weights of integer-scale linear interpolation, half-pixel
    centres, source coordinates clamped to the edge (ONNX half_pixel, PyTorch align_corners
    False)."""
    src = np.maximum((np.arange(n * s) + 0.5) / s - 0.5, 0.0)
    i0 = np.floor(src).astype(np.int64)
    frac = src - i0
    i0 = np.minimum(i0, n - 1)
    i1 = np.minimum(i0 + 1, n - 1)
    return i0, i1, frac


def resize_bilinear(x: np.ndarray, scale: tuple[int, int]) -> np.ndarray:
    c, h, w = x.shape
    y0, y1, fy = _linear_taps(h, scale[0])
    x0, x1, fx = _linear_taps(w, scale[1])
    v = x.astype(np.float64)
    rows = v[:, y0, :] * (1 - fy)[None, :, None] + v[:, y1, :] * fy[None, :, None]
    return (rows[:, :, x0] * (1 - fx) + rows[:, :, x1] * fx).astype(np.float32)
