"""Image input with channel post-extension (CSC D_POST_Y_EXTENSION, 2-line and 4-line) on
nv_full: kernel rows combined into one atomic operation, weights remapped as the data-format
document describes (per group: blocks of 2 or 4 kernel rows, kernels, then the block's rows).
INT8/INT16 results equal an int64 reference of the image convolution (and the run without
post-extension); FP16 agrees with float64; the CSC issues ceil(R / rows) packages per stripe."""
from __future__ import annotations

import numpy as np
import pytest

from nvdla_sim.config import load_hardware
from nvdla_sim.datatype import FP16, INT8, INT16
from nvdla_sim.engine import Engine
from nvdla_sim.errors import NvdlaSimError

from conv_helpers import conv_program, conv_registers, image_cdma_registers
from test_conv_precision import pack_weights

LINE = 64


def pack_post_extended(w: np.ndarray, rows: int, group: int) -> np.ndarray:
    """(K, C, R) pre-extended image kernels, post-extended by `rows`: in each group of kernels,
    blocks of `rows` kernel rows; in a block, each kernel's rows one after another, C each."""
    k_total, c, r_total = w.shape
    out = []
    for g0 in range(0, k_total, group):
        for r0 in range(0, r_total, rows):
            for k in range(g0, min(g0 + group, k_total)):
                for r in range(r0, min(r0 + rows, r_total)):
                    out.append(w[k, :, r])
    flat = np.concatenate(out).astype(w.dtype.newbyteorder("<")).view(np.uint8)
    return np.concatenate([flat, np.zeros(-flat.size % 128, np.uint8)])


def program(dtype, image, w, r, s, stride_y, pad_top, pad_bits, y_ext, out_h, out_w):
    """A8B8G8R8 image (H, W, 4) uint8, unconverted (sign-extended into 16-bit lanes)."""
    h, width, _ = image.shape
    k, c, _ = w.shape
    rows = 1 << y_ext
    packed = pack_post_extended(w, rows, 32 if dtype == INT8 else 16) if y_ext else \
        pack_weights(w[:, :, :, None], 32 if dtype == INT8 else 16)
    img = np.zeros(h * LINE, np.uint8)
    for y in range(h):
        img[y * LINE:y * LINE + width * 4] = image[y].ravel()
    misc = {"CONV_MODE": 0, "IN_PRECISION": INT8.code, "PROC_PRECISION": dtype.code}
    bank = {"DATA_BANK": 0, "WEIGHT_BANK": 0}
    cdma = {
        **image_cdma_registers(misc, 12, width, h, 4, LINE, c * r * dtype.bytes, k, packed.size),
        "D_ZERO_PADDING_VALUE": {"PAD_VALUE": pad_bits}, "D_BANK": bank}
    csc = {
        "D_MISC_CFG": misc, "D_DATAIN_FORMAT": {"DATAIN_FORMAT": 1},
        "D_DATAIN_SIZE_EXT_0": {"DATAIN_WIDTH_EXT": width - 1, "DATAIN_HEIGHT_EXT": h - 1},
        "D_DATAIN_SIZE_EXT_1": {"DATAIN_CHANNEL_EXT": 3},
        "D_POST_Y_EXTENSION": {"Y_EXTENSION": y_ext},
        "D_WEIGHT_SIZE_EXT_0": {"WEIGHT_WIDTH_EXT": 0, "WEIGHT_HEIGHT_EXT": r - 1},
        "D_WEIGHT_SIZE_EXT_1": {"WEIGHT_CHANNEL_EXT": c - 1, "WEIGHT_KERNEL": k - 1},
        "D_DATAOUT_SIZE_0": {"DATAOUT_WIDTH": out_w - 1, "DATAOUT_HEIGHT": out_h - 1},
        "D_DATAOUT_SIZE_1": {"DATAOUT_CHANNEL": k - 1},
        "D_CONV_STRIDE_EXT": {"CONV_Y_STRIDE_EXT": stride_y - 1},
        "D_ZERO_PADDING": {"PAD_TOP": pad_top},
        "D_ZERO_PADDING_VALUE": {"PAD_VALUE": pad_bits}, "D_BANK": bank}
    regs = conv_registers(cdma, csc, dtype, out_w, out_h, k)
    return conv_program("post_ext", regs, img, packed)


