"""Helpers shared by the format modules: element types of arrays, little-endian byte views."""
from __future__ import annotations

import numpy as np

from ..datatype import FP16, INT8, INT16, DataType
from ..errors import NvdlaSimError

_BY_NUMPY = {np.dtype(np.int8): INT8, np.dtype(np.int16): INT16, np.dtype(np.float16): FP16}


def element_type(array: np.ndarray, dtype: DataType | None, what: str) -> DataType:
    """The element type of `array` (int8, int16 or float16), or `dtype` when given (the array is
    then converted to it, refusing values the type cannot hold)."""
    array = np.asarray(array)
    if dtype is None:
        try:
            return _BY_NUMPY[array.dtype]
        except KeyError:
            raise NvdlaSimError(f"{what}: array of {array.dtype}, expected int8, int16 or "
                                "float16 (or pass dtype=)") from None
    return dtype


def as_elements(array: np.ndarray, dtype: DataType, what: str) -> np.ndarray:
    """`array` as `dtype` elements; integers out of range are an error, not a wrap-around."""
    array = np.asarray(array)
    if array.dtype == np.dtype(dtype.numpy):
        return array
    if dtype.is_float:
        return array.astype(np.float16)
    if array.dtype.kind == "f" and not np.all(np.isfinite(array)):
        raise NvdlaSimError(f"{what}: non-finite values for an {dtype} format")
    lo, hi = dtype.integer_range()
    if array.size and (array.min() < lo or array.max() > hi or
                       (array.dtype.kind == "f" and np.any(array != np.round(array)))):
        raise NvdlaSimError(f"{what}: values outside {dtype} ({lo}..{hi}) or not integers")
    return array.astype(dtype.numpy)


def element_bytes(array: np.ndarray) -> np.ndarray:
    """The little-endian bytes of each element, shape array.shape + (itemsize,)."""
    a = np.ascontiguousarray(array)
    le = a.astype(a.dtype.newbyteorder("<"), copy=False)
    return np.ascontiguousarray(le).view(np.uint8).reshape(a.shape + (a.dtype.itemsize,))


def from_bytes(raw: np.ndarray, dtype: DataType) -> np.ndarray:
    """Elements of `dtype` from little-endian bytes (length a multiple of the element size)."""
    raw = np.ascontiguousarray(raw, dtype=np.uint8)
    return raw.view(np.dtype(dtype.numpy).newbyteorder("<")).astype(dtype.numpy)


def as_bytes(raw, what: str) -> np.ndarray:
    """A flat uint8 array from bytes, bytearray or an array."""
    if isinstance(raw, (bytes, bytearray, memoryview)):
        return np.frombuffer(bytes(raw), np.uint8)
    raw = np.asarray(raw)
    if raw.dtype != np.uint8:
        raise NvdlaSimError(f"{what}: expected bytes or a uint8 array, got {raw.dtype}")
    return raw.reshape(-1)


def need(raw: np.ndarray, nbytes: int, what: str) -> None:
    if raw.size < nbytes:
        raise NvdlaSimError(f"{what}: {raw.size} bytes given, the layout needs {nbytes}")
