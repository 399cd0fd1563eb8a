"""CACC: accumulates the CMAC partial sums and delivers 32-bit results to SDP.

FP16: the CMACs' results are accumulated in the C model's FP48 format (8-bit exponent over a
40-bit two's complement mantissa, kernels/conv.pyx) and delivered as FP32 bit patterns.

INT8/INT16: the two CMAC halves' sums are assembled per kernel into a 48-bit saturating
accumulator, then each output is rounded half away from zero by CLIP_TRUNCATE bits and saturated
to int32; the number of saturated outputs goes to D_OUT_SATURATION (kernels/conv.pyx
accumulator_output).

Contract with SDP ("cacc->sdp", flying mode): one numpy cube per layer, shape
(surfaces * atom, OUT_H, OUT_W) with atom = memory_atomic_bytes / element bytes of PROC_PRECISION
(32 lanes INT8, 16 INT16/FP16 on nv_full) -- all lanes of every surface; lanes of kernels >= K are
0, as the hardware feeds them.  INT8 and INT16 layers deliver int32 values; FP16 layers deliver
FP32 bit patterns as uint32.  A batched layer (BATCHES > 0) delivers (N, lanes, OUT_H, OUT_W).
Timing-only runs deliver None.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Generator

import numpy as np

from ..errors import NvdlaSimError
from ..kernels.conv import accumulator_output, accumulator_output_fp16
from ..layout import surfaces
from ..regs import GroupView
from ..timing import conv as conv_timing
from .base import Unit
from .cdma import atom_elements, batch_count, conv_precision, kernels_per_group
from .cmac import CHANNEL_CACC_A, CHANNEL_CACC_B, MacPartial

CHANNEL_SDP = "cacc->sdp"


def assemble(partials: list[MacPartial], kernels: int, out_h: int, out_w: int) -> np.ndarray:
    """(K, OH, OW) int64 sums from the CMAC halves."""
    acc = np.zeros((kernels, out_h, out_w), np.int64)
    seen = np.zeros(kernels, bool)
    for p in partials:
        if p.total_kernels != kernels or p.sums.shape[1:] != (out_h, out_w):
            raise NvdlaSimError(
                f"CACC: DATAOUT_SIZE {out_w}x{out_h}x{kernels} differs from the CSC layer "
                f"({p.sums.shape[2]}x{p.sums.shape[1]}x{p.total_kernels})")
        acc[p.kernels] = p.sums
        seen[p.kernels] = True
    if not seen.all():
        raise NvdlaSimError("CACC: some kernels came from neither CMAC")
    return acc


def deliver(acc: np.ndarray, atom: int, clip_truncate: int,
            is_float: bool = False) -> tuple[np.ndarray, int]:
    """The cube for SDP (all lanes of every surface): int32 values and the saturation count, or
    for FP16 layers FP32 bit patterns (uint32; CLIP_TRUNCATE does not apply) and 0."""
    kernels, out_h, out_w = acc.shape
    shape = (surfaces(kernels, atom) * atom, out_h, out_w)
    if is_float:
        out = np.zeros(shape, np.uint32)
        accumulator_output_fp16(acc, out)
        return out, 0
    out = np.zeros(shape, np.int32)
    saturated = accumulator_output(acc, out, clip_truncate)
    return out, saturated


class Cacc(Unit):
    block = "CACC"
    interrupt = "CACC"

    def execute(self, view: GroupView) -> Generator:
        dtype = conv_precision(self, view)
        batches = batch_count(self, view)
        out_w = view.field("D_DATAOUT_SIZE_0", "DATAOUT_WIDTH") + 1
        out_h = view.field("D_DATAOUT_SIZE_0", "DATAOUT_HEIGHT") + 1
        kernels = view.field("D_DATAOUT_SIZE_1", "DATAOUT_CHANNEL") + 1
        part_a = yield from self.receive(CHANNEL_CACC_A)
        part_b = yield from self.receive(CHANNEL_CACC_B)
        out = None                            # timing only: nothing to deliver but tokens
        if part_a is not None and part_b is not None:
            per_batch = [(part_a, part_b)] if batches == 1 else [
                (replace(part_a, sums=part_a.sums[b]), replace(part_b, sums=part_b.sums[b]))
                for b in range(batches)]
            if batches > 1 and part_a.sums.shape[0] != batches:
                raise NvdlaSimError(f"CACC: D_BATCH_NUMBER says {batches} batches but the CSC "
                                    f"ran {part_a.sums.shape[0]}")
            cubes, saturated = [], 0
            for parts in per_batch:
                acc = assemble(list(parts), kernels, out_h, out_w)
                cube, n = deliver(acc, atom_elements(self.hw, dtype),
                                  view.field("D_CLIP_CFG", "CLIP_TRUNCATE"), dtype.is_float)
                cubes.append(cube)
                saturated += n
            out = cubes[0] if batches == 1 else np.stack(cubes)
            self.regs.set_word("D_OUT_SATURATION", saturated, view.group)
        self.engine.timing.announce(conv_timing.CH_SDP)
        yield from self.send(CHANNEL_SDP, out)
        yield from conv_timing.cacc(self, kernels_per_group(self.hw, dtype))
