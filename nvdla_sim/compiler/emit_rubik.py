"""RUBIK CONTRACT hardware layers (compiler/deconv.py plans them; units/rubik.py runs them).

Registers as the NVDLA firmware programs a contract: the input cube's size and strides, the
output's channels and strides, CONTRACT_STRIDE_0 = output surfaces x input surface stride (one
phase block to the next), CONTRACT_STRIDE_1 = DECONV_Y x output line stride (one input line to
the next output line group).
"""
from __future__ import annotations

from ..errors import NvdlaSimError
from .deconv import MAX_CONTRACT_STRIDE, ContractSpec
from .emit import ProgramBuilder
from .placement import TensorPlacement

RUBIK_ATOM_BYTES = 32


def emit_contract(b: ProgramBuilder, name: str, spec: ContractSpec, src: TensorPlacement,
                  dst: TensorPlacement) -> str:
    """One RUBIK CONTRACT layer from `src` (the phase blocks) to `dst` (whose lines may be
    longer than the tensor: the contracted cube is written whole); returns its sync id."""
    if not b.hw.features.rubik:
        raise NvdlaSimError(f"{name}: {b.hw.name} has no RUBIK")
    sy, sx = spec.stride
    if max(sy, sx) > MAX_CONTRACT_STRIDE:
        raise NvdlaSimError(f"{name}: contract stride {sy}x{sx} above {MAX_CONTRACT_STRIDE}")
    for p in (src, dst):
        if p.atom != RUBIK_ATOM_BYTES:
            raise NvdlaSimError(f"{name}: {p.name} has {p.atom}-byte atoms; RUBIK moves 32-byte atoms")
    if src.dtype != dst.dtype:
        raise NvdlaSimError(f"{name}: RUBIK copies, {src.dtype} in, {dst.dtype} out")
    out_surfaces = -(-spec.out_channels // dst.atom_channels)
    if dst.line_stride < spec.out_w * RUBIK_ATOM_BYTES or src.channels < spec.in_channels:
        raise NvdlaSimError(f"{name}: buffers smaller than the contract {spec}")
    groups = b.begin_layer(name, ["RBK"])
    b.reg("RBK", "D_MISC_CFG", RUBIK_MODE="CONTRACT", IN_PRECISION=src.dtype.name)
    b.reg("RBK", "D_DAIN_RAM_TYPE", DATAIN_RAM_TYPE=src.ram_type)
    b.reg("RBK", "D_DATAIN_SIZE_0", DATAIN_WIDTH=spec.in_w - 1, DATAIN_HEIGHT=spec.in_h - 1)
    # DATAIN_CHANNEL is not read in CONTRACT mode (the blocks follow from the output channels
    # and the strides); the phase cube may exceed its 13 bits
    b.reg("RBK", "D_DATAIN_SIZE_1", DATAIN_CHANNEL=min(spec.in_channels, 8192) - 1)
    b.address("RBK", "D_DAIN_ADDR_LOW", "D_DAIN_ADDR_HIGH", src.address)
    b.word("RBK", "D_DAIN_LINE_STRIDE", src.line_stride)
    b.word("RBK", "D_DAIN_SURF_STRIDE", src.surf_stride)
    b.reg("RBK", "D_DAOUT_RAM_TYPE", DATAOUT_RAM_TYPE=dst.ram_type)
    b.reg("RBK", "D_DATAOUT_SIZE_1", DATAOUT_CHANNEL=spec.out_channels - 1)
    b.address("RBK", "D_DAOUT_ADDR_LOW", "D_DAOUT_ADDR_HIGH", dst.address)
    b.word("RBK", "D_DAOUT_LINE_STRIDE", dst.line_stride)
    b.word("RBK", "D_DAOUT_SURF_STRIDE", dst.surf_stride)
    b.word("RBK", "D_CONTRACT_STRIDE_0", out_surfaces * src.surf_stride)
    b.word("RBK", "D_CONTRACT_STRIDE_1", sy * dst.line_stride)
    b.reg("RBK", "D_DECONV_STRIDE", DECONV_X_STRIDE=sx - 1, DECONV_Y_STRIDE=sy - 1)
    b.enable("RBK")
    sync_id = b.intr_notify("RUBIK", groups["RBK"])
    b.end_layer(sync_id)
    return sync_id
