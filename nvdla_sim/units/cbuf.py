"""CBUF: the convolution buffer between CDMA (writer) and CSC (reader).

Not a SimPy process: a store the CDMA fills and the CSC reads.  D_BANK splits the banks into data
banks (first) and weight banks (after them); each bank holds `bank_depth` entries of
`bank_width_bytes` (ATOMIC_C elements of the widest type the configuration has: 64 bytes on
nv_large, 128 on nv_full).  What is kept is what the CDMA wrote, in a form the CSC can use directly,
of the element type of the layer (`dtype`: int8, int16 or float16 arrays):
  - feature input: the (surfaces*atom, H, W) cube after the CDMA converter;
  - image input: (H, (pad_left + W + pad_right) * C_pixel) lines, converted and padded;
  - Winograd input: the padded, channel-extended (C_ext, H_ext, W_ext) cube (cdma.py);
  - weights: the WEIGHT_BYTES raw bytes, in memory order.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..config import HardwareConfig
from ..datatype import INT8, DataType
from ..errors import NvdlaSimError

FEATURE, PIXEL, WINOGRAD = "feature", "pixel", "winograd"


@dataclass(frozen=True)
class BankSplit:
    data_banks: int
    weight_banks: int


@dataclass
class CbufData:
    kind: str                    # FEATURE, PIXEL or WINOGRAD
    array: np.ndarray            # cube (lanes, H, W), pixel lines (H, elements) or Winograd cube
    entries: int                 # CBUF entries the data occupies
    pixel_channels: int = 0      # elements per pixel (PIXEL only)
    dtype: DataType = INT8       # element type in CBUF (PROC_PRECISION)
    batches: int = 1             # feature input of several images: array is (N, lanes, H, W)


class Cbuf:
    def __init__(self, hw: HardwareConfig):
        self.hw = hw
        self.banks = hw.cbuf.banks
        self.bank_depth = hw.cbuf.bank_depth
        self.entry_bytes = hw.cbuf.bank_width_bytes
        self.split: BankSplit | None = None
        self.data: CbufData | None = None
        self.weights: np.ndarray | None = None
        self.retained_key: tuple | None = None     # layer settings of data kept (SKIP_DATA_RLS)
        self.retained_weight_key: tuple | None = None

    # -- allocation ----------------------------------------------------------------------------
    def allocate(self, data_banks: int, weight_banks: int) -> BankSplit:
        """D_BANK (values already +1): the data and weight banks must exist in this CBUF."""
        if data_banks + weight_banks > self.banks:
            raise NvdlaSimError(
                f"CBUF: D_BANK asks for {data_banks} data + {weight_banks} weight banks, but "
                f"{self.hw.name} has {self.banks} banks of {self.bank_depth} x "
                f"{self.entry_bytes} bytes")
        self.split = BankSplit(data_banks, weight_banks)
        return self.split

    def check_data_fits(self, entries: int, what: str) -> None:
        """The whole input must be resident: the CSC waits for all of it before starting."""
        capacity = self.split.data_banks * self.bank_depth
        if entries > capacity:
            raise NvdlaSimError(
                f"CBUF: {what} needs {entries} entries but the {self.split.data_banks} data banks "
                f"hold {capacity} (entries of {self.entry_bytes} bytes)")

    def check_weights_fit(self, total_bytes: int, largest_group_bytes: int,
                          keep_all: bool, compressed: bool = False) -> None:
        """With SKIP_WEIGHT_RLS every weight stays resident; otherwise the CDMA streams kernel
        groups through the weight banks, so the largest group must fit (compressed: at most its
        uncompressed size, at most all the compressed bytes).  Compressed weights keep their
        WMB in the last bank, which data and weights must leave free."""
        capacity = self.split.weight_banks * self.bank_depth * self.entry_bytes
        if compressed:
            largest_group_bytes = min(largest_group_bytes, total_bytes)
            if self.split.data_banks + self.split.weight_banks >= self.banks:
                raise NvdlaSimError(
                    f"CBUF: D_BANK gives {self.split.data_banks} data + "
                    f"{self.split.weight_banks} weight banks, but compressed weights keep their "
                    f"WMB in bank {self.banks - 1}, which must stay free")
        need, what = (total_bytes, "all weights (SKIP_WEIGHT_RLS)") if keep_all else \
            (largest_group_bytes, "one kernel group of weights")
        if need > capacity:
            raise NvdlaSimError(
                f"CBUF: {what} need {need} bytes but the {self.split.weight_banks} weight banks "
                f"hold {capacity}")

    def entries_for_bytes(self, nbytes: int) -> int:
        return -(-nbytes // self.entry_bytes)

    # -- contents ------------------------------------------------------------------------------
    def store_data(self, data: CbufData) -> None:
        self.data = data

    def store_weights(self, raw: np.ndarray) -> None:
        self.weights = raw

    def require(self) -> tuple[CbufData, np.ndarray]:
        if self.data is None or self.weights is None:
            raise NvdlaSimError("CSC: the CBUF holds no data or weights (CDMA did not load them)")
        return self.data, self.weights
