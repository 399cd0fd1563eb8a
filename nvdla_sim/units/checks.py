"""Consistency of registers the hardware reads but the simulator's units derive from the rest of
the layer.  Where such a register contradicts the layer, the hardware would read the wrong CBUF
lines, stop early or wait for data that never comes; the simulator would compute the right answer
anyway and let a wrong program pass its CRC.  Each check runs before the unit computes anything
and names the register (one line, NvdlaSimError).

- CSC: D_ENTRY_PER_SLICE and D_WEIGHT_BYTES must equal the CDMA's (the CSC reads CBUF with its
  own copy: a different slice size reads other lines, other weight bytes other kernels);
  D_ATOMICS + 1 is the number of output positions of a direct convolution (the CSC issues that
  many atomic operations per kernel group: fewer stop early, more read past the input).
- PDP: D_DATA_CUBE_OUT_CHANNEL must equal D_DATA_CUBE_IN_CHANNEL (pooling keeps the channels);
  reading from memory (FLYING_MODE off), PDP_RDMA must fetch the cube PDP pools (the same width,
  height and channels).  PDP_RDMA.D_FLYING_MODE is read by no RTL logic (see check_pdp).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import NvdlaSimError
from ..regs.regfile import GroupView

if TYPE_CHECKING:
    from .base import Unit

FLYING_ON = 0                     # PDP / PDP_RDMA FLYING_MODE: 0 = on the fly from SDP


def peer(unit: "Unit", block: str, view: GroupView) -> GroupView:
    """The registers of another unit in the same register group (programmed before any enable)."""
    return GroupView(unit.engine.regs[block], view.group)


def check_csc(unit: "Unit", view: GroupView, out_w: int, out_h: int, winograd: bool,
              batches: int) -> None:
    cdma = peer(unit, "CDMA", view)
    csc_eps = view.field("D_ENTRY_PER_SLICE", "ENTRIES")
    cdma_eps = cdma.field("D_ENTRY_PER_SLICE", "ENTRIES")
    if csc_eps != cdma_eps:
        raise NvdlaSimError(f"CSC.D_ENTRY_PER_SLICE.ENTRIES={csc_eps} differs from the CDMA's "
                            f"{cdma_eps}: the CSC would read CBUF lines the CDMA did not write")
    csc_wb, cdma_wb = view.word("D_WEIGHT_BYTES"), cdma.word("D_WEIGHT_BYTES")
    if csc_wb != cdma_wb:
        raise NvdlaSimError(f"CSC.D_WEIGHT_BYTES={csc_wb} differs from CDMA.D_WEIGHT_BYTES="
                            f"{cdma_wb}: the CSC would take other weights than the CDMA loaded")
    if not winograd and batches == 1:
        atomics = view.field("D_ATOMICS", "ATOMICS") + 1
        if atomics != out_w * out_h:
            raise NvdlaSimError(f"CSC.D_ATOMICS.ATOMICS={atomics - 1}: a {out_w}x{out_h} output "
                                f"takes {out_w * out_h} atomic operations per kernel group "
                                f"(ATOMICS={out_w * out_h - 1})")


def check_pdp(unit: "Unit", view: GroupView) -> None:
    c_in = view.field("D_DATA_CUBE_IN_CHANNEL", "CUBE_IN_CHANNEL")
    c_out = view.field("D_DATA_CUBE_OUT_CHANNEL", "CUBE_OUT_CHANNEL")
    if c_in != c_out:
        raise NvdlaSimError(f"PDP.D_DATA_CUBE_OUT_CHANNEL.CUBE_OUT_CHANNEL={c_out} differs from "
                            f"CUBE_IN_CHANNEL={c_in}: pooling keeps the channels")
    if view.field("D_OPERATION_MODE_CFG", "FLYING_MODE") == FLYING_ON:
        return
    # PDP_RDMA.D_FLYING_MODE is not checked: the RTL's RDMA (NV_NVDLA_PDP_rdma.v) wires the field
    # to nothing, and the NVDLA software leaves it at ON_FLYING while the RDMA fetches (the gem5
    # captures in tests/test_vp_trace.py); PDP's own FLYING_MODE decides.
    # PDP and PDP_RDMA keep their own group pointers: a PDP fed on the fly by SDP advances PDP's
    # and not the RDMA's, so a compiled program's memory-fed PDP may run in group 1 while its RDMA
    # runs in group 0.  The cube must be in one of the RDMA's groups.
    cube = (("D_DATA_CUBE_IN_WIDTH", "CUBE_IN_WIDTH"), ("D_DATA_CUBE_IN_HEIGHT", "CUBE_IN_HEIGHT"),
            ("D_DATA_CUBE_IN_CHANNEL", "CUBE_IN_CHANNEL"))
    regs = unit.engine.regs["PDP_RDMA"]
    if any(all(view.field(reg, field) == GroupView(regs, g).field(reg, field) for reg, field in cube)
           for g in (0, 1)):
        return
    rdma = peer(unit, "PDP_RDMA", view)
    for reg, field in cube:
        mine, theirs = view.field(reg, field), rdma.field(reg, field)
        if mine != theirs:
            raise NvdlaSimError(f"PDP_RDMA.{reg}.{field}={theirs} differs from PDP's {mine}: "
                                "the RDMA would fetch another cube than PDP pools")


def check_rubik(unit: "Unit", c) -> None:
    """A RUBIK CONTRACT (units/rubik.Contract) reads and writes inside its memory spaces.  The
    values path finds a stray address when it copies; a timing-only run moves no data, so
    without this check it would time a contract the hardware could not perform (and exit 0).
    Extents: the last atom of the last block, surface and line, on either side."""
    atom = 32
    last_block = (c.stride_y * c.stride_x - 1) * c.block_stride
    src_end = (c.src + last_block + (c.out_surfaces - 1) * c.src_surf_stride
               + (c.height - 1) * c.src_line_stride + c.width * atom)
    dst_end = (c.dst + (c.out_surfaces - 1) * c.dst_surf_stride + (c.height - 1) * c.super_line_stride
               + (c.stride_y - 1) * c.dst_line_stride + c.width * c.stride_x * atom)
    memory = unit.engine.memory
    for side, start, end, ram, regs in (
            ("reads", c.src, src_end, c.src_ram_type, "D_DAIN_ADDR_LOW/HIGH, D_DAIN_RAM_TYPE"),
            ("writes", c.dst, dst_end, c.dst_ram_type, "D_DAOUT_ADDR_LOW/HIGH, D_DAOUT_RAM_TYPE")):
        space = memory.space(ram)
        if not space.contains(start, end - start):
            raise NvdlaSimError(f"RBK ({regs}): the contract {side} [0x{start:x}, 0x{end:x}), "
                                f"outside {space.name} [0x{space.base:x}, 0x{space.end:x})")
