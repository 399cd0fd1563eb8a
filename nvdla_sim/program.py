"""RegisterProgram: what every frontend produces and the engine executes.

A program is an ordered list of commands: CSB register writes, memory images, waits on interrupts and
checks of memory.  Official .cfg traces, virtual-platform traces and compiled scenarios all become one.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Where:
    """Source position of a command, for error messages."""
    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class RegWrite:
    addr: int                  # CSB byte address
    value: int
    name: str                  # UNIT.REG, for messages and listings
    where: Where | None = None


@dataclass(frozen=True)
class MemFill:
    mem: str                   # "pri_mem" / "sec_mem" as written; routing is by address
    addr: int
    nbytes: int
    value: int = 0
    where: Where | None = None


@dataclass(frozen=True)
class MemLoad:
    mem: str
    addr: int
    data: np.ndarray = field(repr=False)     # uint8 image, gaps already zero
    source: str = ""
    where: Where | None = None


@dataclass(frozen=True)
class PollRegEqual:
    addr: int
    value: int
    name: str
    where: Where | None = None


@dataclass(frozen=True)
class IntrNotify:
    """Arm a wait on a GLB interrupt status bit; `sync_id` names the event."""
    source: str                # SDP, CDP, PDP, CACC, CDMA_DAT, CDMA_WT
    group: int
    sync_id: str
    where: Where | None = None


@dataclass(frozen=True)
class SyncWait:
    """Hold the register stream of the program until the interrupt armed as `sync_id` has fired
    (`sync_wait(NVDLA_<block>, sync_id)`: how a multi-layer trace waits for a layer to finish)."""
    block: str
    sync_id: str
    where: Where | None = None


@dataclass(frozen=True)
class CheckCrc:
    sync_id: str
    mem: str
    addr: int
    nbytes: int
    expected: int
    where: Where | None = None


@dataclass(frozen=True)
class CheckNothing:
    sync_id: str
    where: Where | None = None


@dataclass(frozen=True)
class ReadReg:
    """Read a register and compare `value & mask` with `expected & mask`; a mismatch is read
    again after a poll interval, `attempts` reads in all (the v1 trace player's `read_reg`)."""
    addr: int
    mask: int
    expected: int
    attempts: int
    name: str
    where: Where | None = None
    # Virtual-platform traces: the values are the VP's, not the hardware's, so a mismatch left
    # after `attempts` back-to-back reads is a warning of the run, not a failed check.
    warn_only: bool = False


@dataclass(frozen=True)
class UntilBits:
    """Hold the register stream until every bit of `bits` is set in the register at `addr` (the
    GLB interrupt status): a VP trace's `until`, how its firmware waits for one or more layers."""
    addr: int
    bits: int
    name: str
    where: Where | None = None


@dataclass(frozen=True)
class WaitInterrupt:
    """Hold the register stream until the GLB interrupt line is high (any status bit its mask
    lets through): the v1 trace player's `wait`.  Nothing is cleared."""
    where: Where | None = None


@dataclass(frozen=True)
class DumpMem:
    """Compare `nbytes` of memory at `addr` with `golden` (uint8) when the stream reaches it;
    `golden` None only records the bytes (how the txn writer computes its golden images)."""
    mem: str
    addr: int
    nbytes: int
    golden: np.ndarray | None = field(default=None, repr=False)
    source: str = ""
    where: Where | None = None


Command = (RegWrite | MemFill | MemLoad | PollRegEqual | IntrNotify | SyncWait | CheckCrc
           | CheckNothing | ReadReg | UntilBits | WaitInterrupt | DumpMem)


@dataclass
class RegisterProgram:
    name: str
    commands: list = field(default_factory=list)
    source: Path | None = None
    # What the frontend wants said about the run (VP traces: where memory came from).
    notes: list[str] = field(default_factory=list)

    @property
    def checks(self) -> list:
        return [c for c in self.commands
                if isinstance(c, (CheckCrc, CheckNothing, ReadReg, DumpMem))]
