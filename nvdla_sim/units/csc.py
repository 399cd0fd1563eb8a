"""CSC: sequences a convolution layer from CBUF to the two CMACs.

It unpacks the weights from their CBUF order (kernel groups of ATOMIC_K, channel blocks of
ATOMIC_C, kernel positions, kernels of the group, channels of the block) into (K, R, S*C), and
turns the CBUF input into padded *lines* (see kernels/conv.pyx), of the layer's element type
(PROC_PRECISION: INT8 weight groups of ATOMIC_K kernels, INT16/FP16 ones of ATOMIC_K / 2; channel
blocks of ATOMIC_C elements of any type):
  - feature input: rows of W x C elements; a kernel position outside the cube reads the CSC
    ZERO_PADDING_VALUE (INT8: its low byte; INT16/FP16: all 16 bits) in every channel below C;
    channels >= C are not fed;
  - image input: the CDMA's pixel lines; the kernel is one column of the pre-extended
    S*C_pixel channels starting at element ox * stride_x * C_pixel of line oy * stride_y + r -
    PAD_TOP; lines above or below the image read the CSC pad value.
  - image input with channel post-extension (POST_Y_EXTENSION 2-line / 4-line): each atomic
    operation holds 2 or 4 kernel rows, each in a slot of ATOMIC_C / rows elements;
  - Winograd (CONV_MODE=WINOGRAD): the CDMA's padded, channel-extended cube; the CSC pre-adds
    (PRA) every 4x4 tile two apart, B^T d B, truncated by PRA_TRUNCATE (INT8/INT16) or in FP17
    (FP16), and unpacks the 4x4-domain kernels (4x4x4 small cubes).
The same job goes to CMAC_A and CMAC_B ("csc->cmac_a", "csc->cmac_b"), each computing its half of
the kernel cells.  Output geometry is DATAOUT_SIZE (there is no right/bottom pad register).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Generator

import numpy as np

from .. import formats
from ..errors import NvdlaSimError
from ..regs import GroupView
from ..timing import conv as conv_timing
from .base import Unit
from .checks import check_csc
from ..kernels.conv import winograd_pra
from .cbuf import FEATURE, PIXEL, WINOGRAD
from ..datatype import INT8, DataType
from .cdma import (CHANNEL_CSC, DATAIN_FEATURE, WINOGRAD_TILE, CbufLoad, conv_precision,
                   batch_count, is_winograd, kernels_per_group, pad_element,
                   weight_compressed)

CHANNEL_CMAC_A = "csc->cmac_a"
CHANNEL_CMAC_B = "csc->cmac_b"


@dataclass(frozen=True)
class ConvJob:
    """One layer as the CMACs compute it (arguments of kernels.conv.conv_lines)."""
    lines: np.ndarray             # (rows, elements) of the element type, padding applied
    weights: np.ndarray           # (K, R, kernel_w * kernel_c) of the element type
    kernel_w: int
    kernel_c: int
    x_step: int                   # elements between output columns
    s_step: int                   # elements between kernel columns
    y_step: int                   # lines between output rows
    r_step: int                   # lines between kernel rows
    out_h: int
    out_w: int
    block_c: int = 0              # channels of one atomic operation (ATOMIC_C; 0: all)
    kernel_group: int = 0         # kernels of one atomic operation (0: ATOMIC_K)

    @property
    def dtype(self) -> np.dtype:
        return self.lines.dtype

    @property
    def kernels(self) -> int:
        return self.weights.shape[0]


@dataclass(frozen=True)
class WinogradJob:
    """One Winograd layer as the CMACs compute it (arguments of kernels.conv.winograd_mac)."""
    tiles: np.ndarray             # (OH/2, OW/2, C/4, 64): PRA output of every input tile
    weights: np.ndarray           # (K, C/4, 64): 4x4-domain kernels, [position * 4 + channel]
    kernel_group: int

    @property
    def kernels(self) -> int:
        return self.weights.shape[0]


@dataclass(frozen=True)
class BatchJob:
    """A batched layer: one job per image, all with the same weights."""
    jobs: tuple

    @property
    def kernels(self) -> int:
        return self.jobs[0].kernels

    @property
    def kernel_group(self) -> int:
        return self.jobs[0].kernel_group


@dataclass(frozen=True)
class ConvGeometry:
    in_w: int
    in_h: int
    in_c: int
    kernel_w: int                 # S
    kernel_h: int                 # R
    kernel_c: int
    kernels: int                  # K
    out_w: int
    out_h: int
    stride_x: int
    stride_y: int
    dilation_x: int
    dilation_y: int
    pad_left: int
    pad_top: int
    pad_value: object             # one element of the layer's type (numpy scalar)


def decode_geometry(view: GroupView, dtype: DataType = INT8) -> ConvGeometry:
    return ConvGeometry(
        in_w=view.field("D_DATAIN_SIZE_EXT_0", "DATAIN_WIDTH_EXT") + 1,
        in_h=view.field("D_DATAIN_SIZE_EXT_0", "DATAIN_HEIGHT_EXT") + 1,
        in_c=view.field("D_DATAIN_SIZE_EXT_1", "DATAIN_CHANNEL_EXT") + 1,
        kernel_w=view.field("D_WEIGHT_SIZE_EXT_0", "WEIGHT_WIDTH_EXT") + 1,
        kernel_h=view.field("D_WEIGHT_SIZE_EXT_0", "WEIGHT_HEIGHT_EXT") + 1,
        kernel_c=view.field("D_WEIGHT_SIZE_EXT_1", "WEIGHT_CHANNEL_EXT") + 1,
        kernels=view.field("D_WEIGHT_SIZE_EXT_1", "WEIGHT_KERNEL") + 1,
        out_w=view.field("D_DATAOUT_SIZE_0", "DATAOUT_WIDTH") + 1,
        out_h=view.field("D_DATAOUT_SIZE_0", "DATAOUT_HEIGHT") + 1,
        stride_x=view.field("D_CONV_STRIDE_EXT", "CONV_X_STRIDE_EXT") + 1,
        stride_y=view.field("D_CONV_STRIDE_EXT", "CONV_Y_STRIDE_EXT") + 1,
        dilation_x=view.field("D_DILATION_EXT", "X_DILATION_EXT") + 1,
        dilation_y=view.field("D_DILATION_EXT", "Y_DILATION_EXT") + 1,
        pad_left=view.field("D_ZERO_PADDING", "PAD_LEFT"),
        pad_top=view.field("D_ZERO_PADDING", "PAD_TOP"),
        pad_value=pad_element(view.field("D_ZERO_PADDING_VALUE", "PAD_VALUE"), dtype),
    )


# -- weights -----------------------------------------------------------------------------------
def unpack_weights(raw: np.ndarray, kernels: int, rows: int, cols: int, channels: int,
                   atomic_c: int, atomic_k: int, dtype: DataType = INT8) -> np.ndarray:
    """(K, R, S, C) weights of `dtype` from the raw CBUF bytes: the direct-convolution weight
    format (`formats.unpack_direct_weights`), `atomic_k` kernels per group."""
    need = kernels * rows * cols * channels * dtype.bytes
    if need > raw.size:
        raise NvdlaSimError(f"CSC: {kernels} kernels of {rows}x{cols}x{channels} {dtype} need "
                            f"{need} weight bytes but CDMA loaded {raw.size} (WEIGHT_BYTES)")
    w = formats.unpack_direct_weights(raw, (kernels, channels, rows, cols), dtype, atomic_c,
                                      atomic_k)
    return np.ascontiguousarray(w.transpose(0, 2, 3, 1))


def winograd_weight_offsets(kernels: int, channels: int, group: int) -> np.ndarray:
    """Element offset of Winograd weight (k, super channel, position * 4 + channel) in the
    CBUF/memory layout, shape (K, C/4, 64): kernel groups of `group` kernels (the last may be
    short), each kernel BYTE_PER_KERNEL = 16 x C elements; in a group, 4x4x4 small cubes of 4
    channels scanned kernel by kernel, then channel block by channel block."""
    k = np.arange(kernels, dtype=np.int64)[:, None, None]
    sc = np.arange(channels // 4, dtype=np.int64)[None, :, None]
    e = np.arange(64, dtype=np.int64)[None, None, :]
    g, cell = k // group, k % group
    in_group = np.minimum(group, kernels - g * group)
    return g * group * 16 * channels + sc * 64 * in_group + cell * 64 + e


def unpack_winograd_weights(raw: np.ndarray, kernels: int, channels: int, group: int,
                            dtype: DataType) -> np.ndarray:
    """(K, C/4, 64) Winograd weights of `dtype` from the raw CBUF bytes."""
    need = kernels * 16 * channels * dtype.bytes
    if need > raw.size:
        raise NvdlaSimError(f"CSC: {kernels} Winograd kernels of 4x4x{channels} {dtype} need "
                            f"{need} weight bytes but CDMA loaded {raw.size} (WEIGHT_BYTES)")
    usable = raw.size - raw.size % dtype.bytes
    elements = raw[:usable].view(np.dtype(dtype.numpy).newbyteorder("<"))
    return np.ascontiguousarray(elements[winograd_weight_offsets(kernels, channels, group)]
                                .astype(dtype.numpy))


def unpack_post_extended_weights(raw: np.ndarray, kernels: int, rows_total: int, channels: int,
                                 rows: int, slot: int, group: int,
                                 dtype: DataType) -> np.ndarray:
    """(K, blocks, rows * slot) weights of a post-extended image layer from the raw CBUF bytes:
    in each kernel group, row blocks of `rows` kernel rows (the last may be short); in a block,
    the group's kernels one after another, each with its block's rows of `channels` elements
    back to back.  Elements are placed in their row's slot; the rest are 0."""
    need = kernels * rows_total * channels * dtype.bytes
    if need > raw.size:
        raise NvdlaSimError(f"CSC: {kernels} kernels of {rows_total}x{channels} {dtype} need "
                            f"{need} weight bytes but CDMA loaded {raw.size} (WEIGHT_BYTES)")
    # the layout is formats' (one implementation): read as (K, C, R, 1) post-extended weights
    ext = formats.unpack_image_weights(raw, (kernels, channels, rows_total, 1), channels, dtype,
                                       rows, rows * slot, group)[:, :, :, 0]
    blocks = -(-rows_total // rows)
    out = np.zeros((kernels, blocks, rows, slot), dtype.numpy)
    for r in range(rows_total):
        out[:, r // rows, r % rows, :channels] = ext[:, :, r]
    return out.reshape(kernels, blocks, rows * slot)


# -- input lines -------------------------------------------------------------------------------
def _place(dst_len: int, offset: int, src_len: int) -> tuple[slice, slice]:
    """Slices copying src[0:src_len] to dst[offset:offset+src_len], clipped to dst[0:dst_len]."""
    lo, hi = max(0, offset), min(dst_len, offset + src_len)
    if hi <= lo:
        return slice(0, 0), slice(0, 0)
    return slice(lo, hi), slice(lo - offset, hi - offset)


def _as_bits(g: ConvGeometry) -> ConvGeometry:
    """FP16 lines are padded and copied as bit patterns (a NaN pad value keeps its payload)."""
    return replace(g, pad_value=np.float16(g.pad_value).view(np.uint16))


def feature_lines(cube: np.ndarray, g: ConvGeometry) -> np.ndarray:
    """Padded (rows, columns * C) lines covering every kernel position of the output."""
    if cube.dtype == np.float16:
        return feature_lines(cube.view(np.uint16), _as_bits(g)).view(np.float16)
    rows = (g.out_h - 1) * g.stride_y + (g.kernel_h - 1) * g.dilation_y + 1
    cols = (g.out_w - 1) * g.stride_x + (g.kernel_w - 1) * g.dilation_x + 1
    padded = np.full((rows, cols, g.in_c), g.pad_value, cube.dtype)
    dy, sy = _place(rows, g.pad_top, g.in_h)
    dx, sx = _place(cols, g.pad_left, g.in_w)
    padded[dy, dx, :] = np.transpose(cube[:g.in_c, sy, sx], (1, 2, 0))
    return padded.reshape(rows, cols * g.in_c)


def pixel_lines(lines: np.ndarray, g: ConvGeometry, pixel_channels: int) -> np.ndarray:
    """Image lines padded top/bottom with the CSC pad value; elements past a CBUF line (never
    read by a consistent configuration) are 0."""
    if lines.dtype == np.float16:
        return pixel_lines(lines.view(np.uint16), _as_bits(g), pixel_channels).view(np.float16)
    rows = (g.out_h - 1) * g.stride_y + g.kernel_h
    elements = max(lines.shape[1],
                   (g.out_w - 1) * g.stride_x * pixel_channels + g.kernel_c)
    padded = np.full((rows, elements), g.pad_value, lines.dtype)
    dy, sy = _place(rows, g.pad_top, lines.shape[0])
    padded[dy, :] = 0
    padded[dy, :lines.shape[1]] = lines[sy]
    return padded


class Csc(Unit):
    block = "CSC"

    def execute(self, view: GroupView) -> Generator:
        dtype = conv_precision(self, view)
        weight_compressed(self, view)          # the CDMA expands compressed weights in CBUF
        batches = batch_count(self, view)
        g = decode_geometry(view, dtype)
        winograd = is_winograd(self, view)
        check_csc(self, view, g.out_w, g.out_h, winograd, batches)   # registers derived elsewhere
        feature = view.field("D_DATAIN_FORMAT", "DATAIN_FORMAT") == DATAIN_FEATURE
        if winograd:
            self.check_winograd(view, g, feature)
        y_ext = self.post_extension(view, g, feature)
        out_channels = view.field("D_DATAOUT_SIZE_1", "DATAOUT_CHANNEL") + 1
        if out_channels != g.kernels:
            raise self.unsupported(f"DATAOUT_CHANNEL={out_channels} differs from WEIGHT_KERNEL="
                                   f"{g.kernels}")

        load: CbufLoad = yield from self.receive(CHANNEL_CSC)
        expected = WINOGRAD if winograd else FEATURE if feature else PIXEL
        if load.data.kind != expected:
            raise NvdlaSimError(f"CSC: DATAIN_FORMAT is {expected} but the CDMA loaded "
                                f"{load.data.kind} input")
        if load.data.dtype != dtype:
            raise NvdlaSimError(f"CSC: D_MISC_CFG.PROC_PRECISION is {dtype} but the CDMA loaded "
                                f"{load.data.dtype} data")
        if load.data.batches != batches:
            raise NvdlaSimError(f"CSC: D_BATCH_NUMBER says {batches} batches but the CDMA "
                                f"loaded {load.data.batches}")
        group = kernels_per_group(self.hw, dtype)
        if load.data.array is None:           # timing only
            job = None
        elif winograd:
            job = self.winograd_job(view, load, g, dtype)
        elif batches > 1:                     # the same weights for every image
            job = BatchJob(tuple(self.feature_job(replace(load, data=replace(
                load.data, array=cube, batches=1)), g, dtype) for cube in load.data.array))
        elif y_ext > 1:
            job = self.post_extended_job(load, g, dtype, y_ext)
        else:
            job = self.feature_job(load, g, dtype) if feature else self.pixel_job(load, g, dtype)
        yield from self.send(CHANNEL_CMAC_A, job)
        yield from self.send(CHANNEL_CMAC_B, job)
        # post-extension: each package takes Y_EXTENSION kernel rows in one atomic operation
        kernel_h, kernel_c = (g.kernel_h, g.kernel_c) if y_ext == 1 else \
            (-(-g.kernel_h // y_ext), self.hw.atomic_c)
        geom = conv_timing.csc_geometry(self.hw, not feature, g.out_w, g.out_h, kernel_h,
                                        g.kernel_w, kernel_c, g.kernels, kernel_group=group,
                                        winograd=winograd, elem_bytes=dtype.bytes,
                                        batches=batches)
        layer = self.engine.timing.layer("conv", self.stats["layers"])
        yield from conv_timing.csc(self, geom, layer)

    def post_extension(self, view: GroupView, g: ConvGeometry, feature: bool) -> int:
        """D_POST_Y_EXTENSION: 1, 2 or 4 kernel rows per atomic operation (image input only;
        each row's pre-extended channels in a slot of ATOMIC_C / rows elements)."""
        code = view.field("D_POST_Y_EXTENSION", "Y_EXTENSION")
        where = "CSC.D_POST_Y_EXTENSION.Y_EXTENSION"
        if code == 0:
            return 1
        if code > 2:
            raise NvdlaSimError(f"{where}={code}: only 2-line (1) and 4-line (2) post-extension "
                                "exist")
        rows = 1 << code
        if feature:
            raise NvdlaSimError(f"{where}: channel post-extension is for image input only")
        slot = self.hw.atomic_c // rows
        if g.kernel_c > slot:
            raise NvdlaSimError(f"{where}: {rows}-line post-extension needs at most {slot} "
                                f"pre-extended channels, WEIGHT_CHANNEL_EXT+1 is {g.kernel_c}")
        return rows

    def post_extended_job(self, load: CbufLoad, g: ConvGeometry, dtype: DataType,
                          rows: int) -> ConvJob:
        """Image input with `rows`-line post-extension: one atomic operation holds kernel rows
        rows*j .. rows*j + rows - 1, row i's C pre-extended channels in elements slot*i ..
        slot*i + C - 1 (slot = ATOMIC_C / rows; the rest 0, and rows past the kernel 0).  Weights
        are mapped the same way: per group, row block, kernel, then the block's rows of C."""
        base = self.pixel_job(load, g, dtype, unpack=False)
        lines = base.lines.view(np.uint16) if dtype.is_float else base.lines
        slot = self.hw.atomic_c // rows
        blocks = -(-g.kernel_h // rows)
        ext = np.zeros((g.out_h, blocks, g.out_w, rows * slot), lines.dtype)
        cols = (np.arange(g.out_w)[:, None] * base.x_step + np.arange(g.kernel_c)[None, :])
        for r in range(g.kernel_h):
            j, i = divmod(r, rows)
            picked = lines[r: r + (g.out_h - 1) * g.stride_y + 1: g.stride_y]
            ext[:, j, :, i * slot:i * slot + g.kernel_c] = picked[:, cols]
        group = kernels_per_group(self.hw, dtype)
        weights = unpack_post_extended_weights(load.weights, g.kernels, g.kernel_h, g.kernel_c,
                                               rows, slot, group, dtype)
        ext_lines = ext.reshape(g.out_h * blocks, g.out_w * rows * slot)
        if dtype.is_float:
            ext_lines = ext_lines.view(np.float16)
        return ConvJob(ext_lines, weights, kernel_w=1, kernel_c=rows * slot,
                       x_step=rows * slot, s_step=rows * slot, y_step=blocks, r_step=1,
                       out_h=g.out_h, out_w=g.out_w, block_c=self.hw.atomic_c,
                       kernel_group=group)

    def check_winograd(self, view: GroupView, g: ConvGeometry, feature: bool) -> None:
        """The Winograd register rules: feature input already channel-extended by the CDMA
        (DATAIN_SIZE_EXT and WEIGHT_CHANNEL_EXT are the extended sizes, channels a multiple of
        4), 4x4 (pre-transformed) kernels, and outputs in whole 4x4 blocks of 2x2 tiles."""
        where = "CSC.D_MISC_CFG.CONV_MODE=WINOGRAD"
        if not feature:
            raise NvdlaSimError(f"{where}: needs DATAIN_FORMAT=FEATURE")
        if (g.kernel_w, g.kernel_h) != (WINOGRAD_TILE, WINOGRAD_TILE):
            raise NvdlaSimError(f"{where}: WEIGHT_SIZE_EXT must be 4x4 (kernels transformed to "
                                f"the 4x4 domain), got {g.kernel_w}x{g.kernel_h}")
        if g.in_c % 4 or g.kernel_c != g.in_c:
            raise NvdlaSimError(f"{where}: DATAIN_CHANNEL_EXT+1={g.in_c} must be a multiple of "
                                f"4 and equal WEIGHT_CHANNEL_EXT+1={g.kernel_c}")
        if g.out_w % 4 or g.out_h % 4:
            raise NvdlaSimError(f"{where}: DATAOUT_SIZE {g.out_w}x{g.out_h} must be a multiple "
                                "of 4 wide and high")
        if g.out_w + 2 > g.in_w or g.out_h + 2 > g.in_h:
            raise NvdlaSimError(f"{where}: {g.out_w}x{g.out_h} outputs need an input of at "
                                f"least {g.out_w + 2}x{g.out_h + 2}, DATAIN_SIZE_EXT is "
                                f"{g.in_w}x{g.in_h}")
        if view.field("D_POST_Y_EXTENSION", "Y_EXTENSION"):
            raise NvdlaSimError(f"{where}: channel post-extension cannot be used with Winograd")

    def winograd_job(self, view: GroupView, load: CbufLoad, g: ConvGeometry,
                     dtype: DataType) -> WinogradJob:
        """The CSC's pre-addition of every input tile (PRA_TRUNCATE) and the 4x4 kernels."""
        cube = load.data.array
        if cube.shape != (g.in_c, g.in_h, g.in_w):
            raise NvdlaSimError(
                f"CSC: DATAIN_SIZE_EXT {g.in_w}x{g.in_h}x{g.in_c} differs from the Winograd "
                f"input the CDMA extended ({cube.shape[2]}x{cube.shape[1]}x{cube.shape[0]})")
        group = kernels_per_group(self.hw, dtype)
        weights = unpack_winograd_weights(load.weights, g.kernels, g.in_c, group, dtype)
        tiles = np.empty((g.out_h // 2, g.out_w // 2, g.in_c // 4, 64), dtype.numpy)
        if dtype.is_float:                     # the C model's float formats work on the bits
            winograd_pra(cube.view(np.uint16), tiles.view(np.uint16),
                         view.field("D_PRA_CFG", "PRA_TRUNCATE"))
        else:
            winograd_pra(cube, tiles, view.field("D_PRA_CFG", "PRA_TRUNCATE"))
        return WinogradJob(tiles, weights, group)

    def feature_job(self, load: CbufLoad, g: ConvGeometry, dtype: DataType) -> ConvJob:
        cube = load.data.array
        if (cube.shape[0] < g.in_c or cube.shape[1] != g.in_h or cube.shape[2] != g.in_w):
            raise self.unsupported(
                f"DATAIN_SIZE_EXT {g.in_w}x{g.in_h}x{g.in_c} differs from the cube the CDMA "
                f"loaded ({cube.shape[2]}x{cube.shape[1]}, {cube.shape[0]} lanes)")
        if g.kernel_c != g.in_c:
            raise self.unsupported(f"WEIGHT_CHANNEL_EXT+1={g.kernel_c} differs from "
                                   f"DATAIN_CHANNEL_EXT+1={g.in_c}")
        group = kernels_per_group(self.hw, dtype)
        w = unpack_weights(load.weights, g.kernels, g.kernel_h, g.kernel_w, g.kernel_c,
                           self.hw.atomic_c, group, dtype)
        return ConvJob(feature_lines(cube, g), w.reshape(g.kernels, g.kernel_h, -1),
                       kernel_w=g.kernel_w, kernel_c=g.in_c, x_step=g.stride_x * g.in_c,
                       s_step=g.dilation_x * g.in_c, y_step=g.stride_y, r_step=g.dilation_y,
                       out_h=g.out_h, out_w=g.out_w, block_c=self.hw.atomic_c, kernel_group=group)

    def pixel_job(self, load: CbufLoad, g: ConvGeometry, dtype: DataType,
                  unpack: bool = True) -> ConvJob:
        if g.kernel_w != 1:
            raise NvdlaSimError(f"CSC: image input needs WEIGHT_WIDTH_EXT=0 (a pre-extended "
                                f"kernel one column wide), got width {g.kernel_w}")
        if g.in_c != load.data.pixel_channels:
            raise self.unsupported(f"DATAIN_CHANNEL_EXT+1={g.in_c} differs from the "
                                   f"{load.data.pixel_channels} elements per pixel in CBUF")
        if load.data.array.shape[0] != g.in_h:
            raise self.unsupported(f"DATAIN_HEIGHT_EXT+1={g.in_h} differs from the "
                                   f"{load.data.array.shape[0]} image lines in CBUF")
        group = kernels_per_group(self.hw, dtype)
        w = unpack_weights(load.weights, g.kernels, g.kernel_h, 1, g.kernel_c,
                           self.hw.atomic_c, group, dtype) if unpack else \
            np.zeros((g.kernels, g.kernel_h, 1, g.kernel_c), dtype.numpy)
        return ConvJob(pixel_lines(load.data.array, g, g.in_c),
                       w.reshape(g.kernels, g.kernel_h, g.kernel_c),
                       kernel_w=1, kernel_c=g.kernel_c, x_step=g.stride_x * g.in_c,
                       s_step=g.kernel_c, y_step=g.stride_y, r_step=1,
                       out_h=g.out_h, out_w=g.out_w, block_c=self.hw.atomic_c, kernel_group=group)
