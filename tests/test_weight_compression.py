"""Sparse weight compression (nv_full, WEIGHT_FORMAT=COMPRESSED): the CDMA expands the weights
from the WMB bit masks, the WGS group sizes and the non-zero elements.  The compressed surfaces
are built here from the data-format document by a small independent compressor; the expanded
CBUF weights must equal the original stream, layers give the same values as uncompressed ones,
and the weight port moves the compressed bytes plus WMB and WGS."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from nvdla_sim.config import load_hardware
from nvdla_sim.datatype import FP16, INT8, INT16, DataType
from nvdla_sim.engine import Engine
from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.program import MemLoad

import test_winograd as wino
from test_conv_precision import Layer, int_reference, layer_program, pack_weights

WMB, WGS = 0x8200_0000, 0x8300_0000


def compress(raw: np.ndarray, dtype: DataType, kernels: int, byte_per_kernel: int,
             group: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(compressed weights, WMB, WGS) of an uncompressed weight stream, per the document: one
    bit per element (little-endian bit order), WMB and weights each padded to 128 bytes, one
    32-bit WGS per kernel group holding its non-zero bytes."""
    elements = kernels * byte_per_kernel // dtype.bytes
    values = raw[:elements * dtype.bytes].view(f"<u{dtype.bytes}")
    present = values != 0
    bits = np.packbits(present, bitorder="little")
    wmb = np.concatenate([bits, np.zeros(-bits.size % 128, np.uint8)])
    kept = values[present].view(np.uint8)
    weights = np.concatenate([kept, np.zeros(-kept.size % 128, np.uint8)])
    per_group = group * byte_per_kernel // dtype.bytes
    sizes = [int(present[g:g + per_group].sum()) * dtype.bytes
             for g in range(0, elements, per_group)]
    return weights, wmb, np.array(sizes, "<u4").view(np.uint8)


def compressed_program(program, raw, dtype, kernels, byte_per_kernel, group, regs=None):
    """The same register program with the weight image replaced by its compressed surfaces and
    the CDMA/CSC weight-format registers set."""
    from program_helpers import reg_writes
    weights, wmb, wgs = compress(raw, dtype, kernels, byte_per_kernel, group)
    loads, rest = [], []
    for step in program.commands:
        if isinstance(step, MemLoad) and step.addr == wino.WT:
            loads += [MemLoad("pri_mem", wino.WT, weights), MemLoad("pri_mem", WMB, wmb),
                      MemLoad("pri_mem", WGS, wgs)]
        else:
            rest.append(step)
    fields = {"CDMA.D_WEIGHT_FORMAT": {"WEIGHT_FORMAT": 1},
              "CDMA.D_WEIGHT_BYTES": {"WEIGHT_BYTES": weights.size},
              "CDMA.D_WMB_BYTES": {"WMB_BYTES": wmb.size},
              "CDMA.D_WMB_ADDR_LOW": {"WMB_ADDR_LOW": WMB},
              "CDMA.D_WGS_ADDR_LOW": {"WGS_ADDR_LOW": WGS},
              "CSC.D_WEIGHT_FORMAT": {"WEIGHT_FORMAT": 1},
              "CSC.D_WEIGHT_BYTES": {"WEIGHT_BYTES": weights.size},
              "CSC.D_WMB_BYTES": {"WMB_BYTES": wmb.size}, **(regs or {})}
    # the new writes go before the OP_ENABLEs, which end the program
    n_enable = 5
    steps = loads + rest[:-n_enable] + list(reg_writes(fields, version=1)) + rest[-n_enable:]
    return replace(program, commands=steps), weights, wmb


def sparse(rng, shape, dtype: DataType, density: float) -> np.ndarray:
    if dtype == FP16:
        values = rng.uniform(-1, 1, size=shape).astype(np.float16)
    else:
        lo, hi = dtype.integer_range()
        values = rng.integers(lo, hi + 1, size=shape).astype(dtype.numpy)
    return np.where(rng.random(shape) < density, values, 0).astype(dtype.numpy)


def run(program, compute_values=True):
    engine = Engine(load_hardware("nv_full"), compute_values=compute_values)
    result = engine.run(program)
    out = engine.channel("cacc->sdp").items[0]
    return out, engine, result


CASES = [(INT8, 40, 0.5), (INT16, 17, 0.3), (FP16, 9, 0.5), (INT8, 70, 0.25)]


