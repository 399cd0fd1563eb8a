"""A fused element-wise SDP layer without events per stripe (issue 20): the SDP core, its write
DMA and SDP_RDMA's per-element operand stream beside CACC's output.

ResNet-50's res*_branch2c layers add the shortcut in SDP: CACC hands SDP each stripe, the core
takes the stripe's operands from SDP_RDMA's latency FIFO, which frees room there, so SDP_RDMA
books its next operand read; the core serves the stripe and the write DMA books its write.  On
the processes alone that is about eight SimPy events a stripe (`sdp.rdma`, `sdp.core`,
`dma.write_stream`).  `OperandWriter.take` computes the same steps when CACC hands a stripe over
and books both transfers at once when every one of them comes before any other event (and before
CSC next does something others see, `limit`), the rule of `sdp.FlyingWriter` with the operand
reader as a third party:

- the core takes the stripe when it waits for one (or when its sleep after the last one ends),
  takes the operands the FIFO holds (they must be there), frees their room; SDP_RDMA, waiting
  for that room, is granted it in the same cycle and books its read first (its grant is the
  event scheduled first), then the core serves and the write DMA books the write;
- SDP_RDMA then sleeps until its port is free and asks for room again: when the FIFO is full
  again (the steady state) that wait starts at the cycle its port is free and ends at the next
  stripe's take, so nothing is scheduled for it; when the room is there (a stripe that took
  several operand chunks) its wake-up is put on the queue as the event it stands for and the
  process reads on.

The three processes stay parked (the core and the write DMA on their input channels, SDP_RDMA on
its room request); their pending wake-ups keep the event numbers SimPy would have given them, and
when a stripe cannot be taken (the layer's last, the operand reader's last read, operands not yet
in, a tie or another event first) they become events again (`_hand_back`) and the processes go on
from the state left here.  A write DMA that sleeps on its port when a stripe comes (the writes
are the slower) is taken over (`_adopt_wdma`: its timeout's cycle and event number become the
pending wake-up), so the event-free stripes resume after a declined one.  `take` runs in C
(kernels/operand_run.pyx; NVDLA_SIM_OPERAND_C=0: `_take`, the Python reference).
NVDLA_SIM_OPERAND_WRITER=0 turns all this off (the reference tests/test_speed_operands.py compares
it against).
"""
from __future__ import annotations

import os
import weakref
from heapq import heapify, heappush
from typing import TYPE_CHECKING

from simpy.events import NORMAL

from .tokens import GRANTED, Channel, Seg, Wake, fire, held, serve

if TYPE_CHECKING:
    from .dma import WriteState
    from .model import TimingModel


_take_c = None          # kernels/operand_run.take, loaded on first use (it needs engine.memif)


def _load_c() -> None:
    global _take_c
    from ..kernels import operand_run
    operand_run.init(Seg)
    _take_c = operand_run.take


def operand_c() -> bool:
    """Whether `OperandWriter.take` runs in C (kernels/operand_run.pyx, the same steps).
    NVDLA_SIM_OPERAND_C=0: the Python method, the reference tests/test_speed_operands.py
    compares the C one against."""
    return os.environ.get("NVDLA_SIM_OPERAND_C", "1") != "0"


def operand_writer() -> bool:
    """Whether a fused element-wise layer's SDP, write DMA and operand reads may take CACC's
    stripes without events (`OperandWriter`; exact).  NVDLA_SIM_OPERAND_WRITER=0 turns it off."""
    return os.environ.get("NVDLA_SIM_OPERAND_WRITER", "1") != "0"


