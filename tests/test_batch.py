"""Batched direct convolution on nv_full (D_BATCH_NUMBER, D_BATCH_STRIDE in CDMA/CSC/CACC; SDP
BATCH_NUMBER and DST_BATCH_STRIDE): N images through one layer with the same weights, each
against the independent int64 reference of test_conv_precision; weights are fetched once, and a
fully connected layer's weight-bound packages serve every image."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from nvdla_sim.config import load_hardware
from nvdla_sim.datatype import INT8, INT16
from nvdla_sim.engine import Engine
from nvdla_sim.errors import NvdlaSimError, UnsupportedError
from nvdla_sim.program import IntrNotify, MemLoad, RegisterProgram

from program_helpers import reg_writes
from test_conv_precision import (SRC, Layer, entries_per_slice, int_reference, layer_program,
                                 pack_feature)

DST = 0x8400_0000
BANK_ENTRIES = 256


def batch_program(layers: list[Layer], stride_bytes: int) -> RegisterProgram:
    """layer_program of the first image, with every image BATCH_STRIDE apart in memory and
    BATCHES set in CDMA, CSC and CACC (data banks for all images)."""
    first = layers[0]
    n = len(layers)
    c, h, w = first.data.shape
    slice_entries = entries_per_slice(c, w, first.dtype.bytes)
    data_banks = -(-slice_entries * h * n // BANK_ENTRIES)
    regs = {f"{u}.D_BATCH_NUMBER": {"BATCHES": n - 1} for u in ("CDMA", "CSC", "CACC")}
    regs["CDMA.D_BATCH_STRIDE"] = {"BATCH_STRIDE": stride_bytes}
    program = layer_program(replace(first, overrides={
        **regs, "CDMA.D_BANK": {"DATA_BANK": data_banks - 1},
        "CSC.D_BANK": {"DATA_BANK": data_banks - 1}}))
    extra = [MemLoad("pri_mem", SRC + b * stride_bytes, pack_feature(layer.data)[0])
             for b, layer in enumerate(layers) if b]
    return replace(program, commands=extra + list(program.commands))


def random_images(rng, n: int, dtype, c: int, h: int, w: int, weights, **kw) -> list[Layer]:
    lo, hi = dtype.integer_range()
    return [Layer(dtype, rng.integers(lo, hi + 1, size=(c, h, w)).astype(dtype.numpy), weights,
                  **kw) for _ in range(n)]


def run(program, compute_values=True):
    engine = Engine(load_hardware("nv_full"), compute_values=compute_values)
    result = engine.run(program)
    return engine.channel("cacc->sdp").items[0], engine, result


@pytest.mark.parametrize("dtype, n, c, h, w, k, r, pad", [
    (INT8, 16, 100, 1, 1, 40, 1, 0),          # fully connected, batch 16
    (INT16, 3, 37, 5, 6, 17, 3, 1),           # 3x3 with padding, odd channels
    (INT8, 5, 70, 2, 3, 33, 1, 0),
])
def test_each_image_equals_its_own_convolution(dtype, n, c, h, w, k, r, pad):
    rng = np.random.default_rng(n * 100 + c)
    lo, hi = dtype.integer_range()
    weights = rng.integers(lo, hi + 1, size=(k, c, r, r)).astype(dtype.numpy)
    layers = random_images(rng, n, dtype, c, h, w, weights, pad=(pad, pad),
                           clip=6 if dtype == INT16 else 0)
    surf_bytes = h * w * 32
    surfaces = -(-c * dtype.bytes // 32)
    out, _, _ = run(batch_program(layers, surfaces * surf_bytes + 64))
    assert out.shape[0] == n and out.dtype == np.int32
    for b, layer in enumerate(layers):
        np.testing.assert_array_equal(out[b, :k].astype(np.int64), int_reference(layer))
        assert not out[b, k:].any()


def test_weights_are_fetched_once_and_serve_every_image():
    rng = np.random.default_rng(7)
    weights = rng.integers(-128, 128, size=(64, 256, 1, 1)).astype(np.int8)
    layers = random_images(rng, 16, INT8, 256, 1, 1, weights)
    _, _, one = run(layer_program(layers[0]), compute_values=False)
    _, _, batch = run(batch_program(layers, 8 * 32), compute_values=False)
    wt = lambda r: sum(c.get("CDMA_WT", {}).get("read", 0) for c in r.memory_bytes.values())
    dat = lambda r: sum(c.get("CDMA_DAT", {}).get("read", 0) for c in r.memory_bytes.values())
    assert wt(batch) == wt(one) == 64 * 256
    assert dat(batch) == 16 * dat(one)
    # weight-load bound packages: 16 images cost far less than 16 separate layers
    busy = lambda r: r.unit_stats["CSC"]["busy_cycles"]
    assert busy(batch) < 2 * busy(one)
    assert batch.cycles < 2 * one.cycles


def test_batch_stride_shorter_than_a_cube_is_an_error():
    rng = np.random.default_rng(2)
    weights = rng.integers(-9, 9, size=(8, 64, 1, 1)).astype(np.int8)
    layers = random_images(rng, 2, INT8, 64, 2, 2, weights)
    with pytest.raises(NvdlaSimError, match="BATCH_STRIDE"):
        run(batch_program(layers, 32))


def test_batched_winograd_is_unsupported():
    import test_winograd as wino
    layer = wino.random_layer(np.random.default_rng(3), INT8, 5, 8, 8, 4, (8, 8),
                              pad=(1, 3, 1, 3),
                              overrides={"CDMA.D_BATCH_NUMBER": {"BATCHES": 1}})
    with pytest.raises(UnsupportedError, match="BATCHES=2 with Winograd"):
        wino.run(layer)


def sdp_program(n: int, channels: int, batch_stride: int) -> RegisterProgram:
    cube = {"D_DATA_CUBE_WIDTH": {"WIDTH": 0}, "D_DATA_CUBE_HEIGHT": {"HEIGHT": 0},
            "D_DATA_CUBE_CHANNEL": {"CHANNEL": channels - 1}}
    regs = {f"SDP.{k}": v for k, v in cube.items()}
    regs.update({"SDP.D_DATA_FORMAT": {"PROC_PRECISION": 0, "OUT_PRECISION": 0},
                 "SDP.D_CVT_SCALE": {"CVT_SCALE": 1}, "SDP.D_CVT_SHIFT": {"CVT_SHIFT": 4},
                 "SDP.D_DST_BASE_ADDR_LOW": {"DST_BASE_ADDR_LOW": DST},
                 "SDP.D_DST_DMA_CFG": {"DST_RAM_TYPE": 1},
                 "SDP.D_DST_BATCH_STRIDE": {"DST_BATCH_STRIDE": batch_stride},
                 "SDP.D_FEATURE_MODE_CFG": {"FLYING_MODE": 1, "BATCH_NUMBER": n - 1}})
    return RegisterProgram("sdp_batch", [*reg_writes(regs, version=1),
                                         IntrNotify("SDP", 0, "sdp_done"),
                                         *reg_writes({"SDP.D_OP_ENABLE": {"OP_EN": 1}},
                                                     version=1)])


def test_sdp_writes_each_image_at_its_batch_stride():
    n, lanes, stride = 4, 64, 0x100
    x = np.random.default_rng(1).integers(-5000, 5000, size=(n, lanes, 1, 1)).astype(np.int32)
    engine = Engine(load_hardware("nv_full"))
    engine.channel("cacc->sdp").put(x)
    engine.run(sdp_program(n, 40, stride))
    mem = engine.memory.space(1)
    expected = np.clip(np.sign(x) * ((np.abs(x) + 8) // 16), -128, 127)
    for b in range(n):
        got = mem.read(DST + b * stride, lanes).view(np.int8)
        np.testing.assert_array_equal(got, expected[b, :, 0, 0])


def test_fp16_batch_equals_single_image_runs():
    from nvdla_sim.datatype import FP16
    rng = np.random.default_rng(8)
    weights = rng.uniform(-1, 1, size=(9, 20, 3, 3)).astype(np.float16)
    layers = [Layer(FP16, rng.uniform(-1, 1, size=(20, 4, 4)).astype(np.float16), weights,
                    pad=(1, 1)) for _ in range(3)]
    layers[1].data[2, 1, 1] = np.float16(np.inf)
    out, engine, _ = run(batch_program(layers, 2 * 16 * 32 + 32))
    for b, layer in enumerate(layers):
        single, _, _ = run(layer_program(layer))
        np.testing.assert_array_equal(out[b], single)
    # the CDMA counts FP16 infinities over every image
    assert engine.regs["CDMA"].view(0).word("D_INF_INPUT_DATA_NUM") == 1
