"""What the trace writers share: CSB words, and the sync ids that intr_notify arms and sync_wait awaits.

Both written forms (trace-player input.txn, VP capture) turn a program's IntrNotify/SyncWait pairs
into "poll the GLB status bit, then clear it" at the first sync_wait on the id, and await the
interrupts never sync-waited at the end; only the lines they write differ (the `on_await` hook).
"""
from __future__ import annotations

from typing import Callable

from ..engine.glb import INTR_BIT
from ..errors import NvdlaSimError
from ..program import IntrNotify, SyncWait


def csb_word(addr: int) -> str:
    """A CSB register's byte address as the 0xffffNNNN word address the traces use."""
    return f"0xffff{addr // 4:04x}"


class SyncIds:
    """Sync ids armed (id -> GLB.S_INTR_STATUS bit, not yet awaited) and those already awaited."""

    def __init__(self, on_await: Callable[[str, int], None]) -> None:
        self.armed: dict[str, int] = {}
        self.awaited: set[str] = set()
        self._on_await = on_await               # (sync id, status bit) -> writes the await lines

    def notify(self, cmd: IntrNotify, where: str) -> None:
        if cmd.sync_id in self.armed or cmd.sync_id in self.awaited:
            raise NvdlaSimError(f"{where}: sync id '{cmd.sync_id}' armed twice")
        self.armed[cmd.sync_id] = INTR_BIT[(cmd.source, cmd.group)]

    def wait(self, cmd: SyncWait, where: str) -> None:
        if cmd.sync_id in self.armed:
            self.await_interrupt(cmd.sync_id)
        elif cmd.sync_id not in self.awaited:
            raise NvdlaSimError(f"{where}: sync_wait on '{cmd.sync_id}' that no intr_notify armed")

    def await_interrupt(self, sync_id: str) -> None:
        bit = self.armed.pop(sync_id)
        self.awaited.add(sync_id)
        self._on_await(sync_id, bit)

    def await_rest(self) -> None:
        """Await, in arming order, every interrupt no sync_wait awaited."""
        for sync_id in list(self.armed):
            self.await_interrupt(sync_id)
