"""CDMA: fetches the input (feature cube or image) and the weights of a convolution into CBUF.

The element type comes from D_MISC_CFG (`conv_precision`): IN_PRECISION is what memory holds,
PROC_PRECISION what CBUF and the MACs hold.  Direct convolution never converts precision (the two
must agree); image input converts integer pixels to any type, float pixels to FP16 only (NVDLA
in-memory data formats, precision conversion).  A memory atom holds `memory_atomic_bytes / bytes`
elements (32 INT8 or 16 INT16/FP16 channels on nv_full).

Feature input is read as whole atoms (layout.read_cube) and, with CVT_EN, converted element by
element (INT8/INT16: sat(round((x - offset) * scale / 2^truncate)); FP16 passes unconverted, as
the C model's converter does); image input (DATAIN_FORMAT = PIXEL) is read line by line from DAIN_ADDR_0, its bytes
reordered so CBUF holds R,G,B,A (Y,U,V,A), converted with the per-element mean (MEAN_FORMAT) or
CVT_OFFSET to INT8, INT16 or FP16 (the converter's 17-bit result rounded to nearest even; without
CVT_EN a pixel byte enters a 16-bit lane sign-extended), and padded left and right with
ZERO_PADDING_VALUE (INT8: its low byte; padding is never converted).  Every single-plane
pitch-linear pixel format is modelled: 8-bit, 16-bit (R10/R12/R16, A16B16G16R16, A16Y16U16V16,
V16U16Y16A16), FP16 (R16_F, *_F: passed unconverted) and 10-bit packed (A2B10G10R10 and kin, each
field MSB-aligned in 16 bits); semi-planar formats are not.  Winograd input (CONV_MODE=WINOGRAD)
is padded and channel-extended by the stride as CBUF holds it (load_winograd).  Weights are copied
verbatim; compressed weights (WEIGHT_FORMAT=COMPRESSED) are expanded from the WMB bit masks, WGS
group sizes and the non-zero elements (decompress_weights) -- the timing fetches the compressed
bytes plus WMB and WGS.  When data and weights are in CBUF the CDMA raises
CDMA_DAT and CDMA_WT and hands the CSC a reference to what it loaded on "cdma->csc".

DATA_REUSE / WEIGHT_REUSE keep what the previous layer left in CBUF (it must have set
SKIP_DATA_RLS / SKIP_WEIGHT_RLS on the same banks and input format), as the hardware does.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Generator

import numpy as np

from ..datatype import FP16, INT8, INT16, DataType, from_code, require_supported
from ..errors import NvdlaSimError
from ..kernels.conv import convert_feature, convert_pixels
from ..kernels.nvfloat_py import int_to_fp16
from ..layout import read_cube, surfaces
from ..regs import GroupView
from ..timing import conv as conv_timing
from .base import Unit
from .cbuf import FEATURE, PIXEL, WINOGRAD, Cbuf, CbufData
from .cdma_gating import WeightClock

CHANNEL_CSC = "cdma->csc"

CONV_MODE_DIRECT = 0
WINOGRAD_TILE = 4               # input rows/columns of one Winograd tile (2x2 outputs)
DATAIN_FEATURE, DATAIN_PIXEL = 0, 1
WEIGHT_UNCOMPRESSED = 0
PIXEL_PITCH_LINEAR = 0


@dataclass(frozen=True)
class PixelLayout:
    name: str
    bytes_per_pixel: int
    byte_order: tuple[int, ...]   # memory element of each CBUF element (R,G,B,A or Y,U,V,A
                                  # order), in units of element_bytes
    element_bytes: int = 1        # 1: 8-bit, 2: 16-bit components
    in_type: DataType = INT8      # IN_PRECISION the format needs (FP16: float components)
    fields: tuple = ()            # 10-bit packed: (shift, bits) of each CBUF element in the
                                  # 32-bit pixel, read MSB-aligned into 16 bits

    @property
    def elements(self) -> int:
        return len(self.fields or self.byte_order)


def _p16(name: str, elements: tuple, in_type: DataType = INT16) -> PixelLayout:
    return PixelLayout(name, 2 * len(elements), elements, 2, in_type)


def _p10(name: str, fields: tuple) -> PixelLayout:
    return PixelLayout(name, 4, (0, 1, 2, 3), 4, INT16, fields)


# PIXEL_FORMAT codes modelled: the single-plane (packed) pitch-linear formats of the register map.
# 16-bit components are unsigned unless PIXEL_SIGN_OVERRIDE (R16_I too, as the C model reads it);
# the semi-planar Y___UV formats are not modelled.
PIXEL_LAYOUTS = {
    0: PixelLayout("R8", 1, (0,)),
    12: PixelLayout("A8B8G8R8", 4, (0, 1, 2, 3)),
    16: PixelLayout("X8B8G8R8", 4, (0, 1, 2, 3)),
    13: PixelLayout("A8R8G8B8", 4, (2, 1, 0, 3)),
    17: PixelLayout("X8R8G8B8", 4, (2, 1, 0, 3)),
    26: PixelLayout("A8Y8U8V8", 4, (2, 1, 0, 3)),
    14: PixelLayout("B8G8R8A8", 4, (1, 2, 3, 0)),
    18: PixelLayout("B8G8R8X8", 4, (1, 2, 3, 0)),
    27: PixelLayout("V8U8Y8A8", 4, (1, 2, 3, 0)),
    15: PixelLayout("R8G8B8A8", 4, (3, 2, 1, 0)),
    19: PixelLayout("R8G8B8X8", 4, (3, 2, 1, 0)),
    1: _p16("R10", (0,)), 2: _p16("R12", (0,)), 3: _p16("R16", (0,)), 4: _p16("R16_I", (0,)),
    5: _p16("R16_F", (0,), FP16),
    6: _p16("A16B16G16R16", (0, 1, 2, 3)), 7: _p16("X16B16G16R16", (0, 1, 2, 3)),
    8: _p16("A16B16G16R16_F", (0, 1, 2, 3), FP16),
    9: _p16("A16Y16U16V16", (2, 1, 0, 3)), 11: _p16("A16Y16U16V16_F", (2, 1, 0, 3), FP16),
    10: _p16("V16U16Y16A16", (1, 2, 3, 0)),
    20: _p10("A2B10G10R10", ((0, 10), (10, 10), (20, 10), (30, 2))),
    21: _p10("A2R10G10B10", ((20, 10), (10, 10), (0, 10), (30, 2))),
    24: _p10("A2Y10U10V10", ((20, 10), (10, 10), (0, 10), (30, 2))),
    22: _p10("B10G10R10A2", ((2, 10), (12, 10), (22, 10), (0, 2))),
    25: _p10("V10U10Y10A2", ((2, 10), (12, 10), (22, 10), (0, 2))),
    23: _p10("R10G10B10A2", ((22, 10), (12, 10), (2, 10), (0, 2))),
}


@dataclass(frozen=True)
class CbufLoad:
    """What the CDMA hands the CSC for one layer (references into CBUF)."""
    data: CbufData
    weights: np.ndarray           # uint8, WEIGHT_BYTES


def is_winograd(unit: Unit, view: GroupView) -> bool:
    """D_MISC_CFG.CONV_MODE: direct (False) or Winograd (True, where the configuration has it)."""
    if view.field("D_MISC_CFG", "CONV_MODE") == CONV_MODE_DIRECT:
        return False
    if not unit.hw.features.winograd:
        raise unit.unsupported(f"CONV_MODE=WINOGRAD: {unit.hw.name} has no Winograd feature")
    return True


def conv_precision(unit: Unit, view: GroupView) -> DataType:
    """Shared by CDMA, CSC, CMAC and CACC: the element type the MACs work in (PROC_PRECISION) of
    a direct, image or Winograd layer.  CDMA and CSC also check IN_PRECISION against it:
    feature input is never converted; image pixels are, except float ones to anything but FP16."""
    is_winograd(unit, view)
    where = f"{unit.block}.D_MISC_CFG"
    proc = from_code(view.field("D_MISC_CFG", "PROC_PRECISION"), f"{where}.PROC_PRECISION")
    require_supported(proc, unit.hw.data_types, unit.hw.name, f"{where}.PROC_PRECISION")
    if unit.block not in ("CDMA", "CSC"):
        return proc                                     # CMAC, CACC: no input side
    inp = from_code(view.field("D_MISC_CFG", "IN_PRECISION"), f"{where}.IN_PRECISION")
    require_supported(inp, unit.hw.data_types, unit.hw.name, f"{where}.IN_PRECISION")
    image = view.field("D_DATAIN_FORMAT", "DATAIN_FORMAT") == DATAIN_PIXEL
    if image and inp.is_float and not proc.is_float:
        raise NvdlaSimError(f"{where}: IN_PRECISION={inp} with PROC_PRECISION={proc}: float images "
                            "convert to FP16 only")
    if not image and inp != proc:
        raise NvdlaSimError(f"{where}: IN_PRECISION={inp} with PROC_PRECISION={proc}: direct "
                            "convolution does not convert precision (they must be equal)")
    return proc


def weight_compressed(unit: Unit, view: GroupView) -> bool:
    """D_WEIGHT_FORMAT: uncompressed (False) or sparse-compressed (True, where the configuration
    has weight compression)."""
    if view.field("D_WEIGHT_FORMAT", "WEIGHT_FORMAT") == WEIGHT_UNCOMPRESSED:
        return False
    if not unit.hw.features.weight_compression:
        raise unit.unsupported(f"WEIGHT_FORMAT=COMPRESSED: {unit.hw.name} has no weight "
                               "compression")
    return True


def wgs_bytes(kernels: int, group: int, atom_bytes: int) -> int:
    """Bytes the CDMA reads for the WGS: one 32-bit size per kernel group, whole atoms."""
    return -(-(-(-kernels // group) * 4) // atom_bytes) * atom_bytes


def kernels_per_group(hw, dtype: DataType) -> int:
    """Kernels of one atomic operation: a MAC cell computes two INT8 kernels or one 16-bit one,
    so INT16/FP16 kernel groups hold ATOMIC_K / 2 kernels (weight layout groups alike)."""
    return hw.atomic_k // dtype.bytes


def atom_elements(hw, dtype: DataType) -> int:
    """Channels in one memory atom of this element type."""
    return dtype.elements_per_atom(hw.memory_atomic_bytes)


def batch_count(unit: Unit, view: GroupView) -> int:
    """D_BATCH_NUMBER.BATCHES + 1: images the layer runs through the same weights (direct
    convolution of feature input only, where the configuration has the batch feature)."""
    batches = view.field("D_BATCH_NUMBER", "BATCHES") + 1
    if batches == 1:
        return 1
    if not unit.hw.features.batch:
        raise unit.unsupported(f"BATCHES={batches}: this configuration has no batch feature")
    if view.field("D_MISC_CFG", "CONV_MODE") != CONV_MODE_DIRECT:
        raise unit.unsupported(f"BATCHES={batches} with Winograd convolution (batches are for "
                               "direct convolution)")
    if unit.block in ("CDMA", "CSC") and \
            view.field("D_DATAIN_FORMAT", "DATAIN_FORMAT") != DATAIN_FEATURE:
        raise unit.unsupported(f"BATCHES={batches} with image input (batches are for feature "
                               "input)")
    return batches


def int8_low_byte(value: int) -> int:
    """The low byte of a 16-bit padding value as the INT8 datapath uses it."""
    v = value & 0xFF
    return v - 256 if v >= 128 else v


def pad_element(value: int, dtype: DataType):
    """A 16-bit ZERO_PADDING_VALUE as one element: INT8 its low byte, INT16 all 16 bits signed,
    FP16 all 16 bits as a binary16 pattern."""
    if dtype == INT8:
        return np.int8(int8_low_byte(value))
    bits = np.array([value & 0xFFFF], np.uint16)
    return bits.view(dtype.numpy)[0]


class Cdma(Unit):
    block = "CDMA"
    interrupt = None          # raises CDMA_DAT and CDMA_WT itself

    def __init__(self, engine):
        super().__init__(engine)
        self.cbuf = Cbuf(self.hw)
        # The CBUF comes out of reset flushed; traces poll FLUSH_DONE before the first layer.
        self.regs.set_word("S_CBUF_FLUSH_STATUS", 1)
        # wt_wr_dmatx_cnt's gated clock: releases it misses with clock_gating on (cdma_gating.py)
        self.weight_clock = WeightClock(self.hw.clock_gating)
        self._last_banks = (31, 31)     # RTL reset value of CDMA's last data/weight bank

    def pending(self, view: GroupView) -> Generator:
        """RTL CDMA_wt/dc PEND state: a layer whose D_BANK split differs from the previous layer's
        waits for CSC's pending request, which CSC sends when it starts that layer.  Modelled
        when CSC is still running an earlier layer (a CDMA layer enabled ahead of time): CDMA
        then fetches nothing until CSC has finished it and its next OP_ENABLE arrives.  A CSC
        that is idle answers within cycles (inside the calibrated CDMA start)."""
        banks = (view.field("D_BANK", "DATA_BANK"), view.field("D_BANK", "WEIGHT_BANK"))
        last, self._last_banks = self._last_banks, banks
        csc = self.engine.units["CSC"]
        current = csc.stats["layers"]            # the layer CSC runs or waits to start
        idle = (csc.waiting_for or "").startswith("its D_OP_ENABLE")
        if banks == last or idle or current >= self.stats["layers"]:
            return
        self.waiting_for = "CSC to start its next layer (D_BANK changed: pending)"
        done = self.engine.timing.layer("conv", current)["done"]
        if not done.triggered:
            yield done
        start = csc.enable_event((current + 1) % 2)   # units alternate their groups from 0
        if not start.triggered:
            yield start
        self.waiting_for = None

    def describe_wait(self) -> str | None:
        hang = self.weight_clock.enabled and self.weight_clock.describe_hang(
            self.engine.timing.pool(conv_timing.POOL_WEIGHT, 1))
        return hang or super().describe_wait()

    def execute(self, view: GroupView) -> Generator:
        self.weight_clock.start(self.env.now)
        yield from self.pending(view)
        dtype = conv_precision(self, view)
        compressed = weight_compressed(self, view)
        batches = batch_count(self, view)
        self.cbuf.allocate(view.field("D_BANK", "DATA_BANK") + 1,
                           view.field("D_BANK", "WEIGHT_BANK") + 1)
        fmt = view.field("D_DATAIN_FORMAT", "DATAIN_FORMAT")
        if fmt not in (DATAIN_FEATURE, DATAIN_PIXEL):
            raise self.unsupported(f"DATAIN_FORMAT={fmt}")
        winograd = is_winograd(self, view)
        if winograd and fmt != DATAIN_FEATURE:
            raise NvdlaSimError("CDMA.D_DATAIN_FORMAT.DATAIN_FORMAT: Winograd convolution takes "
                                "feature input, not pixels")
        key = (fmt, self.cbuf.split, dtype, winograd, batches)
        # -- data ------------------------------------------------------------------------------
        reuse = view.field("D_MISC_CFG", "DATA_REUSE") and self.cbuf.retained_key == key \
            and self.cbuf.data is not None
        read_bytes = 0
        if not reuse:
            data, read_bytes = self.load_winograd(view, dtype) if winograd else \
                self.load_input(view, fmt, dtype, batches)
            self.cbuf.check_data_fits(data.entries, f"{data.kind} input")
            self.cbuf.store_data(data)
        self.cbuf.retained_key = key if view.field("D_MISC_CFG", "SKIP_DATA_RLS") else None
        # -- weights ---------------------------------------------------------------------------
        kernels = view.field("D_WEIGHT_SIZE_1", "WEIGHT_KERNEL") + 1
        byte_per_kernel = view.field("D_WEIGHT_SIZE_0", "BYTE_PER_KERNEL") + 1
        weight_bytes = view.word("D_WEIGHT_BYTES")
        keep_all = bool(view.field("D_MISC_CFG", "SKIP_WEIGHT_RLS"))
        group = kernels_per_group(self.hw, dtype)
        self.cbuf.check_weights_fit(weight_bytes, min(kernels, group) * byte_per_kernel, keep_all,
                                    compressed)
        reuse_weights = view.field("D_MISC_CFG", "WEIGHT_REUSE") and self.cbuf.weights is not None \
            and self.cbuf.retained_weight_key == key
        if not reuse_weights and not self.engine.compute_values:
            self.cbuf.store_weights(np.zeros(0, np.uint8))     # timing only: sizes, no bytes
        elif not reuse_weights:
            ram_type = view.field("D_WEIGHT_RAM_TYPE", "WEIGHT_RAM_TYPE")
            raw = self.engine.memory.space(ram_type).read(
                view.addr("D_WEIGHT_ADDR_LOW", "D_WEIGHT_ADDR_HIGH"), weight_bytes)
            raw = np.array(raw, dtype=np.uint8)
            if compressed:
                raw = self.decompress_weights(view, raw, kernels, byte_per_kernel, group, dtype)
            self.cbuf.store_weights(raw)
            if dtype.is_float:
                self.count_weight_specials(view, self.cbuf.weights)
        self.cbuf.retained_weight_key = key if keep_all else None
        yield from self.send(CHANNEL_CSC, CbufLoad(self.cbuf.data, self.cbuf.weights))
        # -- timing: both channels fetch into the CBUF banks -------------------------------------
        geom = conv_timing.cdma_geometry(
            self.hw, data_bytes=read_bytes, data_entries=self.cbuf.data.entries,
            weight_bytes=0 if reuse_weights else weight_bytes, byte_per_kernel=byte_per_kernel,
            kernels=kernels, kernel_group=group, compressed=compressed,
            mask_bytes=0 if reuse_weights or not compressed else
            view.word("D_WMB_BYTES") + wgs_bytes(kernels, group, self.hw.memory_atomic_bytes), data_banks=self.cbuf.split.data_banks,
            weight_banks=self.cbuf.split.weight_banks,
            data_ram_type=view.field("D_DAIN_RAM_TYPE", "DATAIN_RAM_TYPE"),
            weight_ram_type=view.field("D_WEIGHT_RAM_TYPE", "WEIGHT_RAM_TYPE"),
            keep_data=bool(view.field("D_MISC_CFG", "SKIP_DATA_RLS")), keep_weights=keep_all)
        glb = self.engine.glb
        rates = self.engine.timing.params.rates
        self.weight_clock.begin_fetch(self.stats["layers"], [
            a * rates.atom_bytes / rates.cbuf_entry_bytes for a in geom.group_atoms])
        yield from conv_timing.cdma(
            self, geom, on_data_done=lambda: glb.raise_interrupt("CDMA_DAT", view.group),
            on_weight_done=lambda: glb.raise_interrupt("CDMA_WT", view.group))
        self.weight_clock.stop(self.env.now)

    def decompress_weights(self, view: GroupView, raw: np.ndarray, kernels: int,
                           byte_per_kernel: int, group: int, dtype: DataType) -> np.ndarray:
        """The uncompressed weight stream (kernels x BYTE_PER_KERNEL bytes, the layout of the
        layer's weight format) from the compressed one: WMB holds one bit per element, least
        significant bit first, 1 for a non-zero element; the compressed surface holds the
        non-zero elements in order, one stream over all kernel groups.  WGS holds each group's
        compressed bytes (32 bits, little-endian), checked against the WMB."""
        elements = kernels * byte_per_kernel // dtype.bytes
        space = self.engine.memory.space(view.field("D_WEIGHT_RAM_TYPE", "WEIGHT_RAM_TYPE"))
        wmb_bytes = view.word("D_WMB_BYTES")
        if wmb_bytes * 8 < elements:
            raise NvdlaSimError(f"CDMA.D_WMB_BYTES: {wmb_bytes} bytes of mask bits cannot tag "
                                f"the layer's {elements} weight elements")
        wmb = np.array(space.read(view.addr("D_WMB_ADDR_LOW", "D_WMB_ADDR_HIGH"), wmb_bytes),
                       dtype=np.uint8)
        present = np.unpackbits(wmb, bitorder="little")[:elements].astype(bool)
        values = raw[:raw.size - raw.size % dtype.bytes].view(np.dtype(f"<u{dtype.bytes}"))
        count = int(present.sum())
        if count > values.size:
            raise NvdlaSimError(f"CDMA.D_WEIGHT_BYTES: the WMB tags {count} non-zero weights "
                                f"({count * dtype.bytes} bytes) but WEIGHT_BYTES is {raw.size}")
        n_groups = -(-kernels // group)
        wgs = np.array(space.read(view.addr("D_WGS_ADDR_LOW", "D_WGS_ADDR_HIGH"), 4 * n_groups),
                       dtype=np.uint8).view("<u4")
        per_group = group * byte_per_kernel // dtype.bytes
        for g in range(n_groups):
            expected = int(present[g * per_group:(g + 1) * per_group].sum()) * dtype.bytes
            if int(wgs[g]) != expected:
                raise NvdlaSimError(f"CDMA.D_WGS_ADDR: kernel group {g} has {expected} bytes of "
                                    f"non-zero weights (WMB) but its WGS says {int(wgs[g])}")
        out = np.zeros(elements, values.dtype)
        out[present] = values[:count]
        return out.view(np.uint8)

    def load_input(self, view: GroupView, fmt: int, dtype: DataType,
                   batches: int = 1) -> tuple[CbufData, int]:
        """The input as CBUF holds it (entries; in values mode also its bytes, converted) and the
        bytes CDMA_DAT reads for it.  Timing-only runs get the same sizes and checks, no array.
        With batches, feature cubes BATCH_STRIDE apart: the array gets a leading batch axis."""
        width = view.field("D_DATAIN_SIZE_0", "DATAIN_WIDTH") + 1
        height = view.field("D_DATAIN_SIZE_0", "DATAIN_HEIGHT") + 1
        channels = view.field("D_DATAIN_SIZE_1", "DATAIN_CHANNEL") + 1
        entries = (view.field("D_ENTRY_PER_SLICE", "ENTRIES") + 1) * height
        atom = self.hw.memory_atomic_bytes
        values = self.engine.compute_values
        if fmt == DATAIN_FEATURE:
            n_surf = surfaces(channels, atom_elements(self.hw, dtype))
            read_bytes = n_surf * atom * height * width * batches
            cube = None
            if batches > 1:
                stride = view.word("D_BATCH_STRIDE")
                if stride < view.word("D_SURF_STRIDE") * n_surf:
                    raise NvdlaSimError(f"CDMA.D_BATCH_STRIDE: {stride} bytes between batches is "
                                        f"less than the {n_surf} surfaces of one cube")
                if values:
                    cube = self.read_feature(view, width, height, channels, dtype, batches)
            elif values:
                cube = self.read_feature(view, width, height, channels, dtype)
            return CbufData(FEATURE, cube, entries * batches, dtype=dtype,
                            batches=batches), read_bytes
        layout = self.pixel_layout(view, channels, dtype)
        x_offset = view.field("D_PIXEL_OFFSET", "PIXEL_X_OFFSET")
        read_bytes = height * -(-((x_offset + width) * layout.bytes_per_pixel) // atom) * atom
        lines = self.read_pixels(view, layout, width, height, x_offset, dtype) if values else None
        return CbufData(PIXEL, lines, entries, channels, dtype), read_bytes

    # -- Winograd input ------------------------------------------------------------------------
    def load_winograd(self, view: GroupView, dtype: DataType) -> tuple[CbufData, int]:
        """Winograd input as the CDMA writes it into CBUF: the cube padded on all four sides with
        ZERO_PADDING_VALUE (INT8: its low byte; no converter), then channel-extended by the
        convolution stride (input row y * SY + i, column x * SX + j goes to row y, column x of
        phase i * SX + j; the phases' channels, whole atoms each, follow one another), so a
        strided layer becomes a stride-1 one.  The padded size must be a multiple of 4 x stride;
        only pixels inside the cube are read from memory."""
        if view.field("D_CVT_CFG", "CVT_EN"):
            raise self.unsupported("CVT_EN with Winograd convolution (the C model's Winograd "
                                   "path has no input converter)")
        width = view.field("D_DATAIN_SIZE_0", "DATAIN_WIDTH") + 1
        height = view.field("D_DATAIN_SIZE_0", "DATAIN_HEIGHT") + 1
        channels = view.field("D_DATAIN_SIZE_1", "DATAIN_CHANNEL") + 1
        sx = view.field("D_CONV_STRIDE", "CONV_X_STRIDE") + 1
        sy = view.field("D_CONV_STRIDE", "CONV_Y_STRIDE") + 1
        left, right = view.field("D_ZERO_PADDING", "PAD_LEFT"), view.field("D_ZERO_PADDING", "PAD_RIGHT")
        top, bottom = view.field("D_ZERO_PADDING", "PAD_TOP"), view.field("D_ZERO_PADDING", "PAD_BOTTOM")
        total_w, total_h = left + width + right, top + height + bottom
        if total_w % (WINOGRAD_TILE * sx) or total_h % (WINOGRAD_TILE * sy):
            raise NvdlaSimError(
                f"CDMA.D_ZERO_PADDING: Winograd input padded to {total_w}x{total_h} must be a "
                f"multiple of 4 x CONV_X_STRIDE ({4 * sx}) wide and 4 x CONV_Y_STRIDE ({4 * sy}) "
                "high")
        atom = atom_elements(self.hw, dtype)
        n_surf = surfaces(channels, atom)
        ext_w, ext_h = total_w // sx, total_h // sy
        slice_entries = ext_w // WINOGRAD_TILE * n_surf * sx * sy
        if view.field("D_ENTRY_PER_SLICE", "ENTRIES") + 1 != slice_entries:
            raise NvdlaSimError(
                f"CDMA.D_ENTRY_PER_SLICE.ENTRIES: a Winograd input {ext_w} wide after extension "
                f"with {n_surf * sx * sy} atoms of channels needs ENTRIES={slice_entries - 1}")
        read_bytes = n_surf * self.hw.memory_atomic_bytes * height * width
        entries = slice_entries * ext_h
        if not self.engine.compute_values:
            return CbufData(WINOGRAD, None, entries, dtype=dtype), read_bytes
        cube = read_cube(self.engine.memory.space(view.field("D_DAIN_RAM_TYPE", "DATAIN_RAM_TYPE")),
                         view.addr("D_DAIN_ADDR_LOW_0", "D_DAIN_ADDR_HIGH_0"), width, height,
                         channels, view.word("D_LINE_STRIDE"), view.word("D_SURF_STRIDE"),
                         atom, dtype.numpy)
        pad = view.field("D_ZERO_PADDING_VALUE", "PAD_VALUE")
        if dtype.bytes == 2:                   # 16-bit lanes: the pad value's bits
            cube, pad = cube.view(np.uint16), np.uint16(pad & 0xFFFF)
        else:
            pad = np.int8(int8_low_byte(pad))
        padded = np.full((cube.shape[0], total_h, total_w), pad, cube.dtype)
        padded[:, top:top + height, left:left + width] = cube
        if dtype.is_float:                    # NaN/INF counted over what CBUF receives
            padded = self.float_input(view, padded.view(np.float16)).view(np.uint16)
        lanes = padded.shape[0]
        ext = padded.reshape(lanes, ext_h, sy, ext_w, sx).transpose(2, 4, 0, 1, 3)
        ext = np.ascontiguousarray(ext).reshape(sy * sx * lanes, ext_h, ext_w).view(dtype.numpy)
        return CbufData(WINOGRAD, ext, entries, dtype=dtype), read_bytes

    # -- feature input -------------------------------------------------------------------------
    def read_feature(self, view: GroupView, width: int, height: int, channels: int,
                     dtype: DataType, batches: int = 1) -> np.ndarray:
        """The feature cube (with batches: (N, lanes, H, W), images BATCH_STRIDE apart),
        through the converter; FP16 NaN/INF counted over every image."""
        space = self.engine.memory.space(view.field("D_DAIN_RAM_TYPE", "DATAIN_RAM_TYPE"))
        base = view.addr("D_DAIN_ADDR_LOW_0", "D_DAIN_ADDR_HIGH_0")
        cubes = [read_cube(space, base + b * view.word("D_BATCH_STRIDE"), width, height,
                           channels, view.word("D_LINE_STRIDE"), view.word("D_SURF_STRIDE"),
                           atom_elements(self.hw, dtype), dtype.numpy) for b in range(batches)]
        if dtype.is_float:
            return self.float_input(view, cubes[0] if batches == 1 else np.stack(cubes))
        if batches > 1:
            return np.stack([self.convert_cube(view, cube) for cube in cubes])
        return self.convert_cube(view, cubes[0])

    def convert_cube(self, view: GroupView, cube: np.ndarray) -> np.ndarray:
        """INT8/INT16 feature input through the CDMA converter (CVT_EN)."""
        if view.field("D_CVT_CFG", "CVT_EN"):
            cube = np.ascontiguousarray(cube)
            converted = np.empty_like(cube)
            convert_feature(cube, converted, view.sfield("D_CVT_OFFSET", "CVT_OFFSET"),
                            view.sfield("D_CVT_SCALE", "CVT_SCALE"),
                            view.field("D_CVT_CFG", "CVT_TRUNCATE"))
            cube = converted
        return cube

    def float_input(self, view: GroupView, cube: np.ndarray) -> np.ndarray:
        """FP16 feature input: NaNs and infinities of every lane read are counted
        (D_NAN_INPUT_DATA_NUM, D_INF_INPUT_DATA_NUM); NAN_TO_ZERO flushes NaNs to +0.  Values pass
        the converter unchanged; INF is an ordinary exponent to the MACs (+-65536)."""
        bits = np.ascontiguousarray(cube).view(np.uint16)
        nan = fp16_nan_mask(bits)
        inf = (bits & 0x7FFF) == 0x7C00
        self.regs.set_word("D_NAN_INPUT_DATA_NUM", int(nan.sum()), view.group)
        self.regs.set_word("D_INF_INPUT_DATA_NUM", int(inf.sum()), view.group)
        if view.field("D_NAN_FLUSH_TO_ZERO", "NAN_TO_ZERO") and nan.any():
            bits = np.where(nan, np.uint16(0), bits)
        return bits.view(np.float16)

    def count_weight_specials(self, view: GroupView, raw: np.ndarray) -> None:
        """FP16 weights: NaN and infinity counts (the hardware counts, never flushes them)."""
        bits = raw[:raw.size - raw.size % 2].view("<u2")
        self.regs.set_word("D_NAN_INPUT_WEIGHT_NUM", int(fp16_nan_mask(bits).sum()), view.group)
        self.regs.set_word("D_INF_INPUT_WEIGHT_NUM", int(((bits & 0x7FFF) == 0x7C00).sum()),
                           view.group)

    # -- image input ---------------------------------------------------------------------------
    def pixel_layout(self, view: GroupView, channels: int, dtype: DataType) -> PixelLayout:
        """The image format the registers name, if it is one this model reads."""
        code = view.field("D_DATAIN_FORMAT", "PIXEL_FORMAT")
        layout = PIXEL_LAYOUTS.get(code)
        if layout is None:
            raise self.unsupported(f"PIXEL_FORMAT={code}: semi-planar (Y___UV) images are not "
                                   "modelled, only single-plane pitch-linear formats")
        in_type = from_code(view.field("D_MISC_CFG", "IN_PRECISION"),
                            "CDMA.D_MISC_CFG.IN_PRECISION")
        if in_type != layout.in_type:
            raise NvdlaSimError(f"CDMA.D_MISC_CFG.IN_PRECISION: PIXEL_FORMAT={layout.name} "
                                f"holds {layout.in_type} components, so it must be "
                                f"{layout.in_type}")
        if view.field("D_DATAIN_FORMAT", "PIXEL_MAPPING") != PIXEL_PITCH_LINEAR:
            raise self.unsupported("PIXEL_MAPPING=RESERVED_LINEAR (only pitch-linear images)")
        if channels != layout.elements:
            raise self.unsupported(f"DATAIN_CHANNEL={channels} with {layout.name} pixels "
                                   f"({layout.elements} elements each)")
        return layout

    def pixel_means(self, view: GroupView, elements: int) -> np.ndarray:
        """Per-element means (MEAN_FORMAT: MEAN_RY, GU, BV, AX) or CVT_OFFSET for all."""
        if view.field("D_MEAN_FORMAT", "MEAN_FORMAT"):
            means = [view.sfield("D_MEAN_GLOBAL_0", "MEAN_RY"),
                     view.sfield("D_MEAN_GLOBAL_0", "MEAN_GU"),
                     view.sfield("D_MEAN_GLOBAL_1", "MEAN_BV"),
                     view.sfield("D_MEAN_GLOBAL_1", "MEAN_AX")][:elements]
        else:
            means = [view.sfield("D_CVT_OFFSET", "CVT_OFFSET")] * elements
        return np.array(means, np.int64)

    def read_pixels(self, view: GroupView, layout: PixelLayout, width: int, height: int,
                    x_offset: int, dtype: DataType) -> np.ndarray:
        """CBUF image lines: the pixels read, converted, and padded left and right.

        FP16 components pass unconverted (the C model's and RTL's converter bypasses FP16
        input, means included), after NaN/INF counting and NAN_TO_ZERO.  Integer components
        (unsigned, or signed with PIXEL_SIGN_OVERRIDE) with CVT_EN: sat(round((p - mean) *
        scale / 2^truncate)) to INT8/INT16, or the 17-bit result to FP16 (nearest even,
        saturating at +-65504); without CVT_EN a component's bits enter the lane (8-bit ones
        sign-extended into 16-bit lanes, 16-bit ones cut to their low byte for INT8)."""
        space = self.engine.memory.space(view.field("D_DAIN_RAM_TYPE", "DATAIN_RAM_TYPE"))
        base = view.addr("D_DAIN_ADDR_LOW_0", "D_DAIN_ADDR_HIGH_0")
        components = read_pixel_lines(space, base, view.word("D_LINE_STRIDE"), width, height,
                                      x_offset, layout)
        if layout.in_type == FP16:
            self.count_pixel_specials(view, space, base, layout, width, height, x_offset)
            bits = components
            if view.field("D_NAN_FLUSH_TO_ZERO", "NAN_TO_ZERO"):
                bits = np.where(fp16_nan_mask(bits), np.uint16(0), bits)
            pixels = bits.view(np.float16)
        elif view.field("D_CVT_CFG", "CVT_EN"):
            out_type = {INT8: np.int8, INT16: np.int16, FP16: np.int32}[dtype]
            pixels = np.empty(components.shape, out_type)
            convert_pixels(components, pixels, self.pixel_means(view, layout.elements),
                           view.sfield("D_CVT_SCALE", "CVT_SCALE"),
                           view.field("D_CVT_CFG", "CVT_TRUNCATE"),
                           bool(view.field("D_DATAIN_FORMAT", "PIXEL_SIGN_OVERRIDE")))
            if dtype == FP16:             # the converter's int17 -> FP16 (one rule: nvfloat)
                pixels = int_to_fp16(pixels.astype(np.int64), 17).view(np.float16)
        elif layout.element_bytes == 1:
            # Unconverted 8-bit pixels enter a 16-bit lane sign-extended (their bits as FP16).
            pixels = components.view(np.int8).astype(np.int16).view(dtype.numpy) \
                if dtype.bytes == 2 else components.view(np.int8)
        else:
            pixels = components.view(np.int16).view(dtype.numpy) if dtype.bytes == 2 else \
                (components & 0xFF).astype(np.uint8).view(np.int8)
        pad = pad_element(view.field("D_ZERO_PADDING_VALUE", "PAD_VALUE"), dtype)
        return pad_pixel_lines(pixels, view.field("D_ZERO_PADDING", "PAD_LEFT"),
                               view.field("D_ZERO_PADDING", "PAD_RIGHT"), pad)

    def count_pixel_specials(self, view: GroupView, space, base: int, layout: PixelLayout,
                             width: int, height: int, x_offset: int) -> None:
        """FP16 images: NaN and INF elements from the first pixel (X offset) to the end of each
        line's last 32-byte atom, as the C model counts them."""
        atom = self.hw.memory_atomic_bytes
        first = x_offset * layout.bytes_per_pixel
        end = -(-(x_offset + width) * layout.bytes_per_pixel // atom) * atom
        stride = view.word("D_LINE_STRIDE")
        raw = space.read(base, (height - 1) * stride + end)
        lines = np.stack([raw[y * stride + first:y * stride + end] for y in range(height)])
        bits = np.ascontiguousarray(lines).view("<u2")
        self.regs.set_word("D_NAN_INPUT_DATA_NUM", int(fp16_nan_mask(bits).sum()), view.group)
        self.regs.set_word("D_INF_INPUT_DATA_NUM", int(((bits & 0x7FFF) == 0x7C00).sum()),
                           view.group)


def fp16_nan_mask(bits: np.ndarray) -> np.ndarray:
    """NaN binary16 patterns: exponent all ones, fraction not zero."""
    return ((bits & 0x7C00) == 0x7C00) & ((bits & 0x03FF) != 0)


def read_pixel_lines(space, base: int, line_stride: int, width: int, height: int, x_offset: int,
                     layout: PixelLayout) -> np.ndarray:
    """(H, W, elements) components of pixels x_offset.. of each line in CBUF element order:
    uint8 for 8-bit formats, uint16 for 16-bit ones and for 10-bit packed ones (each field
    MSB-aligned in 16 bits, as the CDMA widens them)."""
    bpp = layout.bytes_per_pixel
    first = x_offset * bpp
    span = (height - 1) * line_stride + first + width * bpp
    raw = space.read(base, span)
    offsets = (np.arange(height, dtype=np.int64)[:, None, None] * line_stride + first
               + np.arange(width, dtype=np.int64)[None, :, None] * bpp
               + np.arange(bpp, dtype=np.int64)[None, None, :])
    pixels = np.ascontiguousarray(raw[offsets], dtype=np.uint8)          # (H, W, bpp)
    if layout.fields:
        word = pixels.view("<u4")[..., 0].astype(np.uint32)
        return np.stack([((word >> shift) & ((1 << bits) - 1)) << (16 - bits)
                         for shift, bits in layout.fields], axis=-1).astype(np.uint16)
    if layout.element_bytes == 2:
        pixels = pixels.view("<u2").astype(np.uint16)
    return np.ascontiguousarray(pixels[..., list(layout.byte_order)])


def pad_pixel_lines(pixels: np.ndarray, pad_left: int, pad_right: int,
                    pad_value) -> np.ndarray:
    """CBUF image lines: pad_left pixels of pad_value, the converted pixels, pad_right more
    (of the pixels' element type; FP16 by bit pattern)."""
    height, width, elements = pixels.shape
    if pixels.dtype == np.float16:
        return pad_pixel_lines(pixels.view(np.uint16), pad_left, pad_right,
                               np.float16(pad_value).view(np.uint16)).view(np.float16)
    lines = np.full((height, (pad_left + width + pad_right) * elements), pad_value, pixels.dtype)
    lines[:, pad_left * elements:(pad_left + width) * elements] = pixels.reshape(height, -1)
    return lines
