"""Pitch-linear pixel formats (image input, ROI): every PIXEL_FORMAT of CDMA D_DATAIN_FORMAT.

An image is (H, W, n) component values in the order the CDMA writes them to CBUF: R, G, B, A
(or Y, U, V, A; X formats' X is the A lane; single-component formats R; semi-planar Y, U, V).
Values are what memory holds per component: uint8 (8-bit formats), uint16 (16-bit containers,
and the 10-bit fields of the 2:10:10:10 packed formats, 0..1023, alpha 0..3), int16 (T_R16_I,
T_A16Y16U16V16: signed) or float16 (_F formats).  `cdma_values` gives what the CDMA feeds its
converter (10-bit fields shifted to the top of 16 bits, as the C model does).  T_R10/T_R12 and
the 10/12-bit semi-planar formats are 16-bit containers read whole.

Memory (per plane): line y starts at plane address + y * line_stride (both 32-byte aligned);
pixel x is at byte (x_offset + x) * bytes_per_pixel of the line (x_offset pixels of whatever
lie between the aligned start and the first pixel).  Semi-planar (N444) formats have a Y plane
and a plane of two-component pixels, one per Y pixel, each with its own line stride.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..datatype import FP16, INT8, INT16, DataType
from ..errors import NvdlaSimError
from .alignment import check_alignment
from .common import as_bytes, need

RGBA, YUVA, YUV = ("R", "G", "B", "A"), ("Y", "U", "V", "A"), ("Y", "U", "V")


@dataclass(frozen=True)
class PixelFormat:
    name: str                         # register enum name without T_
    code: int                         # PIXEL_FORMAT value
    components: tuple[str, ...]       # CBUF order
    container_bits: int               # 8, 16 or 32 (a 2:10:10:10 word)
    # Per plane: memory slot of each component (container index within the pixel; for 32-bit
    # words the (shift, bits) of each field instead).
    planes: tuple[tuple, ...]
    kind: str = "uint"                # uint, int or fp16
    precision: DataType = INT8        # the document's valid input precision

    @property
    def plane_count(self) -> int:
        return len(self.planes)

    @property
    def packed_10bit(self) -> bool:
        return self.container_bits == 32

    def plane_bytes_per_pixel(self, plane: int) -> int:
        if self.packed_10bit:
            return 4
        return len(self.planes[plane]) * self.container_bits // 8

    @property
    def bytes_per_pixel(self) -> int:
        return sum(self.plane_bytes_per_pixel(p) for p in range(self.plane_count))

    @property
    def max_x_offset(self) -> int:
        """Largest PIXEL_X_OFFSET (pixels before the first one within a 32-byte atom)."""
        return 32 // self.plane_bytes_per_pixel(0) - 1

    @property
    def numpy(self) -> type:
        if self.kind == "fp16":
            return np.float16
        if self.kind == "int":
            return np.int16
        return np.uint8 if self.container_bits == 8 else np.uint16

    def field_bits(self, component: int) -> int:
        if self.packed_10bit:
            return self.planes[0][component][1]
        return self.container_bits


def _bytes4(order: str, comps=RGBA) -> tuple[tuple[int, ...]]:
    """Memory slot of each CBUF component, from the memory order of the components."""
    return (tuple(order.index(c) for c in "".join(x[0] for x in comps)),)


def _fields(r: int, g: int, b: int, a: int) -> tuple[tuple[tuple[int, int], ...]]:
    return (((r, 10), (g, 10), (b, 10), (a, 2)),)


_FORMATS = [
    PixelFormat("R8", 0, ("R",), 8, ((0,),)),
    PixelFormat("R10", 1, ("R",), 16, ((0,),), precision=INT16),
    PixelFormat("R12", 2, ("R",), 16, ((0,),), precision=INT16),
    PixelFormat("R16", 3, ("R",), 16, ((0,),), precision=INT16),
    PixelFormat("R16_I", 4, ("R",), 16, ((0,),), "int", INT16),
    PixelFormat("R16_F", 5, ("R",), 16, ((0,),), "fp16", FP16),
    PixelFormat("A16B16G16R16", 6, RGBA, 16, _bytes4("RGBA"), precision=INT16),
    PixelFormat("X16B16G16R16", 7, RGBA, 16, _bytes4("RGBA"), precision=INT16),
    PixelFormat("A16B16G16R16_F", 8, RGBA, 16, _bytes4("RGBA"), "fp16", FP16),
    PixelFormat("A16Y16U16V16", 9, YUVA, 16, _bytes4("VUYA", YUVA), "int", INT16),
    PixelFormat("V16U16Y16A16", 10, YUVA, 16, _bytes4("AYUV", YUVA), precision=INT16),
    PixelFormat("A16Y16U16V16_F", 11, YUVA, 16, _bytes4("VUYA", YUVA), "fp16", FP16),
    PixelFormat("A8B8G8R8", 12, RGBA, 8, _bytes4("RGBA")),
    PixelFormat("A8R8G8B8", 13, RGBA, 8, _bytes4("BGRA")),
    PixelFormat("B8G8R8A8", 14, RGBA, 8, _bytes4("ARGB")),
    PixelFormat("R8G8B8A8", 15, RGBA, 8, _bytes4("ABGR")),
    PixelFormat("X8B8G8R8", 16, RGBA, 8, _bytes4("RGBA")),
    PixelFormat("X8R8G8B8", 17, RGBA, 8, _bytes4("BGRA")),
    PixelFormat("B8G8R8X8", 18, RGBA, 8, _bytes4("ARGB")),
    PixelFormat("R8G8B8X8", 19, RGBA, 8, _bytes4("ABGR")),
    PixelFormat("A2B10G10R10", 20, RGBA, 32, _fields(0, 10, 20, 30), precision=INT16),
    PixelFormat("A2R10G10B10", 21, RGBA, 32, _fields(20, 10, 0, 30), precision=INT16),
    PixelFormat("B10G10R10A2", 22, RGBA, 32, _fields(2, 12, 22, 0), precision=INT16),
    PixelFormat("R10G10B10A2", 23, RGBA, 32, _fields(22, 12, 2, 0), precision=INT16),
    PixelFormat("A2Y10U10V10", 24, YUVA, 32, _fields(20, 10, 0, 30), precision=INT16),
    PixelFormat("V10U10Y10A2", 25, YUVA, 32, _fields(2, 12, 22, 0), precision=INT16),
    PixelFormat("A8Y8U8V8", 26, YUVA, 8, _bytes4("VUYA", YUVA)),
    PixelFormat("V8U8Y8A8", 27, YUVA, 8, _bytes4("AYUV", YUVA)),
    # Semi-planar: plane 0 holds Y, plane 1 the two chroma components (slots for U, V).
    PixelFormat("Y8___U8V8_N444", 28, YUV, 8, ((0,), (1, 0))),
    PixelFormat("Y8___V8U8_N444", 29, YUV, 8, ((0,), (0, 1))),
    PixelFormat("Y10___U10V10_N444", 30, YUV, 16, ((0,), (1, 0)), precision=INT16),
    PixelFormat("Y10___V10U10_N444", 31, YUV, 16, ((0,), (0, 1)), precision=INT16),
    PixelFormat("Y12___U12V12_N444", 32, YUV, 16, ((0,), (1, 0)), precision=INT16),
    PixelFormat("Y12___V12U12_N444", 33, YUV, 16, ((0,), (0, 1)), precision=INT16),
    PixelFormat("Y16___U16V16_N444", 34, YUV, 16, ((0,), (1, 0)), precision=INT16),
    PixelFormat("Y16___V16U16_N444", 35, YUV, 16, ((0,), (0, 1)), precision=INT16),
]
PIXEL_FORMATS: dict[str, PixelFormat] = {f.name: f for f in _FORMATS}
PIXEL_FORMAT_BY_CODE: dict[int, PixelFormat] = {f.code: f for f in _FORMATS}


def pixel_format(fmt: str | int | PixelFormat) -> PixelFormat:
    """A format by name ('A8B8G8R8' or 'T_A8B8G8R8'), PIXEL_FORMAT code, or itself."""
    if isinstance(fmt, PixelFormat):
        return fmt
    found = PIXEL_FORMAT_BY_CODE.get(fmt) if isinstance(fmt, (int, np.integer)) else \
        PIXEL_FORMATS.get(str(fmt).upper().removeprefix("T_"))
    if found is None:
        raise NvdlaSimError(f"PIXEL_FORMAT={fmt}: not a pixel format of the register map")
    return found


def _plane_slots(f: PixelFormat) -> list[tuple[int, int]]:
    """(plane, slot) of each CBUF component (slot: container index, or field index)."""
    if f.plane_count == 1:
        slots = f.planes[0]
        return [(0, i if f.packed_10bit else slots[i]) for i in range(len(f.components))]
    return [(0, 0), (1, f.planes[1][0]), (1, f.planes[1][1])]


@dataclass(frozen=True)
class PixelImage:
    """A packed image: the bytes of each plane from its (32-byte aligned) start address."""
    format: PixelFormat
    width: int
    height: int
    x_offset: int
    line_strides: tuple[int, ...]
    planes: tuple[np.ndarray, ...]


def _check_geometry(f: PixelFormat, width: int, height: int, x_offset: int,
                    line_strides: tuple[int, ...], addresses: tuple[int | None, ...]) -> None:
    if not 0 <= x_offset <= f.max_x_offset:
        raise NvdlaSimError(f"pixel format T_{f.name}: x offset {x_offset} outside "
                            f"0..{f.max_x_offset}")
    for p, (stride, address) in enumerate(zip(line_strides, addresses)):
        check_alignment("pixel", start=address, line_stride=stride)
        line = (x_offset + width) * f.plane_bytes_per_pixel(p)
        if stride < line:
            raise NvdlaSimError(f"pixel format T_{f.name}: plane {p} line stride {stride} is "
                                f"below one line of {line} bytes")


def pack_pixels(image: np.ndarray, fmt: str | int | PixelFormat, line_stride: int | None = None,
                x_offset: int = 0, uv_line_stride: int | None = None,
                address: int | None = None, uv_address: int | None = None) -> PixelImage:
    """Pack (H, W, components) values (CBUF order, see the module doc) into the planes of
    `fmt`; line strides default to the smallest 32-byte multiple."""
    f = pixel_format(fmt)
    image = np.asarray(image)
    if image.ndim == 2 and len(f.components) == 1:
        image = image[:, :, None]
    if image.ndim != 3 or image.shape[2] != len(f.components):
        raise NvdlaSimError(f"pixel format T_{f.name}: image of shape {image.shape}, expected "
                            f"(H, W, {len(f.components)}) ({', '.join(f.components)})")
    height, width, _ = image.shape
    values = _component_values(image, f)
    strides = []
    for p, given in enumerate((line_stride, uv_line_stride)[:f.plane_count]):
        need_bytes = (x_offset + width) * f.plane_bytes_per_pixel(p)
        strides.append(-(-need_bytes // 32) * 32 if given is None else given)
    _check_geometry(f, width, height, x_offset, tuple(strides),
                    (address, uv_address)[:f.plane_count])
    planes = []
    for p in range(f.plane_count):
        bpp = f.plane_bytes_per_pixel(p)
        pixels = np.zeros((height, width, bpp), np.uint8)
        if f.packed_10bit:
            word = np.zeros((height, width), np.uint32)
            for i, (shift, bits) in enumerate(f.planes[0]):
                word |= values[:, :, i].astype(np.uint32) << np.uint32(shift)
            pixels[:] = word.astype("<u4").view(np.uint8).reshape(height, width, 4)
        else:
            cb = f.container_bits // 8
            for comp, (plane, slot) in enumerate(_plane_slots(f)):
                if plane == p:
                    le = values[:, :, comp].astype(np.dtype(values.dtype).newbyteorder("<"))
                    pixels[:, :, slot * cb:(slot + 1) * cb] = \
                        np.ascontiguousarray(le).view(np.uint8).reshape(height, width, cb)
        buf = np.zeros(strides[p] * height, np.uint8)
        lines = buf.reshape(height, strides[p])
        lines[:, x_offset * bpp:(x_offset + width) * bpp] = pixels.reshape(height, -1)
        planes.append(buf)
    return PixelImage(f, width, height, x_offset, tuple(strides), tuple(planes))


def unpack_pixels(planes, fmt: str | int | PixelFormat, width: int, height: int,
                  line_strides: tuple[int, ...] | int, x_offset: int = 0) -> np.ndarray:
    """The (H, W, components) values of an image in `planes` (bytes of each plane from its
    start address)."""
    f = pixel_format(fmt)
    if isinstance(planes, np.ndarray) or isinstance(planes, (bytes, bytearray)):
        planes = (planes,)
    if isinstance(line_strides, int):
        line_strides = (line_strides,)
    if len(planes) != f.plane_count or len(line_strides) != f.plane_count:
        raise NvdlaSimError(f"pixel format T_{f.name}: {f.plane_count} plane(s) and line "
                            f"stride(s) expected")
    _check_geometry(f, width, height, x_offset, tuple(line_strides), (None,) * f.plane_count)
    out = np.zeros((height, width, len(f.components)), f.numpy)
    for p in range(f.plane_count):
        raw = as_bytes(planes[p], f"pixel format T_{f.name}")
        bpp, stride = f.plane_bytes_per_pixel(p), line_strides[p]
        need(raw, (height - 1) * stride + (x_offset + width) * bpp, f"pixel format T_{f.name}")
        rows = np.arange(height)[:, None] * stride + x_offset * bpp + np.arange(width * bpp)
        pixels = np.ascontiguousarray(raw[rows]).reshape(height, width, bpp)
        if f.packed_10bit:
            word = pixels.view("<u4")[:, :, 0]
            for i, (shift, bits) in enumerate(f.planes[0]):
                out[:, :, i] = (word >> np.uint32(shift)) & np.uint32((1 << bits) - 1)
            continue
        cb = f.container_bits // 8
        for comp, (plane, slot) in enumerate(_plane_slots(f)):
            if plane == p:
                chunk = np.ascontiguousarray(pixels[:, :, slot * cb:(slot + 1) * cb])
                out[:, :, comp] = chunk.view(np.dtype(f.numpy).newbyteorder("<"))[:, :, 0]
    return out


def _component_values(image: np.ndarray, f: PixelFormat) -> np.ndarray:
    """The image as the format's component type, refusing values its fields cannot hold."""
    if f.kind == "fp16":
        return image.astype(np.float16)
    info = np.iinfo(f.numpy)
    for i in range(len(f.components)):
        bits = f.field_bits(i)
        hi = info.max if bits >= 16 or f.kind == "int" else (1 << bits) - 1
        comp = image[:, :, i]
        if comp.size and (comp.min() < info.min or comp.max() > hi):
            raise NvdlaSimError(f"pixel format T_{f.name}: component {f.components[i]} "
                                f"outside {info.min}..{hi}")
    return image.astype(f.numpy)


def cdma_values(image: np.ndarray, fmt: str | int | PixelFormat) -> np.ndarray:
    """What the CDMA hands its converter per component: 8-bit and 16-bit values as they are,
    2:10:10:10 fields at the top of 16 bits (10-bit << 6, alpha << 14)."""
    f = pixel_format(fmt)
    if not f.packed_10bit:
        return np.asarray(image).astype(f.numpy)
    out = np.asarray(image).astype(np.uint16).copy()
    for i in range(len(f.components)):
        out[:, :, i] <<= np.uint16(16 - f.field_bits(i))
    return out
