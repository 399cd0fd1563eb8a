"""SDP timing: SDP_RDMA (main data and operand streams), the SDP core and its write DMA.

Tokens: SDP_RDMA cuts the input cube (in read order) into streaming tokens of atoms; operands read
per element from memory are booked on the same port beside each data token, operands per kernel
once before the first.  The core serves atoms at (elements per atom) / throughput cycles each
(8 on nv_small; an INT16 / FP16 atom holds half the elements of an INT8 one) with a fixed
pipeline depth plus one stage depth per enabled X stage.  Its output goes to its own WDMA,
or in SDP->PDP mode to the PDP core's input channel.  In flying mode the input comes from CACC.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Generator

from .dma import split_atoms, token_atoms, write_stream
from .tokens import GRANTED, Ready, Seg, serve, sleep_event, wait_until, waited

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
            chunks = split_atoms(geom.atoms, min(token_atoms(tm), fifo))
            for i, chunk in enumerate(chunks):
                yield from waited(env, ops.room.acquire(chunk.atoms), tracker, f"{ops.name} full")
                first = last = port_free = 0.0
                busy = 0.0
                for client, ram, per_atom in per_element:
                    tr = tm.engine.memif(ram).reserve(client, "read", round(per_atom * chunk.atoms))
                    first, last = max(first, tr.first), max(last, tr.last)
                    port_free, busy = max(port_free, tr.port_free), busy + tr.port_cycles
                ops.put(Seg(chunk.atoms, max(first + rsp, operands_ready),
                            max(last + rsp, operands_ready), end=i == len(chunks) - 1))
                tracker.busy(port_free - busy, port_free, "operands")
                yield from wait_until(env, port_free)
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
    writer = None
    if geom.to_pdp:
        out = tm.channel(CH_PDP, p.rates.stream_buffer_atoms)
    elif geom.writes:
        out = tm.channel(CH_WDMA, p.rates.stream_buffer_atoms)
        writer = env.process(write_stream(tm, "SDP_WDMA", geom.ram_type, out, p.sdp.wdma_cycles))
    else:
        out = None                                   # EQL mode: results are only compared
    # Flying with per-element operands: each CACC token also needs its operands from SDP_RDMA.
    ops = tm.channel(CH_OPERANDS, p.rates.latency_fifo_atoms) \
        if geom.flying and tm.claim(CH_OPERANDS) else None
    if geom.flying:      # CSC hands this layer coarse tokens only without operands (timing/conv.py)
        tm.flying_operands = ops is not None
    have, have_last = 0.0, 0.0
    end = env.now
    room = out.room if out is not None else None
    while True:
        # event-free hand-overs and grants without a generator (tokens.Ready / GRANTED)
        got = inp.get()
        seg = got.value if type(got) is Ready else \
            (yield from waited(env, got, tracker, f"{inp.name} empty"))
        if ops is not None:
            while have < seg.n - 1e-9:
                op = yield from waited(env, ops.get(), tracker, f"{ops.name} empty")
                have, have_last = have + op.n, op.last
                ops.release(op.n)          # taken into the core's pipeline
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
            have -= seg.n
        if seg.end:
            break
    tracker.flush()
    if writer is not None:
        done = yield writer
        tm.tracker("SDP_WDMA").flush()
        yield from wait_until(env, done + p.glb.interrupt_cycles)
    elif out is None:
        yield from wait_until(env, end + depth + p.glb.interrupt_cycles)
