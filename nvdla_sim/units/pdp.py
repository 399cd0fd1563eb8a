"""PDP (planar pooling) and PDP_RDMA (its input DMA).

PDP_RDMA reads the input cube from memory and hands it to PDP on "pdp_rdma->pdp"; with PDP
FLYING_MODE = ON_FLYING (0; SDP's encoding is the other way round) PDP takes SDP's output from
"sdp->pdp" instead.  Either way the payload is one whole cube (surfaces*atom, H, W), all lanes.

Split width (SPLIT_NUM > 0) cuts the cube into SPLIT_NUM+1 vertical strips pooled one after
another: strip i > 0 starts `first + (i-1)*mid - (kernel_w - stride_w)` columns into the line and
carries that overlap; only the first strip has left padding and only the last right padding.  The
strips' outputs lie side by side in the output cube.  The pooling arithmetic is the kernel
`kernels/pdp.pyx`.

The element type (INT8, INT16, FP16) comes from D_DATA_FORMAT.INPUT_DATA of each unit: a 32-byte
memory atom holds 32 INT8 or 16 INT16/FP16 channels.  FP16 cubes travel as float16 arrays; the FP16
kernel works on their bit patterns.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Generator

import numpy as np

from .. import datatype
from ..datatype import DataType
from ..kernels.fixed import sign_extend
from ..kernels.pdp import POOL_AVERAGE, POOL_MAX, POOL_MIN, pool_fp16, pool_int
from ..layout import surfaces, write_cube
from ..regs import GroupView
from ..timing import pdp as pdp_timing
from ..timing.dma import token_atoms
from .base import Unit
from .checks import check_pdp

CHANNEL_RDMA = "pdp_rdma->pdp"
CHANNEL_SDP = "sdp->pdp"

FLYING_ON = 0          # PDP/PDP_RDMA FLYING_MODE: 0 = from SDP, 1 = from memory
POOLING_METHODS = {POOL_AVERAGE: "average", POOL_MAX: "max", POOL_MIN: "min"}
# PAD_VALUE_{n}X (n = 1..7) is sign-extended from these bits into an accumulator twice as wide as
# the element, as the C model does; FP16 takes the field's low 17 bits as an FP17 value.
PAD_VALUE_SIGN_BITS = {"INT8": (7, 8, 9, 9, 10, 10, 10), "INT16": (15, 16, 17, 17, 18, 18, 18)}
FP17_BITS = 17
# Status registers PDP sets at the end of every layer (zero unless FP16).
COUNTER_REGISTERS = {"nan_input": "D_NAN_INPUT_NUM", "inf_input": "D_INF_INPUT_NUM",
                     "nan_output": "D_NAN_OUTPUT_NUM"}


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


def pad_value(raw: int, sign_bit: int, bits: int = 16) -> int:
    """A PAD_VALUE_nX field as an integer datapath with a `bits`-wide accumulator sees it (16 for
    INT8, 32 for INT16).  Like the C model, the bits above the sign bit are ORed with ones when it
    is set and otherwise kept as written."""
    if (raw >> sign_bit) & 1:
        raw |= -1 << (sign_bit + 1)
    return sign_extend(raw & ((1 << bits) - 1), bits)


def pad_values(view: GroupView, dtype: DataType) -> np.ndarray:
    """PAD_VALUE_1X..7X as the kernel takes them: integers, or FP17 bit patterns in FP16."""
    raw = [view.field(f"D_POOLING_PADDING_VALUE_{n}_CFG", f"PAD_VALUE_{n}X") for n in range(1, 8)]
    if dtype.is_float:
        return np.array([r & ((1 << FP17_BITS) - 1) for r in raw], dtype=np.int64)
    bits = 2 * dtype.bits
    return np.array([pad_value(r, b, bits) for r, b in zip(raw, PAD_VALUE_SIGN_BITS[dtype.name])],
                    dtype=np.int64)


def input_type(unit: Unit, view: GroupView) -> DataType:
    """The element type D_DATA_FORMAT.INPUT_DATA selects, if the hardware builds it."""
    dtype = datatype.from_code(view.field("D_DATA_FORMAT", "INPUT_DATA"),
                               f"{unit.block}.D_DATA_FORMAT.INPUT_DATA")
    datatype.require_supported(dtype, unit.hw.data_types, unit.hw.name,
                               f"{unit.block}.D_DATA_FORMAT.INPUT_DATA")
    return dtype


def bit_patterns(cube: np.ndarray) -> np.ndarray:
    """An FP16 cube (float16 or its uint16 bits) as uint16 bit patterns, without copying."""
    return cube.view(np.uint16)


def fp16_class_counts(cube: np.ndarray) -> tuple[int, int]:
    """(NaN, infinity) elements of an FP16 cube, counted on the bits as the C model does."""
    bits = bit_patterns(cube)
    special = (bits & 0x7C00) == 0x7C00
    nan = int(np.count_nonzero(special & ((bits & 0x3FF) != 0)))
    return nan, int(np.count_nonzero(special)) - nan


# -- PDP_RDMA ----------------------------------------------------------------------------------
class PdpRdma(Unit):
    block = "PDP_RDMA"

    def execute(self, view: GroupView) -> Generator:
        dtype = input_type(self, view)
        atom = dtype.elements_per_atom(self.hw.memory_atomic_bytes)
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
        cube = self.read_src_cube(view, ram_type, width, height, channels, dtype=dtype)
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
    pad_values: np.ndarray          # int64[7]: PAD_VALUE_1X..7X (see pad_values)
    recip_w: int
    recip_h: int

    @property
    def in_width(self) -> int:
        return max(s.in_offset + s.in_width for s in self.strips)

    @property
    def out_width(self) -> int:
        return sum(s.out_width for s in self.strips)


def decode_pooling(view: GroupView, dtype: DataType) -> PoolingConfig:
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
    return PoolingConfig(
        method=view.field("D_OPERATION_MODE_CFG", "POOLING_METHOD"),
        kernel_w=kernel_w,
        kernel_h=view.field("D_POOLING_KERNEL_CFG", "KERNEL_HEIGHT") + 1,
        stride_w=stride_w,
        stride_h=view.field("D_POOLING_KERNEL_CFG", "KERNEL_STRIDE_HEIGHT") + 1,
        pad_top=view.field("D_POOLING_PADDING_CFG", "PAD_TOP"),
        out_height=view.field("D_DATA_CUBE_OUT_HEIGHT", "CUBE_OUT_HEIGHT") + 1,
        strips=strips,
        pad_values=pad_values(view, dtype),
        recip_w=view.field("D_RECIP_KERNEL_WIDTH", "RECIP_KERNEL_WIDTH"),
        recip_h=view.field("D_RECIP_KERNEL_HEIGHT", "RECIP_KERNEL_HEIGHT"),
    )


def pool_cube(cube: np.ndarray, cfg: PoolingConfig) -> tuple[np.ndarray, int]:
    """Pool a whole (surfaces*atom, H, W) cube (int8, int16, or float16 for FP16) strip by strip;
    returns (output of the cube's dtype, number of windows that held no input element)."""
    is_float = cube.dtype == np.float16
    work = bit_patterns(cube) if is_float else cube
    out = np.zeros((cube.shape[0], cfg.out_height, cfg.out_width), work.dtype)
    empty = 0
    out_x = 0
    for s in cfg.strips:
        strip_in = np.ascontiguousarray(work[:, :, s.in_offset:s.in_offset + s.in_width])
        strip_out = np.zeros((cube.shape[0], cfg.out_height, s.out_width), work.dtype)
        kernel = pool_fp16 if is_float else pool_int
        empty += kernel(strip_in, strip_out, cfg.method, cfg.kernel_w, cfg.kernel_h,
                        cfg.stride_w, cfg.stride_h, s.pad_left, cfg.pad_top, cfg.pad_values,
                        cfg.recip_w, cfg.recip_h)
        out[:, :, out_x:out_x + s.out_width] = strip_out
        out_x += s.out_width
    return (out.view(np.float16) if is_float else out), empty


def flush_nan_to_zero(cube: np.ndarray) -> np.ndarray:
    """NAN_TO_ZERO: every FP16 NaN read from memory becomes +0 before pooling."""
    bits = bit_patterns(cube)
    nan = ((bits & 0x7C00) == 0x7C00) & ((bits & 0x3FF) != 0)
    if not nan.any():
        return cube
    flushed = bits.copy()
    flushed[nan] = 0
    return flushed.view(np.float16)


class Pdp(Unit):
    block = "PDP"
    interrupt = "PDP"

    def execute(self, view: GroupView) -> Generator:
        check_pdp(self, view)                  # OUT_CHANNEL, the RDMA's flying mode and cube
        dtype = input_type(self, view)
        cfg = decode_pooling(view, dtype)
        if cfg.method not in POOLING_METHODS:
            raise self.unsupported(f"POOLING_METHOD={cfg.method} is not a pooling method")
        atom = dtype.elements_per_atom(self.hw.memory_atomic_bytes)
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
        if cube.dtype != dtype.numpy or cube.shape[0] != lanes or cube.shape[1] != height \
                or cube.shape[2] != cfg.in_width:
            raise self.unsupported(
                f"input cube {cube.shape} ({cube.dtype}) from {'SDP' if on_flying else 'PDP_RDMA'} "
                f"does not match the PDP registers ({dtype} {lanes} lanes x {height} x "
                f"{cfg.in_width})")
        if any(s.in_offset < 0 or s.in_width <= 0 or s.out_width <= 0 for s in cfg.strips):
            raise self.unsupported(f"split-width strips {cfg.strips} reach outside the cube")

        counters = dict.fromkeys(COUNTER_REGISTERS, 0)
        if dtype.is_float:
            if not on_flying:
                # PDP counts what its RDMA delivers: each strip, overlap columns included.
                for s in cfg.strips:
                    nan, inf = fp16_class_counts(cube[:, :, s.in_offset:s.in_offset + s.in_width])
                    counters["nan_input"] += nan
                    counters["inf_input"] += inf
                if view.field("D_NAN_FLUSH_TO_ZERO", "NAN_TO_ZERO"):
                    cube = flush_nan_to_zero(cube)
        out, empty = pool_cube(cube, cfg)
        if empty:
            raise self.unsupported(f"{empty} pooling windows lie entirely in the padding "
                                   "(the hardware never completes them)")
        write_cube(self.engine.memory.space(ram_type),
                   view.addr("D_DST_BASE_ADDR_LOW", "D_DST_BASE_ADDR_HIGH"), out,
                   view.word("D_DST_LINE_STRIDE"), view.word("D_DST_SURFACE_STRIDE"), atom)
        if dtype.is_float:
            counters["nan_output"] = fp16_class_counts(out)[0]
        for key, reg in COUNTER_REGISTERS.items():
            self.regs.set_word(reg, counters[key] & 0xFFFFFFFF, view.group)
        yield from pdp_timing.core(self, timing)


def timing_geometry(view: GroupView, cfg: PoolingConfig, height: int, channels: int, atom: int,
                    on_flying: bool, ram_type: int) -> pdp_timing.PdpGeometry:
    """What the timing model needs of a pooling layer (sizes, padding, strips)."""
    return pdp_timing.geometry(
        height, channels, atom, cfg.out_height, cfg.kernel_w, cfg.kernel_h, cfg.stride_w,
        cfg.stride_h, cfg.pad_top, view.field("D_POOLING_PADDING_CFG", "PAD_BOTTOM"),
        [(s.in_width, s.out_width, s.pad_left, s.pad_right) for s in cfg.strips],
        on_flying, ram_type)
