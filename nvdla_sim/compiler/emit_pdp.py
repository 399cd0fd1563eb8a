"""PDP hardware layers (max/min/average pooling) as NVDLA register writes.

The registers are derived as the NVDLA software does it (nvdla/sw: umd PDPNode.cpp computes the
bottom/right padding and the split-width strips, kmd firmware/pdp.c writes the registers):
- bottom/right padding is what the last window needs beyond the input:
  (out - 1) * stride + kernel - (in + pad_top_or_left); when negative the input is cut instead;
- the PDP line buffer holds 7 KiB; an output wider than it holds is pooled in vertical strips
  (SPLIT_NUM + 1 of them, PARTIAL_WIDTH_IN/OUT first/mid/last), at most 64; PDP fed on the fly by
  SDP cannot split;
- RECIP_KERNEL_WIDTH/HEIGHT are 2^16 / kernel size (Q16, truncated) and the seven
  PAD_VALUE_nX registers hold n times the padding value (the average sums them for windows that
  cross n padded columns or rows).
Precision (`PdpLayer.dtype`, D_DATA_FORMAT): INT16 as INT8 with 16-bit values; FP16 averages
multiply the FP17 window sum by RECIP_KERNEL_WIDTH and _HEIGHT read as FP17 values (C model
pdp_hls_wrapper: 1 sign, 6 exponent bits biased by 31, 10 mantissa bits), so the reciprocals are
written as FP17 bit patterns of 1 / kernel, and the padding values as FP16 bits.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..config import HardwareConfig
from ..datatype import INT8, DataType
from ..errors import NvdlaSimError
from .emit import ProgramBuilder
from .placement import TensorPlacement

METHODS = {"avg": "POOLING_METHOD_AVERAGE", "max": "POOLING_METHOD_MAX",
           "min": "POOLING_METHOD_MIN"}
MAX_KERNEL, MAX_STRIDE, MAX_PAD = 8, 16, 7
MAX_SPLITS = 64
# PDP line buffer (umd PDPNode::calculateMaxWidth): 7 KiB; INT8 keeps 14 bits per element for
# ATOMIC_K channels; lines that overlap between vertically adjacent windows cost RTL buffer lines.
PDP_BUFFER_BITS = 7 * 1024 * 8
INT8_BITS_PER_ELEMENT = 14
RTL_OVERLAP_LINES = (1, 1, 2, 4, 4, 8, 8, 8, 8)      # by ceil(kernel_h / stride_h)


@dataclass(frozen=True)
class PdpLayer:
    """One pooling hardware layer; sizes are (height, width), pads (top, left, bottom, right).
    `pad_value` is the INT8 value padded elements have in an average (0 for zero padding)."""
    method: str
    kernel: tuple[int, int]
    stride: tuple[int, int]
    pad: tuple[int, int, int, int] = (0, 0, 0, 0)
    pad_value: int = 0
    name: str = "pdp"
    dtype: DataType = INT8                 # INPUT_DATA: the cube's element type


@dataclass(frozen=True)
class SplitWidth:
    """Split-width strips (all sizes in columns, not minus one)."""
    splits: int
    first_in: int
    mid_in: int
    last_in: int
    first_out: int
    mid_out: int
    last_out: int


@dataclass(frozen=True)
class PdpPlan:
    """Register-level values of one PDP layer."""
    method: str
    kernel_h: int
    kernel_w: int
    stride_h: int
    stride_w: int
    pad_top: int
    pad_left: int
    pad_bottom: int
    pad_right: int
    in_width: int              # after cutting columns no window reaches
    in_height: int
    channels: int
    out_width: int
    out_height: int
    split: SplitWidth | None
    pad_values: tuple[int, ...]
    recip_w: int
    recip_h: int
    dtype: DataType = INT8


def output_size(in_size: int, kernel: int, stride: int, pad_before: int, pad_after: int,
                ceil_mode: bool = False) -> int:
    span = in_size + pad_before + pad_after - kernel
    return (-(-span // stride) if ceil_mode else span // stride) + 1


def max_flying_width(hw: HardwareConfig, kernel_h: int, stride_h: int,
                     dtype: DataType = INT8) -> int:
    """Widest output row the PDP line buffer holds; a 16-bit element takes twice the bits of an
    INT8 one (the buffer holds half as many)."""
    overlap = RTL_OVERLAP_LINES[-(-kernel_h // stride_h)]
    return PDP_BUFFER_BITS // (overlap * hw.atomic_k * INT8_BITS_PER_ELEMENT * dtype.bytes)


def recip_q16(kernel: int) -> int:
    return (1 << 16) // kernel


def fp17_bits(value: float) -> int:
    """The FP17 bits of a value (the float library's FP32 -> FP17 conversion, nearest even)."""
    from ..kernels.nvfloat_py import fp32_to_fp17
    bits = np.array([value], np.float32).view(np.uint32)
    return int(np.asarray(fp32_to_fp17(bits)).reshape(-1)[0])


def recip(kernel: int, dtype: DataType) -> int:
    """RECIP_KERNEL_WIDTH/HEIGHT of a kernel size in the layer's precision."""
    return fp17_bits(1.0 / kernel) if dtype.is_float else recip_q16(kernel)


def pad_register(value: int, dtype: DataType) -> int:
    """A PAD_VALUE_nX register value: the integer, or the FP16 bits of a float padding value."""
    if dtype.is_float:
        return int(np.array([value], np.float16).view(np.uint16)[0])
    return value


def _check_range(layer: PdpLayer, what: str, values, lo: int, hi: int) -> None:
    for v in values:
        if not lo <= v <= hi:
            raise NvdlaSimError(f"{layer.name}: {what} {v} outside {lo}..{hi}")


def split_width(out_w: int, kw: int, sw: int, pad_l: int, pad_r: int,
                max_width: int) -> SplitWidth:
    """Strips of an output `out_w` wide, as umd PDPNode::pdpHWSplitWidth cuts them.  The
    overlap between strips is kernel - stride (negative when the stride skips columns), which is
    how the PDP consumes PARTIAL_WIDTH_IN (reference map 5.8)."""
    splits = -(-out_w // max_width)
    first_out = min(max_width, out_w)
    mid_out = 0 if splits == 2 else max_width
    last_out = out_w - first_out - mid_out * (splits - 2)
    overlap = kw - sw
    first_in = (first_out - 1) * sw + kw - pad_l
    last_in = (last_out - 1) * sw + kw - pad_r - overlap
    if last_in <= 0:
        # Move output columns from the first strip to the last until the last reads a column.
        total = first_out + last_out
        last_in = 1
        while (last_in + overlap + pad_r - kw) % sw:
            last_in += 1
        last_out = (last_in + overlap + pad_r - kw) // sw + 1
        first_out = total - last_out
        first_in = (first_out - 1) * sw + kw - pad_l
    mid_in = (mid_out - 1) * sw + kw - overlap if splits > 2 else 0
    if min(first_in, last_in) <= 0 or (splits > 2 and mid_in <= 0) or min(first_out, last_out) <= 0:
        raise NvdlaSimError(f"cannot split a {out_w}-wide PDP output into strips of {max_width}")
    return SplitWidth(splits, first_in, mid_in, last_in, first_out, mid_out, last_out)


def plan_pdp(hw: HardwareConfig, layer: PdpLayer, in_shape: tuple[int, int, int],
             out_shape: tuple[int, int, int], flying: bool = False) -> PdpPlan:
    """Register values for pooling a (C, H, W) input into a (C, H', W') output."""
    if layer.method not in METHODS:
        raise NvdlaSimError(f"{layer.name}: pooling method '{layer.method}' is not one of "
                            f"{', '.join(METHODS)}")
    c, in_h, in_w = in_shape
    c_out, out_h, out_w = out_shape
    if c != c_out:
        raise NvdlaSimError(f"{layer.name}: input has {c} channels, output {c_out}")
    kh, kw = layer.kernel
    sh, sw = layer.stride
    pad_top, pad_left = layer.pad[0], layer.pad[1]
    _check_range(layer, "kernel size", (kh, kw), 1, MAX_KERNEL)
    _check_range(layer, "stride", (sh, sw), 1, MAX_STRIDE)
    _check_range(layer, "padding", (pad_top, pad_left), 0, MAX_PAD)
    dtype = layer.dtype
    if not dtype.is_float:
        _check_range(layer, "padding value", (layer.pad_value,), *dtype.integer_range())
    if pad_top >= kh or pad_left >= kw:
        raise NvdlaSimError(f"{layer.name}: padding ({pad_top}, {pad_left}) must be smaller "
                            f"than the kernel ({kh}, {kw})")
    pad_right = (out_w - 1) * sw + kw - (in_w + pad_left)
    pad_bottom = (out_h - 1) * sh + kh - (in_h + pad_top)
    # The last window ends before the input does: an off-line PDP reads less; a PDP fed on the
    # fly takes the SDP's whole cube (its input registers must match it) and leaves the rest unused.
    if pad_right < 0:
        in_w, pad_right = in_w + (0 if flying else pad_right), 0
    if pad_bottom < 0:
        in_h, pad_bottom = in_h + (0 if flying else pad_bottom), 0
    if pad_right > min(MAX_PAD, kw - 1) or pad_bottom > min(MAX_PAD, kh - 1):
        raise NvdlaSimError(f"{layer.name}: output {out_h}x{out_w} needs bottom/right padding "
                            f"({pad_bottom}, {pad_right}); at most {MAX_PAD} and below the kernel")
    if in_w <= 0 or in_h <= 0:
        raise NvdlaSimError(f"{layer.name}: no input column or row reaches the output windows")
    max_width = max_flying_width(hw, kh, sh, dtype)
    split = None
    if out_w > max_width:
        if flying:
            raise NvdlaSimError(f"{layer.name}: output width {out_w} exceeds the PDP line buffer "
                                f"({max_width}) and PDP fed on the fly by SDP cannot split")
        split = split_width(out_w, kw, sw, pad_left, pad_right, max_width)
        if split.splits > MAX_SPLITS:
            raise NvdlaSimError(f"{layer.name}: {split.splits} split-width strips needed, "
                                f"at most {MAX_SPLITS}")
    pad_values = tuple(pad_register(n * layer.pad_value, dtype) for n in range(1, 8))
    return PdpPlan(layer.method, kh, kw, sh, sw, pad_top, pad_left, pad_bottom, pad_right,
                   in_w, in_h, c, out_w, out_h, split, pad_values, recip(kw, dtype),
                   recip(kh, dtype), dtype)


def _partial(split: SplitWidth | None, kind: str) -> dict[str, int]:
    if split is None:
        return {}
    first, mid, last = ((split.first_in, split.mid_in, split.last_in) if kind == "IN"
                        else (split.first_out, split.mid_out, split.last_out))
    return {f"PARTIAL_WIDTH_{kind}_FIRST": max(first - 1, 0),
            f"PARTIAL_WIDTH_{kind}_MID": max(mid - 1, 0),
            f"PARTIAL_WIDTH_{kind}_LAST": max(last - 1, 0)}


def write_pdp_rdma(b: ProgramBuilder, plan: PdpPlan, src: TensorPlacement) -> None:
    split_num = plan.split.splits - 1 if plan.split else 0
    b.reg("PDP_RDMA", "D_DATA_CUBE_IN_WIDTH", CUBE_IN_WIDTH=plan.in_width - 1)
    b.reg("PDP_RDMA", "D_DATA_CUBE_IN_HEIGHT", CUBE_IN_HEIGHT=plan.in_height - 1)
    b.reg("PDP_RDMA", "D_DATA_CUBE_IN_CHANNEL", CUBE_IN_CHANNEL=plan.channels - 1)
    b.address("PDP_RDMA", "D_SRC_BASE_ADDR_LOW", "D_SRC_BASE_ADDR_HIGH", src.address)
    b.word("PDP_RDMA", "D_SRC_LINE_STRIDE", src.line_stride)
    b.word("PDP_RDMA", "D_SRC_SURFACE_STRIDE", src.surf_stride)
    b.reg("PDP_RDMA", "D_DATA_FORMAT", INPUT_DATA=plan.dtype.name)
    b.reg("PDP_RDMA", "D_SRC_RAM_CFG", SRC_RAM_TYPE=src.ram_type)
    # pdp.c leaves PDP_RDMA's flying mode at its reset (on the fly); the RDMA reads memory, so
    # say so, as the official traces do.
    b.reg("PDP_RDMA", "D_FLYING_MODE", FLYING_MODE="OFF_FLYING")
    b.reg("PDP_RDMA", "D_OPERATION_MODE_CFG", SPLIT_NUM=split_num)
    b.reg("PDP_RDMA", "D_POOLING_KERNEL_CFG", KERNEL_WIDTH=plan.kernel_w - 1,
          KERNEL_STRIDE_WIDTH=plan.stride_w - 1)
    b.reg("PDP_RDMA", "D_POOLING_PADDING_CFG", PAD_WIDTH=plan.pad_left)
    b.reg("PDP_RDMA", "D_PARTIAL_WIDTH_IN", **_partial(plan.split, "IN"))


def write_pdp(b: ProgramBuilder, plan: PdpPlan, src: TensorPlacement | None,
              dst: TensorPlacement) -> None:
    """PDP's own registers; `src` None means the input comes on the fly from SDP."""
    split_num = plan.split.splits - 1 if plan.split else 0
    b.reg("PDP", "D_DATA_CUBE_IN_WIDTH", CUBE_IN_WIDTH=plan.in_width - 1)
    b.reg("PDP", "D_DATA_CUBE_IN_HEIGHT", CUBE_IN_HEIGHT=plan.in_height - 1)
    b.reg("PDP", "D_DATA_CUBE_IN_CHANNEL", CUBE_IN_CHANNEL=plan.channels - 1)
    b.reg("PDP", "D_DATA_CUBE_OUT_WIDTH", CUBE_OUT_WIDTH=plan.out_width - 1)
    b.reg("PDP", "D_DATA_CUBE_OUT_HEIGHT", CUBE_OUT_HEIGHT=plan.out_height - 1)
    b.reg("PDP", "D_DATA_CUBE_OUT_CHANNEL", CUBE_OUT_CHANNEL=plan.channels - 1)
    b.reg("PDP", "D_OPERATION_MODE_CFG", POOLING_METHOD=METHODS[plan.method],
          FLYING_MODE="ON_FLYING" if src is None else "OFF_FLYING", SPLIT_NUM=split_num)
    b.reg("PDP", "D_PARTIAL_WIDTH_IN", **_partial(plan.split, "IN"))
    b.reg("PDP", "D_PARTIAL_WIDTH_OUT", **_partial(plan.split, "OUT"))
    b.reg("PDP", "D_POOLING_KERNEL_CFG", KERNEL_WIDTH=plan.kernel_w - 1,
          KERNEL_HEIGHT=plan.kernel_h - 1, KERNEL_STRIDE_WIDTH=plan.stride_w - 1,
          KERNEL_STRIDE_HEIGHT=plan.stride_h - 1)
    b.reg("PDP", "D_RECIP_KERNEL_WIDTH", RECIP_KERNEL_WIDTH=plan.recip_w)
    b.reg("PDP", "D_RECIP_KERNEL_HEIGHT", RECIP_KERNEL_HEIGHT=plan.recip_h)
    b.reg("PDP", "D_POOLING_PADDING_CFG", PAD_LEFT=plan.pad_left, PAD_RIGHT=plan.pad_right,
          PAD_TOP=plan.pad_top, PAD_BOTTOM=plan.pad_bottom)
    for n, value in enumerate(plan.pad_values, start=1):
        b.reg("PDP", f"D_POOLING_PADDING_VALUE_{n}_CFG", **{f"PAD_VALUE_{n}X": value})
    if src is not None:
        b.word("PDP", "D_SRC_LINE_STRIDE", src.line_stride)
        b.word("PDP", "D_SRC_SURFACE_STRIDE", src.surf_stride)
    b.address("PDP", "D_DST_BASE_ADDR_LOW", "D_DST_BASE_ADDR_HIGH", dst.address)
    b.word("PDP", "D_DST_LINE_STRIDE", dst.line_stride)
    b.word("PDP", "D_DST_SURFACE_STRIDE", dst.surf_stride)
    b.reg("PDP", "D_DST_RAM_CFG", DST_RAM_TYPE=dst.ram_type)
    b.reg("PDP", "D_DATA_FORMAT", INPUT_DATA=plan.dtype.name)


def shape(p: TensorPlacement) -> tuple[int, int, int]:
    return (p.channels, p.height, p.width)


def emit_pdp(b: ProgramBuilder, layer: PdpLayer, src: TensorPlacement,
             dst: TensorPlacement) -> str:
    """One PDP hardware layer reading `src` from memory; returns its completion sync id."""
    for p in (src, dst):
        if p.dtype != layer.dtype:
            raise NvdlaSimError(f"{layer.name}: {p.name} is {p.dtype}, the pooling {layer.dtype}")
    plan = plan_pdp(b.hw, layer, shape(src), shape(dst))
    groups = b.begin_layer(layer.name, ["PDP_RDMA", "PDP"])
    write_pdp_rdma(b, plan, src)
    write_pdp(b, plan, src, dst)
    b.enable("PDP_RDMA")
    b.enable("PDP")
    sync_id = b.intr_notify("PDP", groups["PDP"])
    b.end_layer(sync_id)
    return sync_id
