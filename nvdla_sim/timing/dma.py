"""DMA timing processes: a read engine feeding a latency FIFO, a write engine draining an output FIFO.

Read (RDMA): for each token the engine first takes room for its atoms in the latency FIFO (the
FIFO is where read data waits for the core, so its depth bounds reads in flight), books the reads
on the memory interface, hands the core a token with the first and last beat times, and books its
next token only when the request port is free again.

Write (WDMA): takes output tokens in order, books their writes no earlier than the data is ready,
frees the output buffer as the port takes them, and reports when the last response came back.
"""
from __future__ import annotations

import os
import weakref
from dataclasses import dataclass
from heapq import heappush
from typing import TYPE_CHECKING, Generator, Iterable

from simpy.events import NORMAL

from .tokens import GRANTED, Channel, Ready, Seg, Wake, fire, held, sleep_event, wait_until

if TYPE_CHECKING:
    from .model import TimingModel


@dataclass(frozen=True)
class ReadChunk:
    atoms: int
    tag: object = None
    requests: int | None = None     # default: as few bursts as the interface allows


def stream_reads() -> bool:
    """Whether a read engine's next request may be booked inside its consumer's step when the
    consumer frees the room it waits for (`release`; issue 20; exact).
    NVDLA_SIM_STREAM_READS=0 turns it off: the reference tests/test_speed_streams.py compares
    it against."""
    return os.environ.get("NVDLA_SIM_STREAM_READS", "1") != "0"


class StreamReader:
    """A read engine's loop state outside its generator (`read_stream`), so that its consumer
    can book its next request when it frees the room the engine waits for (`release`): the next
    chunk, the room request the generator is parked on, the cycle it began (or begins) waiting.

    `held`: the consumer holds the engine's room request (not in the pool's waiters): the engine
    booked its last request inside the consumer's step, then sleeps until its port is free
    (`wait_from`) and waits for room, which is short; its wake-up would only start that wait,
    so it is kept as a number (`eid`, the one SimPy would have given the sleep) and becomes an
    event only if the consumer frees room before it (`_wake`)."""
    __slots__ = ("env", "memif", "client", "chunks", "i", "out", "atom", "rsp", "tracker",
                 "full", "parked", "wait_from", "held", "eid", "last")

    def __init__(self, tm: "TimingModel", client: str, ram_type: int, chunks: list,
                 out: Channel):
        self.env = tm.env
        self.memif = tm.engine.memif(ram_type)
        self.client = client
        self.chunks = chunks
        self.i = 0
        self.out = out
        self.atom = tm.params.rates.atom_bytes
        self.rsp = tm.params.dma.response_cycles
        self.tracker = tm.tracker(client)
        self.full = f"{out.name} full"
        self.parked = None
        self.wait_from = tm.env.now
        self.held = False
        self.eid = None
        self.last = tm.env.now

    def book(self) -> float:
        """Book chunk `i` now and hand it to the channel; returns the cycle the port is free."""
        chunk = self.chunks[self.i]
        tr = self.memif.reserve(self.client, "read", chunk.atoms * self.atom,
                                requests=chunk.requests)
        rsp = self.rsp
        self.i += 1
        self.out.put(Seg(chunk.atoms, tr.first + rsp, tr.last + rsp, chunk.tag,
                         end=self.i == len(self.chunks)))
        self.tracker.busy(tr.port_free - tr.port_cycles, tr.port_free, "read")
        self.last = tr.last + rsp
        return tr.port_free

    def _wake(self, parked) -> None:
        """The engine after its sleep: asks for room for its next chunk (as `read_stream`
        does); the generator parked on `parked` goes on when it is granted."""
        self.wait_from = self.env._now
        grant = self.out.room.acquire(self.chunks[self.i].atoms)
        if grant is GRANTED:
            fire(parked)
        else:
            grant.callbacks.append(lambda _e: fire(parked))


