"""The network's input and output tensor formats TensorRT names for the DLA ("Working with DLA",
I/O formats on DLA), their stride and padding rules, and how the compiler realises each one.

Every format is the NVDLA feature layout (`nvdla_sim.formats.FeatureLayout`) with a different
atom, so packing and unpacking stay `formats.pack_feature_layout` / `formats.unpack_feature`:

  chw32       INT8: [C/32][H][W][32], channels padded to 32 bytes: the 32-byte feature atom
  chw16       FP16: [C/16][H][W][16], the same 32-byte atom of 16 FP16 channels
  dla_hwc4    input only, C in {1, 3, 4}, a convolution first layer: [H][W'][C'] with C' = 1 or 4
              (a 3-channel pixel's 4th byte is padding), W stride a multiple of 32 bytes (Xavier)
              or 64 bytes (Orin): the CDMA's pitch-linear image input (PIXEL_FORMAT T_R8 or
              T_A8B8G8R8), an atom of C' elements
  dla_linear  [C][H][roundUp(W, 64 / element bytes)]: planes, an atom of one element

`auto` (the default) is what the compiler chose before these formats existed: an INT8 input of at
most 4 channels read only by convolutions is an image (32-byte lines), any other input and every
output a packed feature cube.

Model limits (UnsupportedError): a planar (dla_linear) tensor of more than one channel needs
nv_full's RUBIK merge (input) or split (output) pass, and units/rubik.py does not model RUBIK; a
one-channel dla_linear input is the R8 image with 64-byte lines (a convolution first layer);
dla_linear outputs are planar and so need RUBIK split.  FP16 pixel formats are not compiled
(emit_conv: INT8 pixel formats only).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..config import HardwareConfig
from ..datatype import FP16, INT8, DataType
from ..errors import NvdlaSimError, UnsupportedError
from ..formats import FeatureLayout, pack_feature_layout, unpack_feature
from .placement import align_up

FORMATS = ("dla_linear", "dla_hwc4", "chw16", "chw32")
CHOICES = ("auto",) + FORMATS
TRT_NAMES = {"dla_linear": "kDLA_LINEAR", "dla_hwc4": "kDLA_HWC4", "chw16": "kCHW16",
             "chw32": "kCHW32"}
# The document's element types per format (input; outputs: the same without kDLA_HWC4)
PRECISIONS = {"dla_linear": (INT8, FP16), "dla_hwc4": (INT8, FP16), "chw16": (FP16,),
              "chw32": (INT8,)}
CHANNEL_PAD_BYTES = 32              # kCHW16 / kCHW32: C padded to the next 32-byte boundary
LINEAR_LINE_ALIGN_BYTES = 64        # kDLA_LINEAR: W stride padded up to 64 bytes
HWC4_LINE_ALIGN_BYTES = {"xavier_dla": 32, "orin_dla": 64}   # others: 32 (the CDMA's minimum)
HWC4_CHANNELS = (1, 3, 4)
DEFAULT_IMAGE_LINE_ALIGN_BYTES = 32  # auto: what emit_conv.image_placement did before


def _fail(rule: str, text: str) -> NvdlaSimError:
    return NvdlaSimError(f"{text} [rule io.{rule}]")


def hwc4_line_align(hw: HardwareConfig) -> int:
    """kDLA_HWC4's W stride granularity on this preset."""
    return HWC4_LINE_ALIGN_BYTES.get(hw.name, 32)


def io_layout(fmt: str, channels: int, height: int, width: int, dtype: DataType,
              hw: HardwareConfig | None = None) -> FeatureLayout:
    """Where a C x H x W tensor in format `fmt` lies, as a FeatureLayout (strides in bytes)."""
    e = dtype.bytes
    if fmt in ("chw16", "chw32"):
        return FeatureLayout.packed(width, height, channels, dtype, CHANNEL_PAD_BYTES)
    if fmt == "dla_hwc4":
        atom = (1 if channels == 1 else 4) * e
        align = hwc4_line_align(hw) if hw is not None else DEFAULT_IMAGE_LINE_ALIGN_BYTES
        line = align_up(width * atom, align)
        return FeatureLayout(width, height, channels, dtype, line, line * height, atom)
    if fmt == "dla_linear":
        line = align_up(width * e, LINEAR_LINE_ALIGN_BYTES)
        return FeatureLayout(width, height, channels, dtype, line, line * height, e)
    raise NvdlaSimError(f"io format {fmt!r}: expected one of {', '.join(FORMATS)}")


def pack_io(cube: np.ndarray, fmt: str, dtype: DataType,
            hw: HardwareConfig | None = None) -> np.ndarray:
    """The bytes of a (C, H, W) cube of `dtype` elements in format `fmt` (padding 0)."""
    c, h, w = np.asarray(cube).shape
    return pack_feature_layout(np.asarray(cube).astype(dtype.numpy),
                               io_layout(fmt, c, h, w, dtype, hw))


def unpack_io(raw, fmt: str, channels: int, height: int, width: int, dtype: DataType,
              hw: HardwareConfig | None = None) -> np.ndarray:
    """The (C, H, W) cube `pack_io` (or the hardware) wrote in format `fmt`."""
    return unpack_feature(raw, io_layout(fmt, channels, height, width, dtype, hw))