def reference(image, w, s, stride_y, pad_top, pad, out_h, out_w, as_float=False):
    """out[k, oy, ox] = sum over kernel rows r and the S*4 pre-extended channels of pixel
    columns ox.. of line oy*SY + r - PAD_TOP (lines outside the image: the pad value)."""
    h, width, _ = image.shape
    vals = image.view(np.int8).astype(np.float64 if as_float else np.int64)
    k, c, r_total = w.shape
    wt = w.astype(np.float64 if as_float else np.int64)
    out = np.zeros((k, out_h, out_w), wt.dtype)
    for oy in range(out_h):
        for r in range(r_total):
            y = oy * stride_y + r - pad_top
            for ox in range(out_w):
                if 0 <= y < h:
                    x = vals[y, ox:ox + s].reshape(-1)
                else:
                    x = np.full(c, pad, wt.dtype)
                out[:, oy, ox] += wt[:, :, r] @ x
    return out


CASES = [
    # dtype, y_ext, R, S, stride_y, pad_top, K
    (INT8, 1, 5, 3, 1, 2, 40),
    (INT8, 2, 7, 2, 2, 3, 7),
    (INT16, 1, 3, 4, 1, 1, 17),
    (INT16, 2, 6, 3, 1, 0, 5),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{2 << (c[1] - 1)}line-R{c[2]}")
def test_post_extension_is_bit_exact(case):
    dtype, y_ext, r, s, sy, pad_top, k = case
    rng = np.random.default_rng(r * 10 + s)
    h, width = 9, 8
    image = rng.integers(0, 256, (h, width, 4)).astype(np.uint8)
    lo, hi = (-128, 127) if dtype == INT8 else (-3000, 3000)
    w = rng.integers(lo, hi + 1, (k, 4 * s, r)).astype(dtype.numpy)
    out_w, out_h = width - s + 1, (h + pad_top - r) // sy + 1
    pad_bits = 0xFFF9 if dtype == INT16 else 0x05
    pad = -7 if dtype == INT16 else 5
    results = []
    for ext in (0, y_ext):
        engine = Engine(load_hardware("nv_full"))
        result = engine.run(program(dtype, image, w, r, s, sy, pad_top, pad_bits, ext, out_h,
                                    out_w))
        out = engine.channel("cacc->sdp").items[0][:k].astype(np.int64)
        np.testing.assert_array_equal(out, reference(image, w, s, sy, pad_top, pad, out_h,
                                                     out_w))
        results.append(result)
    # fewer packages: ceil(R / rows) kernel-row operations instead of R
    busy = [res.unit_stats["CSC"]["busy_cycles"] for res in results]
    assert busy[1] < busy[0]


def test_fp16_post_extension():
    rng = np.random.default_rng(3)
    h, width, r, s, k = 6, 7, 5, 3, 9
    image = rng.integers(0, 256, (h, width, 4)).astype(np.uint8)
    w = rng.uniform(-1, 1, (k, 4 * s, r)).astype(np.float16)
    engine = Engine(load_hardware("nv_full"))
    # unconverted bytes enter FP16 lanes as sign-extended bit patterns: keep them finite
    image &= 0x3F
    engine.run(program(FP16, image, w, r, s, 1, 1, 0x3C00, 2, h - r + 2, width - s + 1))
    got = engine.channel("cacc->sdp").items[0][:k].view(np.float32).astype(np.float64)
    lanes = image.astype(np.uint16).view(np.float16).astype(np.float64)      # the lane bits
    ref = np.zeros_like(got)
    for oy in range(got.shape[1]):
        for rr in range(r):
            y = oy + rr - 1
            for ox in range(got.shape[2]):
                x = lanes[y, ox:ox + s].reshape(-1) if 0 <= y < h else np.ones(4 * s)
                ref[:, oy, ox] += w[:, :, rr].astype(np.float64) @ x
    assert np.abs(got - ref).max() <= 2.0 ** -18 * np.abs(ref).max() * 4 * s * r + 1e-30


@pytest.mark.parametrize("y_ext, s, message", [(2, 5, "at most 16"), (3, 2, "only 2-line")])
def test_bad_post_extension_is_a_one_line_error(y_ext, s, message):
    image = np.zeros((6, 8, 4), np.uint8)
    w = np.zeros((4, 4 * s, 3), np.int8)
    engine = Engine(load_hardware("nv_full"))
    with pytest.raises(NvdlaSimError, match=message) as err:
        engine.run(program(INT8, image, w, 3, s, 1, 0, 0, y_ext, 4, 8 - s + 1))
    assert "\n" not in str(err.value)