# the read engine streaming into each channel while its layer runs (for `release`)
_READERS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def read_chunks(env, reader, room, tracker) -> Generator:
    """A read engine's loop over `reader.chunks` (its state in `reader`: `StreamReader`,
    `sdp_operands.OperandReader`, which a consumer may advance while the engine waits): take
    room for the next chunk in `room` (None: unbounded), parked on the request while it waits,
    book the chunk (`reader.book`), sleep until the port is free."""
    chunks = reader.chunks
    while reader.i < len(chunks):
        if room is not None:
            grant = room.acquire(chunks[reader.i].atoms)
            if grant is not GRANTED:
                reader.wait_from, reader.parked = env.now, grant
                yield grant
                reader.parked = None
                tracker.stall(reader.wait_from, env.now, reader.full)
        sleep = sleep_event(env, reader.book())
        if sleep is not None:
            yield sleep


def read_stream(tm: "TimingModel", client: str, ram_type: int, chunks: Iterable[ReadChunk],
                out: Channel, start_delay: float | None = None) -> Generator:
    """Process body: stream `chunks` from memory into `out`; returns the last beat's arrival."""
    env, p = tm.env, tm.params
    tracker = tm.tracker(client)
    yield from wait_until(env, env.now + (p.dma.request_cycles if start_delay is None else start_delay))
    reader = StreamReader(tm, client, ram_type, list(chunks), out)
    room = out.room
    if room is not None and stream_reads():
        _READERS[out] = reader
    yield from read_chunks(env, reader, room, tracker)
    if _READERS.get(out) is reader:
        del _READERS[out]
    return reader.last


def release(channel: Channel, n: float) -> None:
    """`channel.release(n)` by its consumer, with the read engine's next request booked here
    when this frees the room it waits for (issue 20).

    Plainly the release grants the engine's room request, whose event is processed next (no
    other event is due this cycle), so the engine books its next chunk before the consumer's
    step goes on (the consumer's next get waits behind that event); booking it here is the same
    order without the events.  The engine then sleeps until its port is free and asks for room
    again: when that room is short (the FIFO is full again), the consumer holds the request
    (`StreamReader.held`) and the next release starts from it; when it is not, or the release
    comes before the engine wakes, the wake-up becomes an event."""
    room = channel.room
    if room is None:
        return
    reader = _READERS.get(channel)
    if reader is None:
        room.release(n)
        return
    env = channel.env
    now = env._now
    if reader.held:
        if reader.wait_from > now:            # still asleep: it asks for room when it wakes
            _unhold(reader, True)
            room.release(n)
            return
        waiting = True                        # waiting since wait_from
    else:
        waiting = len(room._waiters) == 1 and reader.parked is not None \
            and room._waiters[0][1] is reader.parked
    chunks = reader.chunks
    queue = env._queue
    if not waiting or reader.i >= len(chunks) - 1 or (queue and not queue[0][0] > now) \
            or not chunks[reader.i].atoms <= room.free + n + 1e-6:
        if reader.held:                       # it waits in the pool again
            _unhold(reader, False)
        room.release(n)
        return
    # the grant, as Pool.release gives it
    room.free += n
    if reader.held:
        reader.held = False
        if reader.eid is not None:
            _kept(env, 1)                     # its wake-up never became an event
    else:
        room._waiters.popleft()
    room.free -= chunks[reader.i].atoms
    used = room.capacity - room.free
    if used > room.peak:
        room.peak = used
    # the engine's step: its read, then its sleep until the port is free
    reader.tracker.stall(reader.wait_from, now, reader.full)
    port_free = reader.book()
    if not port_free > now:                   # no sleep: it asks for room at once (the pool)
        reader.wait_from = now
        room._waiters.append((chunks[reader.i].atoms, reader.parked))
        room._wake()
        return
    reader.wait_from = now + (port_free - now)
    reader.eid = next(env._eid)
    reader.held = True
    if chunks[reader.i].atoms <= room.free + 1e-6:    # it books again when it wakes
        _unhold(reader, True)


