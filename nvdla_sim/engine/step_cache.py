"""Repeated-layer timing reuse (issue 20): a step whose register program and starting state
repeat an earlier step's is not simulated again; its recorded outcome is replayed.

`compiler/lower.py run_lowered` runs a network piece by piece on one engine
(`Engine.run_step`).  Between pieces the engine is quiescent: no SimPy event can act, every unit
waits for its next OP_ENABLE, every channel is empty.  What the next piece does then depends on

- the piece: its register writes (addresses left out: timing reads only the RAM_TYPE fields,
  registers of their own) and interrupt waits, sync ids by position;
- the registers it reads before writing them, and the register-group pointers it uses: watched
  while a piece is recorded (`_track`), stored with the entry (`reads`, `pointer_reads`) and
  compared before a replay; a recording that reads an address register is not kept;
- the timing state: each memory interface's port, bus and memory free times relative to now
  (a time at or before now books as now), every credit pool and channel buffer in use (a pool
  with every credit free only by name: its size matters only when the piece uses it before
  resizing it, `pool_sizes`; an empty channel only by its size, when the piece uses it,
  `channels`), the CBUF entries kept for the next layer, CACC's delivery credits still
  out, CDMA's kept data / weights, the convolution units' layer counts relative to CSC's and
  the register group of each unit the piece runs (`parities`);
- the host: its poll phase relative to now, changeover flags, writes issued ahead and which of
  its launch fields are still open.

Register groups are relabelled so that CSC's next group is 0 (`_flip`, `_mirror`): the units
alternate their groups, so a block of three steps repeats in the other group, and its recording
serves both.  Pieces outside what is proven are never keyed (`refused` counts why): a SimPy
event that can still act, a unit not idle, BDMA or LUT programming, compressed weights, clock
gating, VP-trace commands, values runs.

The first time a key runs, the piece runs on the token model and its outcome is recorded
relative to its start cycle: the cycles it took, activity spans, memory-interface bytes per
client (and transfer records when kept), interface free times, unit counters, the registers it
changed, pools, channels, CBUF retention, CACC credits, CDMA state, interrupts raised, host
launches, sync ids fired and checks.  A hit moves the clock by the recorded duration and applies
all of it shifted to the new start, restarting each unit that ran in the group it now waits in:
the same cycles up to float rounding of the shifted absolute times (tests/test_step_cache.py
compares every layer with and without the cache).

Timing-only runs only (`Engine(compute_values=False)`): a values run moves data every layer.
Off with `Engine(step_cache=False)` or `NVDLA_SIM_NO_STEP_CACHE=1`; `NVDLA_SIM_STEP_CACHE_VERIFY=1`
runs every hit on the token model as well and raises if its outcome differs from the recording.
"""
from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from ..program import (CheckCrc, CheckNothing, IntrNotify, MemFill, MemLoad, PollRegEqual,
                       RegWrite, SyncWait)
from .activity import ActivityLog, SpanBlock

if TYPE_CHECKING:
    from ..program import RegisterProgram
    from .engine import Engine, RunResult

ENV_OFF = "NVDLA_SIM_NO_STEP_CACHE"
ENV_VERIFY = "NVDLA_SIM_STEP_CACHE_VERIFY"
MAX_VARIANTS = 8            # entries kept per key (register values read differ)
POOL_EPS = 1e-6             # credits: the pools' own tolerance (fractional entries per atom)
KEY_DIGITS = 6              # relative times in a key, rounded (cycles)
CONV_UNITS = ("CDMA", "CSC", "CMAC_A", "CMAC_B")
_GLB_MIRRORED = ("S_INTR_MASK", "S_INTR_SET", "S_INTR_STATUS")   # a bit per group: `_mirror`
_LAUNCH_TIMES = ("start", "interrupt", "detected", "next_start")
_LAUNCH_COUNTS = ("writes", "ahead_writes", "interrupts")


def enabled_by_default(compute_values: bool) -> bool:
    return not compute_values and not os.environ.get(ENV_OFF)


def _rel(t: float, now: float) -> float:
    """A free time as it books from `now` on: at or before now is now."""
    return round(t - now, KEY_DIGITS) if t > now else 0.0


def _processed_event(env, value: Any):
    """A SimPy event that has fired and been processed, without scheduling anything."""
    event = env.event()
    event._ok = True
    event._value = value
    event.callbacks = None
    return event


# How the key takes a register write (`StepCache._kind`): its address and value as written
# (no relabelling, no check applies), a refusal, or the full look (`_reg`).
_AS_WRITTEN, _REFUSE, _LOOK = 0, 1, 2


@dataclass
class _Reg:
    """What the cache needs of one register address."""
    unit: str
    offset: int
    name: str
    address: bool           # an address register: left out of the key
    dual: bool
    mask: int
    pointer: bool
    op_enable: bool
    refuse: bool            # BDMA / LUT programming: not cached


