"""A read engine's next request booked inside its consumer's step when the consumer frees the
room it waits for (timing/dma.py `release`, issue 20) gives what the two processes give on their
own.

Reference: the same program with NVDLA_SIM_STREAM_READS=0 (the release grants the engine's room
request through an event, the engine books when that event is processed and sleeps until its
port is free).  Compared with `==` (test_speed_follower's record): every layer's start, end,
bytes and bound, the total, the bytes per client, every transfer record in booking order, every
busy/stall span, the unit summary, the CBUF peak, every channel buffer's peak and final credits;
the shortcut must have been used (reads booked in a consumer's step, fewer SimPy events).
PDP_RDMA (a pooling read from memory: ResNet-50's pool1 where CBUF is too small for the pooling
on the fly; max and average, padded) and CDP_RDMA (LRN), INT8 / INT16 / FP16, memory starved and
generous."""
from __future__ import annotations

import pytest

from nvdla_sim.timing import dma

from test_speed_follower import HEAD, _run, assert_same_record, timing_only

POOLS = {"name": "pools", "input": [32, 56, 56],
         "layers": [{"name": "c1", "type": "conv", "out_channels": 64, "kernel": 3, "pad": 1,
                     "relu": True},
                    {"name": "n1", "type": "lrn", "size": 5},
                    {"name": "p1", "type": "pool", "method": "max", "kernel": 3, "stride": 2,
                     "pad": 1},
                    {"name": "p2", "type": "pool", "method": "avg", "kernel": 2, "stride": 2}]}
LARGE_8X8 = {"preset": "nv_large", "atomic_c": 8, "atomic_k": 8, "cbuf": {"bank_width_bytes": 8},
             "memory_atomic_bytes": 8}

CASES = {
    "nv_small_head": ("nv_small", HEAD, "int8", {"dram_gbps": 10, "dram_latency_ns": 100}),
    "nv_small_1gbps": ("nv_small", POOLS, "int8", {"dram_gbps": 1, "dram_latency_ns": 100}),
    "nv_large_8x8": (LARGE_8X8, HEAD, "int8", {"dram_gbps": 25.6, "dram_latency_ns": 50,
                                               "cvsram_bytes": 0}),
    "nv_full_int16": ("nv_full", POOLS, "int16", {"dram_gbps": 3, "dram_latency_ns": 100}),
    "nv_full_fp16": ("nv_full", POOLS, "fp16", {"dram_gbps": 10, "dram_latency_ns": 100}),
}


def _record(prep, on: bool, monkeypatch) -> dict:
    """test_speed_follower's record with the stream reads on or off, and the reads booked
    inside a consumer's step."""
    monkeypatch.setenv("NVDLA_SIM_STREAM_READS", "1" if on else "0")
    inline = []
    real = dma.release

    def counting(channel, n):
        reader = dma._READERS.get(channel)
        before = reader.i if reader is not None else None
        real(channel, n)
        if reader is not None and reader.i != before:
            inline.append(reader.client)

    monkeypatch.setattr(dma, "release", counting)
    for module in ("pdp", "cdp"):
        monkeypatch.setattr(f"nvdla_sim.timing.{module}.release", counting)
    record = _run(prep, True, monkeypatch)
    return {**record, "inline": sorted(set(inline)), "inline_reads": len(inline)}


@pytest.mark.parametrize("case", sorted(CASES))
def test_stream_reads_give_the_processes_cycles_bytes_and_spans(case, monkeypatch):
    network = CASES[case][1]
    prep = timing_only(*CASES[case])
    fast, plain = _record(prep, True, monkeypatch), _record(prep, False, monkeypatch)
    assert plain["inline_reads"] == 0
    assert fast["inline_reads"] > 0, "no read was booked in its consumer's step"
    assert fast["events"] < plain["events"]
    assert_same_record(fast, plain)
    if network is not HEAD:
        assert fast["inline"] == ["CDP_RDMA", "PDP_RDMA"]


def test_stream_reads_switch(monkeypatch):
    monkeypatch.setenv("NVDLA_SIM_STREAM_READS", "0")
    assert not dma.stream_reads()
    monkeypatch.setenv("NVDLA_SIM_STREAM_READS", "1")
    assert dma.stream_reads()
