"""Element types of the NVDLA datapaths: precision as data, not as a fork of each unit.

Every unit decodes the element type of its input and output from its registers (the precision
fields of D_MISC_CFG, D_DATA_FORMAT, ...: 0 = INT8, 1 = INT16, 2 = FP16 in every unit) and carries
it in the geometry it hands its kernels and its timing process.  Sizes follow from it: a memory atom
of `memory_atomic_bytes` holds `atom_bytes // bytes` elements, a CBUF entry likewise, and a MAC cell
takes half as many INT16/FP16 products per cycle as INT8 ones.

FP16 cubes are carried as numpy float16 arrays (IEEE binary16, the same bits as in memory); kernels
that need the C model's own float arithmetic view them as uint16 bit patterns.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import NvdlaSimError


@dataclass(frozen=True)
class DataType:
    code: int                 # the register encoding (IN_PRECISION, INPUT_DATA, ...)
    name: str                 # INT8, INT16, FP16
    bytes: int                # bytes per element in memory and in CBUF
    numpy: type               # numpy scalar type of a cube of this type
    is_float: bool

    @property
    def bits(self) -> int:
        return 8 * self.bytes

    def elements_per_atom(self, atom_bytes: int) -> int:
        """Channels one memory atom (or CBUF entry) of `atom_bytes` bytes holds."""
        return atom_bytes // self.bytes

    def integer_range(self) -> tuple[int, int]:
        """Smallest and largest value of an integer type (saturation bounds)."""
        if self.is_float:
            raise ValueError(f"{self.name} is not an integer type")
        hi = (1 << (self.bits - 1)) - 1
        return -hi - 1, hi

    def __str__(self) -> str:
        return self.name


INT8 = DataType(0, "INT8", 1, np.int8, False)
INT16 = DataType(1, "INT16", 2, np.int16, False)
FP16 = DataType(2, "FP16", 2, np.float16, True)

BY_CODE = {t.code: t for t in (INT8, INT16, FP16)}
BY_NAME = {t.name.lower(): t for t in (INT8, INT16, FP16)}


def from_code(code: int, register: str) -> DataType:
    """The element type a precision field encodes; `register` (e.g. 'CDMA.D_MISC_CFG.IN_PRECISION')
    names the field in the error for a reserved code."""
    try:
        return BY_CODE[code]
    except KeyError:
        raise NvdlaSimError(f"{register}={code}: not a precision (0 INT8, 1 INT16, 2 FP16)") \
            from None


def from_name(name: str, where: str = "precision") -> DataType:
    """'int8', 'int16' or 'fp16' (any case), as scenarios and hardware configs spell them."""
    try:
        return BY_NAME[str(name).lower()]
    except KeyError:
        raise NvdlaSimError(f"{where}: '{name}' is not one of int8, int16, fp16") from None


def require_supported(dtype: DataType, data_types: tuple[str, ...] | list[str], hw_name: str,
                      register: str) -> None:
    """Refuse a precision the hardware configuration does not build (nv_small has INT8 only)."""
    if dtype.name.lower() not in [t.lower() for t in data_types]:
        raise NvdlaSimError(f"{register}={dtype.name}: {hw_name} supports "
                            f"{', '.join(t.upper() for t in data_types)} only")
