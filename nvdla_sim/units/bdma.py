"""BDMA (NVDLA v1): memory-to-memory copies of lines and surfaces between DBB and CVSRAM.

Programming model (cmod/bdma of nvdlav1): software writes one operation's CFG_* registers, then
CFG_OP.EN=1 queues a snapshot of them (a FIFO of 20 operations; STATUS.FREE_SLOT counts the free
entries).  CFG_LAUNCH0/1 hand every operation queued since the last launch to register group 0/1;
groups run in launch order.  An operation copies SURF_REPEAT+1 surfaces of LINE_REPEAT+1 lines of
(LINE.SIZE+1) x 32 bytes; addresses and strides are in 32-byte units (bits 31:5).  When the last
write of a group's last operation is acknowledged, the BDMA raises its GLB interrupt for that
group.  The CSB registers are single (no D_ groups); CFG_OP and CFG_LAUNCH keep the value written.

Timing: each line is one read request on the source interface (MCIF for RAM_TYPE 1, CVIF for 0)
and one write on the destination interface once its data arrived; lines are booked in runs of up
to LINES_PER_TOKEN (a token is not a hardware unit, just simulation granularity).
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generator

from ..errors import NvdlaSimError

if TYPE_CHECKING:
    from ..engine import Engine

CONFIG_FIFO_DEPTH = 20
ATOM_BYTES = 32
LINES_PER_TOKEN = 16


@dataclass(frozen=True)
class BdmaOperation:
    """One queued copy, decoded from the CFG_* registers at CFG_OP.EN time."""
    src_addr: int
    dst_addr: int
    line_bytes: int
    lines: int
    surfaces: int
    src_line_stride: int
    dst_line_stride: int
    src_surf_stride: int
    dst_surf_stride: int
    src_ram_type: int            # 1: MC (DBB through MCIF), 0: CV (CVSRAM through CVIF)
    dst_ram_type: int

    @property
    def nbytes(self) -> int:
        return self.line_bytes * self.lines * self.surfaces

    def line_addresses(self, base: int, line_stride: int, surf_stride: int) -> list[int]:
        return [base + s * surf_stride + l * line_stride
                for s in range(self.surfaces) for l in range(self.lines)]


def decode_operation(regs) -> BdmaOperation:
    """The operation the BDMA's CFG_* registers describe now."""
    def word(name: str) -> int:
        return regs.read_word(regs.definition.regs[name])

    def addr(low: str, high: str) -> int:
        return (word(low) & ~(ATOM_BYTES - 1)) | (word(high) << 32)

    cmd = word("CFG_CMD")
    return BdmaOperation(
        src_addr=addr("CFG_SRC_ADDR_LOW", "CFG_SRC_ADDR_HIGH"),
        dst_addr=addr("CFG_DST_ADDR_LOW", "CFG_DST_ADDR_HIGH"),
        line_bytes=((word("CFG_LINE") & 0x1FFF) + 1) * ATOM_BYTES,
        lines=(word("CFG_LINE_REPEAT") & 0xFFFFFF) + 1,
        surfaces=(word("CFG_SURF_REPEAT") & 0xFFFFFF) + 1,
        src_line_stride=word("CFG_SRC_LINE") & ~(ATOM_BYTES - 1),
        dst_line_stride=word("CFG_DST_LINE") & ~(ATOM_BYTES - 1),
        src_surf_stride=word("CFG_SRC_SURF") & ~(ATOM_BYTES - 1),
        dst_surf_stride=word("CFG_DST_SURF") & ~(ATOM_BYTES - 1),
        src_ram_type=cmd & 1,
        dst_ram_type=cmd >> 1 & 1,
    )


def copy_values(memory, op: BdmaOperation) -> None:
    """Copy the operation's lines (in the hardware's order: surfaces, then lines)."""
    src, dst = memory.space(op.src_ram_type), memory.space(op.dst_ram_type)
    for s_addr, d_addr in zip(op.line_addresses(op.src_addr, op.src_line_stride, op.src_surf_stride),
                              op.line_addresses(op.dst_addr, op.dst_line_stride, op.dst_surf_stride)):
        dst.write(d_addr, src.read(s_addr, op.line_bytes))


