"""Measure a CDP (LRN) lookup table on the bit-exact CDP kernel.

The CDP looks its table up at the square sum ss of the window's converted inputs (38-bit
START/END, its own index path), not at an SDP value, so `fit.py`'s SDP measurement does not
apply.  Here the table's registers are written as `compiler.lut.write_lut` emits them into a
fresh register file, decoded as the CDP unit decodes them (`units.cdp.decode_lrn`), and the
kernel runs on INT16 cubes built so that one output lane sees a chosen square sum (nine
values <= 32767 under a window of 9): with
MUL_BYPASS the output is the table's value itself (identity output converter, 16-bit output, so
nothing clips).  INT8 and INT16 share the table path (only the index-select field width
differs: 6 and 7 bits, which the designs below fit both).
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from ..datatype import INT16


def square_sums(max_ss: float, points: int = 4096) -> np.ndarray:
    """Square sums over [0, max_ss]: `points` evenly spaced ones and the perfect squares up to
    4096 (where the table is steepest)."""
    top = int(max_ss)
    targets = np.unique(np.concatenate([np.round(np.linspace(0, top, points)),
                                        np.arange(0, min(math.isqrt(top), 64) + 1) ** 2]))
    return targets.astype(np.int64)


WINDOW = 9                      # NORMALZ_LEN 3: channel 4 sums the squares of channels 0..8
INT16_TOP = (1 << 15) - 1


def _split_squares(ss: np.ndarray) -> np.ndarray:
    """(WINDOW, n) int64 values <= 32767 whose squares add up to each ss (greedy: exact but for
    what the greedy split leaves over, which the caller reads back as the reached sum)."""
    r = np.asarray(ss, np.int64).copy()
    parts = []
    for _ in range(WINDOW):
        a = np.minimum(np.floor(np.sqrt(r.astype(np.float64))).astype(np.int64), INT16_TOP)
        a = np.where(a * a > r, a - 1, a)
        parts.append(a)
        r = r - a * a
    return np.stack(parts)


def _programmed_cdp(lut, hw, dtype, scales: bool):
    """The CDP's decoded LRN configuration and LUT memory after the registers `write_lut` emits
    for `lut` (window of 9, MUL_BYPASS so the output is the table's value; `scales`: unit
    input/output convertor scales, for the integer path)."""
    from ..compiler.emit import ProgramBuilder
    from ..compiler.lut import write_lut
    from ..program import RegWrite
    from ..regs import RegisterFile, register_map
    from ..units.cdp import decode_lrn
    from ..units.lut_memory import LutMemory

    b = ProgramBuilder(hw, "lrn_lut", images=False)
    write_lut(b, "CDP", lut)
    b.reg("CDP", "D_LRN_CFG", NORMALZ_LEN=3)                 # window of 9: channels 0..8
    b.reg("CDP", "D_DATA_FORMAT", INPUT_DATA_TYPE=dtype.name)
    if scales:
        b.reg("CDP", "D_DATIN_SCALE", DATIN_SCALE=1)
        b.reg("CDP", "D_DATOUT_SCALE", DATOUT_SCALE=1)
    b.reg("CDP", "D_FUNC_BYPASS", SQSUM_BYPASS=0, MUL_BYPASS=1)
    rmap = register_map(hw.nvdla_version)
    rf = RegisterFile(rmap)
    memory = LutMemory(rmap.units["CDP"]).install(rf["CDP"])
    for c in b.commands:
        if isinstance(c, RegWrite):
            rf.write(c.addr, c.value)
    return decode_lrn(rf["CDP"].view(0), dtype), memory


def run_cdp_lut(lut, ss: np.ndarray, version: int = 2) -> tuple[np.ndarray, np.ndarray, dict]:
    """(square sums reached, table value at each, LUT counters) on the CDP kernel."""
    from ..config import load_hardware
    from ..kernels.cdp import lrn_int

    hw = load_hardware("nv_full" if version == 1 else "nv_large")
    parts = _split_squares(ss)
    reached = (parts * parts).sum(axis=0)
    cfg, memory = _programmed_cdp(lut, hw, INT16, scales=True)
    lanes = INT16.elements_per_atom(hw.memory_atomic_bytes)
    cube = np.zeros((lanes, 1, reached.size), np.int16)
    cube[:WINDOW, 0, :] = parts
    out, counters = lrn_int(cube, WINDOW, cfg, memory.le, memory.lo)
    return reached, out[WINDOW // 2, 0, :].astype(np.int64), counters


def measure_cdp_lut(lut, f: Callable[[np.ndarray], np.ndarray], entry_lsb: float,
                    max_ss: float, name: str, design: str) -> dict:
    """`Lut.measured` for an INT8/INT16 LRN table of f over square sums [0, max_ss]."""
    ss, y, _ = run_cdp_lut(lut, square_sums(max_ss))
    err = y * entry_lsb - f(ss.astype(np.float64))
    return {"function": name, "range": (0.0, float(max_ss)),
            "max_error": float(np.max(np.abs(err))), "rms_error": float(np.sqrt(np.mean(err ** 2))),
            "design": design}


def measure_cdp_lut_fp16(lut, f: Callable[[np.ndarray], np.ndarray], max_ss: float,
                         design: str, points: int = 4096) -> dict:
    """`Lut.measured` for an FP16 LRN table over square sums [0, max_ss]: nine equal FP16
    values v under a window of 9, so the kernel's FP32 square sum is 9 v^2; error of the FP16
    output (MUL_BYPASS: the table's value) against f(9 v^2) in float64."""
    from ..config import load_hardware
    from ..datatype import FP16
    from ..kernels.cdp import lrn_fp16

    hw = load_hardware("nv_full")
    top = min(float(np.sqrt(max_ss / WINDOW)), 65504.0)
    v = np.unique(np.linspace(0.0, top, points).astype(np.float16))
    cfg, memory = _programmed_cdp(lut, hw, FP16, scales=False)
    lanes = FP16.elements_per_atom(hw.memory_atomic_bytes)
    cube = np.zeros((lanes, 1, v.size), np.float16)
    cube[:WINDOW, 0, :] = v
    out, _ = lrn_fp16(cube.view(np.uint16), WINDOW, cfg, memory.le, memory.lo)
    y = np.asarray(out, np.uint16)[WINDOW // 2, 0, :].view(np.float16).astype(np.float64)
    ss = WINDOW * v.astype(np.float64) ** 2
    err = y - f(ss)
    return {"function": "LRN", "range": (0.0, float(ss[-1])),
            "max_error": float(np.max(np.abs(err))), "rms_error": float(np.sqrt(np.mean(err ** 2))),
            "design": design}
