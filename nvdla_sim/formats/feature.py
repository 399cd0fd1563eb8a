"""Feature data format: a W x H x C cube as surfaces of one memory atom of channels.

The cube is cut into 1x1 atoms of `atom_bytes` (32) bytes of channels; the channels are padded
to whole atoms (the padding is never NaN for FP16: zeros here); atoms are mapped C' (within the
atom) -> W -> H -> C (surfaces), so element (c, y, x) with e-byte elements lives at

    (c // A) * surface_stride + y * line_stride + x * atom_bytes + (c % A) * e,   A = atom_bytes / e

Atoms of a line are compact; lines and surfaces may be packed or have gaps (strides multiples of
32 bytes).  A 1x1xC cube mapped surface-packed is what NVDLA treats as (C/A) x 1 x A.
Units handle whole atoms, so `read_cube`/`write_cube` work on (S*A, H, W) cubes including the
padding lanes; `pack_feature`/`unpack_feature` take and return the C channels.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..datatype import DataType
from ..errors import NvdlaSimError
from ..memory import AddressSpace
from .alignment import check_alignment
from .common import as_bytes, as_elements, element_bytes, element_type, from_bytes, need

ATOM_BYTES = 32


def surfaces(channels: int, atom: int) -> int:
    """Surfaces of `atom` channels (elements) a cube of `channels` channels takes."""
    return -(-channels // atom)


def byte_offsets(width: int, height: int, channels: int, line_stride: int, surf_stride: int,
                 atom: int, elem_bytes: int) -> np.ndarray:
    """Byte offset of every byte of every atom, shape (S, H, W, atom * elem_bytes)."""
    n_surf = surfaces(channels, atom)
    s = np.arange(n_surf, dtype=np.int64)[:, None, None, None] * surf_stride
    y = np.arange(height, dtype=np.int64)[None, :, None, None] * line_stride
    x = np.arange(width, dtype=np.int64)[None, None, :, None] * (atom * elem_bytes)
    lane = np.arange(atom * elem_bytes, dtype=np.int64)[None, None, None, :]
    return s + y + x + lane


def atom_view(raw: np.ndarray, n_surf: int, height: int, width: int, atom_bytes: int,
              line_stride: int, surf_stride: int) -> np.ndarray:
    """The bytes `byte_offsets` lists, (S, H, W, atom_bytes), as a strided view of `raw`
    (contiguous uint8 starting at the cube's first byte, at least `span_bytes` long): no index
    array, no gather.  Writable views are only taken where atoms cannot overlap (`disjoint`)."""
    if raw.ndim != 1 or raw.dtype != np.uint8 or not raw.flags.c_contiguous or \
            raw.size < span_bytes(n_surf, height, width, atom_bytes, line_stride, surf_stride):
        raise ValueError("atom_view: raw must be contiguous uint8 covering the cube")
    return np.lib.stride_tricks.as_strided(raw, (n_surf, height, width, atom_bytes),
                                           (surf_stride, line_stride, atom_bytes, 1))


def span_bytes(n_surf: int, height: int, width: int, atom_bytes: int, line_stride: int,
               surf_stride: int) -> int:
    """Bytes from the cube's first to one past its last byte."""
    return (n_surf - 1) * surf_stride + (height - 1) * line_stride + width * atom_bytes


def disjoint(n_surf: int, height: int, width: int, atom_bytes: int, line_stride: int,
             surf_stride: int) -> bool:
    """Whether no byte belongs to two atoms (lines do not overlap, nor do surfaces)."""
    line = width * atom_bytes
    return (height == 1 or line_stride >= line) and \
        (n_surf == 1 or surf_stride >= (height - 1) * line_stride + line)


@dataclass(frozen=True)
class FeatureLayout:
    """Where a feature cube lies: its size, element type, strides (bytes) and atom size."""
    width: int
    height: int
    channels: int
    dtype: DataType
    line_stride: int
    surface_stride: int
    atom_bytes: int = ATOM_BYTES

    @classmethod
    def packed(cls, width: int, height: int, channels: int, dtype: DataType,
               atom_bytes: int = ATOM_BYTES) -> "FeatureLayout":
        """Line- and surface-packed strides."""
        line = width * atom_bytes
        return cls(width, height, channels, dtype, line, line * height, atom_bytes)

    @property
    def atom_channels(self) -> int:
        return self.dtype.elements_per_atom(self.atom_bytes)

    @property
    def surfaces(self) -> int:
        return surfaces(self.channels, self.atom_channels)

    @property
    def size_bytes(self) -> int:
        """Bytes from the first to one past the last byte of the cube."""
        return ((self.surfaces - 1) * self.surface_stride + (self.height - 1) * self.line_stride
                + self.width * self.atom_bytes)

    def check(self, address: int | None = None) -> None:
        """The alignment table's rules and strides that keep atoms from overlapping."""
        if min(self.width, self.height, self.channels) < 1:
            raise NvdlaSimError(f"feature format: cube {self.width}x{self.height}x"
                                f"{self.channels} is empty")
        check_alignment("feature", start=address, line_stride=self.line_stride,
                        surface_stride=self.surface_stride)
        if self.line_stride < self.width * self.atom_bytes:
            raise NvdlaSimError(f"feature format: line stride {self.line_stride} is below one "
                                f"line of {self.width} atoms ({self.width * self.atom_bytes} "
                                "bytes)")
        if self.surfaces > 1 and self.surface_stride < ((self.height - 1) * self.line_stride
                                                        + self.width * self.atom_bytes):
            raise NvdlaSimError(f"feature format: surface stride {self.surface_stride} is below "
                                f"one surface of {self.height} lines")

    def offsets(self) -> np.ndarray:
        return byte_offsets(self.width, self.height, self.channels, self.line_stride,
                            self.surface_stride, self.atom_channels, self.dtype.bytes)


def _layout(cube_shape: tuple[int, int, int], dtype: DataType, line_stride: int | None,
            surface_stride: int | None, atom_bytes: int) -> FeatureLayout:
    c, h, w = cube_shape
    packed = FeatureLayout.packed(w, h, c, dtype, atom_bytes)
    line = packed.line_stride if line_stride is None else line_stride
    surf = line * h if surface_stride is None else surface_stride
    return FeatureLayout(w, h, c, dtype, line, surf, atom_bytes)


def pack_feature(cube: np.ndarray, dtype: DataType | None = None, line_stride: int | None = None,
                 surface_stride: int | None = None, atom_bytes: int = ATOM_BYTES,
                 address: int | None = None) -> np.ndarray:
    """The bytes (uint8, `size_bytes` long) of a (C, H, W) cube in the feature data format;
    padding channels and the gaps between lines and surfaces are 0.  Strides default to packed;
    `address`, when given, is checked for the start-address alignment."""
    cube = np.asarray(cube)
    if cube.ndim != 3:
        raise NvdlaSimError(f"feature format: cube of shape {cube.shape}, expected (C, H, W)")
    dtype = element_type(cube, dtype, "feature format")
    layout = _layout(cube.shape, dtype, line_stride, surface_stride, atom_bytes)
    layout.check(address)
    return pack_feature_layout(as_elements(cube, dtype, "feature format"), layout)


def pack_feature_layout(cube: np.ndarray, layout: FeatureLayout) -> np.ndarray:
    """`pack_feature` into a given (checked) layout."""
    c, h, w = cube.shape
    a, n_surf = layout.atom_channels, layout.surfaces
    lanes = np.zeros((n_surf * a, h, w), cube.dtype)
    lanes[:c] = cube
    data = element_bytes(lanes.reshape(n_surf, a, h, w).transpose(0, 2, 3, 1))
    image = np.zeros(layout.size_bytes, np.uint8)
    atom_bytes = a * layout.dtype.bytes
    atoms = data.reshape(n_surf, h, w, atom_bytes)
    if disjoint(n_surf, h, w, atom_bytes, layout.line_stride, layout.surface_stride):
        atom_view(image, n_surf, h, w, atom_bytes, layout.line_stride,
                  layout.surface_stride)[...] = atoms
    else:
        image[layout.offsets()] = atoms
    return image


def unpack_feature(raw, layout: FeatureLayout) -> np.ndarray:
    """The (C, H, W) cube of `layout.dtype` in `raw` (bytes from the cube's start address)."""
    raw = as_bytes(raw, "feature format")
    need(raw, layout.size_bytes, "feature format")
    n_surf, a = layout.surfaces, layout.atom_channels
    data = np.ascontiguousarray(atom_view(np.ascontiguousarray(raw), n_surf, layout.height,
                                          layout.width, a * layout.dtype.bytes,
                                          layout.line_stride, layout.surface_stride))
    elements = from_bytes(data, layout.dtype).reshape(n_surf, layout.height, layout.width, a)
    lanes = elements.transpose(0, 3, 1, 2).reshape(n_surf * a, layout.height, layout.width)
    return lanes[:layout.channels]


def pack_feature_batch(cubes: np.ndarray, dtype: DataType | None = None,
                       line_stride: int | None = None, surface_stride: int | None = None,
                       batch_stride: int | None = None, atom_bytes: int = ATOM_BYTES,
                       address: int | None = None) -> np.ndarray:
    """N cubes (N, C, H, W) of one layout, cube n at n * batch_stride (BATCH_STRIDE: a multiple
    of 32 bytes, default all surfaces of one cube)."""
    cubes = np.asarray(cubes)
    if cubes.ndim != 4 or cubes.shape[0] < 1:
        raise NvdlaSimError(f"feature format: batch of shape {cubes.shape}, expected (N, C, H, W)")
    dtype = element_type(cubes, dtype, "feature format")
    layout = _layout(cubes.shape[1:], dtype, line_stride, surface_stride, atom_bytes)
    layout.check(address)
    stride = _batch_stride(layout, batch_stride)
    image = np.zeros((cubes.shape[0] - 1) * stride + layout.size_bytes, np.uint8)
    for n, cube in enumerate(as_elements(cubes, dtype, "feature format")):
        image[n * stride:n * stride + layout.size_bytes] = pack_feature_layout(cube, layout)
    return image


def unpack_feature_batch(raw, layout: FeatureLayout, batches: int,
                         batch_stride: int | None = None) -> np.ndarray:
    """The (N, C, H, W) cubes `pack_feature_batch` wrote."""
    raw = as_bytes(raw, "feature format")
    stride = _batch_stride(layout, batch_stride)
    need(raw, (batches - 1) * stride + layout.size_bytes, "feature format")
    return np.stack([unpack_feature(raw[n * stride:], layout) for n in range(batches)])


def _batch_stride(layout: FeatureLayout, batch_stride: int | None) -> int:
    stride = layout.surfaces * layout.surface_stride if batch_stride is None else batch_stride
    check_alignment("feature", planar_stride=stride)
    if stride < layout.size_bytes:
        raise NvdlaSimError(f"feature format: batch stride {stride} is below one cube of "
                            f"{layout.size_bytes} bytes")
    return stride


# -- whole-atom cubes in an address space (what the units read and write) ----------------------
def read_cube(space: AddressSpace, base: int, width: int, height: int, channels: int,
              line_stride: int, surf_stride: int, atom: int, dtype=np.int8) -> np.ndarray:
    """Read a cube as (S*atom, H, W) of `dtype` (numpy type; little-endian elements), `atom`
    elements per surface (padding lanes included)."""
    elem_bytes = np.dtype(dtype).itemsize
    n_surf = surfaces(channels, atom)
    shape = (n_surf, height, width, atom * elem_bytes, line_stride, surf_stride)
    raw = space.read(base, span_bytes(*shape))
    data = np.ascontiguousarray(atom_view(raw, *shape))
    data = data.view(np.dtype(dtype).newbyteorder("<")).astype(dtype)
    return data.transpose(0, 3, 1, 2).reshape(n_surf * atom, height, width)


def write_cube(space: AddressSpace, base: int, cube: np.ndarray, line_stride: int,
               surf_stride: int, atom: int) -> None:
    """Write a (S*atom, H, W) cube, all lanes of every atom, leaving the bytes between lines and
    surfaces untouched."""
    c_pad, height, width = cube.shape
    elem_bytes = cube.dtype.itemsize
    n_surf = c_pad // atom
    shape = (n_surf, height, width, atom * elem_bytes, line_stride, surf_stride)
    dense = line_stride == width * atom * elem_bytes and surf_stride == height * line_stride
    data = element_bytes(cube.reshape(n_surf, atom, height, width).transpose(0, 2, 3, 1)) \
        .reshape(n_surf, height, width, atom * elem_bytes)
    if dense:
        space.write(base, data.reshape(-1))
        return
    raw = space.read(base, span_bytes(*shape))
    if disjoint(*shape):
        atom_view(raw, *shape)[...] = data
    else:                        # overlapping atoms: the index array's order decides
        raw[byte_offsets(width, height, c_pad, line_stride, surf_stride, atom, elem_bytes)] = data
    space.write(base, raw)
