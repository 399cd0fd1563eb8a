"""PDP timing: PDP_RDMA streaming lines, the pooling core with its padding bubbles, the write DMA.

Read order is strip -> surface -> line.  The core serves ATOM / throughput cycles per input atom
and counts lines as atoms go by, so its input may come from PDP_RDMA or, on the fly, from SDP.
After each line it inserts horizontal bubbles, and after each surface vertical bubble rows (whole
output rows), following the RTL's cal1d / cal2d rules (docs/timing-model-notes.md, 1.3):

    flush  = largest k <= 7 with pad >= k * stride      (windows still needing right/bottom pad)
    first  = kernel - pad_before
    bubble = flush - first + 1 if flush >= first else 0 (after every line / surface but the last)
    the last line / surface of a strip gets `flush` instead.

Throughput is per byte, not per element: the core takes a fixed number of bytes a cycle (v1: 8,
`pdp_throughput`), so an INT16/FP16 atom (16 channels) costs as many cycles as an INT8 one (32).
The unit counts surfaces in elements per atom of its element type; nothing here depends on it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Generator

from .dma import ReadChunk, read_stream, release, write_stream
from .tokens import Ready, Seg, held, serve, sleep_event, wait_until, waited

if TYPE_CHECKING:
    from ..units.base import Unit
    from .model import TimingModel

CH_RDMA = "pdp_rdma->pdp"
CH_SDP = "sdp->pdp"
CH_WDMA = "pdp->pdp_wdma"
MAX_FLUSH = 7


def flush_windows(pad: int, stride: int) -> int:
    """Windows that still need padding after the last input line (RTL flush_num_cal)."""
    k = 0
    while k < MAX_FLUSH and pad >= (k + 1) * stride:
        k += 1
    return k


def bubbles(flush: int, kernel: int, pad_before: int) -> int:
    """Bubble atoms (or rows) between two lines (or surfaces)."""
    first = kernel - pad_before
    return flush - first + 1 if flush and flush >= first else 0


@dataclass(frozen=True)
class PdpStripTiming:
    in_width: int                    # input atoms per line (with the split overlap)
    out_width: int
    flush_h: int                     # horizontal flush atoms after the strip's last line
    bubble_h: int                    # horizontal bubble atoms after other lines
    rows_done: tuple                 # output rows completed by input line y (index y)


@dataclass(frozen=True)
class PdpGeometry:
    height: int
    surfaces: int
    out_height: int
    strips: tuple                    # PdpStripTiming, in order
    flush_v: int                     # vertical flush rows after a strip's last surface
    bubble_v: int                    # vertical bubble rows after other surfaces
    on_flying: bool
    ram_type: int                    # destination

    @property
    def lines(self) -> int:
        return len(self.strips) * self.surfaces * self.height


def read_chunks(strip_widths: list[int], surfaces: int, height: int,
                max_atoms: int) -> list[ReadChunk]:
    """PDP_RDMA tokens in read order (strip, surface, line): short lines merged, long lines cut."""
    chunks: list[ReadChunk] = []
    for width in strip_widths:
        pending = 0
        for _ in range(surfaces * height):
            w = width
            while w > 0:
                if pending and pending + w > max_atoms:
                    chunks.append(ReadChunk(pending))
                    pending = 0
                take = min(w, max_atoms - pending)
                pending += take
                w -= take
        if pending:
            chunks.append(ReadChunk(pending))
    return chunks


def geometry(height: int, channels: int, atom: int, out_height: int, kernel_w: int, kernel_h: int,
             stride_w: int, stride_h: int, pad_top: int, pad_bottom: int,
             strips: list[tuple[int, int, int, int]], on_flying: bool, ram_type: int) -> PdpGeometry:
    """`strips`: (in_width, out_width, pad_left, pad_right) of each split-width strip."""
    rows_done = []
    for y in range(height):
        # Output row j is complete once its last kernel row, j*stride - pad_top + kernel - 1, is in.
        done = 0 if y < kernel_h - 1 - pad_top else (y + pad_top - kernel_h + 1) // stride_h + 1
        rows_done.append(min(out_height, max(0, done)))
    strip_t = []
    for in_w, out_w, pad_l, pad_r in strips:
        fh = flush_windows(pad_r, stride_w)
        strip_t.append(PdpStripTiming(in_w, out_w, fh, bubbles(fh, kernel_w, pad_l), tuple(rows_done)))
    fv = flush_windows(pad_bottom, stride_h)
    return PdpGeometry(height, -(-channels // atom), out_height, tuple(strip_t), fv,
                       bubbles(fv, kernel_h, pad_top), on_flying, ram_type)


def rdma(unit: "Unit", chunks: list[ReadChunk], src_ram_type: int) -> Generator:
    """PDP_RDMA's layer: stream `chunks` (see read_chunks) into the core's latency FIFO."""
    tm: TimingModel = unit.engine.timing
    out = tm.channel(CH_RDMA, tm.params.rates.latency_fifo_atoms)
    last = yield from read_stream(tm, "PDP_RDMA", src_ram_type, chunks, out)
    tm.tracker("PDP_RDMA").flush()
    yield from wait_until(tm.env, last)


def _line_events(geom: PdpGeometry):
    """Per input line in read order: (atoms, extra bubble atoms, output atoms it completes)."""
    for strip in geom.strips:
        for s in range(geom.surfaces):
            last_surface = s == geom.surfaces - 1
            for y in range(geom.height):
                last_line = last_surface and y == geom.height - 1
                extra = strip.flush_h if last_line else strip.bubble_h
                rows = strip.rows_done[y] - (strip.rows_done[y - 1] if y else 0)
                if y == geom.height - 1:
                    rows += geom.out_height - strip.rows_done[y]          # padded rows
                    extra += (geom.flush_v if last_surface else geom.bubble_v) * strip.out_width
                yield strip.in_width, extra, rows * strip.out_width


def core(unit: "Unit", geom: PdpGeometry) -> Generator:
    """The pooling core's layer; returns when the output is written and the interrupt is due."""
    tm: TimingModel = unit.engine.timing
    env, p = tm.env, tm.params
    tracker = tm.tracker("PDP")
    c = p.rates.pdp_cycles_per_atom
    depth = p.pdp.pipeline_cycles
    atoms = sum(s.in_width for s in geom.strips) * geom.surfaces * geom.height
    inp = tm.stream(CH_SDP if geom.on_flying else CH_RDMA,
                    p.rates.stream_buffer_atoms if geom.on_flying else p.rates.latency_fifo_atoms,
                    lambda: [Seg(atoms, env.now, env.now, end=True)])
    out = tm.channel(CH_WDMA, None)
    writer = env.process(write_stream(tm, "PDP_WDMA", geom.ram_type, out, p.pdp.wdma_cycles))
    lines = _line_events(geom)
    line_left, line_extra, line_out = next(lines)
    remaining_lines = geom.lines
    while remaining_lines:
        got = inp.get()              # without a generator when handed over at once
        seg = got.value if type(got) is Ready else \
            (yield from waited(env, got, tracker, f"{inp.name} empty"))
        # Lines this token completes: their bubbles and the output rows they finish.
        n, extra, out_atoms = seg.n, 0, 0
        while n > 0 and remaining_lines:
            take = min(n, line_left)
            n -= take
            line_left -= take
            if line_left == 0:
                extra += line_extra
                out_atoms += line_out
                remaining_lines -= 1
                if remaining_lines:
                    line_left, line_extra, line_out = next(lines)
        start, end = serve(env.now, seg, c, extra * c)
        tracker.stall(env.now, start, "waiting for data")
        if out_atoms or not remaining_lines:
            out.put(Seg(out_atoms, start + c + depth, end + depth, end=not remaining_lines))
        tracker.busy(start, end)
        sleep = sleep_event(env, end)
        if sleep is not None:
            yield sleep
        # a coarse token holds at most the whole buffer; PDP_RDMA may book its next read here
        release(inp, held(inp, seg.n))
    tracker.flush()
    done = yield writer
    tm.tracker("PDP_WDMA").flush()
    yield from wait_until(env, done + p.glb.interrupt_cycles)
