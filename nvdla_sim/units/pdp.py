"""PDP (planar pooling) and PDP_RDMA (its input DMA).

PDP_RDMA reads the input cube from memory and hands it to PDP on "pdp_rdma->pdp"; with PDP
FLYING_MODE = ON_FLYING (0; SDP's encoding is the other way round) PDP takes SDP's output from
"sdp->pdp" instead.  Either way the payload is one whole cube (surfaces*atom, H, W), all lanes.

Split width (SPLIT_NUM > 0) cuts the cube into SPLIT_NUM+1 vertical strips pooled one after
another: strip i > 0 starts `first + (i-1)*mid - (kernel_w - stride_w)` columns into the line and
carries that overlap; only the first strip has left padding and only the last right padding.  The
strips' outputs lie side by side in the output cube.  The pooling arithmetic is the kernel
`kernels/pdp.pyx`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Generator

import numpy as np

from ..kernels.fixed import sign_extend
from ..kernels.pdp import POOL_AVERAGE, POOL_MAX, POOL_MIN, pool_int8
from ..layout import surfaces, write_cube
from ..regs import GroupView
from ..timing import pdp as pdp_timing
from ..timing.dma import token_atoms
from .base import Unit

CHANNEL_RDMA = "pdp_rdma->pdp"
CHANNEL_SDP = "sdp->pdp"

INPUT_INT8 = 0
FLYING_ON = 0          # PDP/PDP_RDMA FLYING_MODE: 0 = from SDP, 1 = from memory
POOLING_METHODS = {POOL_AVERAGE: "average", POOL_MAX: "max", POOL_MIN: "min"}
# INT8: PAD_VALUE_{n}X is sign-extended from these bits (n = 1..7), as the C model does.
PAD_VALUE_SIGN_BITS_INT8 = (7, 8, 9, 9, 10, 10, 10)


# -- register decoding shared by PDP_RDMA and PDP ----------------------------------------------
@dataclass(frozen=True)
class Strip:
    """One split-width strip: input columns [in_offset, in_offset+in_width) of the cube."""
    in_offset: int
    in_width: int
    out_width: int = 0
    pad_left: int = 0
    pad_right: int = 0


def strip_columns(split_num: int, width_in: tuple[int, int, int], kernel_w: int,
                  stride_w: int) -> list[tuple[int, int]]:
    """(offset, width) in columns of each strip; `width_in` = (first, mid, last), not minus one."""
    first, mid, last = width_in
    overlap = kernel_w - stride_w     # negative when the stride skips columns
    n = split_num + 1
    cols = [(0, first)]
    for i in range(1, n):
        offset = first + (i - 1) * mid - overlap
        cols.append((offset, (last if i == n - 1 else mid) + overlap))
    return cols


def partial_widths(view: GroupView, reg: str, prefix: str) -> tuple[int, int, int]:
    return tuple(view.field(reg, f"{prefix}_{part}") + 1 for part in ("FIRST", "MID", "LAST"))


def pad_value_int8(raw: int, sign_bit: int) -> int:
    """A PAD_VALUE_nX field as the INT8 datapath sees it (16 bits).  Like the C model, the bits
    above the sign bit are ORed with ones when it is set and otherwise kept as written."""
    if (raw >> sign_bit) & 1:
        raw |= -1 << (sign_bit + 1)
    return sign_extend(raw & 0xFFFF, 16)


def check_int8(unit: Unit, view: GroupView) -> None:
    fmt = view.field("D_DATA_FORMAT", "INPUT_DATA")
    if fmt != INPUT_INT8:
        name = {1: "INT16", 2: "FP16"}.get(fmt, "reserved")
        raise unit.unsupported(f"INPUT_DATA={fmt} ({name}); only INT8 is modelled")


# -- PDP_RDMA ----------------------------------------------------------------------------------
class PdpRdma(Unit):
    block = "PDP_RDMA"

    def execute(self, view: GroupView) -> Generator:
        check_int8(self, view)
        atom = self.hw.memory_atomic_bytes
        height = view.field("D_DATA_CUBE_IN_HEIGHT", "CUBE_IN_HEIGHT") + 1
        channels = view.field("D_DATA_CUBE_IN_CHANNEL", "CUBE_IN_CHANNEL") + 1
        split_num = view.field("D_OPERATION_MODE_CFG", "SPLIT_NUM")
        if split_num == 0:
            cols = [(0, view.field("D_DATA_CUBE_IN_WIDTH", "CUBE_IN_WIDTH") + 1)]
        else:
            cols = strip_columns(split_num,
                                 partial_widths(view, "D_PARTIAL_WIDTH_IN", "PARTIAL_WIDTH_IN"),
                                 view.field("D_POOLING_KERNEL_CFG", "KERNEL_WIDTH") + 1,
                                 view.field("D_POOLING_KERNEL_CFG", "KERNEL_STRIDE_WIDTH") + 1)
        if any(offset < 0 or width <= 0 for offset, width in cols):
            raise self.unsupported(f"split-width strips {cols} reach outside the cube")
        # The strips together cover columns [0, width); read that once, count overlap for timing.
        width = max(offset + w for offset, w in cols)
        ram_type = view.field("D_SRC_RAM_CFG", "SRC_RAM_TYPE")
        cube = self.read_src_cube(view, ram_type, width, height, channels)
        self.engine.timing.announce(pdp_timing.CH_RDMA)
        yield from self.send(CHANNEL_RDMA, cube)
        # Timing: each strip is read whole, overlap columns included.
        chunks = pdp_timing.read_chunks([w for _, w in cols], surfaces(channels, atom), height,
                                        token_atoms(self.engine.timing))
        yield from pdp_timing.rdma(self, chunks, ram_type)


# -- PDP ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PoolingConfig:
    method: int
    kernel_w: int
    kernel_h: int
    stride_w: int
    stride_h: int
    pad_top: int
    out_height: int
    strips: tuple[Strip, ...]
    pad_values: np.ndarray          # int64[7]: PAD_VALUE_1X..7X as 16-bit values
    recip_w: int
    recip_h: int

    @property
    def in_width(self) -> int:
        return max(s.in_offset + s.in_width for s in self.strips)

    @property
    def out_width(self) -> int:
        return sum(s.out_width for s in self.strips)


def decode_pooling(view: GroupView) -> PoolingConfig:
    kernel_w = view.field("D_POOLING_KERNEL_CFG", "KERNEL_WIDTH") + 1
    stride_w = view.field("D_POOLING_KERNEL_CFG", "KERNEL_STRIDE_WIDTH") + 1
    pad_left = view.field("D_POOLING_PADDING_CFG", "PAD_LEFT")
    pad_right = view.field("D_POOLING_PADDING_CFG", "PAD_RIGHT")
    split_num = view.field("D_OPERATION_MODE_CFG", "SPLIT_NUM")
    if split_num == 0:
        strips = (Strip(0, view.field("D_DATA_CUBE_IN_WIDTH", "CUBE_IN_WIDTH") + 1,
                        view.field("D_DATA_CUBE_OUT_WIDTH", "CUBE_OUT_WIDTH") + 1,
                        pad_left, pad_right),)
    else:
        cols = strip_columns(split_num,
                             partial_widths(view, "D_PARTIAL_WIDTH_IN", "PARTIAL_WIDTH_IN"),
                             kernel_w, stride_w)
        first, mid, last = partial_widths(view, "D_PARTIAL_WIDTH_OUT", "PARTIAL_WIDTH_OUT")
        n = len(cols)
        strips = tuple(
            Strip(offset, width,
                  first if i == 0 else (last if i == n - 1 else mid),
                  pad_left if i == 0 else 0,
                  pad_right if i == n - 1 else 0)
            for i, (offset, width) in enumerate(cols))
    pad_values = np.array(
        [pad_value_int8(view.field(f"D_POOLING_PADDING_VALUE_{n}_CFG", f"PAD_VALUE_{n}X"), bit)
         for n, bit in enumerate(PAD_VALUE_SIGN_BITS_INT8, start=1)], dtype=np.int64)
    return PoolingConfig(
        method=view.field("D_OPERATION_MODE_CFG", "POOLING_METHOD"),
        kernel_w=kernel_w,
        kernel_h=view.field("D_POOLING_KERNEL_CFG", "KERNEL_HEIGHT") + 1,
        stride_w=stride_w,
        stride_h=view.field("D_POOLING_KERNEL_CFG", "KERNEL_STRIDE_HEIGHT") + 1,
        pad_top=view.field("D_POOLING_PADDING_CFG", "PAD_TOP"),
        out_height=view.field("D_DATA_CUBE_OUT_HEIGHT", "CUBE_OUT_HEIGHT") + 1,
        strips=strips,
        pad_values=pad_values,
        recip_w=view.field("D_RECIP_KERNEL_WIDTH", "RECIP_KERNEL_WIDTH"),
        recip_h=view.field("D_RECIP_KERNEL_HEIGHT", "RECIP_KERNEL_HEIGHT"),
    )


def pool_cube(cube: np.ndarray, cfg: PoolingConfig) -> tuple[np.ndarray, int]:
    """Pool a whole (surfaces*atom, H, W) int8 cube strip by strip; returns (output, number of
    windows that held no input element)."""
    out = np.zeros((cube.shape[0], cfg.out_height, cfg.out_width), np.int8)
    empty = 0
    out_x = 0
    for s in cfg.strips:
        strip_in = np.ascontiguousarray(cube[:, :, s.in_offset:s.in_offset + s.in_width])
        strip_out = np.zeros((cube.shape[0], cfg.out_height, s.out_width), np.int8)
        empty += pool_int8(strip_in, strip_out, cfg.method, cfg.kernel_w, cfg.kernel_h,
                           cfg.stride_w, cfg.stride_h, s.pad_left, cfg.pad_top, cfg.pad_values,
                           cfg.recip_w, cfg.recip_h)
        out[:, :, out_x:out_x + s.out_width] = strip_out
        out_x += s.out_width
    return out, empty


class Pdp(Unit):
    block = "PDP"
    interrupt = "PDP"

    def execute(self, view: GroupView) -> Generator:
        check_int8(self, view)
        cfg = decode_pooling(view)
        if cfg.method not in POOLING_METHODS:
            raise self.unsupported(f"POOLING_METHOD={cfg.method} is not a pooling method")
        atom = self.hw.memory_atomic_bytes
        height = view.field("D_DATA_CUBE_IN_HEIGHT", "CUBE_IN_HEIGHT") + 1
        channels = view.field("D_DATA_CUBE_IN_CHANNEL", "CUBE_IN_CHANNEL") + 1
        lanes = surfaces(channels, atom) * atom

        on_flying = view.field("D_OPERATION_MODE_CFG", "FLYING_MODE") == FLYING_ON
        cube = yield from self.receive(CHANNEL_SDP if on_flying else CHANNEL_RDMA)
        ram_type = view.field("D_DST_RAM_CFG", "DST_RAM_TYPE")
        timing = timing_geometry(view, cfg, height, channels, atom, on_flying, ram_type)
        if not self.engine.compute_values:
            yield from pdp_timing.core(self, timing)
            return
        if cube.dtype != np.int8 or cube.shape[0] != lanes or cube.shape[1] != height \
                or cube.shape[2] != cfg.in_width:
            raise self.unsupported(
                f"input cube {cube.shape} ({cube.dtype}) from {'SDP' if on_flying else 'PDP_RDMA'} "
                f"does not match the PDP registers ({lanes} lanes x {height} x {cfg.in_width})")
        if any(s.in_offset < 0 or s.in_width <= 0 or s.out_width <= 0 for s in cfg.strips):
            raise self.unsupported(f"split-width strips {cfg.strips} reach outside the cube")

        out, empty = pool_cube(cube, cfg)
        if empty:
            raise self.unsupported(f"{empty} pooling windows lie entirely in the padding "
                                   "(the hardware never completes them)")
        write_cube(self.engine.memory.space(ram_type),
                   view.addr("D_DST_BASE_ADDR_LOW", "D_DST_BASE_ADDR_HIGH"), out,
                   view.word("D_DST_LINE_STRIDE"), view.word("D_DST_SURFACE_STRIDE"), atom)
        yield from pdp_timing.core(self, timing)


def timing_geometry(view: GroupView, cfg: PoolingConfig, height: int, channels: int, atom: int,
                    on_flying: bool, ram_type: int) -> pdp_timing.PdpGeometry:
    """What the timing model needs of a pooling layer (sizes, padding, strips)."""
    return pdp_timing.geometry(
        height, channels, atom, cfg.out_height, cfg.kernel_w, cfg.kernel_h, cfg.stride_w,
        cfg.stride_h, cfg.pad_top, view.field("D_POOLING_PADDING_CFG", "PAD_BOTTOM"),
        [(s.in_width, s.out_width, s.pad_left, s.pad_right) for s in cfg.strips],
        on_flying, ram_type)
