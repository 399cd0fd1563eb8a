"""DMA timing processes: a read engine feeding a latency FIFO, a write engine draining an output FIFO.

Read (RDMA): for each token the engine first takes room for its atoms in the latency FIFO (the
FIFO is where read data waits for the core, so its depth bounds reads in flight), books the reads
on the memory interface, hands the core a token with the first and last beat times, and books its
next token only when the request port is free again.

Write (WDMA): takes output tokens in order, books their writes no earlier than the data is ready,
frees the output buffer as the port takes them, and reports when the last response came back.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Generator, Iterable

from .tokens import Channel, Ready, Seg, held, sleep_event, waited, wait_until

if TYPE_CHECKING:
    from .model import TimingModel


@dataclass(frozen=True)
class ReadChunk:
    atoms: int
    tag: object = None
    requests: int | None = None     # default: as few bursts as the interface allows


def read_stream(tm: "TimingModel", client: str, ram_type: int, chunks: Iterable[ReadChunk],
                out: Channel, start_delay: float | None = None) -> Generator:
    """Process body: stream `chunks` from memory into `out`; returns the last beat's arrival."""
    env, p = tm.env, tm.params
    memif = tm.engine.memif(ram_type)
    tracker = tm.tracker(client)
    atom = p.rates.atom_bytes
    rsp = p.dma.response_cycles
    yield from wait_until(env, env.now + (p.dma.request_cycles if start_delay is None else start_delay))
    last = env.now
    chunks = list(chunks)
    for i, chunk in enumerate(chunks):
        if out.room is not None:
            yield from waited(env, out.room.acquire(chunk.atoms), tracker, f"{out.name} full")
        tr = memif.reserve(client, "read", chunk.atoms * atom, requests=chunk.requests)
        out.put(Seg(chunk.atoms, tr.first + rsp, tr.last + rsp, chunk.tag, end=i == len(chunks) - 1))
        tracker.busy(tr.port_free - tr.port_cycles, tr.port_free, "read")
        last = tr.last + rsp
        yield from wait_until(env, tr.port_free)
    return last


class WriteState:
    """What a write engine carries from token to token, outside its generator so that a
    consumer that takes tokens without events (`sdp.FlyingWriter`) can advance it."""
    __slots__ = ("done", "wait_from")

    def __init__(self, now: float):
        self.done = now          # the last write response booked so far
        self.wait_from = now     # the cycle the engine began waiting for its next token


def write_stream(tm: "TimingModel", client: str, ram_type: int, inp: Channel,
                 pipeline_cycles: float, state: WriteState | None = None) -> Generator:
    """Process body: write every token of `inp` until the `end` token; returns the cycle the
    last write response arrived."""
    env, p = tm.env, tm.params
    memif = tm.engine.memif(ram_type)
    tracker = tm.tracker(client)
    atom = p.rates.atom_bytes
    if state is None:
        state = WriteState(env.now)
    while True:
        got = inp.get()              # the hot loop's waits without generators, same cycles
        if type(got) is Ready:
            seg = got.value
        else:                        # `waited`, its start kept in `state` (FlyingWriter)
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
                yield sleep
        inp.release(held(inp, seg.n))
        if seg.end:
            break
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
