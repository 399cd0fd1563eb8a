"""SDP timing: SDP_RDMA (main data and operand streams), the SDP core and its write DMA.

Tokens: SDP_RDMA cuts the input cube (in read order) into streaming tokens of atoms; operands read
per element from memory are booked on the same port beside each data token, operands per kernel
once before the first.  The core serves atoms at (elements per atom) / throughput cycles each
(8 on nv_small; an INT16 / FP16 atom holds half the elements of an INT8 one) with a fixed
pipeline depth plus one stage depth per enabled X stage.  Its output goes to its own WDMA,
or in SDP->PDP mode to the PDP core's input channel.  In flying mode the input comes from CACC.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generator

from .dma import WriteState, read_chunks, split_atoms, token_atoms, write_stream
from .sdp_operands import (OperandReader, OperandState, OperandWriter, PendingWakes,
                           operand_writer, register, unregister)
from .tokens import (GRANTED, Channel, Ready, Seg, coarse_stripes, flying_writer, held, serve,
                     sleep_event, wait_until, waited)

if TYPE_CHECKING:
    from ..units.base import Unit
    from .model import TimingModel

CH_RDMA = "sdp_rdma->sdp"
CH_CACC = "cacc->sdp"
CH_PDP = "sdp->pdp"
CH_WDMA = "sdp->sdp_wdma"
CH_OPERANDS = "sdp_rdma->sdp operands"     # per-element operands beside CACC's output (flying)


@dataclass(frozen=True)
class Operand:
    """One operand stream of SDP_RDMA (BRDMA, NRDMA, ERDMA)."""
    client: str
    ram_type: int
    per_element: bool                # one value per element (else one per channel)
    nbytes: int                      # bytes read for the layer


@dataclass(frozen=True)
class SdpRdmaGeometry:
    atoms: int                       # input atoms (all lanes of every surface)
    flying: bool                     # main data comes from CACC, not memory
    ram_type: int
    operands: tuple = ()             # Operand streams


@dataclass(frozen=True)
class SdpGeometry:
    atoms: int
    flying: bool                     # input from CACC
    to_pdp: bool                     # output to PDP on the fly
    stages: int                      # enabled X stages present in this hardware
    ram_type: int
    writes: bool = True              # False in EW EQL mode: nothing is written
    element_bytes: int = 1           # PROC_PRECISION: an atom holds atom_bytes / this elements
    out_ratio: float = 1             # output atoms per input atom (2: INT8 written as 16-bit)


def rdma(unit: "Unit", geom: SdpRdmaGeometry) -> Generator:
    """SDP_RDMA's layer: main data (unless flying) and operand streams into the core's FIFO."""
    tm: TimingModel = unit.engine.timing
    env = tm.env
    out = tm.channel(CH_RDMA, tm.params.rates.latency_fifo_atoms)
    tracker = tm.tracker("SDP_RDMA")
    yield from wait_until(env, env.now + tm.params.dma.request_cycles)
    atom = tm.params.rates.atom_bytes
    rsp = tm.params.dma.response_cycles
    # Per-kernel operands: their DMAs fetch them beside the first data (the core needs them
    # before its first atom).
    operands_ready = env.now
    for op in geom.operands:
        if not op.per_element:
            tr = tm.engine.memif(op.ram_type).reserve(op.client, "read", op.nbytes)
            tracker.busy(tr.port_free - tr.port_cycles, tr.port_free, "operands")
            operands_ready = max(operands_ready, tr.last + rsp)
    # Per-element operands: bytes per data atom.
    per_element = [(op.client, op.ram_type, op.nbytes / geom.atoms)
                   for op in geom.operands if op.per_element]
    if geom.flying:
        # Operands only, streaming beside CACC's output: token by token into the operand
        # latency FIFO, which the core drains as it consumes CACC's atoms, so the operand reads
        # share the read port with the CDMA's instead of booking it for the whole layer at once.
        if per_element:
            fifo = tm.params.rates.latency_fifo_atoms
            ops = tm.channel(CH_OPERANDS, fifo)
            # the loop's state in an object the SDP core's OperandWriter may advance while
            # this process waits for room (sdp_operands.py)
            reader = OperandReader(tm, ops, split_atoms(geom.atoms, min(token_atoms(tm), fifo)),
                                   per_element, operands_ready)
            register(reader)
            yield from read_chunks(env, reader, ops.room, tracker)
            unregister(reader)
        tracker.flush()
        return
    chunks = split_atoms(geom.atoms, token_atoms(tm))
    for i, chunk in enumerate(chunks):
        if out.room is not None:
            yield from waited(env, out.room.acquire(chunk.atoms), tracker, f"{out.name} full")
        if per_element:
            # The DMAs take turns on the port request by request: book atom by atom, so an
            # atom is complete when its data and its operands are in.
            first = last = port_free = None
            busy = 0.0
            for _ in range(chunk.atoms):
                t_atom = port_atom = 0.0
                for client, ram, nbytes in [("SDP_RDMA", geom.ram_type, atom)] + per_element:
                    tr = tm.engine.memif(ram).reserve(client, "read", nbytes)
                    t_atom, port_atom = max(t_atom, tr.last), max(port_atom, tr.port_free)
                    busy += tr.port_cycles
                first = t_atom if first is None else first
                last, port_free = t_atom, port_atom
        else:
            tr = tm.engine.memif(geom.ram_type).reserve("SDP_RDMA", "read", chunk.atoms * atom)
            first, last, port_free, busy = tr.first, tr.last, tr.port_free, tr.port_cycles
        out.put(Seg(chunk.atoms, max(first + rsp, operands_ready), max(last + rsp, operands_ready),
                    end=i == len(chunks) - 1))
        tracker.busy(port_free - busy, port_free, "read")
        yield from wait_until(env, port_free)
    tracker.flush()


def core(unit: "Unit", geom: SdpGeometry) -> Generator:
    """The SDP core's layer; returns when its output is written (or handed to PDP)."""
    tm: TimingModel = unit.engine.timing
    env, p = tm.env, tm.params
    tracker = tm.tracker("SDP")
    # The core's rate is in elements per cycle: an INT16 / FP16 atom holds half the elements.
    c = p.rates.sdp_cycles_per_atom / geom.element_bytes
    depth = p.sdp.pipeline_cycles + p.sdp.stage_cycles * geom.stages
    inp = tm.stream(CH_CACC if geom.flying else CH_RDMA,
                    None if geom.flying else p.rates.latency_fifo_atoms,
                    lambda: [Seg(geom.atoms, env.now, env.now, end=True)])
    writer = wdma = None
    if geom.to_pdp:
        out = tm.channel(CH_PDP, p.rates.stream_buffer_atoms)
    elif geom.writes:
        out = tm.channel(CH_WDMA, p.rates.stream_buffer_atoms)
        wdma = WriteState(env.now)
        writer = env.process(write_stream(tm, "SDP_WDMA", geom.ram_type, out, p.sdp.wdma_cycles,
                                          wdma))
    else:
        out = None                                   # EQL mode: results are only compared
    # Flying with per-element operands: each CACC token also needs its operands from SDP_RDMA.
    ops = tm.channel(CH_OPERANDS, p.rates.latency_fifo_atoms) \
        if geom.flying and tm.claim(CH_OPERANDS) else None
    if geom.flying:      # CSC hands this layer coarse tokens only without operands (timing/conv.py)
        tm.flying_operands = ops is not None
    credit = OperandState()       # operand atoms taken, the last one's arrival
    end = env.now
    room = out.room if out is not None else None
    # CACC's stripes straight into this core and its write DMA (FlyingWriter), when nothing
    # else reads or feeds them: the plain case of a convolution layer's output; with operands
    # beside them, the operand reader as well (OperandWriter, sdp_operands.py)
    follower = None
    if geom.flying and wdma is not None and inp is tm.channel(CH_CACC) and flying_writer():
        if ops is None:
            if coarse_stripes() <= 1:
                follower = inp.follower = FlyingWriter(tm, geom, c, depth, inp, out, wdma,
                                                       writer)
        # CSC hands a layer with operands single stripes unless NVDLA_SIM_COARSE_OPERANDS=1
        # (timing/conv.py)
        elif operand_writer() and (coarse_stripes() <= 1
                                   or os.environ.get("NVDLA_SIM_COARSE_OPERANDS") != "1"):
            follower = inp.follower = OperandWriter(tm, geom.ram_type, geom.out_ratio, c, depth,
                                                    inp, out, ops, wdma, credit, writer)
    empty = f"{inp.name} empty"
    waits = follower if follower is not None else WriteState(env.now)    # .wait_from
    while True:
        # event-free hand-overs and grants without a generator (tokens.Ready / GRANTED)
        got = inp.get()
        if type(got) is Ready:
            seg = got.value
        else:                        # `waited`, its start kept where FlyingWriter moves it
            waits.wait_from = env.now
            seg = yield got
            tracker.stall(waits.wait_from, env.now, empty)
        if ops is not None:
            while credit.have < seg.n - 1e-9:
                op = yield from waited(env, ops.get(), tracker, f"{ops.name} empty")
                credit.have, credit.have_last = credit.have + op.n, op.last
                ops.release(op.n)          # taken into the core's pipeline
            have_last = credit.have_last
            seg = Seg(seg.n, max(seg.first, min(have_last, seg.last)), max(seg.last, have_last),
                      seg.tag, seg.end)
        n_out = seg.n if geom.out_ratio == 1 else seg.n * geom.out_ratio
        if room is not None:
            # a coarse CSC token (NVDLA_SIM_COARSE_STRIPES) may be wider than the output buffer:
            # it holds the whole buffer (the consumer releases as much; tokens.held)
            grant = room.acquire(n_out if n_out <= room.capacity else room.capacity)
            if grant is not GRANTED:
                yield from waited(env, grant, tracker, f"{out.name} full")
        start, end = serve(env.now, seg, c)
        tracker.stall(env.now, start, "waiting for data")
        if out is not None:
            out.put(Seg(n_out, start + c + depth, end + depth, end=seg.end))
        tracker.busy(start, end)
        sleep = sleep_event(env, end)
        if sleep is not None:
            yield sleep
        inp.release(seg.n)
        if ops is not None:
            credit.have -= seg.n
        if seg.end:
            break
    if follower is not None:
        inp.follower = None
        # SimPy's counter numbers events; these numbers were kept for wake-ups computed
        # without one (events per run: the counter less these: `kept_event_numbers`)
        env.kept_event_numbers = kept_event_numbers(env) + follower.reserved
    tracker.flush()
    if writer is not None:
        done = yield writer
        tm.tracker("SDP_WDMA").flush()
        yield from wait_until(env, done + p.glb.interrupt_cycles)
    elif out is None:
        yield from wait_until(env, end + depth + p.glb.interrupt_cycles)


