"""Direct convolution hardware layers: CDMA -> CSC -> CMAC_A/B -> CACC -> SDP (on the fly), as
NVDLA register writes, with the weight image, the CBUF bank split and the partial-height split.

How the NVDLA software does it (nvdla/sw, facts re-derived here):
- weights (reference map 5.1): kernels in groups of ATOMIC_K (INT16/FP16: ATOMIC_K / 2, a MAC
  cell holds half as many 16-bit kernels), inside a group channel blocks of ATOMIC_C elements,
  inside a block kernel rows then columns, inside a position the group's kernels one after
  another with their block's channels; WEIGHT_BYTES (bytes, not elements) is rounded up to 128;
- CBUF (umd ConvCoreNode): ENTRY_PER_SLICE = CBUF entries one input line takes (feature input:
  whole entries for every ATOMIC_C / atom atoms of channels, the last partial entry scaled by the
  share of the entry it fills, a 3/4-full entry counted whole); data banks = entries of all lines
  / bank depth; weight banks for all kernels, or for one kernel group (ATOMIC_K kernels);
  allocation in this order of preference: all input and all weights, all input and two kernel
  groups (ping-pong), all input and one group, then a partial-height split of the input with the
  banks the weights leave (all weights kept across the parts when they fit, else two groups, else
  one);
- partial height (ConvCoreNode::determineSplitDataRatios): each part takes as many input lines as
  its data banks hold; the next part starts where the next window of the stride starts; only the
  first part has top padding, only the last bottom padding; each part writes its output lines;
  with all weights kept, the first part holds them (SKIP_WEIGHT_RLS) and the others reuse them
  (WEIGHT_REUSE), the last releases them;
- FETCH_GRAIN 1, RELEASE = the part's input lines, CACC CLIP_TRUNCATE, the SDP in flying mode
  (emit_sdp), enable order SDP, CACC, CMAC_A, CMAC_B, CSC, CDMA after CBUF flush status reads 1.
Kernel groups are split by the hardware (weights streamed through the weight banks); a layer
whose one kernel group and one kernel-height band of input do not fit CBUF together is an error.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from .. import formats
from ..config import HardwareConfig
from ..datatype import INT8, DataType
from ..errors import NvdlaSimError, UnsupportedError
from ..formats import pre_extend
from .emit import Converter, ProgramBuilder, element_type
from .emit_pdp import PdpLayer
from .emit_sdp import SdpLayer, sdp_needs_rdma, write_sdp
from .placement import BUFFER_ALIGN_BYTES, Allocator, Buffer, TensorPlacement, align_up

WEIGHT_ALIGN_BYTES = 128
MAX_KERNEL, MAX_STRIDE, MAX_DILATION, MAX_PAD_TL, MAX_PAD_BR = 32, 8, 32, 31, 63
CONV_UNITS = ("CDMA", "CSC", "CMAC_A", "CMAC_B", "CACC")


@dataclass(frozen=True)
class ConvLayer:
    """A direct convolution of a cube with `weights` (K, C, R, S) of the cube's element type
    (int8, int16 or float16: the precision of the layer); sizes (y, x), pads (top, left, bottom,
    right).  `sdp` post-processes the CACC output (int32, or fp32 for FP16)."""
    weights: np.ndarray = field(repr=False)
    stride: tuple[int, int] = (1, 1)
    pad: tuple[int, int, int, int] = (0, 0, 0, 0)
    dilation: tuple[int, int] = (1, 1)
    pad_value: int = 0                      # value of padded input elements (integer types only)
    clip_truncate: int = 0                  # CACC: acc >> truncate, rounded, saturated to int32
    in_cvt: Converter | None = None         # CDMA feature input converter (None: off)
    sdp: SdpLayer = field(default_factory=SdpLayer)
    name: str = "conv"
    image: bool = False                     # input is a pitch-linear image (see image_placement)
    winograd: object = None                 # compiler.winograd.WinogradPlan: run in Winograd mode
    compress: bool = False                  # sparse-compressed weights (WMB / WGS surfaces)
    post_extension: int = 1                 # image input: kernel rows per atomic operation (1/2/4)

    @property
    def kernels(self) -> int:
        return self.weights.shape[0]

    @property
    def dtype(self) -> DataType:
        """The layer's precision: its weights' element type."""
        return element_type(self.weights, f"{self.name}: weights")


def kernel_group(hw: HardwareConfig, dtype: DataType) -> int:
    """Kernels of one weight group of this configuration (`formats.kernel_group`)."""
    return formats.kernel_group(hw.atomic_k, dtype)


# -- image input -------------------------------------------------------------------------------
# A network input of at most 4 channels is read as an image (DATAIN_FORMAT = PIXEL), as the NVDLA
# software does for the first layer: the CDMA pads each line left and right, and the CSC sees a
# kernel one column wide whose channels are the S columns x C_pixel channels of a kernel row
# ("pre-extended"), so a 3-channel 7x7 kernel fills 28 of the ATOMIC_C lanes instead of 3.
PIXEL_FORMATS = {1: ("T_R8", 1), 4: ("T_A8B8G8R8", 4)}   # C_pixel -> PIXEL_FORMAT, bytes per pixel
IMAGE_LINE_ALIGN_BYTES = 32


def pixel_channels(channels: int) -> int | None:
    """Elements per pixel of the image format holding `channels` channels (None: no format)."""
    return 1 if channels == 1 else 4 if channels <= 4 else None


def image_placement(name: str, space: str, address: int, channels: int, height: int,
                    width: int, line_align_bytes: int = IMAGE_LINE_ALIGN_BYTES) -> TensorPlacement:
    """A pitch-linear image: one 'surface' whose atom is the pixel (R8: 1 byte, A8B8G8R8: 4; a
    3-channel image leaves the alpha byte 0), lines 32-byte aligned."""
    bpp = PIXEL_FORMATS[pixel_channels(channels)][1]
    line = align_up(width * bpp, line_align_bytes)    # 64 for Orin's kDLA_HWC4 (io_formats.py)
    return TensorPlacement(name, space, address, width, height, channels, bpp, line, line * height)


# Channel post-extension (data-format document; CSC D_POST_Y_EXTENSION): the CSC puts 2 or 4
# kernel rows of pre-extended channels side by side in one atomic operation, so a kernel of R rows
# takes ceil(R / rows) packages per output stripe instead of R.  It needs each row's S * C_pixel
# channels to fit ATOMIC_C / rows lanes, no dilation (the CSC reads rows j*rows .. j*rows+rows-1 of
# the input, C model csc) and uncompressed weights (the layout interleaves the rows of a group's
# kernels, while compression packs each kernel's bytes alone).
Y_EXTENSION_CODE = {1: 0, 2: 1, 4: 2}


def post_extension_rows(hw: HardwareConfig, kernel: tuple[int, int], c_pixel: int,
                        dilation: tuple[int, int], compress: bool) -> tuple[int, str | None]:
    """The kernel rows per atomic operation an image-input convolution can use (4, 2 or 1) and,
    for 1, why not."""
    r, s = kernel
    if r == 1:
        return 1, "a kernel one row high"
    if tuple(dilation) != (1, 1):
        return 1, "dilation"
    if compress:
        return 1, "compressed weights"
    for rows in (4, 2):
        if rows // 2 < r and s * c_pixel * rows <= hw.atomic_c:   # 4 rows only for R > 2
            return rows, None
    return 1, (f"{s} columns x {c_pixel} channels exceed {hw.atomic_c // 2} of the "
               f"{hw.atomic_c} ATOMIC_C lanes")


def geo_kernel(layer: "ConvLayer") -> tuple[int, int]:
    """(R, S) of the layer's original kernel."""
    return tuple(np.shape(layer.weights)[2:4])