@dataclass
class Entry:
    """The outcome of one piece, times relative to its start."""
    duration: float
    spans: SpanBlock        # times relative to the start, labels relabelled
    memifs: list            # per interface: (bytes [(client, read, write)], transfers, free times)
    stats: dict             # unit -> {stat: delta}
    reads: tuple            # (unit, store, offset, value, mask): start values the piece read
    regs: tuple             # (unit, store, offset, value): registers the piece left changed
    pointers: tuple         # (unit, producer, consumer) at the end: units it ran or pointed
    pointer_reads: tuple    # (unit, producer, consumer or None) at the start, as the piece used
    parities: tuple         # (unit, relabelled group it waited in) of the units the piece ran
    pool_sizes: tuple       # (pool, capacity) of free pools the piece used before resizing
    cdma: tuple | None
    pools: list             # (name, capacity, free, peak in the piece) in creation order
    channels: list          # (name, capacity, free or None) of the token channels it used
    retained: dict
    credits: tuple | None
    layers: list            # new TimingModel._layers entries
    cbuf_peak: float
    raised: list
    host: tuple
    launches: tuple
    first_op_enable: float | None
    first_write: float | None
    fired: list             # (sync position, cycle)
    checks: list            # (sync position, cycle)
    pending: list           # sync positions


