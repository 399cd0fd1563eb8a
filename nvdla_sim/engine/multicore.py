"""Several NVDLA cores on one SimPy environment, sharing the memory behind their interfaces.

A Jetson has two DLA cores. Each has its own MCIF (request ports, outstanding-read slots, AXI
data bus) but they read and write the same DRAM, so they contend for its bandwidth. Xavier's
4 MiB SRAM is also shared by both cores; Orin gives each core its own 1 MiB.

`SharedMemory` is what the cores share: the environment, the DRAM contents (one address space,
each core's tensors at its own base address: compiler/multicore.py) and, per shared interface,
the memory's booking state. Each core's engine keeps its own `CoreInterface`s, whose requests book
the memory's data bus together with the other cores' (`MemoryInterface._memory_free`, and the
per-direction buses where the cap is per direction): a core alone books exactly what a
single-core engine books. A memory without a bandwidth cap (e.g. `rtl_testbench`) is not a
shared resource in this model: its cores do not slow each other.

CVSRAM contents stay per core even where the SRAM is shared: each core's managed-SRAM pool is its
own region of the SRAM (compiler/multicore.py checks that the pools fit together), modelled as
its own address space.
"""
from __future__ import annotations

import simpy

from .memif import MemoryInterface


class _Cell:
    """A float several interfaces read and advance (the memory's next free cycle)."""
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0


class CoreInterface(MemoryInterface):
    """One core's memory interface whose memory-side booking is shared with other cores'."""

    def __init__(self, *args, cell: _Cell, buses: dict | None = None, **kwargs):
        self._cell = cell           # (before the base __init__ sets _memory_free through it)
        super().__init__(*args, **kwargs)
        if buses is not None:       # a cap per direction lives in the bus itself: share it
            self._bus_free = buses

    @property
    def _memory_free(self) -> float:
        return self._cell.value

    @_memory_free.setter
    def _memory_free(self, value: float) -> None:
        self._cell.value = value


class SharedMemory:
    """What the cores of one multi-core run share (see the module doc). `share_cvsram`: the
    CVSRAM interface's bandwidth is shared too (Xavier), else each core has its own (Orin)."""

    def __init__(self, share_cvsram: bool):
        self.env = simpy.Environment()
        self.share_cvsram = share_cvsram
        self._cells: dict[str, tuple[_Cell, dict]] = {}
        self._dram = None           # the DRAM address space (the first core's)
        self.engines: list = []

    def attach(self, engine, core: int) -> None:
        """Called by Engine.__init__ (`shared=`): give core `core` its interfaces on the shared
        memory and the shared DRAM contents."""
        hw, params = engine.hw, engine.timing.params
        outstanding = params.dma.mcif_outstanding_reads
        record = engine.mcif._record
        engine.mcif = self._interface(engine, "MCIF", engine.mcif.profile, hw.primary_memif,
                                      outstanding, record)
        if engine.cvif is not None and self.share_cvsram:
            engine.cvif = self._interface(engine, "CVIF", engine.cvif.profile,
                                          hw.secondary_memif, outstanding, record)
        if self._dram is None:
            self._dram = engine.memory.primary
        else:
            engine.memory.primary = self._dram
        self.engines.append(engine)

    def _interface(self, engine, name: str, profile, memif_cfg, outstanding: int,
                   record: bool) -> CoreInterface:
        cell, buses = self._cells.setdefault(name, (_Cell(), {"read": 0.0, "write": 0.0}))
        return CoreInterface(self.env, name, profile, memif_cfg.width_bytes, engine.clock_mhz,
                             memif_cfg.max_burst, outstanding, record, cell=cell,
                             buses=buses if profile.bandwidth_gbps and not profile.shared_bandwidth
                             else None)