def image_entry_per_slice(hw: HardwareConfig, padded_width: int, bytes_per_pixel: int) -> int:
    """CBUF entries of one padded image line."""
    return -(-padded_width * bytes_per_pixel // hw.cbuf.bank_width_bytes)


# -- CBUF --------------------------------------------------------------------------------------
def entry_per_slice(hw: HardwareConfig, channels: int, width: int, dtype: DataType = INT8) -> int:
    """CBUF entries one input line of a feature cube occupies (umd calculateEPS, direct conv);
    counted in bytes, so a 16-bit line takes twice the entries of an INT8 one."""
    atoms_per_entry = hw.cbuf.bank_width_bytes // hw.memory_atomic_bytes
    c_atoms = -(-channels * dtype.bytes // hw.memory_atomic_bytes)
    whole = (c_atoms // atoms_per_entry) * width
    last = c_atoms % atoms_per_entry
    part = width if last == 3 else -(-last * width // atoms_per_entry)
    return whole + part


def weight_banks(hw: HardwareConfig, kernels: int, bytes_per_kernel: int) -> int:
    """Banks `kernels` kernels of `bytes_per_kernel` bytes each take."""
    entry = hw.cbuf.bank_width_bytes
    entries = align_up(kernels * bytes_per_kernel, entry) // entry
    return -(-entries // hw.cbuf.bank_depth)


@dataclass(frozen=True)
class PartialH:
    """One hardware layer of a partial-height split: input lines [top, bottom], its padding and
    its output lines [out_top, out_top + out_height)."""
    top: int
    bottom: int
    pad_top: int
    pad_bottom: int
    out_top: int
    out_height: int


@dataclass(frozen=True)
class ConvBatch:
    """N images through one hardware layer with the same weights (BATCH_NUMBER = N - 1): input
    cubes `src_stride` bytes apart (CDMA BATCH_STRIDE), output cubes `dst_stride` apart (SDP
    DST_BATCH_STRIDE).  The CDMA loads every image into the data banks, line by line."""
    images: int
    src_stride: int
    dst_stride: int


@dataclass(frozen=True)
class CbufPlan:
    entry_per_slice: int
    data_banks: int
    weight_banks: int
    mode: str                       # full, ping-pong, one-group: how weights use their banks
    parts: tuple[PartialH, ...]     # one part: no split
    keep_weights: bool              # all weights resident across the parts

    @property
    def split(self) -> bool:
        return len(self.parts) > 1


def _out_size(in_size: int, pad_before: int, pad_after: int, dilated_kernel: int,
              stride: int) -> int:
    return (in_size + pad_before + pad_after - dilated_kernel) // stride + 1


def partial_heights(in_h: int, lines_per_part: int, dilated_r: int, stride: int,
                    pad_top: int, pad_bottom: int) -> list[PartialH]:
    """Input bands of at most `lines_per_part` lines covering the convolution (the walk of umd
    ConvCoreNode::determineSplitDataRatios for direct convolution)."""
    if dilated_r > lines_per_part:
        raise NvdlaSimError(f"a kernel {dilated_r} lines high does not fit the {lines_per_part} "
                            "input lines the data banks hold")
    bands = [[0, lines_per_part - 1, pad_top, 0]]           # top, bottom, pad top, pad bottom
    slider = dilated_r - pad_top - 1                        # last input line of the current window
    while slider < in_h:
        last = bands[-1][1]
        while slider <= last:
            slider += stride
        if slider > last:
            slider -= stride                               # last window inside the band
        top = min(slider, last) - (dilated_r - 1) + stride
        bottom = top + lines_per_part - 1
        if bottom >= in_h - 1:
            bands.append([top, in_h - 1, 0, pad_bottom])
            break
        bands.append([top, bottom, 0, 0])
        slider = top + dilated_r - 1
    if bands[-1][0] >= in_h or bands[-1][1] >= in_h + pad_bottom:
        bands.pop()
    if len(bands) == 1:
        bands[0][1], bands[0][3] = in_h - 1, pad_bottom
    parts, out_top = [], 0
    for top, bottom, pt, pb in bands:
        bottom = min(bottom, in_h - 1)
        out_h = _out_size(bottom - top + 1, pt, pb, dilated_r, stride)
        parts.append(PartialH(top, bottom, pt, pb, out_top, out_h))
        out_top += out_h
    return parts


def plan_cbuf(hw: HardwareConfig, channels: int, in_h: int, in_w: int, kernels: int,
              bytes_per_kernel: int, dilated_r: int, stride_y: int, pad_top: int,
              pad_bottom: int, eps: int | None = None, dtype: DataType = INT8,
              images: int = 1, reserved_banks: int = 0) -> CbufPlan:
    """Bank split and partial-height split of one convolution (see the module doc); `eps`
    overrides ENTRY_PER_SLICE (image input); `bytes_per_kernel` in bytes of `dtype` elements;
    `images` > 1: a batch, every image's lines in the data banks (no partial-height split);
    `reserved_banks`: banks left free (compressed weights keep the last one for the WMB)."""
    banks, depth = hw.cbuf.banks - reserved_banks, hw.cbuf.bank_depth
    eps = eps or entry_per_slice(hw, channels, in_w, dtype)
    data_needed = -(-eps * in_h * images // depth)
    wt_all = weight_banks(hw, kernels, bytes_per_kernel)
    wt_group = weight_banks(hw, kernel_group(hw, dtype), bytes_per_kernel)
    out_h = _out_size(in_h, pad_top, pad_bottom, dilated_r, stride_y)
    whole = (PartialH(0, in_h - 1, pad_top, pad_bottom, 0, out_h),)
    for mode, wt in (("full", wt_all), ("ping-pong", 2 * wt_group), ("one-group", wt_group)):
        if wt + data_needed <= banks:
            return CbufPlan(eps, data_needed, wt, "full" if wt >= wt_all else mode, whole,
                            keep_weights=False)
    if images > 1:
        raise NvdlaSimError(f"a batch of {images} images needs {data_needed} data banks beside "
                            f"{wt_group} weight banks, {hw.name} has {banks}")
    # Partial height: the weights take what they need, the data the rest.
    for mode, wt in (("full", wt_all), ("ping-pong", 2 * wt_group), ("one-group", wt_group)):
        data_banks = banks - wt
        lines = data_banks * depth // eps if data_banks > 0 else 0
        if lines >= dilated_r:
            parts = partial_heights(in_h, lines, dilated_r, stride_y, pad_top, pad_bottom)
            mode = "full" if wt >= wt_all else mode
            return CbufPlan(eps, data_banks, wt, mode, tuple(parts), keep_weights=mode == "full")
    raise NvdlaSimError(
        f"convolution does not fit CBUF: one kernel group of weights needs {wt_group} banks and "
        f"{dilated_r} input lines need {-(-eps * dilated_r // depth)} banks, "
        f"{hw.name} has {banks} (cbuf.banks) of {depth} entries (cbuf.bank_depth)")


# -- registers ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class ConvGeometry:
    kernels: int
    channels: int
    r: int
    s: int
    stride_y: int
    stride_x: int
    dil_y: int
    dil_x: int
    pad_left: int
    pad_right: int
    bytes_per_kernel: int
    weight_bytes: int
    dtype: DataType = INT8


def _check(layer: ConvLayer, src: TensorPlacement, dst: TensorPlacement) -> ConvGeometry:
    """Geometry of the convolution; for image input, of the pre-extended kernel (S = 1,
    channels S * C_pixel) with the padding and output size of the original one."""
    w = np.asarray(layer.weights)
    if layer.image:
        c_pixel = pixel_channels(src.channels)
        if c_pixel is None or w.ndim != 4 or w.shape[1] != src.channels \
                or src.atom != PIXEL_FORMATS[c_pixel][1]:
            raise NvdlaSimError(f"{layer.name}: image input needs a 1- or 2..4-channel image "
                                f"placement (image_placement) and weights of its channels")
        geo = _check(replace(layer, image=False), replace(src, atom=1), dst)
        k, _, r, s = w.shape
        bpk = r * s * c_pixel
        return replace(geo, channels=s * c_pixel, s=1, bytes_per_kernel=bpk,
                       weight_bytes=align_up(k * bpk, WEIGHT_ALIGN_BYTES))
    w = np.asarray(layer.weights)
    if w.ndim != 4 or w.dtype not in (np.int8, np.int16, np.float16):
        raise NvdlaSimError(f"{layer.name}: weights must be an int8, int16 or float16 (K, C, R, S) "
                            f"array, got {w.dtype} {w.shape}")
    dtype = layer.dtype
    if dtype != src.dtype or layer.sdp.output_type != dst.dtype:
        raise NvdlaSimError(f"{layer.name}: {dtype} weights, input {src.name} {src.dtype}, output "
                            f"{dst.name} {dst.dtype}: the convolution runs in its input's "
                            f"precision and its SDP writes {layer.sdp.output_type}")
    if dtype.is_float and layer.pad_value:
        raise UnsupportedError(f"{layer.name}: a non-zero padding value in {dtype} is not modelled")
    k, c, r, s = w.shape
    sy, sx = layer.stride
    dy, dx = layer.dilation
    pt, pl, pb, pr = layer.pad
    if c != src.channels:
        raise NvdlaSimError(f"{layer.name}: weights have {c} channels, input {src.name} "
                            f"{src.channels}")
    if k != dst.channels:
        raise NvdlaSimError(f"{layer.name}: {k} kernels but output {dst.name} has "
                            f"{dst.channels} channels")
    for what, values, lo, hi in (("kernel size", (r, s), 1, MAX_KERNEL),
                                 ("stride", (sy, sx), 1, MAX_STRIDE),
                                 ("dilation", (dy, dx), 1, MAX_DILATION),
                                 ("top/left padding", (pt, pl), 0, MAX_PAD_TL),
                                 ("bottom/right padding", (pb, pr), 0, MAX_PAD_BR),
                                 ("padding value", (layer.pad_value,),
                                  *((0, 0) if dtype.is_float else dtype.integer_range())),
                                 ("CLIP_TRUNCATE", (layer.clip_truncate,), 0, 16)):
        for v in values:
            if not lo <= v <= hi:
                raise NvdlaSimError(f"{layer.name}: {what} {v} outside {lo}..{hi}")
    out_h = _out_size(src.height, pt, pb, (r - 1) * dy + 1, sy)
    out_w = _out_size(src.width, pl, pr, (s - 1) * dx + 1, sx)
    if (out_h, out_w) != (dst.height, dst.width):
        raise NvdlaSimError(f"{layer.name}: the convolution gives {out_h}x{out_w}, output "
                            f"{dst.name} is {dst.height}x{dst.width}")
    bpk = c * r * s * dtype.bytes
    return ConvGeometry(k, c, r, s, sy, sx, dy, dx, pl, pr, bpk,
                        align_up(k * bpk, WEIGHT_ALIGN_BYTES), dtype)


def write_conv(b: ProgramBuilder, geo: ConvGeometry, layer: ConvLayer, plan: CbufPlan,
               part: PartialH, src: TensorPlacement, dst: TensorPlacement, weights: Buffer,
               weight_reuse: bool, skip_weight_release: bool,
               batch: ConvBatch | None = None) -> None:
    """Registers of CACC, CMAC_A/B, CSC and CDMA for one part (conv.c order)."""
    batches = batch.images - 1 if batch is not None else 0
    c_pixel = pixel_channels(src.channels) if layer.image else 0
    data_format = "PIXEL" if layer.image else "FEATURE"
    data_channels = c_pixel or src.channels
    precision = geo.dtype.name
    wino = layer.winograd
    # Winograd: the CSC sees the CDMA's padded, channel-extended cube as a stride-1 layer
    ext_w, ext_h = (wino.ext_w, wino.ext_h) if wino else (src.width, src.height)
    ext_c = wino.ext_channels if wino else data_channels
    pads = wino.pad if wino else (part.pad_top, geo.pad_left, part.pad_bottom, geo.pad_right)
    csc_stride = (1, 1) if wino else (geo.stride_x, geo.stride_y)
    weight_format = "COMPRESSED" if layer.compress else "UNCOMPRESSED"
    misc = dict(CONV_MODE="WINOGRAD" if wino else "DIRECT", PROC_PRECISION=precision)
    b.reg("CACC", "D_MISC_CFG", **misc)
    b.reg("CACC", "D_DATAOUT_SIZE_0", DATAOUT_WIDTH=dst.width - 1, DATAOUT_HEIGHT=dst.height - 1)
    b.reg("CACC", "D_DATAOUT_SIZE_1", DATAOUT_CHANNEL=dst.channels - 1)
    b.word("CACC", "D_DATAOUT_ADDR", dst.address & 0xFFFFFFFF)
    b.reg("CACC", "D_BATCH_NUMBER", BATCHES=batches)
    # v2 CACC writes no memory; its 24-bit stride fields keep what fits, as conv.c writes them.
    b.word("CACC", "D_LINE_STRIDE", dst.line_stride)
    b.word("CACC", "D_SURF_STRIDE", dst.surf_stride)
    packed = "TRUE" if dst.width == 1 and dst.height == 1 else "FALSE"
    b.reg("CACC", "D_DATAOUT_MAP", LINE_PACKED=packed, SURF_PACKED=packed)
    b.reg("CACC", "D_CLIP_CFG", CLIP_TRUNCATE=layer.clip_truncate)
    for cmac in ("CMAC_A", "CMAC_B"):
        b.reg(cmac, "D_MISC_CFG", **misc)

    reuse = dict(DATA_REUSE="DISABLE", WEIGHT_REUSE="ENABLE" if weight_reuse else "DISABLE",
                 SKIP_DATA_RLS="DISABLE",
                 SKIP_WEIGHT_RLS="ENABLE" if skip_weight_release else "DISABLE")
    b.reg("CSC", "D_MISC_CFG", IN_PRECISION=precision, **misc, **reuse)
    b.reg("CSC", "D_DATAIN_FORMAT", DATAIN_FORMAT=data_format)
    b.reg("CSC", "D_DATAIN_SIZE_EXT_0", DATAIN_WIDTH_EXT=ext_w - 1, DATAIN_HEIGHT_EXT=ext_h - 1)
    b.reg("CSC", "D_DATAIN_SIZE_EXT_1", DATAIN_CHANNEL_EXT=ext_c - 1)
    b.reg("CSC", "D_BATCH_NUMBER", BATCHES=batches)
    b.reg("CSC", "D_POST_Y_EXTENSION", Y_EXTENSION=Y_EXTENSION_CODE[layer.post_extension])
    b.reg("CSC", "D_ENTRY_PER_SLICE", ENTRIES=plan.entry_per_slice - 1)
    b.reg("CSC", "D_WEIGHT_FORMAT", WEIGHT_FORMAT=weight_format)
    b.reg("CSC", "D_WEIGHT_SIZE_EXT_0", WEIGHT_WIDTH_EXT=geo.s - 1, WEIGHT_HEIGHT_EXT=geo.r - 1)
    b.reg("CSC", "D_WEIGHT_SIZE_EXT_1", WEIGHT_CHANNEL_EXT=geo.channels - 1,
          WEIGHT_KERNEL=geo.kernels - 1)
    b.word("CSC", "D_WEIGHT_BYTES", geo.weight_bytes)
    b.reg("CSC", "D_WMB_BYTES", WMB_BYTES=weights.wmb_bytes if layer.compress else 0)
    b.reg("CSC", "D_DATAOUT_SIZE_0", DATAOUT_WIDTH=dst.width - 1, DATAOUT_HEIGHT=dst.height - 1)
    b.reg("CSC", "D_DATAOUT_SIZE_1", DATAOUT_CHANNEL=dst.channels - 1)
    b.reg("CSC", "D_ATOMICS", ATOMICS=dst.width * dst.height - 1)
    b.reg("CSC", "D_RELEASE", RLS_SLICES=ext_h - 1)
    b.reg("CSC", "D_CONV_STRIDE_EXT", CONV_X_STRIDE_EXT=csc_stride[0] - 1,
          CONV_Y_STRIDE_EXT=csc_stride[1] - 1)
    b.reg("CSC", "D_DILATION_EXT", X_DILATION_EXT=geo.dil_x - 1, Y_DILATION_EXT=geo.dil_y - 1)
    b.reg("CSC", "D_ZERO_PADDING", PAD_LEFT=0 if wino else geo.pad_left,
          PAD_TOP=0 if wino else part.pad_top)
    b.reg("CSC", "D_ZERO_PADDING_VALUE", PAD_VALUE=layer.pad_value)
    b.reg("CSC", "D_BANK", DATA_BANK=plan.data_banks - 1, WEIGHT_BANK=plan.weight_banks - 1)
    b.reg("CSC", "D_PRA_CFG", PRA_TRUNCATE=wino.pra_truncate if wino else 0)

    b.reg("CDMA", "D_MISC_CFG", IN_PRECISION=precision, **misc, **reuse)
    if layer.image:
        b.reg("CDMA", "D_DATAIN_FORMAT", DATAIN_FORMAT="PIXEL",
              PIXEL_FORMAT=PIXEL_FORMATS[c_pixel][0], PIXEL_MAPPING="PITCH_LINEAR",
              PIXEL_SIGN_OVERRIDE="SIGNED_INT")
    else:
        b.reg("CDMA", "D_DATAIN_FORMAT", DATAIN_FORMAT="FEATURE", PIXEL_FORMAT=0)
    b.reg("CDMA", "D_DATAIN_SIZE_0", DATAIN_WIDTH=src.width - 1, DATAIN_HEIGHT=src.height - 1)
    b.reg("CDMA", "D_DATAIN_SIZE_1", DATAIN_CHANNEL=data_channels - 1)
    b.reg("CDMA", "D_DATAIN_SIZE_EXT_0", DATAIN_WIDTH_EXT=ext_w - 1, DATAIN_HEIGHT_EXT=ext_h - 1)
    b.reg("CDMA", "D_DAIN_RAM_TYPE", DATAIN_RAM_TYPE=src.ram_type)
    if layer.image:
        b.reg("CDMA", "D_PIXEL_OFFSET", PIXEL_X_OFFSET=0, PIXEL_Y_OFFSET=0)
    b.address("CDMA", "D_DAIN_ADDR_LOW_0", "D_DAIN_ADDR_HIGH_0", src.address)
    b.address("CDMA", "D_DAIN_ADDR_LOW_1", "D_DAIN_ADDR_HIGH_1", src.address)
    b.word("CDMA", "D_LINE_STRIDE", src.line_stride)
    b.word("CDMA", "D_SURF_STRIDE", src.surf_stride)
    b.word("CDMA", "D_LINE_UV_STRIDE", 0)
    b.reg("CDMA", "D_DAIN_MAP", LINE_PACKED=int(src.line_packed), SURF_PACKED=int(src.surf_packed))
    b.reg("CDMA", "D_BATCH_NUMBER", BATCHES=batches)
    b.word("CDMA", "D_BATCH_STRIDE", batch.src_stride if batch is not None else 0)
    b.reg("CDMA", "D_ENTRY_PER_SLICE", ENTRIES=plan.entry_per_slice - 1)
    b.reg("CDMA", "D_FETCH_GRAIN", GRAINS=0)
    b.reg("CDMA", "D_WEIGHT_FORMAT", WEIGHT_FORMAT=weight_format)
    b.reg("CDMA", "D_WEIGHT_SIZE_0", BYTE_PER_KERNEL=geo.bytes_per_kernel - 1)
    b.reg("CDMA", "D_WEIGHT_SIZE_1", WEIGHT_KERNEL=geo.kernels - 1)
    b.reg("CDMA", "D_WEIGHT_RAM_TYPE", WEIGHT_RAM_TYPE=weights.ram_type)
    b.address("CDMA", "D_WEIGHT_ADDR_LOW", "D_WEIGHT_ADDR_HIGH", weights.address)
    b.word("CDMA", "D_WEIGHT_BYTES", geo.weight_bytes)
    if layer.compress:
        b.address("CDMA", "D_WMB_ADDR_LOW", "D_WMB_ADDR_HIGH", weights.wmb.address)
        b.reg("CDMA", "D_WMB_BYTES", WMB_BYTES=weights.wmb_bytes)
        b.address("CDMA", "D_WGS_ADDR_LOW", "D_WGS_ADDR_HIGH", weights.wgs.address)
    b.reg("CDMA", "D_MEAN_FORMAT", MEAN_FORMAT="DISABLE")
    if layer.in_cvt is not None:
        b.reg("CDMA", "D_CVT_CFG", CVT_EN="ENABLE", CVT_TRUNCATE=layer.in_cvt.shift)
        b.reg("CDMA", "D_CVT_OFFSET", CVT_OFFSET=layer.in_cvt.offset)
        b.reg("CDMA", "D_CVT_SCALE", CVT_SCALE=layer.in_cvt.scale)
    else:
        b.reg("CDMA", "D_CVT_CFG", CVT_EN="DISABLE")
    b.reg("CDMA", "D_CONV_STRIDE", CONV_X_STRIDE=geo.stride_x - 1, CONV_Y_STRIDE=geo.stride_y - 1)
    b.reg("CDMA", "D_ZERO_PADDING", PAD_LEFT=pads[1], PAD_RIGHT=pads[3], PAD_TOP=pads[0],
          PAD_BOTTOM=pads[2])
    b.reg("CDMA", "D_ZERO_PADDING_VALUE", PAD_VALUE=layer.pad_value)
    b.reg("CDMA", "D_BANK", DATA_BANK=plan.data_banks - 1, WEIGHT_BANK=plan.weight_banks - 1)


def _operand_rows(operand, top: int, height: int):
    """The lines [top, top+height) of a per-element operand; other operands as they are."""
    if isinstance(operand, TensorPlacement):
        return operand.rows(top, height)
    if isinstance(operand, np.ndarray) and operand.ndim == 3:
        return operand[:, top:top + height]
    return operand


def sdp_rows(sdp: SdpLayer, top: int, height: int) -> SdpLayer:
    """The SDP layer of output lines [top, top+height) of a partial-height part."""
    stages = {}
    for kind in ("x1", "x2", "y"):
        stage = getattr(sdp, kind)
        if stage is not None:
            stages[kind] = replace(stage, alu_operand=_operand_rows(stage.alu_operand, top, height),
                                   mul_operand=_operand_rows(stage.mul_operand, top, height))
    return replace(sdp, **stages)


@dataclass(frozen=True)
class WeightSurfaces:
    """Weights as the CDMA fetches them: the weight surface (WEIGHT_BYTES of it) and, for
    compressed weights, the WMB bit masks (WMB_BYTES) and the WGS group sizes."""
    weights: Buffer
    weight_bytes: int
    wmb: Buffer | None = None
    wgs: Buffer | None = None
    wmb_bytes: int = 0

    @property
    def address(self) -> int:
        return self.weights.address

    @property
    def ram_type(self) -> int:
        return self.weights.ram_type

    @property
    def fetched_bytes(self) -> int:
        """Bytes of the surfaces in memory (weights, WMB, WGS)."""
        return self.weight_bytes + self.wmb_bytes + (self.wgs.size_bytes if self.wgs else 0)


def basic_weights(hw: HardwareConfig, layer: ConvLayer) -> tuple[np.ndarray, int]:
    """The weights in the layout the CBUF holds them, as (K, ...) elements (direct: (K, C, R, S);
    image: pre-extended; Winograd: the transformed 4x4 kernels), and bytes per kernel."""
    if layer.winograd is not None:
        t = layer.winograd.packed.transformed
        return t, 16 * t.shape[1] * layer.dtype.bytes
    w = np.asarray(layer.weights)
    return w, int(np.prod(w.shape[1:])) * layer.dtype.bytes


def _weight_image(hw: HardwareConfig, layer: ConvLayer) -> np.ndarray:
    dtype = layer.dtype
    if layer.winograd is not None:
        return layer.winograd.packed.image
    if layer.post_extension > 1:         # `layer.weights` already pre-extended: (K, S*C_pixel, R, 1)
        return formats.pack_image_weights(layer.weights, layer.weights.shape[1], dtype,
                                          layer.post_extension, hw.atomic_c,
                                          kernel_group(hw, dtype))
    return formats.pack_direct_weights(layer.weights, dtype, hw.atomic_c,
                                       kernel_group(hw, dtype))      # padded to 128 bytes


def place_weights(b: ProgramBuilder, alloc: Allocator, layer: ConvLayer) -> WeightSurfaces:
    """Allocate (and, with images, load) the layer's weight surfaces: the basic image of its
    format, or its compressed surfaces (formats.compress_weights)."""
    dtype = layer.dtype
    name = f"{layer.name}_weights"
    elements, bytes_per_kernel = basic_weights(b.hw, layer)
    k = elements.shape[0]
    group = kernel_group(b.hw, dtype)
    if not layer.compress:
        if not b.images:                    # timing only: the buffer, not its bytes
            buf = alloc.weights(name, elements.size * dtype.bytes)
            return WeightSurfaces(buf, align_up(k * bytes_per_kernel, WEIGHT_ALIGN_BYTES))
        image = _weight_image(b.hw, layer)
        buf = alloc.weights(name, image.size)
        b.mem_load(buf.address, image, buf.name)
        return WeightSurfaces(buf, align_up(k * bytes_per_kernel, WEIGHT_ALIGN_BYTES))
    from .winograd import compression_size
    if not b.images:
        size = compression_size(elements, dtype, k, group)
        surfaces = (size.weight_bytes, size.wmb_bytes, size.wgs_bytes)
        images = None
    else:
        packed = formats.compress_weights(_weight_image(b.hw, layer), dtype, k, bytes_per_kernel,
                                          group)
        images = (packed.weights, packed.wmb, packed.wgs)
        surfaces = tuple(a.size for a in images)
    bufs = []
    for i, (what, nbytes) in enumerate(zip(("weights", "wmb", "wgs"), surfaces)):
        # each surface starts 256-byte aligned (alignment table); buffers start 32-byte aligned
        room = alloc.buffer(f"{layer.name}_{what}", nbytes + 256 - BUFFER_ALIGN_BYTES)
        buf = Buffer(room.name, room.space, align_up(room.address, 256), nbytes)
        if images is not None:
            b.mem_load(buf.address, images[i], buf.name)
        bufs.append(buf)
    return WeightSurfaces(bufs[0], surfaces[0], bufs[1], bufs[2], surfaces[1])


def conv_cbuf_plan(hw: HardwareConfig, layer: ConvLayer, src: TensorPlacement,
                   images: int = 1) -> CbufPlan:
    """The CBUF plan `emit_conv` uses for `layer` reading `src` (`images` of a batch)."""
    try:
        return _conv_cbuf_plan(hw, layer, src, images)
    except NvdlaSimError as exc:              # name the layer (the message names the fields)
        if str(exc).startswith(f"{layer.name}:"):
            raise
        raise type(exc)(f"{layer.name}: {exc}") from None


def _conv_cbuf_plan(hw: HardwareConfig, layer: ConvLayer, src: TensorPlacement,
                    images: int) -> CbufPlan:
    k, c, r, s = np.shape(layer.weights)
    dtype = layer.dtype
    dilated_r = (r - 1) * layer.dilation[0] + 1
    reserved = 1 if layer.compress else 0             # the WMB's bank
    if layer.winograd is not None:
        return winograd_cbuf_plan(hw, layer, src, reserved)
    if layer.image:
        if dtype != INT8:
            raise UnsupportedError(f"{layer.name}: {dtype} image input is not modelled by the "
                                   "compiler (INT8 pixel formats only)")
        c_pixel = pixel_channels(src.channels)
        bpp = PIXEL_FORMATS[c_pixel][1]
        eps = image_entry_per_slice(hw, layer.pad[1] + src.width + layer.pad[3], bpp)
        return plan_cbuf(hw, c_pixel, src.height, src.width, k, r * s * c_pixel, dilated_r,
                         layer.stride[0], layer.pad[0], layer.pad[2], eps=eps,
                         reserved_banks=reserved)
    return plan_cbuf(hw, c, src.height, src.width, k, c * r * s * dtype.bytes, dilated_r,
                     layer.stride[0], layer.pad[0], layer.pad[2], dtype=dtype, images=images,
                     reserved_banks=reserved)


def winograd_cbuf_plan(hw: HardwareConfig, layer: ConvLayer, src: TensorPlacement,
                       reserved_banks: int = 0) -> CbufPlan:
    """Banks of a Winograd layer: the whole padded, channel-extended input (no partial-height
    split) beside all weights, two kernel groups or one (4x4 transformed kernels)."""
    wino = layer.winograd
    dtype = layer.dtype
    eps = wino.ext_w // 4 * -(-src.channels // dtype.elements_per_atom(hw.memory_atomic_bytes)) \
        * wino.stride[0] * wino.stride[1]
    banks, depth = hw.cbuf.banks - reserved_banks, hw.cbuf.bank_depth
    data = -(-eps * wino.ext_h // depth)
    bpk = 16 * wino.ext_channels * dtype.bytes
    k = np.shape(layer.weights)[0]
    wt_all = weight_banks(hw, k, bpk)
    wt_group = weight_banks(hw, kernel_group(hw, dtype), bpk)
    whole = (PartialH(0, src.height - 1, wino.pad[0], wino.pad[2], 0, wino.out_h),)
    for mode, wt in (("full", wt_all), ("ping-pong", 2 * wt_group), ("one-group", wt_group)):
        if wt + data <= banks:
            return CbufPlan(eps, data, wt, "full" if wt >= wt_all else mode, whole,
                            keep_weights=False)
    raise NvdlaSimError(f"{layer.name}: a Winograd input of {data} banks and one kernel group "
                        f"of {wt_group} banks do not fit the {banks} CBUF banks of {hw.name}")


def emit_conv(b: ProgramBuilder, alloc: Allocator, layer: ConvLayer, src: TensorPlacement,
              dst: TensorPlacement, pdp: tuple[PdpLayer, TensorPlacement] | None = None,
              weights: Buffer | None = None, batch: ConvBatch | None = None) -> list[str]:
    """The hardware layer(s) of one convolution (several when CBUF needs a partial-height split);
    `dst` is the convolution output (or, with `pdp`, the cube the SDP streams to the fused PDP
    layer, which writes pdp[1]).  `batch`: `src`/`dst` are image 0 of a batch run as one
    hardware layer (feature input, no fused PDP).  Returns the completion sync id of each
    hardware layer."""
    geo = _check(layer, src, dst)
    if layer.post_extension != 1:
        rows, why = (1, "not an image input") if not layer.image else post_extension_rows(
            b.hw, geo_kernel(layer), pixel_channels(src.channels), layer.dilation, layer.compress)
        if layer.post_extension not in (rows, 2) or (rows == 1):
            raise NvdlaSimError(f"{layer.name}: {layer.post_extension}-line post-extension "
                                f"impossible ({why or f'at most {rows} lines'})")
    wino = layer.winograd
    if wino is not None:
        if pdp is not None or batch is not None:
            raise NvdlaSimError(f"{layer.name}: a Winograd layer writes its padded output to "
                                "memory (no PDP on the fly, no batch)")
        dst = replace(dst, height=wino.out_h, width=wino.out_w)    # whole 4x4 output blocks
        if dst.line_stride < dst.width * dst.atom or dst.surf_stride < dst.height * dst.line_stride:
            raise NvdlaSimError(f"{layer.name}: Winograd output {dst.name} needs room for "
                                f"{dst.width}x{dst.height} (padded to 4) in its strides")
        bpk = 16 * wino.ext_channels * geo.dtype.bytes
        geo = replace(geo, channels=wino.ext_channels, r=4, s=4, bytes_per_kernel=bpk,
                      weight_bytes=align_up(geo.kernels * bpk, WEIGHT_ALIGN_BYTES))
    if batch is not None and (layer.image or pdp is not None):
        raise NvdlaSimError(f"{layer.name}: a batch runs on feature input into memory (no image "
                            "input, no PDP on the fly)")
    plan = conv_cbuf_plan(b.hw, layer, src, batch.images if batch is not None else 1)
    if plan.split and pdp is not None:
        raise NvdlaSimError(f"{layer.name}: a convolution split by height cannot feed PDP on the "
                            "fly (its SDP output is written per part)")
    if weights is None:
        weights = place_weights(b, alloc, replace(layer, weights=pre_extend(
            layer.weights, pixel_channels(src.channels))) if layer.image else layer)
    if layer.compress:
        geo = replace(geo, weight_bytes=weights.weight_bytes)
    done = []
    for i, part in enumerate(plan.parts):
        name = layer.name if not plan.split else f"{layer.name}_h{i}"
        src_part = src.rows(part.top, part.bottom - part.top + 1)
        dst_part = dst.rows(part.out_top, part.out_height) if plan.split else dst
        flying_sdp = sdp_rows(layer.sdp, part.out_top, part.out_height) if plan.split \
            else layer.sdp
        units = list(CONV_UNITS)
        if sdp_needs_rdma(flying_sdp, flying=True):
            units.append("SDP_RDMA")
        units.append("SDP")
        if pdp is not None:
            units.append("PDP")
        groups = b.begin_layer(name, units)
        last = i == len(plan.parts) - 1
        write_conv(b, geo, layer, plan, part, src_part, dst_part, weights,
                   weight_reuse=plan.keep_weights and i > 0,
                   skip_weight_release=plan.keep_weights and not last, batch=batch)
        sdp_shape = (dst_part.channels, dst_part.height, dst_part.width)
        write_sdp(b, alloc, flying_sdp, sdp_shape, None,
                  None if pdp is not None else dst_part, pdp, winograd=wino is not None,
                  batch=(batch.images, batch.dst_stride) if batch is not None else None)
        b.poll("CDMA", "S_CBUF_FLUSH_STATUS", 1)
        if "SDP_RDMA" in groups:
            b.enable("SDP_RDMA")
        b.enable("SDP")
        if pdp is not None:
            b.enable("PDP")
        for unit in ("CACC", "CMAC_A", "CMAC_B", "CSC", "CDMA"):
            b.enable(unit)
        ids = [b.intr_notify("SDP", groups["SDP"])]
        if pdp is not None:
            ids.append(b.intr_notify("PDP", groups["PDP"]))
        b.end_layer(*ids)
        done.append(ids[-1])
    return done
