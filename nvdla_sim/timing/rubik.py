"""RUBIK CONTRACT timing: a DMA engine reading the phase blocks of an output line and writing
the line (units/rubik.py decodes the registers; this moves sized tokens only).

The C model's read sequencer issues, per output surface, input line and Y phase, requests of at
most 8 atoms for each of the X phases (RubikRdmaSequenceContract); the write sequencer sends the
whole contracted line (stride <= 8) or stride-sized pieces.  Here one token is one output line:
DECONV_X x ceil(W / 8) read requests of its atoms on the source interface, one write of the line
(requests as the interface bursts it) on the destination once its data arrived and went through
the planar FIFOs.  Model assumptions (no RTL cycle figure for RUBIK in the calibration set):
START_CYCLES from the OP_ENABLE to the first request, REORDER_CYCLES from the last read beat of
a line to its write (the BDMA's figures: the same DMA request pipelines).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Generator

from .tokens import wait_until

if TYPE_CHECKING:
    from ..units.rubik import Contract, Rubik

START_CYCLES = 4            # assumption: as the BDMA launch -> first read request
REORDER_CYCLES = 3          # assumption: read data in the atom FIFO -> write request (BDMA)
READ_REQUEST_ATOMS = 8      # C model: payload_atom_num = min(width left, 8)


def contract_timing(unit: "Rubik", c: "Contract") -> Generator:
    """Book every line's reads and write; returns when the last write is acknowledged and the
    interrupt is raised."""
    from ..units.rubik import ATOM_BYTES
    engine = unit.engine
    env = unit.env
    p = engine.timing.params
    src, dst = engine.memif(c.src_ram_type), engine.memif(c.dst_ram_type)
    tracker = engine.timing.tracker(unit.block)
    yield from wait_until(env, env.now + START_CYCLES)
    done = env.now
    line_bytes = c.width * c.stride_x * ATOM_BYTES
    reads = c.stride_x * -(-c.width // READ_REQUEST_ATOMS)
    for _ in range(c.out_surfaces * c.height * c.stride_y):
        rd = src.reserve(unit.block, "read", line_bytes, requests=reads)
        wr = dst.reserve(unit.block, "write", line_bytes,
                         ready_first=rd.last + REORDER_CYCLES, ready_last=rd.last + REORDER_CYCLES)
        tracker.busy(rd.start, wr.last + 1, "contract")
        done = max(done, wr.done)
        yield from wait_until(env, rd.port_free)
    yield from wait_until(env, max(done, env.now) + p.glb.interrupt_cycles)
