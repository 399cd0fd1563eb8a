"""Feature-cube layout in memory: surfaces of `atom` channels, lines, atoms.

Element (c, y, x) of a cube with `e`-byte elements lives at
    base + (c // atom) * surf_stride + y * line_stride + x * atom * e + (c % atom) * e
The last surface is padded to a whole atom; units read and write whole atoms, so the padding lanes
are part of every cube handled here (shape (surfaces * atom, H, W)).
"""
from __future__ import annotations

import numpy as np

from .memory import AddressSpace


def surfaces(channels: int, atom: int) -> int:
    return -(-channels // atom)


def _byte_offsets(width: int, height: int, channels: int, line_stride: int, surf_stride: int,
                  atom: int, elem_bytes: int) -> np.ndarray:
    """Byte offset of every element, shape (S*atom, H, W, elem_bytes) before the element reshape."""
    n_surf = surfaces(channels, atom)
    s = np.arange(n_surf, dtype=np.int64)[:, None, None, None] * surf_stride
    y = np.arange(height, dtype=np.int64)[None, :, None, None] * line_stride
    x = np.arange(width, dtype=np.int64)[None, None, :, None] * (atom * elem_bytes)
    lane = np.arange(atom * elem_bytes, dtype=np.int64)[None, None, None, :]
    return s + y + x + lane   # (S, H, W, atom*e)


def read_cube(space: AddressSpace, base: int, width: int, height: int, channels: int,
              line_stride: int, surf_stride: int, atom: int, dtype=np.int8) -> np.ndarray:
    """Read a cube as (S*atom, H, W) of `dtype` (int8 or int16 little-endian elements)."""
    elem_bytes = np.dtype(dtype).itemsize
    offsets = _byte_offsets(width, height, channels, line_stride, surf_stride, atom, elem_bytes)
    span = int(offsets.max()) + 1
    raw = space.read(base, span)
    data = raw[offsets]                                   # (S, H, W, atom*e) uint8
    n_surf = offsets.shape[0]
    data = np.ascontiguousarray(data).view(np.dtype(dtype).newbyteorder("<")).astype(dtype)
    # (S, H, W, atom) -> (S, atom, H, W) -> (S*atom, H, W)
    return data.transpose(0, 3, 1, 2).reshape(n_surf * atom, height, width)


def write_cube(space: AddressSpace, base: int, cube: np.ndarray, line_stride: int,
               surf_stride: int, atom: int) -> None:
    """Write a (S*atom, H, W) cube, all lanes of every atom, leaving bytes between lines untouched."""
    c_pad, height, width = cube.shape
    elem_bytes = cube.dtype.itemsize
    n_surf = c_pad // atom
    offsets = _byte_offsets(width, height, c_pad, line_stride, surf_stride, atom, elem_bytes)
    span = int(offsets.max()) + 1
    dense = line_stride == width * atom * elem_bytes and surf_stride == height * line_stride
    data = np.ascontiguousarray(
        cube.astype(cube.dtype.newbyteorder("<")).reshape(n_surf, atom, height, width)
        .transpose(0, 2, 3, 1)).view(np.uint8).reshape(n_surf, height, width, atom * elem_bytes)
    if dense:
        space.write(base, data.reshape(-1))
        return
    raw = space.read(base, span)
    raw[offsets] = data
    space.write(base, raw)
