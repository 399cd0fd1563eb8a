"""CMAC_A / CMAC_B: the two halves of the MAC array.

Each computes half the kernels of a kernel group (ATOMIC_K kernels in INT8, ATOMIC_K/2 in
INT16/FP16: a cell computes two 8-bit kernels or one 16-bit one): CMAC_A the first half of every
group, CMAC_B the rest.  An atomic operation multiplies ATOMIC_C channels by the weights and sums
them exactly (INT8: 22 bits, INT16: 38 bits for ATOMIC_C 64), the CACC accumulates those partial
sums; here one kernel call computes the whole layer's sums of a half (kernels/conv.pyx) and sends
them to the CACC on "cmac_a->cacc" / "cmac_b->cacc".  Winograd: a cell operation multiplies the
16 positions x 4 channels of a pre-added tile by the 4x4-domain weights and post-adds A^T . A
into a 2x2 output block (FP16: all four with the cell's exponent).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Generator

import numpy as np

from ..kernels.conv import conv_lines, winograd_mac
from ..kernels.conv_gemm import conv_lines_gemm
from ..regs import GroupView
from ..timing import conv as conv_timing
from .base import Unit
from .cdma import conv_precision
from .csc import CHANNEL_CMAC_A, CHANNEL_CMAC_B, BatchJob, ConvJob, WinogradJob

CHANNEL_CACC_A = "cmac_a->cacc"
CHANNEL_CACC_B = "cmac_b->cacc"


@dataclass(frozen=True)
class MacPartial:
    """Sums of the kernels one CMAC computed, shape (len(kernels), OH, OW) int64 (batches:
    (N, len(kernels), OH, OW))."""
    kernels: np.ndarray           # kernel indices
    sums: np.ndarray
    total_kernels: int


def cell_kernels(kernels: int, kernel_group: int, half: int) -> np.ndarray:
    """Indices of the kernels computed in CMAC_A (half 0) or CMAC_B (half 1)."""
    cell = np.arange(kernels) % kernel_group
    in_b = cell >= kernel_group // 2
    return np.flatnonzero(in_b if half else ~in_b)


def mac_layer(job: ConvJob | WinogradJob | BatchJob, kernels: np.ndarray) -> np.ndarray:
    """Sums of `kernels` of the job's layer: INT8 exact, INT16 as the 48-bit accumulator holds
    them, FP16 as FP48 accumulator patterns (kernels/conv.pyx); a batch: (N, K, OH, OW)."""
    if isinstance(job, BatchJob):
        return np.stack([mac_layer(j, kernels) for j in job.jobs])
    if isinstance(job, WinogradJob):
        tiles_h, tiles_w = job.tiles.shape[:2]
        sums = np.empty((len(kernels), 2 * tiles_h, 2 * tiles_w), np.int64)
        tiles, weights = job.tiles, job.weights
        if tiles.dtype == np.float16:
            tiles, weights = tiles.view(np.uint16), weights.view(np.uint16)
        winograd_mac(tiles, np.ascontiguousarray(weights[kernels]), sums)
        return sums
    whole = _gemm_sums(job)
    if whole is not None:
        return whole[kernels]
    sums = np.empty((len(kernels), job.out_h, job.out_w), np.int64)
    lines, weights = job.lines, job.weights
    if lines.dtype == np.float16:                 # the C model's float formats work on the bits
        lines, weights = lines.view(np.uint16), weights.view(np.uint16)
    conv_lines(lines, np.ascontiguousarray(weights[kernels]), sums, job.kernel_w,
               job.kernel_c, job.x_step, job.s_step, job.y_step, job.r_step, job.block_c)
    return sums


# Sums of every kernel of the last few jobs computed by BLAS (kernels/conv_gemm.py): both CMAC
# halves receive the same job, so the first computes all kernels in one matrix product (one
# im2col matrix) and the second takes its kernels from here.  Keyed by the job object itself;
# an entry (None: not provably exact) leaves when both halves have asked (or the cache is full).
_GEMM_CACHE: dict[int, list] = {}
_GEMM_CACHE_JOBS = 4


def _gemm_sums(job: ConvJob) -> np.ndarray | None:
    """(K, OH, OW) int64 sums of all the job's kernels by BLAS where that is provably the
    hardware's result (INT8; INT16 whose 48-bit accumulation cannot saturate), else None."""
    if job.lines.dtype not in (np.int8, np.int16) or os.environ.get("NVDLA_SIM_CONV_GEMM") == "0":
        return None                               # (=0: the exact kernel everywhere, to compare)
    entry = _GEMM_CACHE.get(id(job))
    if entry is not None and entry[0] is job:
        entry[2] -= 1
        if entry[2] <= 0:
            del _GEMM_CACHE[id(job)]
        return entry[1]
    sums = np.empty((job.kernels, job.out_h, job.out_w), np.int64)
    if not conv_lines_gemm(job.lines, job.weights, sums, job.kernel_w, job.kernel_c, job.x_step,
                           job.s_step, job.y_step, job.r_step):
        sums = None                               # the exact kernel runs each half
    if len(_GEMM_CACHE) >= _GEMM_CACHE_JOBS:
        del _GEMM_CACHE[next(iter(_GEMM_CACHE))]
    _GEMM_CACHE[id(job)] = [job, sums, 1]         # one more half to serve
    return sums


class _Cmac(Unit):
    half = 0
    channel_in = ""
    channel_out = ""

    def execute(self, view: GroupView) -> Generator:
        conv_precision(self, view)
        job: ConvJob | None = yield from self.receive(self.channel_in)
        partial = None                        # timing only: no sums
        if job is not None:
            kernels = cell_kernels(job.kernels, job.kernel_group or self.hw.atomic_k, self.half)
            partial = MacPartial(kernels, mac_layer(job, kernels), job.kernels)
        yield from self.send(self.channel_out, partial)
        # Timing: the array is busy while CSC issues its packages.
        yield from conv_timing.cmac(self, self.engine.timing.layer("conv", self.stats["layers"]))


class CmacA(_Cmac):
    block = "CMAC_A"
    half = 0
    channel_in = CHANNEL_CMAC_A
    channel_out = CHANNEL_CACC_A


class CmacB(_Cmac):
    block = "CMAC_B"
    half = 1
    channel_in = CHANNEL_CMAC_B
    channel_out = CHANNEL_CACC_B
