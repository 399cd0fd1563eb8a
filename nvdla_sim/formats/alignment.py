"""The alignment table of the data-format document ("Alignment of Start Address and Stride").

Every `pack_*` function of this package checks the rules of its format here and refuses a
violation with a one-line `NvdlaSimError` naming the format, the quantity and the rule.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import NvdlaSimError


@dataclass(frozen=True)
class Alignment:
    """Byte alignments of one format; None where the document says NA."""
    start: int | None
    line_stride: int | None = None
    surface_stride: int | None = None
    planar_stride: int | None = None
    size: int | None = None


# Rows of the document's table (planar/cube stride: the batch stride of a feature cube).
ALIGNMENT: dict[str, Alignment] = {
    "feature": Alignment(start=32, line_stride=32, surface_stride=32, planar_stride=32),
    "weight": Alignment(start=256, size=128),          # uncompressed or compressed weights
    "wmb": Alignment(start=256, size=128),
    "wgs": Alignment(start=256, size=128),
    "pixel": Alignment(start=32, line_stride=32),      # pitch-linear pixels, each plane
    "bias": Alignment(start=32, line_stride=32, surface_stride=32),
    "prelu": Alignment(start=32),
    "batchnorm": Alignment(start=32),
    "elementwise": Alignment(start=32, line_stride=32, size=32),
}

_LABELS = {"start": "start address", "line_stride": "line stride",
           "surface_stride": "surface stride", "planar_stride": "planar stride",
           "size": "data size"}


def check_alignment(fmt: str, **values: int | None) -> None:
    """Refuse any of start/line_stride/surface_stride/planar_stride/size (bytes; None: not
    given) that breaks the alignment table's rule for `fmt`."""
    rule = ALIGNMENT.get(fmt)
    if rule is None:
        raise NvdlaSimError(f"format '{fmt}': not one of {', '.join(ALIGNMENT)}")
    for name, value in values.items():
        if value is None:
            continue
        align = getattr(rule, name)
        if align is None:
            continue
        if value < 0 or value % align:
            raise NvdlaSimError(f"{fmt} format: {_LABELS[name]} {value:#x} is not a multiple of "
                                f"{align} bytes (alignment table)")


def align_up(nbytes: int, align: int) -> int:
    return -(-nbytes // align) * align
