"""Engine: one SimPy environment, the register file, memory, GLB and every unit process.

The CSB master process executes a RegisterProgram in order: one register access per cycle, memory
images placed at once, `intr_notify` waits armed, checks run when their wait fires.  Units are SimPy
processes that wake on their D_OP_ENABLE and cooperate through channels (see units/base.py).

With a host profile (`host=`, or the `host` its memory profile names: `rtl_testbench`) the master is
also the host between layers (`sync_wait`): it learns of the interrupt as the profile says (the
testbench's poll loop, or an interrupt handler), clears the status bit with a CSB write, pays the
driver's per-layer cost, and writes the next layer's registers at the sustained CSB rate; a host
that programs ahead writes them into the idle register group while the current layer runs.  Each
launch (first OP_ENABLE -> its last awaited interrupt -> next launch) is recorded in
`RunResult.launches` (see nvdla_sim/host/changeover.py and docs/network-timing.md).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import simpy

from ..config import HardwareConfig
from ..errors import NvdlaSimError, UnsupportedError
from ..memory import MemoryAccessError, MemorySystem
from ..program import (CheckCrc, CheckNothing, DumpMem, IntrNotify, MemFill, MemLoad, PollRegEqual,
                       ReadReg, RegisterProgram, RegWrite, SyncWait, UntilBits, WaitInterrupt)
from ..regs import RegisterFile, register_map
from .activity import ActivityLog
from .glb import Glb
from .memif import MemoryInterface, MemoryProfile, load_memory_profile
from ..timing.sdp import kept_event_numbers
from ..timing.tokens import sleep_for

POLL_INTERVAL_CYCLES = 8
POLL_LIMIT_CYCLES = 1_000_000


@dataclass
class CheckResult:
    sync_id: str                # cfg: the sync id; txn: file:line of the command
    kind: str                   # "crc", "nothing", "read_reg" or "dump_mem"
    space: str = ""
    addr: int = 0
    nbytes: int = 0
    expected: int | None = None  # crc / register value (read_reg: already masked)
    actual: int | None = None
    cycle: float = 0
    name: str = ""              # read_reg: UNIT.REG; dump_mem: the golden file
    mask: int = 0xFFFFFFFF      # read_reg
    attempts: int = 0           # read_reg: reads it took
    first_diff: int | None = None          # dump_mem: first differing byte address
    diff_bytes: int = 0                    # dump_mem: how many bytes differ
    captured: np.ndarray | None = field(default=None, repr=False)  # dump_mem without a golden

    @property
    def passed(self) -> bool:
        if self.kind == "nothing":
            return True
        if self.kind == "dump_mem":
            return self.first_diff is None
        return self.expected == self.actual

    def describe(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        if self.kind == "nothing":
            return f"{self.sync_id}: interrupt at cycle {self.cycle:.0f}, nothing to check  PASS"
        if self.kind == "read_reg":
            return (f"{self.sync_id}: read_reg {self.name} mask 0x{self.mask:08x} expected "
                    f"0x{self.expected:08x} actual 0x{self.actual:08x} ({self.attempts} reads, "
                    f"cycle {self.cycle:.0f})  {verdict}")
        if self.kind == "dump_mem":
            text = (f"{self.sync_id}: dump_mem {self.space} 0x{self.addr:x} +0x{self.nbytes:x} vs "
                    f"{self.name} (cycle {self.cycle:.0f})")
            if self.first_diff is not None:
                text += (f": {self.diff_bytes} bytes differ, first at 0x{self.first_diff:x} "
                         f"(expected 0x{self.expected:02x}, actual 0x{self.actual:02x})")
            return f"{text}  {verdict}"
        return (f"{self.sync_id}: crc {self.space} 0x{self.addr:x} +0x{self.nbytes:x} "
                f"expected 0x{self.expected:08x} actual 0x{self.actual:08x}  {verdict}")


@dataclass
class RunResult:
    name: str
    checks: list[CheckResult] = field(default_factory=list)
    cycles: float = 0.0         # first OP_ENABLE write to the last awaited interrupt
    unit_stats: dict = field(default_factory=dict)
    memory_bytes: dict = field(default_factory=dict)   # interface -> client -> read/write bytes
    cbuf: dict = field(default_factory=dict)           # CBUF peak occupancy (timing model)
    events: int = 0                                    # SimPy events the run scheduled
    engine: "Engine | None" = field(default=None, repr=False)
    warnings: list[str] = field(default_factory=list)  # VP read_reg mismatches and the like
    first_write: float | None = None                   # cycle of the program's first register write
    untils: list = field(default_factory=list)         # UntilRecord per VP `until`
    host_reads: int = 0                                # VP read_regs (first reads: host time)
    launches: list = field(default_factory=list)       # Launch per layer launch (host model)
    host_done: float | None = None                     # the host has serviced the last interrupt

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.passed for c in self.checks)


@dataclass
class UntilRecord:
    """One VP `until`: where it is, the bits it waited for, when the stream reached it and when
    the bits were all set."""
    where: object
    bits: int
    reached: float
    satisfied: float


@dataclass
class Launch:
    """One hardware-layer launch as the host drove it: `start` the first OP_ENABLE write,
    `interrupt` the last interrupt the host waited for before the next launch, `detected` when the
    host saw it, `next_start` the next launch's first OP_ENABLE (None for the last); `writes`
    register writes the host issued between `detected` and `next_start`, of which `hidden` were
    written ahead while the layer ran (ping-pong groups)."""
    start: float
    interrupt: float | None = None
    detected: float | None = None
    next_start: float | None = None
    writes: int = 0
    ahead_writes: int = 0
    interrupts: int = 0

    @property
    def compute_cycles(self) -> float | None:
        return None if self.interrupt is None else self.interrupt - self.start

    @property
    def changeover_cycles(self) -> float | None:
        if self.next_start is None or self.interrupt is None:
            return None
        return self.next_start - self.interrupt


def _label(where, fallback: str) -> str:
    """A txn check's name: `input.txn:LINE` (the folder names the test)."""
    return f"{Path(where.file).name}:{where.line}" if where is not None else fallback


