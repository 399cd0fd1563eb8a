"""Sparse weight compression: WMB bit masks, WGS group sizes and the compressed weights.

Applies to any basic weight image (direct, image input with its extensions, Winograd):
  - one mask bit per element (1 byte INT8, 2 bytes INT16/FP16), 1 where the element's bits are
    not all zero (an FP16 -0.0 is kept, so decompression gives back every bit), the bits of
    the whole image in element order, little-endian (element i: byte i // 8, bit i % 8): the
    WMB surface, padded with 0 bits to 128 bytes;
  - the non-zero elements packed compactly in order: the compressed weight surface, padded with
    zeros to 128 bytes;
  - per kernel group (the same groups as the basic format), the bytes of its non-zero elements
    as a 32-bit little-endian word: the WGS surface, padded to 128 bytes.
The three surfaces are separate (each start address 256-byte aligned, alignment table).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..datatype import DataType
from ..errors import NvdlaSimError
from .alignment import align_up, check_alignment
from .common import as_bytes, need

SURFACE_ALIGN_BYTES = 128


@dataclass(frozen=True)
class CompressedWeights:
    wmb: np.ndarray              # uint8 mask surface, padded to 128 bytes
    wgs: np.ndarray              # uint8 group-size surface (uint32 words), padded to 128 bytes
    weights: np.ndarray          # uint8 compressed weight surface, padded to 128 bytes
    group_bytes: tuple[int, ...] # the WGS values

    @property
    def total_bytes(self) -> int:
        """Bytes the three surfaces take in memory (what the CDMA fetches)."""
        return self.wmb.size + self.wgs.size + self.weights.size


def _pad(data: np.ndarray) -> np.ndarray:
    out = np.zeros(max(SURFACE_ALIGN_BYTES, align_up(data.size, SURFACE_ALIGN_BYTES)), np.uint8)
    out[:data.size] = data
    return out


def _group_elements(kernels: int, bytes_per_kernel: int, kernel_group_: int,
                    dtype: DataType) -> list[int]:
    if bytes_per_kernel % dtype.bytes:
        raise NvdlaSimError(f"weight compression: {bytes_per_kernel} bytes per kernel is not a "
                            f"whole number of {dtype} elements")
    per_kernel = bytes_per_kernel // dtype.bytes
    return [min(kernel_group_, kernels - k0) * per_kernel
            for k0 in range(0, kernels, kernel_group_)]


def compress_weights(image, dtype: DataType, kernels: int, bytes_per_kernel: int,
                     kernel_group_: int, wmb_address: int | None = None,
                     wgs_address: int | None = None,
                     weight_address: int | None = None) -> CompressedWeights:
    """Compress the first kernels * bytes_per_kernel bytes of a basic weight image (its 128-byte
    padding is not compressed)."""
    for name, address in (("wmb", wmb_address), ("wgs", wgs_address),
                          ("weight", weight_address)):
        check_alignment(name, start=address)
    raw = as_bytes(image, "weight compression")
    nbytes = kernels * bytes_per_kernel
    need(raw, nbytes, "weight compression")
    groups = _group_elements(kernels, bytes_per_kernel, kernel_group_, dtype)
    elements = raw[:nbytes].reshape(-1, dtype.bytes)
    mask = elements.any(axis=1)
    wmb = np.packbits(mask, bitorder="little")
    kept = elements[mask].reshape(-1)
    bounds = np.cumsum([0] + groups)
    group_bytes = tuple(int(mask[bounds[i]:bounds[i + 1]].sum()) * dtype.bytes
                        for i in range(len(groups)))
    wgs = np.array(group_bytes, "<u4").view(np.uint8)
    return CompressedWeights(_pad(wmb), _pad(wgs), _pad(kept), group_bytes)


def decompress_weights(wmb, wgs, weights, dtype: DataType, kernels: int, bytes_per_kernel: int,
                       kernel_group_: int) -> np.ndarray:
    """The basic weight image (uint8, kernels * bytes_per_kernel bytes) the three surfaces hold;
    a WGS value that disagrees with the mask bits of its group is an error."""
    groups = _group_elements(kernels, bytes_per_kernel, kernel_group_, dtype)
    n = sum(groups)
    wmb = as_bytes(wmb, "weight compression WMB")
    need(wmb, -(-n // 8), "weight compression WMB")
    mask = np.unpackbits(wmb, bitorder="little")[:n].astype(bool)
    wgs = as_bytes(wgs, "weight compression WGS")
    need(wgs, 4 * len(groups), "weight compression WGS")
    sizes = np.ascontiguousarray(wgs[:4 * len(groups)]).view("<u4")
    bounds = np.cumsum([0] + groups)
    for i, size in enumerate(sizes):
        expect = int(mask[bounds[i]:bounds[i + 1]].sum()) * dtype.bytes
        if int(size) != expect:
            raise NvdlaSimError(f"weight compression: WGS of kernel group {i} is {int(size)} "
                                f"bytes, its WMB bits select {expect}")
    weights = as_bytes(weights, "weight compression weights")
    kept = int(mask.sum())
    need(weights, kept * dtype.bytes, "weight compression weights")
    out = np.zeros((n, dtype.bytes), np.uint8)
    out[mask] = weights[:kept * dtype.bytes].reshape(kept, dtype.bytes)
    return out.reshape(-1)
