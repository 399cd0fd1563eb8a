"""CDP timing: CDP_RDMA reading width chunks, the LRN core with its buffer holds, the write DMA.

CDP_RDMA cuts each line into chunks of at most `chunk_pixels` pixels and reads a chunk through
all surfaces before the next (one token = one chunk of one surface).  The core serves ATOM /
throughput cycles per atom; when a chunk is narrower than the one before, its buffer holds
`hold_cycles_per_pixel` per missing pixel, and at the end of the cube it flushes as long per pixel
of the last chunk (RTL bufferin: more2less / cube_done).  A surface's output leaves when the next
surface is in (the window spans neighbouring channels), so the last surface of a chunk leaves
all at once at the chunk's end: a burst the write DMA takes at its request rate.

Throughput is per byte (v1: 8 bytes a cycle, i.e. 8 INT8 or 4 INT16/FP16 channels): an atom costs
the same whatever its element type, and the unit counts surfaces in elements per atom.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Generator

from .dma import ReadChunk, read_stream, release, write_stream
from .tokens import Seg, serve, wait_until, waited

if TYPE_CHECKING:
    from ..units.base import Unit
    from .model import TimingModel

CH_RDMA = "cdp_rdma->cdp"
CH_WDMA = "cdp->cdp_wdma"


@dataclass(frozen=True)
class CdpGeometry:
    width: int
    height: int
    surfaces: int
    lrn: bool                         # square sum or multiply not bypassed
    ram_type: int

    def chunk_widths(self, chunk_pixels: int) -> list[int]:
        full, rest = divmod(self.width, chunk_pixels)
        return [chunk_pixels] * full + ([rest] if rest else [])

    def read_chunks(self, chunk_pixels: int) -> list[ReadChunk]:
        chunks = []
        for _ in range(self.height):
            for w in self.chunk_widths(chunk_pixels):
                for s in range(self.surfaces):
                    chunks.append(ReadChunk(w, (w, s)))
        return chunks


def rdma(unit: "Unit", geom: CdpGeometry, src_ram_type: int) -> Generator:
    tm: TimingModel = unit.engine.timing
    out = tm.channel(CH_RDMA, tm.params.rates.latency_fifo_atoms)
    last = yield from read_stream(tm, "CDP_RDMA", src_ram_type,
                                  geom.read_chunks(tm.params.cdp.chunk_pixels), out)
    tm.tracker("CDP_RDMA").flush()
    yield from wait_until(tm.env, last)


def core(unit: "Unit", geom: CdpGeometry) -> Generator:
    tm: TimingModel = unit.engine.timing
    env, p = tm.env, tm.params
    tracker = tm.tracker("CDP")
    c = p.rates.cdp_cycles_per_atom
    hold = p.cdp.hold_cycles_per_pixel
    depth = p.cdp.pipeline_cycles + (p.cdp.lrn_cycles if geom.lrn else 0)
    chunks = geom.read_chunks(p.cdp.chunk_pixels)
    inp = tm.stream(CH_RDMA, p.rates.latency_fifo_atoms,
                    lambda: [Seg(c.atoms, env.now, env.now, c.tag, end=i == len(chunks) - 1)
                             for i, c in enumerate(chunks)])
    out = tm.channel(CH_WDMA, None)
    writer = env.process(write_stream(tm, "CDP_WDMA", geom.ram_type, out, p.cdp.wdma_cycles))
    # The core's own start-up after OP_ENABLE (it, not the RDMA, sets the start).
    ready = env.now + p.cdp.start_cycles
    prev_w = None
    while True:
        seg = yield from waited(env, inp.get(), tracker, f"{inp.name} empty")
        w, s = seg.tag
        extra = 0.0
        if s == 0:
            if prev_w is not None and w < prev_w:
                extra += hold * (prev_w - w)
            prev_w = w
        if seg.end:
            extra += hold * w                       # cube-end flush of the last chunk
        start, end = serve(max(env.now, ready), seg, c, extra)
        tracker.stall(env.now, start, "waiting for data")
        last_surface = s == geom.surfaces - 1
        if s > 0:       # the previous surface of this chunk leaves as this one comes in
            out.put(Seg(w, start + c + depth, end + depth))
        if last_surface:
            out.put(Seg(w, end + depth, end + depth, end=seg.end))
        tracker.busy(start, end)
        yield from wait_until(env, end)
        release(inp, seg.n)                 # CDP_RDMA may book its next read here
        if seg.end:
            break
    tracker.flush()
    done = yield writer
    tm.tracker("CDP_WDMA").flush()
    yield from wait_until(env, done + p.glb.interrupt_cycles)