class StepCache:
    def __init__(self, engine: "Engine"):
        self.engine = engine
        self.entries: dict = {}
        self.replayed = 0       # pieces replayed from the cache
        self.simulated = 0      # pieces run on the token model through run_step
        self.verify = bool(os.environ.get(ENV_VERIFY))
        self.refused: dict[str, int] = {}     # why pieces were not cached (diagnostics)
        self._regs: dict[int, _Reg | None] = {}
        self._kinds: dict[int, int] = {}          # address -> _AS_WRITTEN / _REFUSE / _LOOK
        self._addr_offsets: dict[str, frozenset] = {}
        self._resets: dict[str, dict[int, int]] = {}

    # -- register map ----------------------------------------------------------------------
    def _reg(self, addr: int) -> _Reg | None:
        info = self._regs.get(addr, False)
        if info is not False:
            return info
        try:
            unit, reg = self.engine.regmap.decode_address(addr)
        except KeyError:
            reg = None
        if reg is None:
            self._regs[addr] = None
            return None
        info = self._regs[addr] = _Reg(
            unit.name, reg.offset, reg.name, "ADDR" in reg.name, unit.is_dual(reg.offset),
            reg.writable_mask, reg.name == "S_POINTER",
            reg.name == "D_OP_ENABLE",
            unit.name == "BDMA" or reg.name.startswith("S_LUT_ACCESS"))
        return info

    def _kind(self, addr: int) -> int:
        """How `key` takes a write to `addr`: _AS_WRITTEN when the full look would give
        (addr, value) whatever the value (an undefined address; a register that is no pointer,
        no address, not relabelled by `_mirror`, not CDMA's weight format), _REFUSE, _LOOK."""
        info = self._reg(addr)
        if info is None:
            kind = _AS_WRITTEN
        elif info.refuse:
            kind = _REFUSE
        elif info.pointer or info.address or info.name == "S_STATUS" or \
                info.unit == "GLB" and info.name in _GLB_MIRRORED or \
                info.unit == "CDMA" and info.name == "D_WEIGHT_FORMAT":
            kind = _LOOK
        else:
            kind = _AS_WRITTEN
        self._kinds[addr] = kind
        return kind

    def _unit_tables(self, name: str) -> tuple[frozenset, dict[int, int]]:
        addr = self._addr_offsets.get(name)
        if addr is None:
            definition = self.engine.regs[name].definition
            addr = self._addr_offsets[name] = frozenset(
                r.offset for r in definition.regs.values() if "ADDR" in r.name)
            self._resets[name] = {r.offset: r.reset_value for r in definition.regs.values()}
        return addr, self._resets[name]

    def _no(self, reason: str) -> None:
        self.refused[reason] = self.refused.get(reason, 0) + 1
        return None

    # -- the key -------------------------------------------------------------------------------
    def key(self, piece: "RegisterProgram") -> tuple | None:
        """The piece and the starting state its timing depends on; None: not cacheable."""
        eng = self.engine
        env = eng.env
        now = env._now
        if eng.compute_values or not _quiet(env):
            return self._no('events pending')
        # Register groups are relabelled so that CSC's next group is 0 (`flip`): a step in
        # group 1 replays one recorded in group 0 (the units alternate their groups).
        f = self._flip()
        # the piece
        syncs: dict[str, int] = {}
        cmds = []
        kinds = self._kinds
        for c in piece.commands:
            t = type(c)
            if t is RegWrite:
                kind = kinds.get(c.addr)
                if kind is None:
                    kind = self._kind(c.addr)
                if kind == _AS_WRITTEN:
                    cmds.append((c.addr, c.value))
                    continue
                if kind == _REFUSE:
                    return self._no('BDMA or LUT programming')
                info = self._regs[c.addr]
                cmds.append((c.addr, (c.value & 1) ^ f if info.pointer else None if info.address
                             else self._mirror(info.unit, info.name, c.value, f)))
                if info.unit == "CDMA" and info.name == "D_WEIGHT_FORMAT" and c.value & 1:
                    return self._no('compressed weights')     # (reads WMB / WGS: not proven)
            elif t is IntrNotify:
                cmds.append(("notify", syncs.setdefault(c.sync_id, len(syncs)), c.source,
                             c.group ^ f))
            elif t is SyncWait:
                cmds.append(("wait", syncs.setdefault(c.sync_id, len(syncs)), c.block))
            elif t is CheckNothing or t is CheckCrc:
                cmds.append(("check", t.__name__, syncs.setdefault(c.sync_id, len(syncs))))
            elif t is PollRegEqual:         # reads a register the key holds
                cmds.append(("poll", c.addr, c.value))
            elif t is MemFill or t is MemLoad:
                continue                # timing only: skipped by the engine
            else:
                return self._no('VP-trace command')
        if any(s in eng._fired or s in eng._serviced for s in syncs):
            return self._no('sync id reused')
        # units
        csc = eng.units.get("CSC")
        base = csc.stats["layers"] if csc is not None else 0
        units = []
        for name, unit in eng.units.items():
            enable = getattr(unit, "_enable", None)
            if enable is None:              # BDMA: idle only
                if unit._in_flight or any(unit._running):
                    return self._no('BDMA busy')
                units.append((name, "idle"))
                continue
            if enable[0].triggered or enable[1].triggered or \
                    not (unit.waiting_for or "").startswith("its D_OP_ENABLE"):
                return self._no('unit busy')
            # (the convolution units index shared per-layer state by their layer count; the
            # group of a unit the piece runs is checked against the entry: `parities`)
            if name in CONV_UNITS:
                units.append((name, unit.stats["layers"] % 2 ^ f, unit.stats["layers"] - base))
        cdma = eng.units.get("CDMA")
        cdma_state = None
        if cdma is not None:
            if cdma.weight_clock.enabled:
                return self._no('clock gating')
            cb = cdma.cbuf
            # (kept data / weights matter only to a layer that may reuse them; the bank split
            # of the last layer only while CSC is behind CDMA: `Cdma.pending`)
            behind = cdma.stats["layers"] != (csc.stats["layers"] if csc is not None else 0)
            cdma_state = (cdma._last_banks if behind else None, cb.retained_key,
                          cb.retained_weight_key,
                          None if cb.data is None or cb.retained_key is None else
                          (type(cb.data).__name__, cb.data.kind, cb.data.entries),
                          None if cb.weights is None or cb.retained_weight_key is None else
                          cb.weights.size)
        # payload channels between units
        for store in eng._channels.values():
            if store.items or store.put_queue or store.get_queue:
                return self._no('payload left')
        # memory interfaces
        memifs = tuple(None if m is None else
                       (_rel(m._port_free["read"], now), _rel(m._port_free["write"], now),
                        _rel(m._bus_free["read"], now), _rel(m._bus_free["write"], now),
                        _rel(m._memory_free, now))
                       for m in (eng.mcif, eng.cvif))
        # timing model
        tm = eng.timing
        pools = []
        for name, p in tm._pools.items():
            if p._waiters:
                return self._no('pool waiters')
            # (a pool with every credit free whose first use resizes it: its size does not
            # matter; an entry that used it otherwise names it in `pool_sizes`)
            pools.append((name, "free") if abs(p.free - p.capacity) <= POOL_EPS else
                         (name, p.capacity, round(p.free, 9)))
        channels = []
        for name, ch in tm._channels.items():
            if ch._items or ch._getters:
                return self._no('tokens left')
            room = ch.room
            if room is not None and room._waiters:
                return self._no('pool waiters')
            if room is not None and abs(room.free - room.capacity) > POOL_EPS:
                # (an empty channel matters only by its size, if the piece uses it: `channels`)
                channels.append((name, room.capacity, round(room.free, 9)))
        if any(tm._announced.values()):
            return self._no('stream announced')
        credits = self._credits_key(now)
        if credits is False:
            return self._no('CACC credit wait')
        host = None
        if eng.host is not None:
            last = eng.launches[-1] if eng.launches else None
            host = (None if eng._poll_start is None else round(eng._poll_start - now, KEY_DIGITS),
                    eng._changeover, eng._driver_due, eng._ahead,
                    None if last is None else (last.interrupt is None, last.detected is None,
                                               last.next_start is None))
        glb = eng.glb
        if any(glb._waits.values()) or glb._line_waits or glb._bits_waits:
            return self._no('interrupt waits')
        return (tuple(cmds), tuple(units), cdma_state, memifs, tuple(pools),
                tuple(channels), (tm.retained["data"], tm.retained["weight"]), credits, host,
                eng.first_op_enable is None, eng.first_write is None)

    def _credits(self):
        from ..timing.conv import _CREDITS
        return _CREDITS.get(self.engine.timing)

    def _credits_key(self, now: float):
        credits = self._credits()
        if credits is None:
            return None
        if credits._booked is not None:
            return False
        out, pending = credits.outstanding, []
        for start, c, k in credits._deliveries:
            if start + k * c + credits.return_cycles <= now and not pending:
                out -= k            # all back: dropped at the next look, as `ready` does
                continue
            pending.append((round(start - now, KEY_DIGITS), c, k))
        return out, tuple(pending)

    # -- running a piece ---------------------------------------------------------------------
    def run(self, piece: "RegisterProgram") -> "RunResult":
        eng = self.engine
        key = self.key(piece)
        if key is None:
            self.simulated += 1
            return eng.run(piece, summarize=False)
        candidates = self.entries.get(key, ())
        entry = next((e for e in candidates if self._matches(e)), None)
        if entry is not None and not self.verify:
            self.replayed += 1
            return self._replay(piece, entry)
        result, fresh = self._record(piece)
        self.simulated += 1
        if fresh is not None:
            if entry is not None:
                _compare(entry, fresh, piece.name)
            elif len(candidates) < MAX_VARIANTS:
                self.entries.setdefault(key, []).append(fresh)
        return result

    def _matches(self, entry: "Entry") -> bool:
        """The registers the entry's piece read hold what they held then, and the units it ran
        wait in the same (relabelled) groups."""
        units, resets, f = self.engine.regs.units, self._resets, self._flip()
        for name, parity in entry.parities:
            if self.engine.units[name].stats["layers"] % 2 ^ f != parity:
                return False
        tm = self.engine.timing
        for name, capacity, _ in entry.channels:
            ch = tm._channels.get(name)
            if ch is not None and (ch.room.capacity if ch.room is not None else None) != capacity:
                return False
        pools = tm._pools
        for name, capacity in entry.pool_sizes:
            if pools[name].capacity != capacity:
                return False
        for name, producer, consumer in entry.pointer_reads:
            u = units[name]
            if u.producer ^ f != producer or consumer is not None and u.consumer ^ f != consumer:
                return False
        for name, which, offset, value, mask in entry.reads:
            u = units[name]
            store = u.single if which == "s" else u.dual[which ^ f]
            v = store.get(offset, resets[name][offset])
            if which == "s":
                v = self._mirror(name, u.definition.by_offset[offset].name, v, f)
            if v & mask != value:
                return False
        return True

    def _flip(self) -> int:
        """The register group relabelling of the current state: CSC's next group."""
        csc = self.engine.units.get("CSC")
        return csc.stats["layers"] % 2 if csc is not None else 0

    @staticmethod
    def _mirror(unit: str, reg: str, value: int, f: int) -> int:
        """A single register's value with the groups relabelled: S_STATUS holds a status per
        group in each half, GLB's interrupt registers a bit per group (even: 0, odd: 1)."""
        if not f or value is None:
            return value
        if reg == "S_STATUS":
            return ((value & 0xFFFF) << 16) | (value >> 16)
        if unit == "GLB" and reg in _GLB_MIRRORED:
            return ((value & 0x55555555) << 1) | ((value >> 1) & 0x55555555)
        return value

    def _track(self):
        """Watch every register access of a recording: the start values the piece reads (before
        writing them), the registers it changes, whether it reads an address register.  Returns
        (reads, written, flags, undo)."""
        eng = self.engine
        reads: dict = {}
        written: set = set()
        flags = {"address read": False}
        pointers: dict = {}             # unit -> [producer, consumer]: start values read
        pointer_written: set = set()
        saved = []
        for name, u in eng.regs.units.items():
            addr, resets = self._unit_tables(name)
            saved.append((u, {k: u.__dict__[k] for k in ("read_word", "csb_write", "set_word")
                              if k in u.__dict__}))

            def which(reg, group, u=u, name=name):
                if reg.offset < u.dual_from:
                    return "s"
                if group is None:       # the CSB side: the producer pointer decides
                    if name not in pointer_written:
                        pointers.setdefault(name, [u.producer, None])
                    return u.producer
                return group

            def read_word(reg, group=None, name=name, u=u, addr=addr, resets=resets,
                          which=which, plain=u.read_word):
                if reg.name == "S_POINTER":
                    pointers.setdefault(name, [u.producer, None])[1] = u.consumer
                else:
                    k = (name, which(reg, group), reg.offset)
                    if reg.offset in addr:
                        flags["address read"] = True
                    elif k not in written and k not in reads:
                        store = u.single if k[1] == "s" else u.dual[k[1]]
                        reads[k] = (store.get(reg.offset, resets[reg.offset]), 0xFFFFFFFF)
                return plain(reg, group)

            def csb_write(reg, value, name=name, u=u, resets=resets, which=which,
                          plain=u.csb_write):
                if reg.name == "S_POINTER":
                    pointer_written.add(name)
                else:
                    k = (name, which(reg, None), reg.offset)
                    keep = ~reg.writable_mask & 0xFFFFFFFF
                    if keep and k not in written and k not in reads:
                        # (bits a write does not store stay: the end value depends on them)
                        store = u.single if k[1] == "s" else u.dual[k[1]]
                        reads[k] = (store.get(reg.offset, resets[reg.offset]) & keep, keep)
                    written.add(k)
                return plain(reg, value)

            def set_word(reg_name, value, group=None, name=name, u=u, which=which,
                         plain=u.set_word):
                reg = u.definition.regs[reg_name]
                written.add((name, which(reg, group), reg.offset))
                return plain(reg_name, value, group)

            u.read_word, u.csb_write, u.set_word = read_word, csb_write, set_word

        def undo():
            for u, attrs in saved:
                for k in ("read_word", "csb_write", "set_word"):
                    if k in attrs:
                        setattr(u, k, attrs[k])
                    else:
                        delattr(u, k)
        return reads, written, flags, pointers, pointer_written, undo

    def _syncs(self, piece) -> list[str]:
        out: dict[str, None] = {}
        for c in piece.commands:
            sid = getattr(c, "sync_id", None)
            if sid is not None and type(c) is not RegWrite:
                out.setdefault(sid, None)
        return list(out)

    def _record(self, piece: "RegisterProgram"):
        eng = self.engine
        env, tm = eng.env, eng.timing
        t0 = env._now
        n_spans = eng.activity.mark()
        mem_before = [None if m is None else
                      (len(m.transfers), {c: dict(v) for c, v in m.bytes_by_client.items()})
                      for m in (eng.mcif, eng.cvif)]
        stats_before = {name: dict(u.stats) for name, u in eng.units.items()}
        peaks = {name: p.peak for name, p in tm._pools.items()}
        for p in tm._pools.values():
            p.peak = -1.0
        cbuf_peak = tm.cbuf_peak_entries
        tm.cbuf_peak_entries = -1.0
        used_channels = self._watch_channels()
        layers_before = set(tm._layers)
        n_raised = len(eng.glb.raised)
        n_launches = len(eng.launches)
        last_before = None if not eng.launches else \
            {f.name: getattr(eng.launches[-1], f.name) for f in fields(eng.launches[-1])}
        first_op_enable, first_write = eng.first_op_enable, eng.first_write
        csc_layers = eng.units["CSC"].stats["layers"] if "CSC" in eng.units else 0
        f = self._flip()
        clock_layers = eng.units["CDMA"].weight_clock.layers if "CDMA" in eng.units else 0
        fired_before = set(eng._fired)
        serviced_before = set(eng._serviced)
        reads, written, flags, pointer_reads, pointer_written, undo = self._track()
        first_use = self._watch_pools()
        try:
            result = eng.run(piece, summarize=False)
        finally:
            undo()
            tm.__dict__.pop("channel", None)
            for p in tm._pools.values():    # (watchers never called are still there)
                for k in ("acquire", "release", "resize"):
                    p.__dict__.pop(k, None)
            piece_peaks = {name: p.peak for name, p in tm._pools.items()}
            for name, p in tm._pools.items():
                p.peak = max(peaks.get(name, 0.0), p.peak)
            piece_cbuf = tm.cbuf_peak_entries
            tm.cbuf_peak_entries = max(cbuf_peak, piece_cbuf)
        if not _quiet(env) or self.key_state_busy():
            return result, self._no("not quiescent after the step")
        syncs = {sid: i for i, sid in enumerate(self._syncs(piece))}
        if any(sid not in syncs for sid in set(eng._fired) - fired_before) or \
                any(sid not in syncs for sid in set(eng._serviced) - serviced_before):
            return result, self._no("sync ids of another step")
        memifs = []
        for m, before in zip((eng.mcif, eng.cvif), mem_before):
            if m is None:
                memifs.append(None)
                continue
            n_tr, old = before
            moved = []
            for client, v in m.bytes_by_client.items():
                o = old.get(client, {"read": 0, "write": 0})
                if v["read"] != o["read"] or v["write"] != o["write"] or client not in old:
                    moved.append((client, v["read"] - o["read"], v["write"] - o["write"]))
            transfers = [(s - t0, e - t0, c, d, n) for s, e, c, d, n in m.transfers[n_tr:]]
            end = env._now          # (a free time in the past books as now: kept as the end)
            memifs.append((moved, transfers, tuple(
                max(x, end) - t0 for x in (m._port_free["read"], m._port_free["write"],
                                           m._bus_free["read"], m._bus_free["write"],
                                           m._memory_free))))
        stats = {}
        for name, u in eng.units.items():
            old = stats_before[name]
            delta = {k: v - old.get(k, 0) if isinstance(v, (int, float)) else v
                     for k, v in u.stats.items() if v != old.get(k)}
            if delta:
                stats[name] = delta
        if flags["address read"]:
            return result, self._no("address register read")
        units = eng.regs.units
        regs = []
        for name, which, offset in written:
            if offset in self._unit_tables(name)[0]:
                continue                # the piece's own addresses, applied on replay
            u = units[name]
            store = u.single if which == "s" else u.dual[which]
            value = store.get(offset, self._resets[name][offset])
            if which == "s":
                value = self._mirror(name, u.definition.by_offset[offset].name, value, f)
            regs.append((name, which if which == "s" else which ^ f, offset, value))
        read_values = []
        for (name, which, offset), (v, m) in reads.items():
            if which == "s":
                reg = units[name].definition.by_offset[offset].name
                v, m = self._mirror(name, reg, v, f), self._mirror(name, reg, m, f)
            else:
                which ^= f
            read_values.append((name, which, offset, v & m, m))
        read_values = tuple(sorted(read_values, key=str))
        ran = {name for name in stats if "layers" in stats[name]}
        pointers = tuple((name, u.producer ^ f, u.consumer ^ f) for name, u in units.items()
                         if name in pointer_written or name in ran)
        pointer_reads = tuple((name, p ^ f, None if c is None else c ^ f)
                              for name, (p, c) in pointer_reads.items())
        cdma = eng.units.get("CDMA")
        cdma_end = None
        if cdma is not None and "layers" in stats.get("CDMA", {}):
            cb, wc = cdma.cbuf, cdma.weight_clock
            cdma_end = (cdma._last_banks, cb.split, cb.data, cb.weights, cb.retained_key,
                        cb.retained_weight_key, wc.layers - clock_layers, wc.running,
                        wc.on_at - t0, wc.off_at - t0)
        # pools the piece used or made, at their end state (the others are as they were)
        pools = [(name, p.capacity, p.free, piece_peaks[name]) for name, p in tm._pools.items()
                 if name not in peaks or first_use.get(name)]
        pool_sizes = tuple((name, capacity) for name, (op, capacity, was_free)
                           in ((n, v) for n, v in first_use.items() if v)
                           if was_free and op != "resize")
        channels = [(name, ch.room.capacity if ch.room is not None else None,
                     ch.room.free if ch.room is not None else None)
                    for name, ch in tm._channels.items() if name in used_channels]
        credits = self._credits()
        credits_end = None if credits is None else \
            (credits.outstanding, [(s - t0, c, k) for s, c, k in credits._deliveries])
        new_layers = []
        for k in tm._layers:
            if k in layers_before:
                continue
            state = tm._layers[k]
            if set(state) - {"done", "mac_busy"} or not state["done"].processed:
                return result, self._no("conv layer state")   # (conv timing shares only these)
            # (by layer count relative to CSC's at the start)
            new_layers.append(((k[0], k[1] - csc_layers), state["done"].value - t0,
                               [(s - t0, e - t0) for s, e in state.get("mac_busy", ())]))
        raised = [(c - t0, s, g ^ f) for c, s, g in eng.glb.raised[n_raised:]]
        host = ()
        if eng.host is not None:
            host = (None if eng._poll_start is None else eng._poll_start - t0,
                    eng._changeover, eng._driver_due, eng._ahead,
                    sorted(syncs[s] for s in set(eng._serviced) - serviced_before))
        launches = self._launch_changes(t0, n_launches, last_before)
        fired = [(syncs[s], eng._fired[s].value - t0) for s in eng._fired if s not in fired_before]
        checks = []
        for c in result.checks:
            if c.kind != "nothing" or c.sync_id not in syncs:
                return result, self._no("checks")
            checks.append((syncs[c.sync_id], c.cycle - t0))
        entry = Entry(
            env._now - t0, _relative_spans(eng.activity, n_spans, t0, f),
            memifs, stats, read_values, tuple(sorted(regs, key=str)), pointers, pointer_reads,
            tuple((name, stats_before[name]["layers"] % 2 ^ f) for name in stats
                  if "layers" in stats[name]), pool_sizes, cdma_end, pools, channels,
            dict(tm.retained), credits_end,
            new_layers, piece_cbuf, raised, host, launches,
            None if first_op_enable is not None or eng.first_op_enable is None
            else eng.first_op_enable - t0,
            None if first_write is not None or eng.first_write is None else eng.first_write - t0,
            fired, checks, [syncs[s] for s in eng._pending_syncs if s in syncs])
        return result, entry

    def key_state_busy(self) -> bool:
        """The engine after a piece is not quiescent (a unit still running, a token left)."""
        eng = self.engine
        for unit in eng.units.values():
            enable = getattr(unit, "_enable", None)
            if enable is None:
                if unit._in_flight or any(unit._running):
                    return True
            elif enable[0].triggered or enable[1].triggered or \
                    not (unit.waiting_for or "").startswith("its D_OP_ENABLE"):
                return True
        tm = eng.timing
        return any(ch._items or ch._getters for ch in tm._channels.values()) or \
            any(p._waiters for p in tm._pools.values()) or any(tm._announced.values())

    def _watch_pools(self) -> dict:
        """Note each existing pool's first use in the recording: (method, capacity, all free);
        the watcher removes itself at once (the pools are used per DMA request)."""
        first: dict = {}
        for name, pool in self.engine.timing._pools.items():
            first[name] = None

            def watcher(method, name=name, pool=pool):
                plain = getattr(type(pool), method)

                def call(*args):
                    if first[name] is None:
                        first[name] = (method, pool.capacity,
                                       abs(pool.free - pool.capacity) <= POOL_EPS)
                    for k in ("acquire", "release", "resize"):
                        pool.__dict__.pop(k, None)
                    return plain(pool, *args)
                return call
            for method in ("acquire", "release", "resize"):
                setattr(pool, method, watcher(method))
        return first

    def _watch_channels(self) -> set:
        """The token channels a recording looks up or makes (TimingModel.channel)."""
        tm = self.engine.timing
        used: set = set()
        plain = type(tm).channel

        def channel(name, capacity=None):
            used.add(name)
            return plain(tm, name, capacity)
        tm.channel = channel
        return used

    def _launch_changes(self, t0: float, n_before: int, last_before: dict | None) -> tuple:
        launches = self.engine.launches
        changed = {}
        if last_before is not None:
            last = launches[n_before - 1]
            for name in _LAUNCH_TIMES:
                v = getattr(last, name)
                if v != last_before[name]:
                    changed[name] = v - t0
            for name in _LAUNCH_COUNTS:
                d = getattr(last, name) - last_before[name]
                if d:
                    changed[name] = ("+", d)
        new = [{f.name: (getattr(x, f.name) - t0 if f.name in _LAUNCH_TIMES and
                         getattr(x, f.name) is not None else getattr(x, f.name))
                for f in fields(x)} for x in launches[n_before:]]
        return changed, new

    # -- replay --------------------------------------------------------------------------------
    def _replay(self, piece: "RegisterProgram", entry: Entry) -> "RunResult":
        from .engine import CheckResult, Launch, RunResult
        eng = self.engine
        env, tm = eng.env, eng.timing
        t0 = env._now
        syncs = self._syncs(piece)
        base = eng.units["CSC"].stats["layers"] if "CSC" in eng.units else 0
        f = self._flip()
        # registers: the recorded end values, the piece's own addresses
        addr_writes = []
        producers = {name: u.producer for name, u in eng.regs.units.items()}
        for c in piece.commands:
            if type(c) is RegWrite:
                info = self._reg(c.addr)
                if info is None:
                    continue
                if info.pointer:
                    producers[info.unit] = c.value & 1
                elif info.address and info.mask:
                    addr_writes.append((info, producers[info.unit] if info.dual else None,
                                        c.value))
        units = eng.regs.units
        for name, which, offset, value in entry.regs:
            u = units[name]
            if which == "s":
                u.single[offset] = self._mirror(name, u.definition.by_offset[offset].name,
                                                value, f)
            else:
                u.dual[which ^ f][offset] = value
        for name, producer, consumer in entry.pointers:
            u = units[name]
            u.producer, u.consumer = producer ^ f, consumer ^ f
        resets = self._resets
        for info, group, value in addr_writes:
            u = eng.regs.units[info.unit]
            store = u.single if group is None else u.dual[group]
            old = store.get(info.offset, resets[info.unit][info.offset])
            store[info.offset] = (old & ~info.mask) | (value & info.mask)
        # the clock, activity, memory interfaces
        while env._queue:
            env.step()              # the ended master's event, due now, nobody waiting
        env._now = t0 + entry.duration
        eng.activity.append_block(entry.spans, t0,
                                  [_relabel(lab, f) for lab in entry.spans.labels])
        for m, rec in zip((eng.mcif, eng.cvif), entry.memifs):
            if m is None:
                continue
            moved, transfers, free = rec
            for client, r, w in moved:
                per = m.bytes_by_client.get(client)
                if per is None:
                    per = m.bytes_by_client[client] = {"read": 0, "write": 0}
                per["read"] += r
                per["write"] += w
            if m._record:
                m.transfers.extend((t0 + s, t0 + e, c, d, n) for s, e, c, d, n in transfers)
            m._port_free["read"], m._port_free["write"] = t0 + free[0], t0 + free[1]
            m._bus_free["read"], m._bus_free["write"] = t0 + free[2], t0 + free[3]
            m._memory_free = t0 + free[4]
        # units: counters, and the register group each waits in
        restart = []
        for name, delta in entry.stats.items():
            unit = eng.units[name]
            for k, v in delta.items():
                unit.stats[k] = unit.stats.get(k, 0) + v if isinstance(v, (int, float)) else v
            if delta.get("layers", 0) % 2 and getattr(unit, "_enable", None) is not None:
                restart.append(unit)
        cdma = eng.units.get("CDMA")
        if entry.cdma is not None and cdma is not None:
            (cdma._last_banks, split, data, weights, retained, retained_w, clock_layers, running,
             on_at, off_at) = entry.cdma
            cb, wc = cdma.cbuf, cdma.weight_clock
            cb.split, cb.data, cb.weights = split, data, weights
            cb.retained_key, cb.retained_weight_key = retained, retained_w
            wc.layers += clock_layers
            wc.running, wc.on_at, wc.off_at, wc.fetch = running, t0 + on_at, t0 + off_at, None
        # timing model
        for name, capacity, _, _ in entry.pools:
            tm.pool(name, capacity)                     # created in the recorded order
        # (pools made in the piece come after the existing ones, as they were made)
        for name, capacity, free, peak in entry.pools:
            p = tm._pools[name]
            p.capacity, p.free = capacity, free
            if peak > p.peak:
                p.peak = peak
        for name, capacity, free in entry.channels:
            ch = tm.channel(name, capacity)     # (made now if the piece made it)
            if ch.room is not None:
                ch.room.free = free
        tm.retained.update(entry.retained)
        if entry.credits is not None:
            from ..timing.conv import delivery_credits
            credits = delivery_credits(tm)
            credits.outstanding = entry.credits[0]
            credits._deliveries = deque((t0 + s, c, k) for s, c, k in entry.credits[1])
        for (kind, index), done, mac_busy in entry.layers:
            tm._layers[(kind, base + index)] = {"done": _processed_event(env, t0 + done),
                               "mac_busy": [(t0 + s, t0 + e) for s, e in mac_busy]}
        if entry.cbuf_peak > tm.cbuf_peak_entries:
            tm.cbuf_peak_entries = entry.cbuf_peak
        # interrupts, host, launches, sync ids
        eng.glb.raised.extend((t0 + c, s, g ^ f) for c, s, g in entry.raised)
        if entry.host:
            poll, eng._changeover, eng._driver_due, eng._ahead, serviced = entry.host
            eng._poll_start = None if poll is None else t0 + poll
            eng._serviced.update(syncs[i] for i in serviced)
        changed, new = entry.launches
        if changed:
            last = eng.launches[-1]
            for name, v in changed.items():
                if isinstance(v, tuple):
                    setattr(last, name, getattr(last, name) + v[1])
                else:
                    setattr(last, name, None if v is None else t0 + v)
        for rec in new:
            eng.launches.append(Launch(**{n: t0 + v if n in _LAUNCH_TIMES and v is not None
                                          else v for n, v in rec.items()}))
        if entry.first_op_enable is not None:
            eng.first_op_enable = t0 + entry.first_op_enable
        if entry.first_write is not None:
            eng.first_write = t0 + entry.first_write
        for i, cycle in entry.fired:
            eng._fired[syncs[i]] = _processed_event(env, t0 + cycle)
        eng._pending_syncs = [syncs[i] for i in entry.pending]
        eng._current = None
        # idle units wait in the group the piece left them in: restart their processes there
        for unit in restart:
            group = unit.stats["layers"] % 2
            old = unit._enable[group ^ 1]
            old.callbacks.remove(unit.process._resume)
            unit.process = env.process(unit._loop(group))
        while env._queue:
            env.step()              # the restarted processes reach their OP_ENABLE wait
        result = RunResult(piece.name)
        result.checks = [CheckResult(syncs[i], "nothing", cycle=t0 + c) for i, c in entry.checks]
        result.first_write = eng.first_write
        result.launches = list(eng.launches)
        result.engine = eng
        return result