class OperandReader:
    """SDP_RDMA's per-element operand stream of one flying layer, its loop state outside the
    generator (`sdp.rdma`) so that `OperandWriter` can advance it: the next chunk, the cycle it
    began waiting for room, the room request it is parked on."""
    __slots__ = ("env", "ops", "chunks", "i", "per_element", "memifs", "ready", "rsp", "tracker",
                 "full", "parked", "wait_from")

    def __init__(self, tm: "TimingModel", ops: Channel, chunks: list, per_element: list,
                 operands_ready: float):
        self.env = tm.env
        self.ops = ops
        self.chunks = chunks
        self.i = 0                           # the next chunk to read
        self.per_element = per_element       # (client, ram type, bytes per atom)
        self.memifs = [tm.engine.memif(ram) for _, ram, _ in per_element]
        self.ready = operands_ready          # the per-kernel operands are in
        self.rsp = tm.params.dma.response_cycles
        self.tracker = tm.tracker("SDP_RDMA")
        self.full = f"{ops.name} full"
        self.parked = None                   # the room request the generator waits on
        self.wait_from = tm.env.now

    def book(self) -> float:
        """Read chunk `i` now (each operand's DMA in turn), hand it to the core's FIFO; returns
        the cycle the port takes the next request."""
        chunk = self.chunks[self.i]
        first = last = port_free = 0.0
        busy = 0.0
        for (client, _, per_atom), memif in zip(self.per_element, self.memifs):
            tr = memif.reserve(client, "read", round(per_atom * chunk.atoms))
            first, last = max(first, tr.first), max(last, tr.last)
            port_free, busy = max(port_free, tr.port_free), busy + tr.port_cycles
        rsp, ready = self.rsp, self.ready
        self.i += 1
        self.ops.put(Seg(chunk.atoms, max(first + rsp, ready), max(last + rsp, ready),
                         end=self.i == len(self.chunks)))
        self.tracker.busy(port_free - busy, port_free, "operands")
        return port_free


# the operand reader of each operand channel while its layer runs
_READERS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def register(reader: OperandReader) -> None:
    _READERS[reader.ops] = reader


def unregister(reader: OperandReader) -> None:
    if _READERS.get(reader.ops) is reader:
        del _READERS[reader.ops]


class OperandState:
    """The core's operand credit (atoms taken from the FIFO, not yet consumed) and the last one's
    arrival, shared by `sdp.core` and `OperandWriter`."""
    __slots__ = ("have", "have_last")

    def __init__(self):
        self.have = 0.0
        self.have_last = 0.0


class PendingWakes:
    """What a follower that takes CACC's stripes without events (`sdp.FlyingWriter`,
    `OperandWriter`) keeps of the SDP core and its write DMA between stripes: the wake-ups it
    computed without events (`core_free` / `wdma_free`, with the event numbers SimPy would have
    given them: `core_eid` / `wdma_eid`; `wdma_hold`: the room the write DMA frees then), and
    how they go back to the processes.  Both processes stay parked on a get of their input
    channel (`inp`, `out`; the output buffer is `out.room`) while a wake-up is pending."""
    __slots__ = ()

    def _hand_back_core_and_wdma(self, now: float) -> None:
        """The core's and the write DMA's pending wake-ups become events on SimPy's queue under
        their numbers (or, when already past, their effect is applied at once)."""
        env = self.env
        if self.core_eid is not None:
            if self.core_free >= now:
                getter = self.inp._getters.popleft()
                heappush(env._queue, (self.core_free, NORMAL, self.core_eid,
                                      Wake(self._core_wakes, getter)))
                self.reserved -= 1           # an event after all
            self.core_eid = None
        if self.wdma_eid is not None:
            getter = self.out._getters.popleft()
            if self.wdma_free >= now:
                heappush(env._queue, (self.wdma_free, NORMAL, self.wdma_eid,
                                      Wake(self._wdma_wakes, getter)))
                self.reserved -= 1
            else:
                self.out.room.release(self.wdma_hold)
                self.out._getters.appendleft(getter)
            self.wdma_eid = None

    def _adopt_wdma(self) -> None:
        """The write DMA sleeps until its port is free (a timeout on the queue): that sleep
        becomes a pending wake-up here, with the timeout's cycle and event number, and the
        process waits on a get of its next token as it would after waking (`_wdma_wakes`
        frees its room then; `write_stream` goes on with the token it is handed).  The same
        state as before; taking the next stripe may then go on without events."""
        timeout, hold = self.wdma.sleeping
        queue = self.env._queue
        for index, entry in enumerate(queue):
            if entry[3] is timeout:
                break
        else:
            return
        last = queue.pop()
        if index < len(queue):
            queue[index] = last
            heapify(queue)
        getter = self.env.event()
        timeout.callbacks.remove(self.writer._resume)
        getter.callbacks.append(self.writer._resume)
        self.writer._target = getter
        self.out._getters.append(getter)
        self.wdma.sleeping = None
        self.wdma_free, self.wdma_eid, self.wdma_hold = entry[0], entry[2], hold
        self.wdma.wait_from = entry[0]
        self.reserved += 1

    def _book_write(self, book: float, now: float, n_out: float, first: float, last: float,
                    hold: float) -> None:
        """The write DMA books the stripe's `n_out` atoms at cycle `book` (the clock set there
        for the booking, then back at `now`), their data ready from `first` to `last` plus its
        pipeline, then sleeps until its port is free: its wake-up (`wdma_free`) frees `hold`."""
        wdma, env = self.wdma, self.env
        if n_out > 0:
            env._now = book
            tr = self.memif.reserve("SDP_WDMA", "write", int(n_out * self.atom),
                                    ready_first=first + self.pipeline,
                                    ready_last=last + self.pipeline)
            env._now = now
            self.wdma_tracker.busy(tr.port_free - tr.port_cycles, tr.port_free, "write")
            if tr.done > wdma.done:
                wdma.done = tr.done
            port_free = tr.port_free
            self.wdma_free = book + (port_free - book) if port_free > book else book
        else:
            self.wdma_free = book
        wdma.wait_from = self.wdma_free
        self.wdma_hold = hold

    def _core_wakes(self, getter) -> None:
        """The core after its sleep: its next stripe, or a wait for one (as `Channel.get`)."""
        inp = self.inp
        self.wait_from = self.env._now
        inp._getters.appendleft(getter)
        if inp._items:
            inp.serve_now()

    def _wdma_wakes(self, getter) -> None:
        """The write DMA after its sleep: frees its stripe's room, then its next token."""
        out = self.out
        self.wdma.wait_from = self.env._now
        out._getters.appendleft(getter)
        out.room.release(self.wdma_hold)
        if out._items:
            out.serve_now()


