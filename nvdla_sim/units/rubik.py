"""RUBIK (nv_full's data-reshape engine): CONTRACT mode modelled; SPLIT and MERGE refused.

CONTRACT (deconvolution, compiler/deconv.py) is a DMA engine moving 32-byte atoms between two
feature cubes in memory, learnt from the v1 C model (cmod/rubik) and the register description:

    input   DATAIN_WIDTH+1 x DATAIN_HEIGHT+1, (DECONV_Y+1)(DECONV_X+1) blocks of
            ceil((DATAOUT_CHANNEL+1) / atom channels) surfaces; block (iy, ix) starts at
            DAIN_ADDR + (iy*(DECONV_X+1) + ix) * CONTRACT_STRIDE_0 (the firmware sets that to the
            output surfaces x DAIN_SURF_STRIDE), surfaces DAIN_SURF_STRIDE, lines DAIN_LINE_STRIDE
    output  atom (s, h, w) of block (iy, ix) goes to line h*(DECONV_Y+1) + iy, pixel
            w*(DECONV_X+1) + ix of surface s: DAOUT_ADDR + s*DAOUT_SURF_STRIDE +
            h*CONTRACT_STRIDE_1 + iy*DAOUT_LINE_STRIDE + (w*(DECONV_X+1) + ix) * 32

Atoms are copied whole (padding lanes included); the values never change, so one code path
serves INT8, INT16 and FP16 (IN_PRECISION sets only the channels per atom).  Addresses and
strides are in 32-byte units (bits 31:5).  Timing: timing/rubik.py.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Generator

import numpy as np

from ..errors import NvdlaSimError
from ..regs import GroupView
from .base import Unit

RUBIK_MODES = {0: "CONTRACT", 1: "SPLIT", 2: "MERGE"}
ATOM_BYTES = 32                     # RUBIK_ATOM_CUBE_SIZE: fixed, whatever the memory atom
ELEMENT_BYTES = {0: 1, 1: 2, 2: 2}  # IN_PRECISION INT8 / INT16 / FP16


@dataclass(frozen=True)
class Contract:
    """A CONTRACT layer decoded from its register group."""
    width: int
    height: int
    stride_x: int
    stride_y: int
    out_surfaces: int
    src: int
    src_ram_type: int
    src_line_stride: int
    src_surf_stride: int
    block_stride: int               # CONTRACT_STRIDE_0
    dst: int
    dst_ram_type: int
    dst_line_stride: int
    dst_surf_stride: int
    super_line_stride: int          # CONTRACT_STRIDE_1

    @property
    def nbytes(self) -> int:
        """Bytes read (and written): every atom of every block."""
        return self.stride_x * self.stride_y * self.out_surfaces * self.height * self.width * ATOM_BYTES


def _stride(view: GroupView, reg: str) -> int:
    return view.word(reg) & ~(ATOM_BYTES - 1)


def decode_contract(view: GroupView) -> Contract:
    precision = view.field("D_MISC_CFG", "IN_PRECISION")
    if precision not in ELEMENT_BYTES:
        raise NvdlaSimError(f"RBK.D_MISC_CFG.IN_PRECISION={precision}: not INT8, INT16 or FP16")
    per_atom = ATOM_BYTES // ELEMENT_BYTES[precision]
    channels = view.field("D_DATAOUT_SIZE_1", "DATAOUT_CHANNEL") + 1

    def addr(low: str, high: str) -> int:
        return (view.word(low) & ~(ATOM_BYTES - 1)) | (view.word(high) << 32)

    return Contract(
        width=view.field("D_DATAIN_SIZE_0", "DATAIN_WIDTH") + 1,
        height=view.field("D_DATAIN_SIZE_0", "DATAIN_HEIGHT") + 1,
        stride_x=view.field("D_DECONV_STRIDE", "DECONV_X_STRIDE") + 1,
        stride_y=view.field("D_DECONV_STRIDE", "DECONV_Y_STRIDE") + 1,
        out_surfaces=-(-channels // per_atom),
        src=addr("D_DAIN_ADDR_LOW", "D_DAIN_ADDR_HIGH"),
        src_ram_type=view.field("D_DAIN_RAM_TYPE", "DATAIN_RAM_TYPE"),
        src_line_stride=_stride(view, "D_DAIN_LINE_STRIDE"),
        src_surf_stride=_stride(view, "D_DAIN_SURF_STRIDE"),
        block_stride=_stride(view, "D_CONTRACT_STRIDE_0"),
        dst=addr("D_DAOUT_ADDR_LOW", "D_DAOUT_ADDR_HIGH"),
        dst_ram_type=view.field("D_DAOUT_RAM_TYPE", "DATAOUT_RAM_TYPE"),
        dst_line_stride=_stride(view, "D_DAOUT_LINE_STRIDE"),
        dst_surf_stride=_stride(view, "D_DAOUT_SURF_STRIDE"),
        super_line_stride=_stride(view, "D_CONTRACT_STRIDE_1"),
    )


def contract_values(memory, c: Contract) -> None:
    """Copy every atom of the contract to its place (see the module doc)."""
    src, dst = memory.space(c.src_ram_type), memory.space(c.dst_ram_type)
    line_bytes = c.width * ATOM_BYTES
    out_line = np.empty((c.width, c.stride_x, ATOM_BYTES), np.uint8)
    for s in range(c.out_surfaces):
        for h in range(c.height):
            for iy in range(c.stride_y):
                for ix in range(c.stride_x):
                    a = (c.src + (iy * c.stride_x + ix) * c.block_stride + s * c.src_surf_stride
                         + h * c.src_line_stride)
                    out_line[:, ix] = src.read(a, line_bytes).reshape(c.width, ATOM_BYTES)
                dst.write(c.dst + s * c.dst_surf_stride + h * c.super_line_stride
                          + iy * c.dst_line_stride, out_line.reshape(-1))


class Rubik(Unit):
    block = "RBK"
    interrupt = "RUBIK"

    def execute(self, view: GroupView) -> Generator:
        mode = view.field("D_MISC_CFG", "RUBIK_MODE")
        if mode != 0:
            raise self.unsupported(f"RUBIK_MODE={RUBIK_MODES.get(mode, mode)}: only CONTRACT "
                                   "(deconvolution) is modelled")
        c = decode_contract(view)
        from .checks import check_rubik
        check_rubik(self, c)        # before any data moves, in timing-only runs too
        if self.engine.compute_values:
            contract_values(self.engine.memory, c)
        from ..timing.rubik import contract_timing
        yield from contract_timing(self, c)
        self.stats["bytes"] = self.stats.get("bytes", 0) + c.nbytes
