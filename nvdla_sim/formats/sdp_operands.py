"""Bias, PReLU, batch-normalization and element-wise operands (what SDP_RDMA's BRDMA, NRDMA and
ERDMA read).

An operand element has 1 or 2 components (ALU and/or MUL: bias, PReLU and single-operation
element-wise 1; batch-norm and element-wise with both ALU and MUL 2, ALU first) of 1 or 2 bytes
(DATA_SIZE; FP16 is always 2).  Atoms hold ElementPerAtom elements, set by the SDP's
PROC_PRECISION (INT8 32, INT16/FP16 16), so an atom is 32 * components * bytes / (2 for 16-bit
processing) bytes:
  - per layer: a register value, no memory;
  - per channel: 1x1xC, the channels padded to whole atoms, back to back from the base;
  - per element: a W x H x C cube in the feature layout with that atom size (line and surface
    strides multiples of 32 bytes: a line of 16-byte atoms of odd width is not packed).
Integer components are signed (int8 for ONE_BYTE, int16 for TWO_BYTE); FP16 ones float16.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..datatype import INT8, INT16, DataType
from ..errors import NvdlaSimError
from .alignment import align_up, check_alignment
from .common import as_bytes, as_elements, element_bytes, from_bytes, need
from .feature import byte_offsets, surfaces

def elements_per_atom(proc: DataType) -> int:
    """ElementPerAtom of the document: 32 for INT8 processing, 16 for INT16/FP16."""
    return proc.elements_per_atom(32)


def _component_type(proc: DataType, size: int, fmt: str) -> DataType:
    if size not in (1, 2):
        raise NvdlaSimError(f"{fmt} format: DATA_SIZE of {size} bytes (1 or 2)")
    if proc.is_float:
        if size != 2:
            raise NvdlaSimError(f"{fmt} format: FP16 operands are 2 bytes")
        return proc
    return INT8 if size == 1 else INT16


def _components(parts: Sequence[np.ndarray], ctype: DataType, fmt: str) -> np.ndarray:
    """(..., components) array of the component type; out-of-range values refused."""
    arrays = [as_elements(np.asarray(p), ctype, f"{fmt} format") for p in parts]
    if not 1 <= len(arrays) <= 2 or any(a.shape != arrays[0].shape for a in arrays):
        raise NvdlaSimError(f"{fmt} format: 1 or 2 operand arrays of one shape expected")
    return np.stack(arrays, axis=-1)


def pack_per_channel(parts: Sequence[np.ndarray], proc: DataType, size: int, fmt: str = "bias",
                     address: int | None = None) -> np.ndarray:
    """The bytes of per-channel operands: `parts` are 1 or 2 (C,) arrays (ALU first)."""
    check_alignment(fmt, start=address)
    ctype = _component_type(proc, size, fmt)
    comps = _components(parts, ctype, fmt)
    if comps.ndim != 2:
        raise NvdlaSimError(f"{fmt} format: per-channel operands are (C,) arrays")
    epa = elements_per_atom(proc)
    lanes = np.zeros((surfaces(comps.shape[0], epa) * epa, comps.shape[1]), comps.dtype)
    lanes[:comps.shape[0]] = comps
    return element_bytes(lanes).reshape(-1)


def unpack_per_channel(raw, channels: int, components: int, proc: DataType, size: int,
                       fmt: str = "bias") -> list[np.ndarray]:
    """The 1 or 2 (C,) arrays of per-channel operands."""
    ctype = _component_type(proc, size, fmt)
    raw = as_bytes(raw, f"{fmt} format")
    need(raw, channels * components * size, f"{fmt} format")
    values = from_bytes(raw[:channels * components * size], ctype).reshape(channels, components)
    return [values[:, i] for i in range(components)]


def _element_layout(shape: tuple[int, int, int], components: int, proc: DataType, size: int,
                    line_stride: int | None, surface_stride: int | None, fmt: str,
                    address: int | None, data_size: bool) -> tuple[np.ndarray, int]:
    c, h, w = shape
    epa = elements_per_atom(proc)
    atom_bytes = epa * components * size
    line = align_up(w * atom_bytes, 32) if line_stride is None else line_stride
    surf = line * h if surface_stride is None else surface_stride
    check_alignment(fmt, start=address, line_stride=line, surface_stride=surf)
    if line < w * atom_bytes or (surfaces(c, epa) > 1 and surf < (h - 1) * line + w * atom_bytes):
        raise NvdlaSimError(f"{fmt} format: strides {line}/{surf} overlap {atom_bytes}-byte "
                            "atoms")
    offsets = byte_offsets(w, h, c, line, surf, epa, components * size)
    size_bytes = int(offsets.max()) + 1
    if data_size:
        check_alignment(fmt, size=size_bytes)
    return offsets, size_bytes


def pack_per_element(parts: Sequence[np.ndarray], proc: DataType, size: int,
                     fmt: str = "elementwise", line_stride: int | None = None,
                     surface_stride: int | None = None,
                     address: int | None = None) -> np.ndarray:
    """The bytes of per-element operands: `parts` are 1 or 2 (C, H, W) arrays (ALU first)."""
    ctype = _component_type(proc, size, fmt)
    comps = _components(parts, ctype, fmt)
    if comps.ndim != 4:
        raise NvdlaSimError(f"{fmt} format: per-element operands are (C, H, W) arrays")
    c, h, w, k = comps.shape
    offsets, nbytes = _element_layout((c, h, w), k, proc, size, line_stride, surface_stride,
                                      fmt, address, data_size=False)
    epa = elements_per_atom(proc)
    n_surf = surfaces(c, epa)
    lanes = np.zeros((n_surf * epa, h, w, k), comps.dtype)
    lanes[:c] = comps
    data = element_bytes(lanes.reshape(n_surf, epa, h, w, k).transpose(0, 2, 3, 1, 4))
    image = np.zeros(nbytes, np.uint8)
    image[offsets] = data.reshape(n_surf, h, w, -1)
    return image


def unpack_per_element(raw, shape: tuple[int, int, int], components: int, proc: DataType,
                       size: int, fmt: str = "elementwise", line_stride: int | None = None,
                       surface_stride: int | None = None) -> list[np.ndarray]:
    """The 1 or 2 (C, H, W) arrays of per-element operands."""
    ctype = _component_type(proc, size, fmt)
    offsets, nbytes = _element_layout(shape, components, proc, size, line_stride,
                                      surface_stride, fmt, None, data_size=False)
    raw = as_bytes(raw, f"{fmt} format")
    need(raw, nbytes, f"{fmt} format")
    c, h, w = shape
    epa = elements_per_atom(proc)
    n_surf = surfaces(c, epa)
    values = from_bytes(np.ascontiguousarray(raw[offsets]), ctype) \
        .reshape(n_surf, h, w, epa, components).transpose(0, 3, 1, 2, 4) \
        .reshape(n_surf * epa, h, w, components)[:c]
    return [values[..., i] for i in range(components)]


# -- the document's four operand kinds ---------------------------------------------------------
def pack_bias(bias: np.ndarray, proc: DataType, size: int | None = None, **layout) -> np.ndarray:
    """Per-channel (C,) or per-element (C, H, W) bias (one component).  Per-layer bias is a
    register value, not memory."""
    bias = np.asarray(bias)
    size = _default_size(bias, proc, size)
    if bias.ndim == 1:
        return pack_per_channel([bias], proc, size, "bias", layout.get("address"))
    return pack_per_element([bias], proc, size, "bias", **layout)


def pack_prelu(slopes: np.ndarray, proc: DataType, size: int | None = None,
               address: int | None = None) -> np.ndarray:
    """Per-channel PReLU slopes (C,)."""
    slopes = np.asarray(slopes)
    return pack_per_channel([slopes], proc, _default_size(slopes, proc, size), "prelu", address)


def pack_batchnorm(add: np.ndarray, mul: np.ndarray, proc: DataType, size: int | None = None,
                   address: int | None = None) -> np.ndarray:
    """Per-channel batch-norm pairs: the ALU (add) and MUL parts of each channel together."""
    add, mul = np.asarray(add), np.asarray(mul)
    size = max(_default_size(add, proc, size), _default_size(mul, proc, size))
    return pack_per_channel([add, mul], proc, size, "batchnorm", address)


def pack_elementwise(alu: np.ndarray | None = None, mul: np.ndarray | None = None,
                     proc: DataType = INT8, size: int | None = None, **layout) -> np.ndarray:
    """Per-element (C, H, W) operands for the ALU, the MUL or both (then ALU first), padded with
    zeros to the alignment table's 32-byte data size."""
    parts = [np.asarray(p) for p in (alu, mul) if p is not None]
    if not parts:
        raise NvdlaSimError("elementwise format: no operand given")
    size = max(_default_size(p, proc, size) for p in parts)
    image = pack_per_element(parts, proc, size, "elementwise", **layout)
    padded = np.zeros(align_up(image.size, 32), np.uint8)
    padded[:image.size] = image
    return padded


def _default_size(values: np.ndarray, proc: DataType, size: int | None) -> int:
    """DATA_SIZE: as given; else 2 for 16-bit processing or values beyond int8, else 1."""
    if size is not None:
        return size
    if proc.bytes == 2 or values.dtype.itemsize > 1 and values.size and \
            (values.min() < -128 or values.max() > 127):
        return 2
    return 1