class Engine:
    def __init__(self, hw: HardwareConfig, memory: MemoryProfile | str = "rtl_testbench",
                 clock_mhz: float = 1000.0, timing: dict | None = None,
                 cvsram_memory: MemoryProfile | str | None = None, compute_values: bool = True,
                 host="auto", record_transfers: bool = True, shared=None, core: int = 0,
                 step_cache: bool | None = None):
        """`timing`: overrides of timing/params.yaml (section -> name -> value).
        `host`: a host profile (name, path, mapping or HostProfile) timing the layer changeovers;
        "auto" (default) the one the memory profile names, None none (sync_waits cost nothing).
        `cvsram_memory`: the CVIF's profile (default: the same as `memory`).
        `compute_values` False: timing only -- units skip their kernels and memory accesses and
        memory images are not placed (the timing processes never depend on values).
        `record_transfers` False: the memory interfaces keep no per-request transfer records
        (timelines and VP layer reports read them; cycles, bytes and spans do not change).
        `shared`: an engine.multicore.SharedMemory: this engine is DLA core `core` on the shared
        environment and memory (pieces are then started with `start` and ended with `finish`).
        `step_cache`: replay repeated steps of `run_step` (engine/step_cache.py); default on in
        timing-only runs unless NVDLA_SIM_NO_STEP_CACHE=1, never on a shared environment."""
        from ..timing import TimingModel
        from ..units import build_units   # units import the engine's channel helpers
        self.hw = hw
        self.clock_mhz = clock_mhz
        self.env = simpy.Environment() if shared is None else shared.env
        self.core = core
        self.compute_values = compute_values
        self.memory_profile = memory if isinstance(memory, MemoryProfile) else load_memory_profile(memory)
        cvsram_profile = self.memory_profile if cvsram_memory is None else \
            cvsram_memory if isinstance(cvsram_memory, MemoryProfile) else \
            load_memory_profile(cvsram_memory)
        if host == "auto":
            host = self.memory_profile.host
        from ..host.profile import load_host_profile
        self.host = load_host_profile(host) if host is not None else None
        self._serviced: set[str] = set()       # sync ids whose interrupt the host has serviced
        self._poll_start: float | None = None  # the host's poll loop started here
        self._changeover = False               # between a serviced interrupt and the next OP_ENABLE
        self._driver_due = False               # the driver's per-layer work is still to be paid
        self._ahead = 0                        # writes issued ahead for the coming launch
        self.launches: list[Launch] = []
        self.activity = ActivityLog()
        self.timing = TimingModel(self, timing)
        outstanding = self.timing.params.dma.mcif_outstanding_reads
        self.mcif = MemoryInterface(self.env, "MCIF", self.memory_profile,
                                    hw.primary_memif.width_bytes, clock_mhz,
                                    hw.primary_memif.max_burst, outstanding, record_transfers)
        self.cvif = MemoryInterface(self.env, "CVIF", cvsram_profile,
                                    hw.secondary_memif.width_bytes, clock_mhz,
                                    hw.secondary_memif.max_burst, outstanding, record_transfers) \
            if hw.secondary_memif else None
        self.regmap = register_map(hw.nvdla_version)
        self._slow_targets: dict[int, bool] = {}     # CSB address -> its block's port is slow
        self.regs = RegisterFile(self.regmap)
        self.memory = MemorySystem(has_secondary=hw.secondary_memif is not None)
        self.glb = Glb(self.env, self.regs)
        if shared is not None:
            shared.attach(self, core)
        self.first_op_enable: float | None = None
        self._fired: dict[str, simpy.Event] = {}    # sync ids of earlier pieces
        self.first_write: float | None = None
        self._current = None            # the program command the CSB master is executing
        self._pending_syncs: list[str] = []   # sync ids the program's end still waits for
        self._channels: dict[str, simpy.Store] = {}
        self.units = build_units(self)
        # repeated-step timing reuse for run_step (engine/step_cache.py)
        from .step_cache import StepCache, enabled_by_default
        if step_cache is None:
            step_cache = enabled_by_default(compute_values)
        self.step_cache = StepCache(self) if step_cache and shared is None and \
            not compute_values else None

    def channel(self, name: str, capacity: int = 1) -> simpy.Store:
        """The bounded channel `name` (e.g. "cacc->sdp"), created on first use."""
        store = self._channels.get(name)
        if store is None:
            store = self._channels[name] = simpy.Store(self.env, capacity)
        return store

    def note_op_enable(self) -> None:
        if self.first_op_enable is None:
            self.first_op_enable = self.env.now

    # -- program execution -------------------------------------------------------------------
    def run_step(self, piece: RegisterProgram) -> RunResult:
        """`run(piece, summarize=False)` for one step of a network run piece by piece, replayed
        from the step cache when an identical step ran from an identical state before."""
        self.network_steps = True    # CSC may use coarse stripes (timing/conv.py; not in traces)
        if self.step_cache is None:
            return self.run(piece, summarize=False)
        return self.step_cache.run(piece)

    def run(self, program: RegisterProgram, summarize: bool = True) -> RunResult:
        """Execute `program` from the current cycle.  A program may be run in pieces on one engine
        (each piece waits for the interrupts it armed); `summarize` False skips the per-unit and
        memory summaries, which cover the whole log so far."""
        result = RunResult(program.name)
        master = self.start(program, result)
        try:
            self.env.run(until=master)
        except MemoryAccessError as exc:
            raise NvdlaSimError(f"{program.name}: {exc}") from None
        except RuntimeError as exc:
            if "No scheduled events" not in str(exc):
                raise
            waiting = [u.describe_wait() for u in self.units.values() if u.describe_wait()]
            where = f"{self._current.where}: " if self._current is not None and \
                self._current.where is not None else ""
            if isinstance(self._current, UntilBits):
                status = self.glb.status
                missing = self._current.bits & ~status
                raise NvdlaSimError(
                    f"{where}deadlock at cycle {self.env.now:.0f}: until {self._current.name} "
                    f"has bits 0x{self._current.bits:08x}: 0x{missing:08x} "
                    f"({self.glb.describe_bits(missing)}) never set, status 0x{status:08x} "
                    f"({'; '.join(waiting) or 'no unit is running'})") from None
            if isinstance(self._current, WaitInterrupt):
                # A txn `wait`: the line never rose again, e.g. one S_INTR_STATUS write cleared
                # two interrupts raised in the same cycle.
                raised = ", ".join(f"{src}{grp}@{cyc:.0f}" for cyc, src, grp in self.glb.raised)
                raise NvdlaSimError(
                    f"{where}deadlock at cycle {self.env.now:.0f}: wait: the interrupt line never "
                    f"rose again (interrupts raised: {raised or 'none'}; "
                    f"{'; '.join(waiting) or 'no unit is running'})") from None
            sync = f" {self._current.sync_id}" if isinstance(self._current, SyncWait) else \
                "".join(f" {s}" for s in self._pending_syncs)
            raise NvdlaSimError(
                f"{where or program.name + ': '}deadlock at cycle {self.env.now:.0f}: awaited "
                f"interrupt{sync} never raised ({'; '.join(waiting) or 'no unit is running'})"
            ) from None
        return self.finish(result, summarize)

    def start(self, program: RegisterProgram, result: RunResult) -> simpy.Process:
        """The CSB master process executing `program` into `result`, started now (whoever runs
        the environment; `run` runs it until the process ends, then calls `finish`)."""
        if self.host is not None and self.host.program_ahead:
            from ..host.changeover import program_ahead
            program = program_ahead(program)
        return self.env.process(self._csb_master(program, result))

    def finish(self, result: RunResult, summarize: bool = True) -> RunResult:
        """`result` of a started program whose process has ended (see `run`)."""
        self.timing.finish()
        result.engine = self
        result.launches = list(self.launches)
        if not summarize:
            return result
        result.unit_stats = self.unit_summary(result.cycles)
        result.memory_bytes = {m.name: m.bytes_by_client for m in (self.mcif, self.cvif) if m}
        result.cbuf = self.timing.cbuf_summary()
        # SimPy numbers every scheduled event (less the numbers kept for wake-ups that were
        # computed without one: timing/sdp.py FlyingWriter)
        result.events = next(self.env._eid) - kept_event_numbers(self.env)
        result.engine = self
        return result

    def unit_summary(self, total_cycles: float) -> dict[str, dict]:
        """Per unit (and DMA engine): layers, busy and stall cycles, utilization of the run."""
        totals = self.activity.totals()
        out = {}
        for name, kinds in sorted(totals.items()):
            busy, stall = kinds.get("busy", 0.0), kinds.get("stall", 0.0)
            unit = self.units.get(name)
            if not busy and not (unit and unit.stats.get("layers")):
                continue
            out[name] = {"layers": unit.stats["layers"] if unit else None,
                         "busy_cycles": busy, "stall_cycles": stall,
                         "active_cycles": kinds.get("layer", 0.0),
                         "utilization": busy / total_cycles if total_cycles else 0.0}
        return out

    def memif(self, ram_type: int) -> MemoryInterface:
        """The interface a DMA with this RAM_TYPE bit uses (1 = MCIF/DBB, 0 = CVIF/CVSRAM)."""
        if ram_type == 0 and self.cvif is not None:
            return self.cvif
        return self.mcif

    def _slow_csb_target(self, addr: int) -> bool:
        slow = self._slow_targets.get(addr)
        if slow is None:
            try:
                unit, _ = self.regmap.decode_address(addr)
            except KeyError:
                return False        # regs.write reports it
            slow = self._slow_targets[addr] = self.timing.params.slow_csb_block(unit.name)
        return slow

    def _route(self, addr: int, nbytes: int, where) -> "object":
        space = self.memory.space_for_address(addr)
        if not space.contains(addr, max(nbytes, 1)):
            raise NvdlaSimError(f"{where}: {nbytes} bytes at 0x{addr:x} lie outside the memory "
                                f"({space.name} is [0x{space.base:x}, 0x{space.end:x}))")
        return space

    def _csb_master(self, program: RegisterProgram, result: RunResult):
        env = self.env
        waits: dict[str, simpy.Event] = {}
        pending_checks: dict[str, list] = {}
        last_intr = [0.0]

        def run_check(check, cycle):
            if isinstance(check, CheckNothing):
                result.checks.append(CheckResult(check.sync_id, "nothing", cycle=cycle))
                return
            space = self._route(check.addr, check.nbytes, check.where)
            result.checks.append(CheckResult(check.sync_id, "crc", space.name.split()[0], check.addr,
                                             check.nbytes, check.expected,
                                             space.crc32(check.addr, check.nbytes), cycle))

        def on_fire(sync_id):
            def callback(event):
                last_intr[0] = max(last_intr[0], event.value)
                for check in pending_checks.pop(sync_id, []):
                    run_check(check, event.value)
            return callback

        csb = self.timing.params.csb
        slow_wait = csb.slow_write_interval_cycles - csb.write_interval_cycles
        stream_end = [None]         # txn programs: the last interrupt line / poll the stream saw
        commands = program.commands
        slow_targets, regs_write = self._slow_targets, self.regs.write
        acknowledged = -1           # index of an acknowledge write executed with its `until`
        for index, cmd in enumerate(commands):
            self._current = cmd
            if index == acknowledged:
                continue
            if isinstance(cmd, RegWrite):
                if self.first_write is None:
                    self.first_write = env.now
                if self.host is not None:
                    yield from self._host_write(cmd)
                    continue
                # (sleep_for: no event when nothing else is due first; the same cycles)
                slow = slow_wait > 0 and slow_targets.get(cmd.addr)
                if slow is None:
                    slow = self._slow_csb_target(cmd.addr)
                if slow:
                    sleep = sleep_for(env, slow_wait)    # the unit's CSB port is not ready yet
                    if sleep is not None:
                        yield sleep
                try:
                    regs_write(cmd.addr, cmd.value)
                except NvdlaSimError as exc:
                    raise self._write_error(cmd, exc) from None
                sleep = sleep_for(env, csb.write_interval_cycles)
                if sleep is not None:
                    yield sleep
            elif isinstance(cmd, UntilBits):
                reached = env.now
                event = self.glb.wait_bits(cmd.bits)
                if not event.processed:
                    yield event
                result.untils.append(UntilRecord(cmd.where, cmd.bits, reached, env.now))
                stream_end[0] = env.now
                nxt = commands[index + 1] if index + 1 < len(commands) else None
                if isinstance(nxt, RegWrite) and nxt.addr == self.glb.status_addr:
                    # The acknowledge that follows an `until` costs no CSB slot, as the native
                    # intr_notify clears the bit it awaited: the two forms time alike.
                    self._write(nxt)
                    acknowledged = index + 1
            elif isinstance(cmd, (MemFill, MemLoad)) and not self.compute_values:
                continue                            # timing only: no memory contents
            elif isinstance(cmd, MemFill):
                self._route(cmd.addr, cmd.nbytes, cmd.where).fill(cmd.addr, cmd.nbytes, cmd.value)
            elif isinstance(cmd, MemLoad):
                self._route(cmd.addr, cmd.data.size, cmd.where).write(cmd.addr, cmd.data)
            elif isinstance(cmd, PollRegEqual):
                start = env.now
                while self.regs.read(cmd.addr) != cmd.value:
                    if env.now - start > POLL_LIMIT_CYCLES:
                        raise NvdlaSimError(f"{cmd.where}: {cmd.name} never became 0x{cmd.value:x}")
                    yield env.timeout(POLL_INTERVAL_CYCLES)
            elif isinstance(cmd, IntrNotify):
                if cmd.sync_id in waits:
                    raise NvdlaSimError(f"{cmd.where}: sync id '{cmd.sync_id}' armed twice")
                event = self.glb.arm(cmd.source, cmd.group)
                waits[cmd.sync_id] = event
                event.callbacks.append(on_fire(cmd.sync_id))
            elif isinstance(cmd, SyncWait):
                event = waits.get(cmd.sync_id)
                if event is None:
                    event = self._fired.get(cmd.sync_id)    # armed by an earlier piece
                if event is None:
                    raise NvdlaSimError(f"{cmd.where}: sync_wait on '{cmd.sync_id}' that no "
                                        "intr_notify armed")
                if self.host is not None:
                    yield from self._host_service(cmd.sync_id, event)
                elif not event.processed:
                    yield event
            elif isinstance(cmd, ReadReg):
                result.host_reads += cmd.warn_only
                check = yield from self._read_reg(cmd)
                if not cmd.warn_only:
                    result.checks.append(check)
                elif not check.passed and not (cmd.addr == self.glb.status_addr
                                               and check.expected == 0):
                    # (a status read that finds newer interrupts is no mismatch: the firmware
                    # read it before they came)
                    result.warnings.append(
                        f"{check.sync_id}: read_reg {cmd.name} mask 0x{cmd.mask:08x} expected "
                        f"0x{check.expected:08x}, read 0x{check.actual:08x}")
                stream_end[0] = env.now
            elif isinstance(cmd, WaitInterrupt):
                event = self.glb.wait_line()
                if not event.processed:
                    yield event
                stream_end[0] = env.now
            elif isinstance(cmd, DumpMem):
                if self.compute_values:
                    result.checks.append(self._dump_mem(cmd))
            elif isinstance(cmd, CheckCrc) and not self.compute_values:
                continue                            # nothing computed, nothing to check
            elif isinstance(cmd, (CheckCrc, CheckNothing)):
                event = waits[cmd.sync_id]
                if event.processed:
                    run_check(cmd, event.value)
                else:
                    pending_checks.setdefault(cmd.sync_id, []).append(cmd)
        if waits:
            # (named in a deadlock report: the program's end waits for these)
            self._pending_syncs = [sid for sid, event in waits.items() if not event.triggered]
            yield simpy.AllOf(env, list(waits.values()))
        self._fired.update(waits)
        if self.launches and self.launches[-1].interrupt is None:
            self.launches[-1].interrupt = max(e.value for e in waits.values()) if waits else None
        self._current = None
        start = self.first_op_enable if self.first_op_enable is not None else 0.0
        end = last_intr[0]
        if not waits and stream_end[0] is not None:
            # No intr_notify: the run ends at the last interrupt raised, else where the stream
            # last waited or polled.
            end = self.glb.raised[-1][0] if self.glb.raised else stream_end[0]
        result.cycles = max(0.0, end - start)
        result.first_write = self.first_write
        if result.untils:
            # VP traces: from the first register write to the last interrupt.
            first = self.first_write if self.first_write is not None else 0.0
            last = self.glb.raised[-1][0] if self.glb.raised else stream_end[0]
            result.cycles = max(0.0, last - first)

    # -- the host between layers ---------------------------------------------------------------
    def _is_op_enable(self, cmd: RegWrite) -> bool:
        return cmd.name.endswith("D_OP_ENABLE") and bool(cmd.value & 1)

    def _host_write(self, cmd: RegWrite):
        """Generator: one register write issued by the host.  OP_ENABLE writes keep the calibrated
        CSB spacing (1 cycle, 2 into the convolution core); programming writes stream through the
        CSB request FIFO at its sustained rate (params.yaml csb.program_*); the CPU's own cost per
        write is the floor of both."""
        env, csb, host = self.env, self.timing.params.csb, self.host
        cpu = host.cycles("register_write", self.clock_mhz)
        if self._driver_due:
            # the driver's scheduler picks the next operation before writing it
            self._driver_due = False
            yield env.timeout(host.cycles("driver_per_layer", self.clock_mhz))
        slow = self._slow_csb_target(cmd.addr)
        block = csb.slow_write_interval_cycles if slow else csb.write_interval_cycles
        if self._is_op_enable(cmd):
            if slow and csb.slow_write_interval_cycles > csb.write_interval_cycles:
                yield env.timeout(csb.slow_write_interval_cycles - csb.write_interval_cycles)
            if self._changeover or not self.launches:
                self._new_launch()
            self._write(cmd)
            yield env.timeout(max(csb.write_interval_cycles, cpu))
            return
        program = csb.program_fifo_round_trip_cycles / csb.program_fifo_depth
        if self._changeover:
            self.launches[-1].writes += 1
        elif self.launches and self.launches[-1].interrupt is None:
            self._ahead += 1              # written while the current layer runs
        self._write(cmd)
        yield env.timeout(max(block, program, cpu))

    def _new_launch(self) -> None:
        now = self.env.now
        if self.launches:
            self.launches[-1].next_start = now
        self.launches.append(Launch(now, ahead_writes=self._ahead))
        self._ahead = 0
        self._changeover = False
        self._poll_start = None

    def _host_service(self, sync_id: str, event: simpy.Event):
        """Generator: the host waits for the interrupt of `sync_id`, learns of it as its profile
        says, and clears the status bit; one sync point per poll round (the testbench fires the
        first sync point whose bits it finds set, then clears it before polling again)."""
        if sync_id in self._serviced:
            return
        env, host = self.env, self.host
        if self._poll_start is None:
            self._poll_start = env.now
        if not event.processed:
            yield event
        raised = float(event.value)
        if host.interrupt == "poll":
            period = host.cycles("poll_period", self.clock_mhz)
            response = host.cycles("poll_response", self.clock_mhz)
            rounds = max(1, math.ceil((raised + response - self._poll_start) / period))
            seen = self._poll_start + rounds * period
            reads = 0.0
        else:
            seen = raised + host.cycles("interrupt_latency", self.clock_mhz)
            # the handler reads S_INTR_MASK and S_INTR_STATUS
            reads = 2 * host.cycles("register_read", self.clock_mhz)
        if seen > env.now:
            yield env.timeout(seen - env.now)
        if reads:
            yield env.timeout(reads)
        self._serviced.add(sync_id)
        if self.launches:
            launch = self.launches[-1]
            launch.interrupts += 1
            if launch.interrupt is None or raised >= launch.interrupt:
                launch.interrupt, launch.detected = raised, env.now
        self._changeover = True
        self._driver_due = True
        # the W1C write of the status bits (its effect on the GLB happened when the wait fired)
        csb = self.timing.params.csb
        yield env.timeout(max(csb.program_fifo_round_trip_cycles / csb.program_fifo_depth,
                              host.cycles("register_write", self.clock_mhz)))
        if self.launches:
            self.launches[-1].writes += 1
        self._poll_start = env.now

    def _write(self, cmd: RegWrite) -> None:
        try:
            self.regs.write(cmd.addr, cmd.value)
        except NvdlaSimError as exc:
            raise self._write_error(cmd, exc) from None

    @staticmethod
    def _write_error(cmd: RegWrite, exc: NvdlaSimError) -> NvdlaSimError:
        """What a refused write raises: the unit's error, named by the program line when the
        command has one (an UnsupportedError as it is)."""
        if isinstance(exc, UnsupportedError) or cmd.where is None:
            return exc
        return NvdlaSimError(f"{cmd.where}: {exc}")

    def _read_reg(self, cmd: ReadReg):
        """Generator: read until `value & mask` matches or the attempts are spent; the check."""
        csb = self.timing.params.csb
        expected = cmd.expected & cmd.mask
        attempts = 0
        while True:
            if attempts or not cmd.warn_only:
                # A VP trace's first read is the firmware's, host time like the native poll's
                # first look (not charged); its retries are back-to-back CSB reads.
                yield self.env.timeout(csb.read_cycles)
            value = self.regs.read(cmd.addr) & cmd.mask
            attempts += 1
            if value == expected or attempts >= cmd.attempts:
                break
            if cmd.warn_only and cmd.addr == self.glb.status_addr and expected == 0:
                break       # VP: interrupts raised since the firmware's read; nothing to wait for
            # VP traces: the read is tried again at once (gem5-NVDLA's CSB master)
            if not cmd.warn_only:
                yield self.env.timeout(csb.poll_interval_cycles)
        return CheckResult(_label(cmd.where, cmd.name), "read_reg", addr=cmd.addr, expected=expected, actual=value,
                           cycle=self.env.now, name=cmd.name, mask=cmd.mask, attempts=attempts)

    def _dump_mem(self, cmd: DumpMem) -> CheckResult:
        """Compare memory with the golden image (or record it when there is none)."""
        space = self._route(cmd.addr, cmd.nbytes, cmd.where)
        data = space.read(cmd.addr, cmd.nbytes)
        check = CheckResult(_label(cmd.where, f"dump 0x{cmd.addr:x}"), "dump_mem", space.name.split()[0], cmd.addr, cmd.nbytes,
                            cycle=self.env.now, name=cmd.source)
        if cmd.golden is None:
            check.captured = data
            return check
        diff = np.flatnonzero(data != cmd.golden)
        if diff.size:
            first = int(diff[0])
            check.first_diff = cmd.addr + first
            check.diff_bytes = int(diff.size)
            check.expected, check.actual = int(cmd.golden[first]), int(data[first])
        return check
