"""GLB: interrupt status (write-1-to-clear), mask and set registers, and the waits of a program.

Status bits are set whatever the mask says (the mask only gates the interrupt wire).  A program's
`intr_notify` arms a wait on one bit; when the bit is set the wait fires, clears exactly that bit
(as the NVDLA testbench does) and its checks run.  The v1 trace player's `wait` instead watches
the interrupt line: high while any status bit is set that S_INTR_MASK does not mask.
"""
from __future__ import annotations

from collections import deque
from typing import Callable

import simpy

from ..regs import RegisterFile

# GLB S_INTR_STATUS bit of <source><group>.
INTR_BIT = {("SDP", 0): 0, ("SDP", 1): 1, ("CDP", 0): 2, ("CDP", 1): 3, ("PDP", 0): 4, ("PDP", 1): 5,
            ("BDMA", 0): 6, ("BDMA", 1): 7, ("RUBIK", 0): 8, ("RUBIK", 1): 9,
            ("CDMA_DAT", 0): 16, ("CDMA_DAT", 1): 17, ("CDMA_WT", 0): 18, ("CDMA_WT", 1): 19,
            ("CACC", 0): 20, ("CACC", 1): 21}


class Glb:
    def __init__(self, env: simpy.Environment, regs: RegisterFile):
        self.env = env
        self.unit = regs["GLB"]
        self._status_reg = self.unit.definition.regs["S_INTR_STATUS"]
        self._waits: dict[int, deque] = {}
        self._line_waits: list[simpy.Event] = []
        self._bits_waits: list[tuple[int, simpy.Event]] = []    # VP `until`: all bits set
        self._mask_reg = self.unit.definition.regs["S_INTR_MASK"]
        self.raised: list[tuple[float, str, int]] = []    # (cycle, source, group)
        status_off = self._status_reg.offset
        self.status_addr = regs.map.base("GLB") + status_off     # CSB byte address
        set_off = self.unit.definition.regs["S_INTR_SET"].offset
        # W1C on status; S_INTR_SET sets bits: replace the plain-store behaviour of both.
        self.unit.csb_write = self._wrap_write(self.unit.csb_write, status_off, set_off)

    def _wrap_write(self, plain: Callable, status_off: int, set_off: int) -> Callable:
        def write(reg, value):
            if reg.offset == status_off:
                self.status &= ~value
            elif reg.offset == set_off:
                self._set_bits(value)
            else:
                plain(reg, value)
                self._wake_line()          # unmasking a set bit raises the line
        return write

    @property
    def status(self) -> int:
        return self.unit.read_word(self._status_reg)

    @status.setter
    def status(self, value: int) -> None:
        self.unit.set_word("S_INTR_STATUS", value)

    @property
    def line(self) -> bool:
        """The interrupt wire to the host: a status bit the mask lets through."""
        return bool(self.status & ~self.unit.read_word(self._mask_reg))

    def wait_line(self) -> simpy.Event:
        """An event that fires (with the cycle) when the interrupt line is or becomes high."""
        event = self.env.event()
        self._line_waits.append(event)
        self._wake_line()
        return event

    def _wake_line(self) -> None:
        if self._line_waits and self.line:
            for event in self._line_waits:
                event.succeed(self.env.now)
            self._line_waits.clear()

    def wait_bits(self, bits: int) -> simpy.Event:
        """An event that fires (with the cycle) when every bit of `bits` is or becomes set in
        S_INTR_STATUS (a VP trace's `until`); nothing is cleared."""
        event = self.env.event()
        self._bits_waits.append((bits, event))
        self._wake_bits()
        return event

    def _wake_bits(self) -> None:
        if not self._bits_waits:
            return
        status = self.status
        still = []
        for bits, event in self._bits_waits:
            if status & bits == bits:
                event.succeed(self.env.now)
            else:
                still.append((bits, event))
        self._bits_waits = still

    @staticmethod
    def describe_bits(bits: int) -> str:
        """Status bits by name (SDP0, CDMA_WT1, ...); bits no unit raises as `bitN`."""
        names = {bit: f"{src}{grp}" for (src, grp), bit in INTR_BIT.items()}
        return " ".join(names.get(b, f"bit{b}") for b in range(32) if bits >> b & 1) or "none"

    def raise_interrupt(self, source: str, group: int) -> None:
        self.raised.append((self.env.now, source, group))
        self._set_bits(1 << INTR_BIT[(source, group)])

    def _set_bits(self, bits: int) -> None:
        self.status |= bits
        for bit, waits in self._waits.items():
            while waits and self.status >> bit & 1:
                self.status &= ~(1 << bit)
                waits.popleft().succeed(self.env.now)
        self._wake_line()
        self._wake_bits()

    def arm(self, source: str, group: int) -> simpy.Event:
        """An event that fires (with the cycle) when <source><group> is or becomes set."""
        bit = INTR_BIT[(source, group)]
        event = self.env.event()
        self._waits.setdefault(bit, deque()).append(event)
        self._set_bits(0)
        return event
