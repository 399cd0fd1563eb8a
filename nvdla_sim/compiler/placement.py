"""Tensor placement: where a feature cube (or any byte image) lives in DBB or CVSRAM memory.

A feature cube of C channels x H x W uses the layout of the NVDLA reference map 5.1: surfaces of
one atom (`atom` bytes, the configuration's memory_atomic_bytes: 32 INT8 or 16 INT16/FP16 channels
on nv_full), each surface H lines of W atoms; the last surface is padded to a whole atom.  The
element type (`nvdla_sim.datatype`) is part of the placement: sizes and offsets are in bytes.  Placements made here are packed: line stride
W*atom, surface stride H*line stride.  Views of a placement (a band of lines for a partial-height
hardware layer, a run of whole surfaces for concatenation along channels) keep the parent strides.

The allocator is a bump allocator per memory space.  Every buffer starts on a 32-byte boundary
(the NVDLA software checks 32-byte alignment of conv input, weight and output addresses; every
configuration's atom divides 32 or is 32); weight images are sized to a multiple of 128 bytes
(the WEIGHT_BYTES granularity conv.c checks).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..config import HardwareConfig
from ..datatype import INT8, DataType
from ..errors import NvdlaSimError
from ..memory import MemoryLayout

DBB, CVSRAM = "DBB", "CVSRAM"
RAM_TYPE = {DBB: 1, CVSRAM: 0}          # *_RAM_TYPE register fields: MC/MCIF = 1, CV/CVIF = 0
TRACE_MEM = {DBB: "pri_mem", CVSRAM: "sec_mem"}
BUFFER_ALIGN_BYTES = 32
WEIGHT_SIZE_ALIGN_BYTES = 128
# Where trace tests put data: DBB at 0x8000_0000 (address bit 31 routes to DBB), CVSRAM at
# 0x5000_0000 (inside the secondary space of memory.MemoryLayout, bit 31 clear).
DEFAULT_BASE = {DBB: MemoryLayout().primary_base, CVSRAM: 0x5000_0000}


def align_up(value: int, alignment: int) -> int:
    return -(-value // alignment) * alignment


class InMemorySpace:
    """Something placed in DBB or CVSRAM (`space`): its RAM_TYPE field value and trace memory name."""
    space: str

    @property
    def ram_type(self) -> int:
        return RAM_TYPE[self.space]

    @property
    def mem(self) -> str:
        return TRACE_MEM[self.space]


@dataclass(frozen=True)
class TensorPlacement(InMemorySpace):
    """A C x H x W cube of `dtype` elements in memory (reference map 5.1 layout)."""
    name: str
    space: str                 # DBB or CVSRAM
    address: int
    width: int
    height: int
    channels: int
    atom: int                  # bytes per atom (an image: bytes per pixel)
    line_stride: int
    surf_stride: int
    dtype: DataType = INT8

    @property
    def atom_channels(self) -> int:
        """Channels one atom holds (32 INT8 or 16 INT16/FP16 in a 32-byte atom)."""
        return max(1, self.dtype.elements_per_atom(self.atom))

    @property
    def surfaces(self) -> int:
        return -(-self.channels // self.atom_channels)

    @property
    def lanes(self) -> int:
        """Channels including the padding lanes of the last surface."""
        return self.surfaces * self.atom_channels

    @property
    def size_bytes(self) -> int:
        """The footprint a unit writes: every surface, all atom lanes (what a CRC check covers)."""
        return (self.surfaces - 1) * self.surf_stride + (self.height - 1) * self.line_stride \
            + self.width * self.atom

    @property
    def line_packed(self) -> bool:
        return self.line_stride == self.width * self.atom

    @property
    def surf_packed(self) -> bool:
        return self.surf_stride == self.height * self.line_stride

    def rows(self, first: int, count: int, name: str | None = None) -> "TensorPlacement":
        """Lines [first, first+count) of the cube, same strides (a partial-height band)."""
        if first < 0 or count <= 0 or first + count > self.height:
            raise NvdlaSimError(f"{self.name}: lines [{first}, {first + count}) are outside "
                                f"its height {self.height}")
        return replace(self, name=name or f"{self.name}[y{first}:{first + count}]",
                       address=self.address + first * self.line_stride, height=count)

    def channel_slice(self, first: int, count: int, name: str | None = None) -> "TensorPlacement":
        """Channels [first, first+count): whole surfaces only, so `first` is a multiple of the atom
        (how concatenation along channels is placed: each producer writes its own surfaces)."""
        if first % self.atom_channels:
            raise NvdlaSimError(f"{self.name}: a channel slice must start on an atom boundary "
                                f"(multiple of {self.atom_channels}), not at channel {first}")
        if first < 0 or count <= 0 or first + count > self.channels:
            raise NvdlaSimError(f"{self.name}: channels [{first}, {first + count}) are outside "
                                f"its {self.channels} channels")
        return replace(self, name=name or f"{self.name}[c{first}:{first + count}]",
                       address=self.address + (first // self.atom_channels) * self.surf_stride,
                       channels=count)


@dataclass(frozen=True)
class Buffer(InMemorySpace):
    """A plain byte buffer (weights, SDP operand arrays)."""
    name: str
    space: str
    address: int
    size_bytes: int


class Allocator:
    """Bump allocation of feature cubes and byte buffers in DBB and (if present) CVSRAM."""

    def __init__(self, hw: HardwareConfig, cvsram_bytes: int | None = None,
                 dbb_bytes: int = 0x4000_0000, base: dict[str, int] | None = None):
        self.hw = hw
        self.atom = hw.memory_atomic_bytes
        bases = dict(DEFAULT_BASE, **(base or {}))
        self._next = {DBB: bases[DBB]}
        self._end = {DBB: bases[DBB] + dbb_bytes}
        if hw.secondary_memif is not None and cvsram_bytes:
            self._next[CVSRAM] = bases[CVSRAM]
            self._end[CVSRAM] = bases[CVSRAM] + cvsram_bytes
        self.placements: list[TensorPlacement | Buffer] = []

    def has_space(self, space: str) -> bool:
        return space in self._next

    def free_bytes(self, space: str) -> int:
        return self._end[space] - self._next[space] if space in self._next else 0

    def _take(self, name: str, space: str, nbytes: int, align: int) -> int:
        if space not in self._next:
            why = "" if space == DBB else " has no CVSRAM or its size is 0"
            raise NvdlaSimError(f"{name}: no {space} memory in this configuration "
                                f"({self.hw.name}{why})")
        address = align_up(self._next[space], align)
        if address + nbytes > self._end[space]:
            raise NvdlaSimError(f"{name}: {nbytes} bytes do not fit in {space} "
                                f"({self._end[space] - address} bytes left)")
        self._next[space] = address + nbytes
        return address

    def feature(self, name: str, channels: int, height: int, width: int,
                space: str = DBB, dtype: DataType = INT8) -> TensorPlacement:
        """A packed C x H x W cube of `dtype` elements."""
        if min(channels, height, width) <= 0:
            raise NvdlaSimError(f"{name}: cube {channels}x{height}x{width} must have positive sizes")
        line_stride = width * self.atom
        surf_stride = height * line_stride
        surfaces = -(-channels // dtype.elements_per_atom(self.atom))
        address = self._take(name, space, surfaces * surf_stride, BUFFER_ALIGN_BYTES)
        placement = TensorPlacement(name, space, address, width, height, channels, self.atom,
                                    line_stride, surf_stride, dtype)
        self.placements.append(placement)
        return placement

    def buffer(self, name: str, nbytes: int, space: str = DBB,
               size_align: int = 1) -> Buffer:
        """`nbytes` (rounded up to `size_align`) bytes on a 32-byte boundary."""
        size = align_up(max(nbytes, 1), size_align)
        buf = Buffer(name, space, self._take(name, space, size, BUFFER_ALIGN_BYTES), size)
        self.placements.append(buf)
        return buf

    def weights(self, name: str, nbytes: int, space: str = DBB) -> Buffer:
        return self.buffer(name, nbytes, space, WEIGHT_SIZE_ALIGN_BYTES)
