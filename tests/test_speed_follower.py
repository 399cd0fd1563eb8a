"""SDP and its write DMA taking a convolution's stripes without events (timing/sdp.py
FlyingWriter, issue 20) give what the two processes give on their own.

Reference: the same program with NVDLA_SIM_FLYING_WRITER=0 (every stripe handed to the SDP
process through its channel, every write booked by the write DMA process when its event comes).
Compared with `==`: every layer's start, end, bytes and bound, the total, each interface's bytes
per client, every per-request transfer record in booking order, every busy/stall span of the
activity log, the CBUF peak, the output buffers' peaks and final credits; and the shortcut must
have been used (fewer SimPy events).  Cases with the memory starved (1 GB/s: the writes and the weight reads
contend on the shared cap), generous (25.6 GB/s), other arrays, 16-bit precisions and CV-SRAM."""
from __future__ import annotations

from dataclasses import replace

import pytest

from nvdla_sim.compiler.lower import lower_and_run
from nvdla_sim.scenario.runner import context, prepare
from nvdla_sim.scenario.schema import parse_scenario
from nvdla_sim.timing import sdp

from test_speed_tokens import RESNET_BLOCKS, run_record

# conv1, pool1 and res2a of RESNET_BLOCKS: a 7x7 stride-2 convolution, a pooling, 1x1 and 3x3
# convolutions and a projection with its fused residual add
HEAD = {**RESNET_BLOCKS, "name": "resnet50_head",
        "layers": RESNET_BLOCKS["layers"][:7]}
SMALL = {"name": "small", "input": [16, 28, 28],
         "layers": [{"name": "c1", "type": "conv", "out_channels": 32, "kernel": 3, "pad": 1,
                     "relu": True},
                    {"name": "c2", "type": "conv", "out_channels": 64, "kernel": 1, "relu": True},
                    {"name": "c3", "type": "conv", "out_channels": 32, "kernel": 3, "stride": 2,
                     "pad": 1}]}

# weights far beyond the CBUF: CDMA's weight ring fills and waits for CSC to free groups
RING = {"name": "ring", "input": [256, 14, 14],
        "layers": [{"name": "r1", "type": "conv", "out_channels": 512, "kernel": 3, "pad": 1,
                    "relu": True},
                   {"name": "r2", "type": "conv", "out_channels": 128, "kernel": 1}]}

# ResNet-50's res3 block: on 256 MACs the write DMA falls behind and sleeps on its port, and
# FlyingWriter takes those sleeps over (`_adopt_wdma`)
RES3 = {"name": "res3", "input": [256, 28, 28],
        "layers": [{"name": "a", "type": "conv", "out_channels": 128, "kernel": 1, "relu": True},
                   {"name": "b", "type": "conv", "out_channels": 128, "kernel": 3, "pad": 1,
                    "relu": True},
                   {"name": "c", "type": "conv", "out_channels": 512, "kernel": 1}]}

CASES = {
    "nv_small_10gbps": ("nv_small", HEAD, "int8", {"dram_gbps": 10, "dram_latency_ns": 100}),
    "nv_small_1gbps": ("nv_small", HEAD, "int8", {"dram_gbps": 1, "dram_latency_ns": 100}),
    "nv_small_25gbps": ("nv_small", HEAD, "int8", {"dram_gbps": 25.6, "dram_latency_ns": 50}),
    "nv_small_32x16": ({"preset": "nv_small", "atomic_c": 32, "atomic_k": 16,
                        "cbuf": {"bank_width_bytes": 32}}, HEAD, "int8",
                       {"dram_gbps": 4, "dram_latency_ns": 100}),
    "nv_large": ("nv_large", HEAD, "int8", {"dram_gbps": 10, "dram_latency_ns": 100,
                                            "cvsram_bytes": 0}),
    "nv_large_cvsram": ("nv_large", SMALL, "int8", {"dram_gbps": 2, "dram_latency_ns": 100}),
    "nv_full_int16": ("nv_full", SMALL, "int16", {"dram_gbps": 3, "dram_latency_ns": 100}),
    "nv_full_fp16": ("nv_full", SMALL, "fp16", {"dram_gbps": 10, "dram_latency_ns": 100}),
    "nv_small_weight_ring": ("nv_small", RING, "int8", {"dram_gbps": 10, "dram_latency_ns": 100}),
    "nv_small_256_adopt": ("nv_small_256", RES3, "int8", {"dram_gbps": 10,
                                                          "dram_latency_ns": 100}),
}


def _run(prep, on: bool, monkeypatch, switch: str = "NVDLA_SIM_FLYING_WRITER") -> dict:
    """The program's run record with `switch` on or off (shared by test_speed_stripe_run)."""
    monkeypatch.setenv(switch, "1" if on else "0")
    monkeypatch.setenv("NVDLA_SIM_COARSE_STRIPES", "0")
    monkeypatch.setenv("NVDLA_SIM_NO_STEP_CACHE", "1")       # every step simulated
    taken = []
    real = sdp.FlyingWriter.take

    def counting(self, seg, limit):
        ok = real(self, seg, limit)
        taken.append(ok)
        return ok

    monkeypatch.setattr(sdp.FlyingWriter, "take", counting)
    adopted = []
    real_adopt = sdp.FlyingWriter._adopt_wdma
    monkeypatch.setattr(sdp.FlyingWriter, "_adopt_wdma",
                        lambda self: adopted.append(1) or real_adopt(self))
    res = lower_and_run(prep.plan, replace(context(prep), timeline=True))
    engine = res.engine_result.engine
    return {**run_record(res),
            "units": engine.unit_summary(res.total_cycles),
            "pool_peaks": {c.name: (c.room.peak, c.room.free)
                           for c in engine.timing._channels.values() if c.room is not None},
            "taken": sum(taken), "adopted": len(adopted)}


RECORD_KEYS = ("layers", "total", "bytes", "transfers", "spans", "units", "cbuf_peak",
               "pool_peaks")


def timing_only(hardware, network: dict, precision: str, memory: dict):
    """A prepared timing-only scenario without plots (shared by the speed tests' cases)."""
    return prepare(parse_scenario({"hardware": hardware, "mode": "timing-only",
                                   "network": network, "precision": precision,
                                   "memory": memory, "outputs": {"plots": False}}, None))


def prepared(case: str):
    """The prepared scenario of CASES[case]."""
    return timing_only(*CASES[case])


def assert_same_record(fast: dict, plain: dict, keys=RECORD_KEYS) -> None:
    """Every entry of two run records equal (the key named when one differs)."""
    for key in keys:
        assert fast[key] == plain[key], key


@pytest.mark.parametrize("case", sorted(CASES))
def test_flying_writer_gives_the_processes_cycles_bytes_and_spans(case, monkeypatch):
    prep = prepared(case)
    monkeypatch.setenv("NVDLA_SIM_STRIPE_RUN", "0")      # FlyingWriter's own Python path
    fast, plain = _run(prep, True, monkeypatch), _run(prep, False, monkeypatch)
    assert plain["taken"] == 0
    assert fast["taken"] > 0, "no stripe was taken without events"
    assert fast["events"] < plain["events"]
    if case == "nv_small_256_adopt":
        assert fast["adopted"] > 0, "no write DMA sleep was taken over"
    assert_same_record(fast, plain)
