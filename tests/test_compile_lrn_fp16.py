"""FP16 LRN from the compiler: the CDP table of lut.lrn_lut_fp16 run on nv_full against a float64
LRN, and FP16 scenarios with LRN compiled end to end."""
from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

from nvdla_sim.compiler.emit import ProgramBuilder, read_output
from nvdla_sim.compiler.emit_cdp import emit_cdp, lrn_layer
from nvdla_sim.compiler.lut import LE_ENTRIES, LO_ENTRIES, lrn_lut_fp16
from nvdla_sim.compiler.placement import Allocator
from nvdla_sim.config import load_hardware
from nvdla_sim.datatype import FP16
from nvdla_sim.engine import Engine
from nvdla_sim.errors import NvdlaSimError

FULL = load_hardware("nv_full")


def float_lrn(x: np.ndarray, n: int, alpha: float, beta: float, k: float) -> np.ndarray:
    """x / (k + alpha/n * sum of the n channels' squares around c)^beta in float64."""
    xf = x.astype(np.float64)
    padded = np.pad(xf ** 2, ((n // 2, n // 2), (0, 0), (0, 0)))
    ss = sum(padded[i:i + x.shape[0]] for i in range(n))
    return xf / (k + alpha / n * ss) ** beta


def sqnr_db(out: np.ndarray, ref: np.ndarray) -> float:
    return float(10 * np.log10((ref ** 2).sum() / ((out - ref) ** 2).sum()))


def lrn_fp16_on_engine(x: np.ndarray, layer) -> np.ndarray:
    alloc, b = Allocator(FULL), ProgramBuilder(FULL, "lrn")
    src = alloc.feature("x", *x.shape, dtype=FP16)
    dst = alloc.feature("y", *x.shape, dtype=FP16)
    b.load_cube(src, x)
    b.mem_fill(dst.address, dst.size_bytes)
    emit_cdp(b, layer, src, dst)
    return read_output(Engine(FULL).run(b.build()).engine, dst).astype(np.float64)


@pytest.mark.parametrize("n, alpha, beta, k, amplitude", [
    (5, 1e-4, 0.75, 1.0, 300.0),        # AlexNet / GoogLeNet parameters, large activations
    (5, 1e-4, 0.75, 1.0, 3.0),          # the same, small ones (the table nearly flat)
    (3, 2e-3, 0.75, 2.0, 30.0),
    (9, 1.0, 0.5, 1.0, 2.0),            # alpha 1: f bends within the range
    (7, 1e-2, 0.75, 0.5, 20000.0),      # square sums far beyond FP16 (FP32 in the CDP)
])
def test_fp16_lrn_table_meets_50_db(n, alpha, beta, k, amplitude):
    rng = np.random.default_rng(n)
    x = (rng.standard_normal((37, 4, 6)) * amplitude / 3).astype(np.float16)
    amax = float(np.abs(x.astype(np.float64)).max())
    out = lrn_fp16_on_engine(x, lrn_layer(n, alpha, beta, k, 1.0, 1.0, dtype=FP16,
                                          max_abs_input=amax))
    assert sqnr_db(out, float_lrn(x, n, alpha, beta, k)) >= 50.0


def test_fp16_lrn_table_registers():
    d = lrn_lut_fp16(5, 1e-4, 0.75, 1.0, 100.0)       # square sums up to 5 * 100^2 = 50000
    lut = d.lut
    assert (LO_ENTRIES - 1) * 2.0 ** lut.lo_index_select >= 50000 > \
        (LO_ENTRIES - 1) * 2.0 ** (lut.lo_index_select - 1)
    assert lut.le_index_select == lut.lo_index_select - 3
    # START 0, END the last entry's square sum, both FP32 patterns
    assert lut.lo_start == lut.le_start == 0
    end = np.array([lut.lo_end], np.int64).astype(np.uint32).view(np.float32)[0]
    assert end == (LO_ENTRIES - 1) * 2.0 ** lut.lo_index_select
    # entries: FP16 of f at their points
    lo = np.array(lut.lo_table, np.int64).astype(np.int16).view(np.float16).astype(np.float64)
    pts = np.arange(LO_ENTRIES) * 2.0 ** lut.lo_index_select
    assert np.allclose(lo, (1 + 1e-4 / 5 * pts) ** -0.75, rtol=2.0 ** -11)
    le = np.array(lut.le_table, np.int64).astype(np.int16).view(np.float16)
    assert le.size == LE_ENTRIES and le[0] == np.float16(1.0)
    assert (lut.hybrid_priority, lut.uflow_priority, lut.oflow_priority) == ("LE", "LO", "LO")


def test_fp16_lrn_needs_the_input_range():
    with pytest.raises(NvdlaSimError, match="max_abs_input"):
        lrn_layer(5, 1e-4, 0.75, 1.0, 1.0, 1.0, "n", FP16)