class OperandWriter(PendingWakes):
    """CACC's stripes of a fused element-wise layer taken by the SDP core, its write DMA and the
    operand reader without events (see the module doc).  `take` is `sdp.FlyingWriter.take`'s
    protocol: True when the stripe was handled here."""
    # not a FlyingWriter: kernels/stripe_run.pyx runs FlyingWriter's steps in C for the
    # follower of a convolution's output and declines a follower without an output room
    room = None
    __slots__ = ("env", "tm", "inp", "out", "buffer", "ops", "wdma", "memif", "c", "depth",
                 "pipeline", "out_ratio", "atom", "core_tracker", "wdma_tracker", "empty",
                 "state", "wait_from", "core_free", "core_eid", "wdma_free", "wdma_eid",
                 "wdma_hold", "reader", "rd_eid", "rd_held", "rd_need", "reserved", "taken", "in_c",
                 "writer")

    def __init__(self, tm: "TimingModel", ram_type: int, out_ratio: float, c: float,
                 depth: float, inp: Channel, out: Channel, ops: Channel, wdma: "WriteState",
                 state: OperandState, writer=None):
        self.env = tm.env
        self.tm = tm
        self.inp, self.out, self.buffer, self.ops, self.wdma = inp, out, out.room, ops, wdma
        self.memif = tm.engine.memif(ram_type)
        self.c, self.depth, self.pipeline = c, depth, tm.params.sdp.wdma_cycles
        self.out_ratio = out_ratio
        self.atom = tm.params.rates.atom_bytes
        self.core_tracker, self.wdma_tracker = tm.tracker("SDP"), tm.tracker("SDP_WDMA")
        self.empty = f"{inp.name} empty"
        self.state = state
        self.wait_from = tm.env.now          # the core began waiting for its next stripe
        # pending wake-ups computed here (None: nothing pending), with their event numbers
        self.core_free = self.wdma_free = tm.env.now
        self.core_eid = self.wdma_eid = None
        self.wdma_hold = 0.0
        # the operand reader: parked on its room request, held here (not in the pool's
        # waiters) from the first stripe taken; it waits for `rd_need` atoms of room from its
        # `wait_from` (after its sleep, event number `rd_eid`, when that is still pending)
        self.reader = None
        self.rd_eid = None
        self.rd_held = False
        self.rd_need = 0.0
        self.reserved = 0                    # event numbers kept for wake-ups (engine's count)
        self.taken = 0                       # stripes taken here
        self.in_c = False                    # `take` in C (kernels/operand_run.pyx)
        self.writer = writer                 # the write DMA's process

    def take(self, seg: Seg, limit: float) -> bool:
        """CACC's stripe `seg`, handled here if every step comes before any other event and
        before `limit` (see the module doc); False: the processes hold the state again and the
        caller puts `seg` on the channel.  In C (kernels/operand_run.pyx) unless
        NVDLA_SIM_OPERAND_C=0.  Only for one per-element operand (the compiler fuses one
        element-wise operation per SDP pass; a register program with more keeps the processes)."""
        if self.reader is None:
            reader = _READERS.get(self.ops)
            if reader is None or len(reader.per_element) != 1:
                return self._hand_back(self.env._now)
            self.reader = reader
            self.in_c = operand_c()
            if self.in_c and _take_c is None:
                _load_c()
        if self.wdma_eid is None and self.wdma.sleeping is not None and not self.out._getters \
                and not seg.end and not self.inp._items and not self.out._items \
                and (self.core_eid is not None or len(self.inp._getters) == 1):
            self._adopt_wdma()
        if self.in_c:
            return _take_c(self, seg, limit)
        return self._take(seg, limit)

    def _take(self, seg: Seg, limit: float) -> bool:
        """`take` in Python: the reference the C steps are compared with."""
        inp, out, room, ops = self.inp, self.out, self.buffer, self.ops
        env = self.env
        now = env._now
        if seg.end or inp._items or out._items or room is None or room._waiters \
                or ops._getters or (self.core_eid is None and len(inp._getters) != 1) \
                or (self.wdma_eid is None and len(out._getters) != 1):
            return self._hand_back(now)
        reader = self.reader
        queue = env._queue
        head = queue[0][0] if queue else float("inf")
        # the core takes the stripe now (it waits for one) or when its sleep ends
        core_free = self.core_free
        got = now if self.core_eid is None or now >= core_free else core_free
        # the write DMA's pending wake-up: before `got` it has freed its last stripe's room and
        # waits for the atoms; after, it frees the room then and takes the atoms at once
        pending = self.wdma_eid is not None
        wdma_free = self.wdma_free
        release_first = pending and wdma_free < got
        if pending and not release_first and not wdma_free > got:      # a tie
            return self._hand_back(now)
        # the operand reader: waiting for room by `got` (held here or parked in the pool)
        pool = ops.room
        rd_waits = False
        if self.rd_held:
            if not self.reader_wait_from() < got:
                return self._hand_back(now)
            rd_waits, need = True, self.rd_need
        elif pool._waiters:
            if len(pool._waiters) != 1 or reader.parked is None \
                    or pool._waiters[0][1] is not reader.parked:
                return self._hand_back(now)
            rd_waits, need = True, pool._waiters[0][0]
        else:
            need = 0.0
        # -- what the processes would do, before changing anything ------------------------------
        st = self.state
        have, have_last = st.have, st.have_last
        items = ops._items
        taken = 0
        free = pool.free
        grant_at = -1                         # the operand whose room grants the reader's
        while have < seg.n - 1e-9:
            if taken >= len(items):           # the core would wait for operands
                return self._hand_back(now)
            op = items[taken]
            have, have_last = have + op.n, op.last
            free += op.n
            if rd_waits and grant_at < 0 and need <= free + 1e-6:
                grant_at = taken
                free -= need
            taken += 1
        # after its read the reader sleeps until its port is free, then asks for room for its
        # next chunk: short (it waits: held here) or not (it reads again: its wake-up an event)
        again = False
        if grant_at >= 0:
            if reader.i >= len(reader.chunks) - 1:       # its last read: the process ends it
                return self._hand_back(now)
            again = reader.chunks[reader.i + 1].atoms <= free + 1e-6
        n_out = seg.n if self.out_ratio == 1 else seg.n * self.out_ratio
        hold = held(out, n_out)
        room_free = room.free + self.wdma_hold if release_first else room.free
        if not hold <= room_free + 1e-6:
            return self._hand_back(now)
        book = got if not pending or release_first else wdma_free
        if not book < limit - 1e-6 or not head > book:
            return self._hand_back(now)
        if again and book > got:              # the reader's next read might come first
            return self._hand_back(now)
        # -- commit: the processes' calls in their order ----------------------------------------
        self.taken += 1
        eid = env._eid
        if release_first:                     # the write DMA woke before: frees its room
            room.free += self.wdma_hold
        tracker = self.core_tracker
        if got > self.wait_from:              # the core waited for the stripe
            tracker.stall(self.wait_from, got, self.empty)
        for k in range(taken):                # its operands: their room back to the reader
            pool.free += items.popleft().n
            if k == grant_at:                 # the reader's request granted
                if not self.rd_held:          # (taken from the pool's waiters)
                    pool._waiters.popleft()
                    self.rd_held = True
                pool.free -= need
                used = pool.capacity - pool.free
                if used > pool.peak:
                    pool.peak = used
        st.have, st.have_last = have - seg.n, have_last    # consumed when the core wakes
        seg = Seg(seg.n, max(seg.first, min(have_last, seg.last)), max(seg.last, have_last),
                  seg.tag, seg.end)
        rd_eid = None
        if grant_at >= 0:
            # SDP_RDMA's grant is processed first (the core's next step waits behind it): it
            # books its read and sleeps until its port is free
            env._now = got
            reader.tracker.stall(reader.wait_from, got, reader.full)
            port_free = reader.book()
            env._now = now
            self.rd_need = reader.chunks[reader.i].atoms
            reader.wait_from = got + (port_free - got)     # > got: a request takes the port
            rd_eid = next(eid)
            if again:                         # it reads again when it wakes: an event
                self._push_reader_wake(reader.wait_from, rd_eid)
                rd_eid = None
            self.rd_eid = rd_eid
        # the core: its output room, then the stripe
        room.free -= hold
        used = room.capacity - room.free
        if used > room.peak:
            room.peak = used
        if pending and not release_first:     # the write DMA wakes after: frees its room then
            room.free += self.wdma_hold
        c = self.c
        start, end = serve(got, seg, c)
        first, last = start + c + self.depth, end + self.depth
        tracker.stall(got, start, "waiting for data")
        tracker.busy(start, end)
        self.core_free = got + (end - got) if end > got else got   # its sleep until `end`
        self.wait_from = self.core_free
        # the write DMA: takes the atoms at once (it waits for them), books, sleeps
        wdma, tracker = self.wdma, self.wdma_tracker
        tracker.stall(wdma.wait_from, book, "no output")
        self._book_write(book, now, n_out, first, last, hold)
        self.core_eid, self.wdma_eid = next(eid), next(eid)
        self.reserved += 2 + (rd_eid is not None)
        return True

    def reader_wait_from(self) -> float:
        return self.reader.wait_from

    def _push_reader_wake(self, wake: float, eid: int) -> None:
        """SDP_RDMA's wake-up at `wake` as the event (number `eid`) it stands for: it reads
        again then (the room is there)."""
        heappush(self.env._queue, (wake, NORMAL, eid,
                                   Wake(self._reader_wakes, self.reader.parked)))
        self.rd_held = False

    def _hand_back(self, now: float) -> bool:
        """The processes take over: pending wake-ups become events (or, when already past, their
        effect is applied).  Returns False."""
        env = self.env
        if self.rd_held:
            reader, pool = self.reader, self.ops.room
            parked = reader.parked
            if self.rd_eid is not None and reader.wait_from >= now:
                heappush(env._queue, (reader.wait_from, NORMAL, self.rd_eid,
                                      Wake(self._reader_wakes, parked)))
                self.reserved -= 1
            else:                             # it waits for room (short: nothing freed it)
                pool._waiters.append((self.rd_need, parked))
            self.rd_eid = None
            self.rd_held = False
        self._hand_back_core_and_wdma(now)
        return False

    def _reader_wakes(self, parked) -> None:
        """SDP_RDMA after its sleep: asks for room for its next chunk (as `sdp.rdma` does);
        `parked`: the room request its process waits on."""
        reader = self.reader
        reader.wait_from = self.env._now
        grant = self.ops.room.acquire(self.rd_need)
        if grant is GRANTED:                  # granted at once: the process goes on now
            fire(parked)
        else:                                 # an event: the process goes on when it fires
            grant.callbacks.append(lambda _e: fire(parked))