def _relative_spans(log: ActivityLog, mark: int, t0: float, f: int) -> SpanBlock:
    """The piece's spans (made since `mark`) as a block relative to its start `t0`, labels
    relabelled; the log keeps them as a block too (a replay then appends the entry's block
    shifted: `t0 + start` per span, as many spans, no tuples made)."""
    block = log.freeze_since(mark)
    return block.relative(t0, [_relabel(lab, f) for lab in block.labels])


def _relabel(label: str, f: int) -> str:
    """A unit's layer span names its register group (units/base.py): relabelled."""
    if f and label.startswith("layer g"):
        return f"layer g{int(label[7:]) ^ f}"
    return label


def _quiet(env) -> bool:
    """No event can do anything: the queue holds at most finished processes' own events due
    now with nobody waiting on them (the ended CSB master of the last piece)."""
    now = env._now
    return all(t == now and not e.callbacks for t, _, _, e in env._queue)


def _compare(a: Entry, b: Entry, where: str) -> None:
    """Verify mode: the recording of a key and a new run of it must agree (times within 1e-6)."""
    for f in fields(Entry):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if f.name == "spans":
            # (which spans a wait leaves can follow a tie of two float times that the shift
            # rounds either way; the busy cycles of each unit must agree)
            x, y = _busy_totals(x), _busy_totals(y)
        path = _diff(x, y, f.name)
        if path is not None:
            raise AssertionError(f"step cache: {where}: the outcome differs from the recording "
                                 f"of the same key at {path}")