def check_choice(value: str, where: str) -> None:
    if value not in CHOICES:
        raise NvdlaSimError(f"{where}: {value!r} is not an I/O format (one of "
                            f"{', '.join(CHOICES)})")


def _precision(fmt: str, dtype: DataType, what: str) -> None:
    if dtype not in PRECISIONS[fmt]:
        allowed = " or ".join(d.name for d in PRECISIONS[fmt])
        raise _fail("precision", f"{what}: {TRT_NAMES[fmt]} holds {allowed}, the tensor is "
                                 f"{dtype.name}")


def _chw_atom(fmt: str, hw: HardwareConfig, what: str) -> None:
    if hw.memory_atomic_bytes != CHANNEL_PAD_BYTES:
        raise _fail("chw_atom", f"{what}: {TRT_NAMES[fmt]} pads channels to 32 bytes, the feature "
                                f"atom of {hw.name} is {hw.memory_atomic_bytes} bytes")


def image_line_align(plan, ctx, image_ok: bool) -> int | None:
    """How the network input is placed: the line alignment (bytes) of a pitch-linear image
    input, or None for a feature cube; refuses a format the input or its readers break.
    `image_ok`: lower.image_input(plan) (INT8, at most 4 channels, only whole convolutions)."""
    fmt = ctx.input_format
    check_choice(fmt, "input_format")
    if fmt == "auto":
        return DEFAULT_IMAGE_LINE_ALIGN_BYTES if image_ok else None
    root = plan.root(plan.network.input_name)[0]
    t = plan.tensors[root]
    dtype, c = plan.tensor_dtype(root), t.shape.c
    what = f"input_format {fmt}"
    _precision(fmt, dtype, what)
    if fmt in ("chw16", "chw32"):
        _chw_atom(fmt, ctx.hw, what)
        return None
    if fmt == "dla_hwc4" and c not in HWC4_CHANNELS:
        raise _fail("hwc4_channels", f"{what}: kDLA_HWC4 needs C in {{1, 3, 4}}, the input has "
                                     f"C={c}")
    if fmt == "dla_linear" and c != 1:
        raise UnsupportedError(f"{what}: a planar input of {c} channels needs the RUBIK merge "
                               "pass, which is not modelled (one channel is the R8 image)")
    if dtype != INT8:
        raise UnsupportedError(f"{what}: FP16 pixel formats are not compiled (INT8 only)")
    if not image_ok:
        raise _fail("hwc4_first_conv" if fmt == "dla_hwc4" else "linear_first_conv",
                    f"{what}: the input is read as an image, so every layer reading it must be "
                    "a convolution over all its channels without dilation")
    return hwc4_line_align(ctx.hw) if fmt == "dla_hwc4" else LINEAR_LINE_ALIGN_BYTES


def check_outputs(plan, ctx, buffers: dict) -> None:
    """The network outputs' format: its element type, atom, and packed strides."""
    fmt = ctx.output_format
    check_choice(fmt, "output_format")
    if fmt == "auto":
        return
    what = f"output_format {fmt}"
    if fmt == "dla_hwc4":
        raise _fail("hwc4_output", f"{what}: kDLA_HWC4 is an input format only (outputs: "
                                   "kDLA_LINEAR, kCHW16, kCHW32)")
    for name in plan.network.outputs:
        root = plan.root(name)[0]
        _precision(fmt, plan.tensor_dtype(root), f"{what} ({name})")
        if fmt == "dla_linear":
            raise UnsupportedError(f"{what} ({name}): a planar output needs the RUBIK split "
                                   "pass, which is not modelled")
        _chw_atom(fmt, ctx.hw, what)
        p = buffers.get(root)
        if p is None:
            continue                      # a GPU-fallback output: not written by the DLA
        t = plan.tensors[root]
        want = io_layout(fmt, t.shape.c, t.shape.h, t.shape.w, p.dtype)
        if (p.line_stride, p.surf_stride) != (want.line_stride, want.surface_stride):
            raise _fail("output_packed", f"{what} ({name}): the last layer writes lines of "
                                         f"{p.line_stride} bytes (padded), {TRT_NAMES[fmt]} "
                                         f"needs {want.line_stride}")


@dataclass(frozen=True)
class IoTensor:
    """A network input or output as the program holds it: format, shape, type and address."""
    name: str
    format: str
    channels: int
    height: int
    width: int
    dtype: DataType
    space: str
    address: int
    layout: FeatureLayout


def io_tensors(lowered, ctx) -> dict[str, IoTensor]:
    """The network input and the DLA-written outputs of a lowered network, with their layouts
    (for a caller packing the input itself or unpacking the outputs from memory)."""
    plan = lowered.plan
    names = {plan.network.input_name: ctx.input_format}
    names.update({n: ctx.output_format for n in plan.network.outputs})
    out = {}
    for name, fmt in names.items():
        root = plan.root(name)[0]
        p = lowered.buffers.get(root)
        if p is None:
            continue
        layout = FeatureLayout(p.width, p.height, p.channels, p.dtype, p.line_stride,
                               p.surf_stride, p.atom)
        out[name] = IoTensor(name, fmt, p.channels, p.height, p.width, p.dtype, p.space,
                             p.address, layout)
    return out
