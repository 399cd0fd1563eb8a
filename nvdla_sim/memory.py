"""The two address spaces NVDLA sees: primary (DBB, through MCIF) and secondary (CVSRAM, CVIF).

Each space is a sparse array of pages: only touched pages exist, untouched bytes read as zero (as in
the Verilator testbench memory).  Every access is bounds-checked against the space's window.
"""
from __future__ import annotations

import os
import zlib
from dataclasses import dataclass

import numpy as np

from .errors import NvdlaSimError

PAGE_BITS = 16
PAGE_BYTES = 1 << PAGE_BITS


def default_limit_bytes() -> int:
    """Simulated memory a run may touch: $NVDLA_SIM_MEMORY_LIMIT_MB, else a quarter of the
    machine's RAM capped at 4 GiB (an official test touches a few MiB)."""
    env = os.environ.get("NVDLA_SIM_MEMORY_LIMIT_MB")
    if env:
        try:
            return max(1, int(env)) << 20
        except ValueError:
            raise NvdlaSimError(f"NVDLA_SIM_MEMORY_LIMIT_MB='{env}' is not a whole number") from None
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        ram = 16 << 30
    return min(4 << 30, ram // 4)


class MemoryAccessError(NvdlaSimError):
    pass


class PageBudget:
    """Pages allocated across the address spaces of one memory system, against a limit."""

    def __init__(self, limit_bytes: int | None = None):
        self.limit_pages = max(1, (limit_bytes or default_limit_bytes()) // PAGE_BYTES)
        self.pages = 0


class AddressSpace:
    def __init__(self, name: str, base: int, size_bytes: int, budget: PageBudget | None = None):
        self.name = name
        self.base = base
        self.size_bytes = size_bytes
        self._pages: dict[int, np.ndarray] = {}
        self.budget = budget or PageBudget()

    def _reserve(self, addr: int, nbytes: int, what: str) -> None:
        """Refuse, before allocating anything, an access that would take the simulated memory
        past its limit."""
        first, last = addr >> PAGE_BITS, (addr + nbytes - 1) >> PAGE_BITS
        if nbytes <= 0:
            return
        missing = sum(1 for i in range(first, last + 1) if i not in self._pages) \
            if last - first < 1 << 20 else last - first + 1
        if self.budget.pages + missing > self.budget.limit_pages:
            raise MemoryAccessError(
                f"{what} of {nbytes} bytes at 0x{addr:x} in {self.name} would take the simulated "
                f"memory to {(self.budget.pages + missing) * PAGE_BYTES >> 20} MiB, past the "
                f"{self.budget.limit_pages * PAGE_BYTES >> 20} MiB limit "
                "(NVDLA_SIM_MEMORY_LIMIT_MB raises it)")

    @property
    def end(self) -> int:
        return self.base + self.size_bytes

    def contains(self, addr: int, nbytes: int = 1) -> bool:
        return self.base <= addr and addr + nbytes <= self.end

    def _check(self, addr: int, nbytes: int, what: str) -> None:
        if nbytes < 0 or not self.contains(addr, nbytes):
            raise MemoryAccessError(
                f"{what} of {nbytes} bytes at 0x{addr:x} is outside {self.name} "
                f"[0x{self.base:x}, 0x{self.end:x})")

    def _page(self, index: int, create: bool) -> np.ndarray | None:
        page = self._pages.get(index)
        if page is None and create:
            page = self._pages[index] = np.zeros(PAGE_BYTES, np.uint8)
            self.budget.pages += 1
        return page

    def read(self, addr: int, nbytes: int) -> np.ndarray:
        """A copy of `nbytes` bytes from `addr` (uint8)."""
        self._check(addr, nbytes, "read")
        if nbytes > self.budget.limit_pages * PAGE_BYTES:
            raise MemoryAccessError(f"read of {nbytes} bytes at 0x{addr:x} in {self.name} is past "
                                    f"the {self.budget.limit_pages * PAGE_BYTES >> 20} MiB limit "
                                    "(NVDLA_SIM_MEMORY_LIMIT_MB raises it)")
        out = np.zeros(nbytes, np.uint8)
        pos = 0
        while pos < nbytes:
            a = addr + pos
            index, offset = a >> PAGE_BITS, a & (PAGE_BYTES - 1)
            n = min(PAGE_BYTES - offset, nbytes - pos)
            page = self._pages.get(index)
            if page is not None:
                out[pos:pos + n] = page[offset:offset + n]
            pos += n
        return out

    def write(self, addr: int, data) -> None:
        data = np.frombuffer(bytes(data), np.uint8) if isinstance(data, (bytes, bytearray)) \
            else np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        nbytes = data.size
        self._check(addr, nbytes, "write")
        self._reserve(addr, nbytes, "write")
        pos = 0
        while pos < nbytes:
            a = addr + pos
            index, offset = a >> PAGE_BITS, a & (PAGE_BYTES - 1)
            n = min(PAGE_BYTES - offset, nbytes - pos)
            self._page(index, True)[offset:offset + n] = data[pos:pos + n]
            pos += n

    def fill(self, addr: int, nbytes: int, value: int = 0) -> None:
        self._check(addr, nbytes, "fill")
        if value != 0:
            self._reserve(addr, nbytes, "fill")
        pos = 0
        while pos < nbytes:
            a = addr + pos
            index, offset = a >> PAGE_BITS, a & (PAGE_BYTES - 1)
            n = min(PAGE_BYTES - offset, nbytes - pos)
            page = self._page(index, value != 0)
            if page is not None:
                page[offset:offset + n] = value
            pos += n

    def crc32(self, addr: int, nbytes: int) -> int:
        """CRC-32 (zlib polynomial, as the NVDLA testbench computes it) page by page, no big copy."""
        self._check(addr, nbytes, "CRC window")
        crc = 0
        pos = 0
        zero = bytes(PAGE_BYTES)
        while pos < nbytes:
            a = addr + pos
            index, offset = a >> PAGE_BITS, a & (PAGE_BYTES - 1)
            n = min(PAGE_BYTES - offset, nbytes - pos)
            page = self._pages.get(index)
            chunk = page[offset:offset + n].tobytes() if page is not None else zero[:n]
            crc = zlib.crc32(chunk, crc)
            pos += n
        return crc & 0xFFFFFFFF


@dataclass(frozen=True)
class MemoryLayout:
    """Where each space sits in the 64-bit address map."""
    primary_base: int = 0x8000_0000
    primary_size_bytes: int = 0x8000_0000
    secondary_base: int = 0x0
    secondary_size_bytes: int = 0x8000_0000


class MemorySystem:
    """DBB and CVSRAM.  DMA engines pick a space by their RAM_TYPE bit (1 = MC/DBB, 0 = CV/SRAM);
    trace commands pick by address bit 31 (the NVDLA Verilator testbench's rule)."""

    def __init__(self, layout: MemoryLayout = MemoryLayout(), has_secondary: bool = True,
                 limit_bytes: int | None = None):
        self.budget = PageBudget(limit_bytes)
        self.primary = AddressSpace("pri_mem (DBB)", layout.primary_base, layout.primary_size_bytes,
                                    self.budget)
        self.secondary = AddressSpace("sec_mem (CVSRAM)", layout.secondary_base,
                                      layout.secondary_size_bytes, self.budget) \
            if has_secondary else None

    def space(self, ram_type: int) -> AddressSpace:
        if ram_type == 1:
            return self.primary
        if self.secondary is None:
            raise MemoryAccessError("a DMA selects CVSRAM (RAM_TYPE=0) but this configuration has "
                                    "no secondary memory interface")
        return self.secondary

    def space_for_address(self, addr: int) -> AddressSpace:
        if self.primary.contains(addr):
            return self.primary
        if self.secondary is not None and self.secondary.contains(addr):
            return self.secondary
        return self.primary  # the access is then reported out of bounds by the primary space
