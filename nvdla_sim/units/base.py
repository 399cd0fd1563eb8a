"""Unit: a hardware unit as a SimPy process woken by its D_OP_ENABLE.

A unit's process runs its register groups in turn (0, 1, 0, ...).  For each hardware layer it calls
`execute(view)`, a generator that receives what its producers send over channels, computes the layer
with the kernels, sends results on, and yields timeouts for the cycles the work takes.  When the layer
is done the process clears OP_EN and raises the unit's GLB interrupt (if it has one).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generator

import numpy as np

from ..errors import UnsupportedError
from ..layout import read_cube
from ..regs import GroupView

if TYPE_CHECKING:
    from ..datatype import DataType
    from ..engine import Engine

STATUS_IDLE, STATUS_RUNNING = 0, 1


class Unit:
    block: str = ""                 # register block name (NVDLA_<block>)
    interrupt: str | None = None    # GLB interrupt source raised at the end of a layer

    def __init__(self, engine: "Engine"):
        self.engine = engine
        self.env = engine.env
        self.hw = engine.hw
        self.regs = engine.regs[self.block]
        self._enable = [self.env.event(), self.env.event()]
        op_enable = self.regs.definition.regs["D_OP_ENABLE"].offset
        self.regs.write_hooks[op_enable] = self._on_op_enable
        self.waiting_for: str | None = None
        self.stats: dict[str, Any] = {"layers": 0, "busy_cycles": 0.0}
        self.process = self.env.process(self._loop())

    # -- life cycle ----------------------------------------------------------------------------
    def _on_op_enable(self, value: int, group: int) -> None:
        if value & 1:
            self.engine.note_op_enable()
            if not self._enable[group].triggered:
                self._enable[group].succeed()

    def enable_event(self, group: int):
        """The event the unit's next layer in register group `group` starts on (its OP_ENABLE)."""
        return self._enable[group]

    def _loop(self, group: int = 0) -> Generator:
        """The unit's life: layers in its register groups in turn, from `group` (0 after reset;
        the step cache restarts an idle unit in the group a replayed step left it in)."""
        while True:
            self.waiting_for = f"its D_OP_ENABLE (group {group})"
            yield self._enable[group]
            self._enable[group] = self.env.event()
            self.waiting_for = None
            self.regs.consumer = group
            self._set_status(group, STATUS_RUNNING)
            start = self.env.now
            yield from self.execute(self.regs.view(group))
            self.stats["layers"] += 1
            self.stats["busy_cycles"] += self.env.now - start
            # The layer span; busy and stall cycles come from the unit's timing processes.
            self.engine.activity.add(self.block, "layer", start, self.env.now, f"layer g{group}")
            self.regs.set_word("D_OP_ENABLE", 0, group)
            self._set_status(group, STATUS_IDLE)
            if self.interrupt:
                self.engine.glb.raise_interrupt(self.interrupt, group)
            group ^= 1

    def _set_status(self, group: int, status: int) -> None:
        reg = self.regs.definition.regs.get("S_STATUS")
        if reg is None:
            return
        shift = 16 * group
        word = self.regs.read_word(reg) & ~(3 << shift)
        self.regs.set_word("S_STATUS", word | (status << shift))

    def describe_wait(self) -> str | None:
        if self.waiting_for and not self.waiting_for.startswith("its D_OP_ENABLE"):
            return f"{self.block} waits for {self.waiting_for}"
        return None

    # -- what subclasses use -------------------------------------------------------------------
    def execute(self, view: GroupView) -> Generator:
        raise UnsupportedError(f"{self.block}: not built yet")
        yield  # pragma: no cover  (makes this a generator)

    def send(self, channel: str, payload: Any) -> Generator:
        """Put `payload` on a bounded channel (blocks while the channel is full)."""
        self.waiting_for = f"room on channel {channel}"
        start = self.env.now
        yield self.engine.channel(channel).put(payload)
        self.engine.activity.add(self.block, "stall", start, self.env.now, f"full {channel}")
        self.waiting_for = None

    def receive(self, channel: str) -> Generator:
        """Take the next payload from a channel; use as `x = yield from self.receive(name)`."""
        self.waiting_for = f"channel {channel}"
        start = self.env.now
        payload = yield self.engine.channel(channel).get()
        self.engine.activity.add(self.block, "stall", start, self.env.now, f"empty {channel}")
        self.waiting_for = None
        return payload

    def dma(self, direction: str, nbytes: int, ram_type: int = 1, client: str | None = None,
            outstanding: int | None = None) -> Generator:
        """Move `nbytes` through the memory interface RAM_TYPE selects; returns when done."""
        memif = self.engine.memif(ram_type)
        yield from memif.transfer(client or self.block, direction, nbytes, outstanding)

    def memory_cycles(self, nbytes: int, secondary: bool = False) -> float:
        """Crude transfer time of `nbytes` over the unit's memory interface (width + latency)."""
        memif = self.hw.secondary_memif if secondary and self.hw.secondary_memif else self.hw.primary_memif
        return memif.latency_cycles + -(-nbytes // memif.width_bytes)

    def read_src_cube(self, view: GroupView, ram_type: int, width: int, height: int,
                      channels: int, line_stride: int | None = None,
                      surf_stride: int | None = None,
                      dtype: "DataType | None" = None) -> np.ndarray | None:
        """The input cube an RDMA reads from its D_SRC_* address and strides (SDP, PDP, CDP) in
        `dtype` elements (INT8 when None); None in a timing-only run, which never reads memory
        contents."""
        if not self.engine.compute_values:
            return None
        atom_bytes = self.hw.memory_atomic_bytes
        return read_cube(self.engine.memory.space(ram_type),
                         view.addr("D_SRC_BASE_ADDR_LOW", "D_SRC_BASE_ADDR_HIGH"),
                         width, height, channels,
                         view.word("D_SRC_LINE_STRIDE") if line_stride is None else line_stride,
                         view.word("D_SRC_SURFACE_STRIDE") if surf_stride is None else surf_stride,
                         atom_bytes if dtype is None else dtype.elements_per_atom(atom_bytes),
                         np.int8 if dtype is None else dtype.numpy)

    def unsupported(self, reason: str) -> UnsupportedError:
        return UnsupportedError(f"{self.block}: {reason}")