@pytest.mark.parametrize("dtype, k, density", CASES, ids=lambda v: str(v))
def test_direct_layer_with_compressed_weights(dtype, k, density):
    rng = np.random.default_rng(k)
    c, h, w = 37, 6, 7
    if dtype == FP16:
        data = rng.uniform(-1, 1, size=(c, h, w)).astype(np.float16)
    else:
        lo, hi = dtype.integer_range()
        data = rng.integers(lo, hi + 1, size=(c, h, w)).astype(dtype.numpy)
    layer = Layer(dtype, data, sparse(rng, (k, c, 3, 3), dtype, density), pad=(1, 1),
                  clip=3 if dtype == INT16 else 0)
    group = 32 if dtype == INT8 else 16
    raw = pack_weights(layer.weights, group)
    byte_per_kernel = c * 9 * dtype.bytes
    plain, _, plain_run = run(layer_program(layer))
    program, weights, wmb = compressed_program(layer_program(layer), raw, dtype, k,
                                               byte_per_kernel, group)
    out, engine, result = run(program)
    # the CBUF holds the original (uncompressed) weight stream
    expanded = engine.units["CDMA"].cbuf.weights
    np.testing.assert_array_equal(expanded, raw[:k * byte_per_kernel])
    np.testing.assert_array_equal(out, plain)
    if dtype != FP16:
        np.testing.assert_array_equal(out[:k].astype(np.int64), int_reference(layer))
    # weight traffic: the compressed bytes, the WMB and one WGS atom instead of every weight
    read = result.memory_bytes
    plain_read = plain_run.memory_bytes
    wt_bytes = _client_bytes(read, "CDMA_WT")
    assert wt_bytes == weights.size + wmb.size + 32
    assert _client_bytes(plain_read, "CDMA_WT") == raw.size
    assert weights.size + wmb.size + 32 < raw.size or density > 0.8


def _client_bytes(memory_bytes: dict, client: str) -> int:
    total = 0
    for clients in memory_bytes.values():
        entry = clients.get(client)
        if entry:
            total += entry.get("read", 0) if isinstance(entry, dict) else entry
    return total


def test_winograd_layer_with_compressed_weights():
    rng = np.random.default_rng(2)
    layer = wino.random_layer(rng, INT8, 5, 8, 8, 7, (8, 8), pad=(1, 3, 1, 3))
    layer.weights = np.where(rng.random(layer.weights.shape) < 0.4, layer.weights, 0) \
        .astype(np.int8)
    raw = wino.pack_winograd_weights(layer.weights, 32)
    c_ext = layer.weights.shape[1]
    program, _, _ = compressed_program(wino.wino_program(layer), raw, INT8, 7, 16 * c_ext, 32)
    out, _, _ = run(program)
    np.testing.assert_array_equal(wino.delivered(out, layer), wino.int_reference(layer))


def test_timing_only_run_fetches_the_same_bytes():
    rng = np.random.default_rng(9)
    layer = Layer(INT8, rng.integers(-9, 9, size=(20, 5, 5)).astype(np.int8),
                  sparse(rng, (33, 20, 3, 3), INT8, 0.3))
    raw = pack_weights(layer.weights, 32)
    program, _, _ = compressed_program(layer_program(layer), raw, INT8, 33, 180, 32)
    _, _, values = run(program)
    _, _, timing = run(program, compute_values=False)
    assert _client_bytes(timing.memory_bytes, "CDMA_WT") == \
        _client_bytes(values.memory_bytes, "CDMA_WT")
    assert timing.cycles == values.cycles


def test_wrong_group_size_is_a_one_line_error():
    rng = np.random.default_rng(4)
    layer = Layer(INT8, rng.integers(-9, 9, size=(8, 4, 4)).astype(np.int8),
                  sparse(rng, (40, 8, 1, 1), INT8, 0.5))
    raw = pack_weights(layer.weights, 32)
    program, _, _ = compressed_program(layer_program(layer), raw, INT8, 40, 8, 32)
    bad = [MemLoad("pri_mem", WGS, np.array([1, 0, 0, 0, 2, 0, 0, 0], np.uint8))
           if isinstance(s, MemLoad) and s.addr == WGS else s for s in program.commands]
    with pytest.raises(NvdlaSimError, match="WGS") as err:
        run(replace(program, commands=bad))
    assert "\n" not in str(err.value)


def test_compressed_weights_need_the_last_bank_free():
    rng = np.random.default_rng(5)
    layer = Layer(INT8, rng.integers(-9, 9, size=(8, 4, 4)).astype(np.int8),
                  sparse(rng, (4, 8, 1, 1), INT8, 0.5))
    raw = pack_weights(layer.weights, 32)
    program, _, _ = compressed_program(layer_program(layer), raw, INT8, 4, 8, 32,
                                       regs={"CDMA.D_BANK": {"DATA_BANK": 14, "WEIGHT_BANK": 0}})
    with pytest.raises(NvdlaSimError, match="WMB"):
        run(program)