def kept_event_numbers(env) -> int:
    """Event numbers `FlyingWriter` took from `env`'s counter for wake-ups that never became
    events: the events a run scheduled are the counter less these."""
    return getattr(env, "kept_event_numbers", 0)


class FlyingWriter(PendingWakes):
    """The SDP core and its write DMA taking CACC's stripes of a convolution without events
    (issue 20).

    CACC hands each stripe to `take` (`conv.CaccDelivery.step`).  What the core and the write
    DMA then do with it depends on nothing outside them: the core takes the stripe when it is
    free, waits for room in its output buffer (freed by the write DMA), serves it; the write DMA
    books the write when it has the atoms and its port is free, and frees the room when the port
    has taken the requests.  Every cycle of that is computed here, with the same operations in
    the same order as the two processes, and the one action others see, the write booked on the
    memory interface, is made at once when no other process has an event due before the cycle
    the write DMA would book it and CSC does nothing that wakes another process before then
    (`limit`).  The processes stay parked on their input channels meanwhile: the events this
    saves would only have run their own code.

    When a stripe cannot be taken (the layer's last, a booking that others' events come
    before), the processes take over from the state left here: the core's and the write DMA's
    pending wake-ups become events with the numbers SimPy would have given them when they were
    scheduled (`_hand_back`), so ties between equal cycles break as they would.  Exact: the
    same bookings, spans and cycles as the two processes on their own."""
    __slots__ = ("env", "inp", "out", "room", "wdma", "memif", "c", "depth", "pipeline",
                 "out_ratio", "atom", "core_tracker", "wdma_tracker", "empty", "full",
                 "wait_from", "core_free", "core_eid", "wdma_free", "wdma_eid", "wdma_hold",
                 "reserved", "writer")

    def __init__(self, tm: "TimingModel", geom: SdpGeometry, c: float, depth: float,
                 inp: Channel, out: Channel, wdma: WriteState, writer=None):
        self.env = tm.env
        self.writer = writer             # the write DMA's process (its sleeps may be taken over)
        self.inp, self.out, self.room, self.wdma = inp, out, out.room, wdma
        self.memif = tm.engine.memif(geom.ram_type)
        self.c, self.depth, self.pipeline = c, depth, tm.params.sdp.wdma_cycles
        self.out_ratio = geom.out_ratio
        self.atom = tm.params.rates.atom_bytes
        self.core_tracker, self.wdma_tracker = tm.tracker("SDP"), tm.tracker("SDP_WDMA")
        self.empty, self.full = f"{inp.name} empty", f"{out.name} full"
        self.wait_from = tm.env.now      # the core began waiting for its next token
        # Wake-ups computed here and not yet reached by the processes: the core's after serving
        # its last stripe, the write DMA's after its last booking (then it frees `wdma_hold`),
        # each with the event number it would have had (None: nothing pending).
        self.core_free = self.wdma_free = tm.env.now
        self.core_eid = self.wdma_eid = None
        self.wdma_hold = 0.0
        self.reserved = 0                # event numbers taken for wake-ups (engine's count)

    def take(self, seg: Seg, limit: float) -> bool:
        """Handle CACC's stripe `seg` here if its write can be booked now (see the class);
        False: the processes hold the state again and the caller puts `seg` on the channel."""
        inp, out, room = self.inp, self.out, self.room
        env = self.env
        now = env._now
        if self.wdma_eid is None and self.wdma.sleeping is not None and not out._getters \
                and not seg.end and not inp._items and not out._items \
                and (self.core_eid is not None or len(inp._getters) == 1):
            self._adopt_wdma()      # the write DMA sleeps on its port: its wake-up is ours
        if seg.end or inp._items or out._items or room is None or room._waiters \
                or (self.core_eid is None and len(inp._getters) != 1) \
                or (self.wdma_eid is None and len(out._getters) != 1):
            return self._hand_back(now)
        # the core: takes the stripe now (it waits for one) or when it wakes
        core_free = self.core_free
        got = now if self.core_eid is None or now >= core_free else core_free
        n_out = seg.n if self.out_ratio == 1 else seg.n * self.out_ratio
        hold = held(out, n_out)
        # its output room: the write DMA frees its last stripe's when it wakes
        free = room.free
        acq = got
        pending = self.wdma_eid is not None
        if not hold <= free + 1e-6:
            if not pending or not hold <= free + self.wdma_hold + 1e-6:
                return self._hand_back(now)
            acq = self.wdma_free if self.wdma_free > got else got
        c = self.c
        start, end = serve(acq, seg, c)
        first, last = start + c + self.depth, end + self.depth
        # the write DMA: gets the atoms when the core hands them over, or when it wakes
        wdma_free = self.wdma_free
        book = acq if not pending or acq >= wdma_free else wdma_free
        queue = env._queue
        if not book < limit - 1e-6 or (queue and not queue[0][0] > book):
            return self._hand_back(now)
        # -- commit: the two processes' calls in their order --------------------------------
        tracker = self.core_tracker
        if got > self.wait_from:                   # it waited for the stripe
            tracker.stall(self.wait_from, got, self.empty)
        release_first = pending and (wdma_free <= acq)
        if release_first:                          # the write DMA woke before the core took room
            room.free += self.wdma_hold
        if acq > got:
            tracker.stall(got, acq, self.full)
        room.free -= hold
        used = room.capacity - room.free
        if used > room.peak:
            room.peak = used
        if pending and not release_first:
            room.free += self.wdma_hold
        tracker.stall(acq, start, "waiting for data")
        tracker.busy(start, end)
        self.core_free = acq + (end - acq) if end > acq else acq   # its sleep until `end`
        self.wait_from = self.core_free
        wdma, tracker = self.wdma, self.wdma_tracker
        tracker.stall(wdma.wait_from, book, "no output")     # it waited for the atoms
        self._book_write(book, now, n_out, first, last, hold)
        eid = env._eid
        self.core_eid, self.wdma_eid = next(eid), next(eid)
        self.reserved += 2
        return True

    def _hand_back(self, now: float) -> bool:
        """The processes take over: the pending wake-ups become events (or, when already past,
        their effect is applied: the room freed, the waits started).  Returns False."""
        self._hand_back_core_and_wdma(now)
        return False