def _unhold(reader: StreamReader, asleep: bool) -> None:
    """The engine's room request back to the processes: its pending wake-up as the event it
    stands for (`asleep`: it has not woken yet) or its wait in the pool's waiters."""
    env = reader.env
    reader.held = False
    if asleep and reader.eid is not None:
        heappush(env._queue, (reader.wait_from, NORMAL, reader.eid,
                              Wake(reader._wake, reader.parked)))
    else:
        if reader.eid is not None:
            _kept(env, 1)
        reader.out.room._waiters.append((reader.chunks[reader.i].atoms, reader.parked))
    reader.eid = None


def _kept(env, n: int) -> None:
    """Event numbers taken for wake-ups that never became events (`sdp.kept_event_numbers`)."""
    env.kept_event_numbers = getattr(env, "kept_event_numbers", 0) + n


class WriteState:
    """What a write engine carries from token to token, outside its generator so that a
    consumer that takes tokens without events (`sdp.FlyingWriter`, `sdp_operands.OperandWriter`)
    can advance it.  `sleeping`: while the engine sleeps until its port is free after a token
    that is not the layer's last, (its timeout, the room it frees when it wakes), so that
    `OperandWriter` can take that sleep over (`adopt`)."""
    __slots__ = ("done", "wait_from", "sleeping")

    def __init__(self, now: float):
        self.done = now          # the last write response booked so far
        self.wait_from = now     # the cycle the engine began waiting for its next token
        self.sleeping = None


def write_stream(tm: "TimingModel", client: str, ram_type: int, inp: Channel,
                 pipeline_cycles: float, state: WriteState | None = None) -> Generator:
    """Process body: write every token of `inp` until the `end` token; returns the cycle the
    last write response arrived.

    A sleep taken over by `sdp_operands.OperandWriter` ends with the engine's next token (the
    room was freed when the sleep ended, as here): the engine goes on with that token."""
    env, p = tm.env, tm.params
    memif = tm.engine.memif(ram_type)
    tracker = tm.tracker(client)
    atom = p.rates.atom_bytes
    if state is None:
        state = WriteState(env.now)
    seg = None
    while True:
        if seg is None:
            got = inp.get()          # the hot loop's waits without generators, same cycles
            if type(got) is Ready:
                seg = got.value
            else:                    # `waited`, its start kept in `state` (FlyingWriter)
                state.wait_from = env.now
                seg = yield got
                tracker.stall(state.wait_from, env.now, "no output")
        if seg.n > 0:
            tr = memif.reserve(client, "write", int(seg.n * atom),
                               ready_first=seg.first + pipeline_cycles,
                               ready_last=seg.last + pipeline_cycles)
            tracker.busy(tr.port_free - tr.port_cycles, tr.port_free, "write")
            if tr.done > state.done:
                state.done = tr.done
            sleep = sleep_event(env, tr.port_free)
            if sleep is not None:
                state.sleeping = None if seg.end else (sleep, held(inp, seg.n))
                nxt = yield sleep
                state.sleeping = None
                if nxt is not None:  # taken over: its room freed, the next token handed over
                    tracker.stall(state.wait_from, env.now, "no output")
                    seg = nxt
                    continue
        inp.release(held(inp, seg.n))
        if seg.end:
            break
        seg = None
    yield from wait_until(env, state.done)
    return state.done


def split_atoms(total: int, token_atoms: int, tag=None) -> list[ReadChunk]:
    """`total` atoms in tokens of at most `token_atoms`."""
    out = []
    while total > 0:
        n = min(token_atoms, total)
        out.append(ReadChunk(n, tag))
        total -= n
    return out


def token_atoms(tm: "TimingModel") -> int:
    """Streaming token size: small enough that several fit in the latency FIFO."""
    r = tm.params.rates
    return max(1, min(tm.params.dma.stream_token_atoms, r.latency_fifo_atoms // 4))