def _busy_totals(spans: SpanBlock) -> dict[str, float]:
    log = ActivityLog()
    log.append_block(spans)
    return {u: k.get("busy", 0.0) for u, k in log.totals().items()}


def _diff(x, y, path: str) -> str | None:
    """Where `x` and `y` first differ (None: they agree; floats within 1e-6 relative)."""
    if isinstance(x, float) and isinstance(y, float):
        ok = x == y or abs(x - y) <= 1e-6 * max(1.0, abs(x), abs(y))
        return None if ok else f"{path}: {x!r} != {y!r}"
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        for i, (p, q) in enumerate(zip(x, y)):
            d = _diff(p, q, f"{path}[{i}]")
            if d is not None:
                return d
        return None if len(x) == len(y) else f"{path}: {len(x)} != {len(y)} items"
    if isinstance(x, dict) and isinstance(y, dict):
        if x.keys() != y.keys():
            return f"{path}: keys {sorted(x, key=str)} != {sorted(y, key=str)}"
        for k in x:
            d = _diff(x[k], y[k], f"{path}[{k!r}]")
            if d is not None:
                return d
        return None
    if hasattr(x, "size") and hasattr(y, "size") and not isinstance(x, (int, float)):
        return None if x.size == y.size else f"{path}: size {x.size} != {y.size}"
    return None if x == y else f"{path}: {x!r} != {y!r}"


# -- the report ----------------------------------------------------------------------------------
def summary(result) -> dict | None:
    """How many steps of a run (a PlanResult) were replayed: for the report."""
    engine = getattr(getattr(result, "engine_result", None), "engine", None)
    cache = getattr(engine, "step_cache", None)
    if cache is None or not (cache.replayed or cache.simulated):
        return None
    return {"replayed_steps": cache.replayed, "steps": cache.replayed + cache.simulated}


def console_lines(info: dict | None) -> list[str]:
    if not info:
        return []
    return [f"timing reuse: {info['replayed_steps']} of {info['steps']} steps replayed from "
            "the step cache (NVDLA_SIM_NO_STEP_CACHE=1 simulates every step)"]
