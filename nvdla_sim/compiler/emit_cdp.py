"""CDP hardware layers (local response normalisation across channels) as NVDLA register writes.

Register order and derivation follow nvdla/sw kmd firmware/cdp.c: CDP_RDMA cube and source, then
the LUT (common.c update_lut), then CDP destination, NORMALZ_LEN = (local_size - 1) / 2 - 1, the
input/output converters and the bypass bits.

`lrn_layer` turns float LRN parameters into an INT8/INT16 layer: the input converter is the
identity (square sums of the integer values), the LUT holds (k + alpha/n * ss * s_in^2)^-beta
(lut.lrn_lut) and the output converter rescales lut * x from s_in / 2^table_bits to the output
scale.  An FP16 layer has no converters; its LUT (lut.lrn_lut_fp16) holds FP16 entries over the
FP32 square sums of the calibrated input range.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..datatype import INT8, DataType
from ..errors import NvdlaSimError
from .. import precision
from .emit import IDENTITY, Converter, ProgramBuilder
from .lut import Lut, lrn_lut, lrn_lut_fp16, write_lut
from .placement import TensorPlacement

LOCAL_SIZES = (3, 5, 7, 9)


@dataclass(frozen=True)
class CdpLayer:
    local_size: int
    lut: Lut | None                      # None: use the LUT already loaded
    in_cvt: Converter = IDENTITY
    out_cvt: Converter = IDENTITY
    sqsum_bypass: bool = False
    mul_bypass: bool = False
    name: str = "cdp"
    dtype: DataType = INT8                # INPUT_DATA(_TYPE): the cube's element type


def lrn_layer(local_size: int, alpha: float, beta: float, k: float, in_scale: float,
              out_scale: float, name: str = "lrn", dtype: DataType = INT8,
              max_abs_input: float | None = None) -> CdpLayer:
    """y = x / (k + alpha/n * sum x^2)^beta.  INT8/INT16 tensors with per-tensor scales: the
    table covers every square sum of the type's values.  FP16 (scales unused, converters the
    identity: the FP16 CDP ignores them): the table covers the square sums of inputs within
    +-max_abs_input (lut.lrn_lut_fp16)."""
    if dtype.is_float:
        if max_abs_input is None:
            raise NvdlaSimError(f"{name}: an FP16 LRN table needs the input range "
                                "(max_abs_input)")
        design = lrn_lut_fp16(local_size, alpha, beta, k, max_abs_input)
        return CdpLayer(local_size, design.lut, name=name, dtype=dtype)
    max_input = -dtype.integer_range()[0]
    design = lrn_lut(local_size, alpha, beta, k, in_scale, max_input)
    ratio = in_scale * design.entry_lsb / out_scale
    scale, shift, fits = precision.fixed_point(ratio)
    if not fits:
        raise NvdlaSimError(f"{name}: output multiplier {ratio:.6g} does not fit a 16-bit scale")
    return CdpLayer(local_size, design.lut, IDENTITY, Converter(0, scale, shift), name=name,
                    dtype=dtype)


def _check(layer: CdpLayer) -> None:
    if layer.local_size not in LOCAL_SIZES:
        raise NvdlaSimError(f"{layer.name}: LRN window {layer.local_size} is not one of "
                            f"{', '.join(map(str, LOCAL_SIZES))}")
    for what, cvt, offset_bits, shift_max in (("input", layer.in_cvt, 8, 31),
                                              ("output", layer.out_cvt, 25, 63)):
        if not -(1 << (offset_bits - 1)) <= cvt.offset < (1 << (offset_bits - 1)) \
                or not -(1 << 15) <= cvt.scale < (1 << 15) or not 0 <= cvt.shift <= shift_max:
            raise NvdlaSimError(f"{layer.name}: {what} converter {cvt} out of range (offset "
                                f"{offset_bits} bits, scale int16, shift 0..{shift_max})")


def emit_cdp(b: ProgramBuilder, layer: CdpLayer, src: TensorPlacement,
             dst: TensorPlacement) -> str:
    """One CDP hardware layer; returns its completion sync id."""
    _check(layer)
    if (src.channels, src.height, src.width) != (dst.channels, dst.height, dst.width):
        raise NvdlaSimError(f"{layer.name}: LRN keeps the cube size; {src.name} is "
                            f"{src.channels}x{src.height}x{src.width}, {dst.name} "
                            f"{dst.channels}x{dst.height}x{dst.width}")
    for p in (src, dst):
        if p.dtype != layer.dtype:
            raise NvdlaSimError(f"{layer.name}: {p.name} is {p.dtype}, the LRN {layer.dtype}")
    precision = layer.dtype.name
    groups = b.begin_layer(layer.name, ["CDP_RDMA", "CDP"])
    b.reg("CDP_RDMA", "D_DATA_CUBE_WIDTH", WIDTH=src.width - 1)
    b.reg("CDP_RDMA", "D_DATA_CUBE_HEIGHT", HEIGHT=src.height - 1)
    b.reg("CDP_RDMA", "D_DATA_CUBE_CHANNEL", CHANNEL=src.channels - 1)
    b.address("CDP_RDMA", "D_SRC_BASE_ADDR_LOW", "D_SRC_BASE_ADDR_HIGH", src.address)
    b.word("CDP_RDMA", "D_SRC_LINE_STRIDE", src.line_stride)
    b.word("CDP_RDMA", "D_SRC_SURFACE_STRIDE", src.surf_stride)
    b.reg("CDP_RDMA", "D_SRC_DMA_CFG", SRC_RAM_TYPE=src.ram_type)
    b.reg("CDP_RDMA", "D_DATA_FORMAT", INPUT_DATA=precision)
    if layer.lut is not None:
        write_lut(b, "CDP", layer.lut)
    b.address("CDP", "D_DST_BASE_ADDR_LOW", "D_DST_BASE_ADDR_HIGH", dst.address)
    b.word("CDP", "D_DST_LINE_STRIDE", dst.line_stride)
    b.word("CDP", "D_DST_SURFACE_STRIDE", dst.surf_stride)
    b.reg("CDP", "D_DST_DMA_CFG", DST_RAM_TYPE=dst.ram_type)
    b.reg("CDP", "D_DATA_FORMAT", INPUT_DATA_TYPE=precision)
    b.reg("CDP", "D_LRN_CFG", NORMALZ_LEN=(layer.local_size - 1) // 2 - 1)
    b.reg("CDP", "D_DATIN_OFFSET", DATIN_OFFSET=layer.in_cvt.offset)
    b.reg("CDP", "D_DATIN_SCALE", DATIN_SCALE=layer.in_cvt.scale)
    b.reg("CDP", "D_DATIN_SHIFTER", DATIN_SHIFTER=layer.in_cvt.shift)
    b.word("CDP", "D_DATOUT_OFFSET", layer.out_cvt.offset)
    b.reg("CDP", "D_DATOUT_SCALE", DATOUT_SCALE=layer.out_cvt.scale)
    b.reg("CDP", "D_DATOUT_SHIFTER", DATOUT_SHIFTER=layer.out_cvt.shift)
    b.reg("CDP", "D_FUNC_BYPASS", SQSUM_BYPASS=int(layer.sqsum_bypass),
          MUL_BYPASS=int(layer.mul_bypass))
    b.enable("CDP_RDMA")
    b.enable("CDP")
    sync_id = b.intr_notify("CDP", groups["CDP"])
    b.end_layer(sync_id)
    return sync_id