class Bdma:
    """The BDMA as a SimPy process fed by its CSB registers (no D_OP_ENABLE: see the module doc)."""
    block = "BDMA"

    def __init__(self, engine: "Engine"):
        self.engine = engine
        self.env = engine.env
        self.regs = engine.regs[self.block]
        self.stats: dict[str, Any] = {"layers": 0, "busy_cycles": 0.0, "bytes": 0}
        self.waiting_for: str | None = None
        self._queued: deque[BdmaOperation] = deque()     # CFG_OP.EN since the last launch
        self._in_flight = 0                               # queued + launched, not yet started
        self._groups: deque[tuple[int, list[BdmaOperation]]] = deque()
        self._running = [False, False]
        self._wake = self.env.event()
        defs = self.regs.definition.regs
        self.regs.write_hooks[defs["CFG_OP"].offset] = self._on_op
        self.regs.write_hooks[defs["CFG_LAUNCH0"].offset] = lambda v, g: self._on_launch(v, 0)
        self.regs.write_hooks[defs["CFG_LAUNCH1"].offset] = lambda v, g: self._on_launch(v, 1)
        self._update_status()
        self.process = self.env.process(self._loop())

    # -- CSB side --------------------------------------------------------------------------------
    def _on_op(self, value: int, _group: int) -> None:
        if not value & 1:
            return
        if self._in_flight >= CONFIG_FIFO_DEPTH:
            raise NvdlaSimError(f"BDMA.CFG_OP.EN: more than {CONFIG_FIFO_DEPTH} operations queued "
                                "(STATUS.FREE_SLOT is 0; the hardware would stall the CSB write)")
        self._queued.append(decode_operation(self.regs))
        self._in_flight += 1
        self._update_status()

    def _on_launch(self, value: int, group: int) -> None:
        if not value & 1:
            return
        if self._running[group]:
            raise NvdlaSimError(f"BDMA.CFG_LAUNCH{group}: group {group} launched again before its "
                                "interrupt was raised")
        self._running[group] = True
        self._groups.append((group, list(self._queued)))
        self._queued.clear()
        self.engine.note_op_enable()
        self._update_status()
        if not self._wake.triggered:
            self._wake.succeed()

    def _update_status(self) -> None:
        busy = (int(self._running[0]) << 9) | (int(self._running[1]) << 10)
        idle = int(not any(self._running) and self._in_flight == 0) << 8
        self.regs.set_word("STATUS", busy | idle | (CONFIG_FIFO_DEPTH - self._in_flight))

    # -- the engine ------------------------------------------------------------------------------
    def _loop(self) -> Generator:
        while True:
            while not self._groups:
                self.waiting_for = "a CFG_LAUNCH"
                yield self._wake
                self._wake = self.env.event()
            self.waiting_for = None
            group, ops = self._groups.popleft()
            start = self.env.now
            done = self.env.now
            for op in ops:
                self._in_flight -= 1
                self._update_status()
                if self.engine.compute_values:
                    copy_values(self.engine.memory, op)
                done = yield from self._timing(op)
                self.stats["bytes"] += op.nbytes
            p = self.engine.timing.params
            end = max(done, self.env.now) + p.glb.interrupt_cycles
            if end > self.env.now:
                yield self.env.timeout(end - self.env.now)
            self.stats["layers"] += 1
            self.stats["busy_cycles"] += self.env.now - start
            self.engine.activity.add(self.block, "layer", start, self.env.now, f"group {group}")
            self._running[group] = False
            self._update_status()
            self.engine.glb.raise_interrupt(self.block, group)

    def _timing(self, op: BdmaOperation) -> Generator:
        """Book the operation's reads and writes; returns the cycle its last write is acknowledged
        (the process itself waits only for the read port, as the read sequencer does)."""
        p = self.engine.timing.params
        src, dst = self.engine.memif(op.src_ram_type), self.engine.memif(op.dst_ram_type)
        tracker = self.engine.timing.tracker(self.block)
        yield self.env.timeout(p.bdma.start_cycles)
        done = self.env.now
        total_lines = op.lines * op.surfaces
        for first in range(0, total_lines, LINES_PER_TOKEN):
            n = min(LINES_PER_TOKEN, total_lines - first)
            nbytes = n * op.line_bytes
            rd = src.reserve(self.block, "read", nbytes, requests=n)
            wr = dst.reserve(self.block, "write", nbytes, requests=n,
                             ready_first=rd.first + p.bdma.write_cycles,
                             ready_last=rd.last + p.bdma.write_cycles)
            tracker.busy(rd.start, wr.last + 1, "copy")
            done = max(done, wr.done)
            if rd.port_free > self.env.now:
                yield self.env.timeout(rd.port_free - self.env.now)
        return done

    def describe_wait(self) -> str | None:
        if self._groups or any(self._running):
            return f"{self.block} is copying"
        return None
