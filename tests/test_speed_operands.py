"""A fused element-wise SDP layer's core, write DMA and operand reads taking CACC's stripes
without events (timing/sdp_operands.py OperandWriter, issue 20) give what the three processes
give on their own.

Reference: the same program with NVDLA_SIM_OPERAND_WRITER=0 (every stripe through the SDP core's
channel, every operand read booked by SDP_RDMA's process, every write by the write DMA's), the
plain convolutions' FlyingWriter on in both.  Compared with `==` (test_speed_follower's record):
every layer's start, end, bytes and bound, the total, each interface's bytes per client, every
transfer record in booking order, every busy/stall span, the unit summary, the CBUF peak, every
channel buffer's peak and final credits; and the shortcut must have been used (stripes taken,
fewer SimPy events; on a 32x8 nv_small a write DMA's sleep taken over too).  Networks with
residual adds fused into SDP (ResNet-50's head, a small bottleneck) on nv_small (starved and
generous memory), a 256-MAC nv_small, a 64-MAC nv_large, nv_large and nv_full in INT16 and
FP16 (stripes of several operand chunks)."""
from __future__ import annotations

import pytest

from nvdla_sim.timing import sdp_operands

from test_speed_follower import HEAD, _run, assert_same_record, timing_only
from test_speed_tokens import _bottleneck

# a 1x1 / 3x3 / 1x1 bottleneck with a projection and the add fused into res_2c's SDP
BOTTLENECK = {"name": "bottleneck", "input": [32, 28, 28],
              "layers": [{"name": "c0", "type": "conv", "out_channels": 512, "kernel": 3,
                          "pad": 1, "relu": True}] + _bottleneck("res", "c0", 512, 512, 1, True)}
LARGE_8X8 = {"preset": "nv_large", "atomic_c": 8, "atomic_k": 8, "cbuf": {"bank_width_bytes": 8},
             "memory_atomic_bytes": 8}

CASES = {
    "nv_small_10gbps": ("nv_small", HEAD, "int8", {"dram_gbps": 10, "dram_latency_ns": 100}),
    "nv_small_1gbps": ("nv_small", HEAD, "int8", {"dram_gbps": 1, "dram_latency_ns": 100}),
    "nv_small_25gbps": ("nv_small", BOTTLENECK, "int8", {"dram_gbps": 25.6,
                                                         "dram_latency_ns": 50}),
    "nv_small_32x8": ({"preset": "nv_small", "atomic_c": 32, "atomic_k": 8,
                       "cbuf": {"bank_width_bytes": 32}}, HEAD, "int8",
                      {"dram_gbps": 10, "dram_latency_ns": 100}),
    "nv_large_8x8": (LARGE_8X8, HEAD, "int8", {"dram_gbps": 10, "dram_latency_ns": 100,
                                               "cvsram_bytes": 0}),
    # nv_large's SDP core lags CACC: the stripes queue and are declined, the processes run them
    "nv_large": ("nv_large", HEAD, "int8", {"dram_gbps": 10, "dram_latency_ns": 100,
                                            "cvsram_bytes": 0}),
    "nv_full_int16": ("nv_full", BOTTLENECK, "int16", {"dram_gbps": 3, "dram_latency_ns": 100}),
    "nv_full_fp16": ("nv_full", BOTTLENECK, "fp16", {"dram_gbps": 10, "dram_latency_ns": 100}),
}


def _record(prep, on: bool, monkeypatch) -> dict:
    """test_speed_follower's record (FlyingWriter on) with the operand writer on or off, and
    the stripes it took."""
    monkeypatch.setenv("NVDLA_SIM_OPERAND_WRITER", "1" if on else "0")
    taken = []
    real = sdp_operands.OperandWriter.take

    def counting(self, seg, limit):
        ok = real(self, seg, limit)
        taken.append(ok)
        return ok

    adopted = []
    real_adopt = sdp_operands.OperandWriter._adopt_wdma

    def adopting(self):
        adopted.append(self.wdma_eid is None)
        real_adopt(self)
        adopted[-1] = adopted[-1] and self.wdma_eid is not None

    monkeypatch.setattr(sdp_operands.OperandWriter, "take", counting)
    monkeypatch.setattr(sdp_operands.OperandWriter, "_adopt_wdma", adopting)
    record = _run(prep, True, monkeypatch)
    monkeypatch.setattr(sdp_operands.OperandWriter, "take", real)
    monkeypatch.setattr(sdp_operands.OperandWriter, "_adopt_wdma", real_adopt)
    return {**record, "operand_stripes": sum(taken), "adopted": sum(adopted)}


@pytest.mark.parametrize("case", sorted(CASES))
def test_operand_writer_gives_the_processes_cycles_bytes_and_spans(case, monkeypatch):
    prep = timing_only(*CASES[case])
    fast, plain = _record(prep, True, monkeypatch), _record(prep, False, monkeypatch)
    assert plain["operand_stripes"] == 0
    if case == "nv_small_32x8":               # a write DMA's sleep taken over (after the
        assert fast["adopted"] > 0, "no write DMA sleep was taken over"   # last operand read)
    if case != "nv_large":
        assert fast["operand_stripes"] > 0, "no stripe of the fused add was taken without events"
        assert fast["events"] < plain["events"]
    assert_same_record(fast, plain)


@pytest.mark.parametrize("case", ["nv_large_8x8", "nv_small_1gbps", "nv_full_int16"])
def test_operand_writer_in_c_takes_the_python_steps(case, monkeypatch):
    """kernels/operand_run.pyx against OperandWriter._take (NVDLA_SIM_OPERAND_C=0): the same
    stripes taken, the same record and events."""
    prep = timing_only(*CASES[case])
    monkeypatch.setenv("NVDLA_SIM_OPERAND_C", "1")
    in_c = _record(prep, True, monkeypatch)
    monkeypatch.setenv("NVDLA_SIM_OPERAND_C", "0")
    in_python = _record(prep, True, monkeypatch)
    assert in_c["operand_stripes"] > 0
    for key in ("operand_stripes", "events", "layers", "total", "bytes", "transfers", "spans",
                "units", "cbuf_peak", "pool_peaks"):
        assert in_c[key] == in_python[key], key


def test_operand_writer_switch(monkeypatch):
    monkeypatch.setenv("NVDLA_SIM_OPERAND_WRITER", "0")
    assert not sdp_operands.operand_writer()
    monkeypatch.setenv("NVDLA_SIM_OPERAND_WRITER", "1")
    assert sdp_operands.operand_writer()
    monkeypatch.setenv("NVDLA_SIM_OPERAND_C", "0")
    assert not sdp_operands.operand_c()
    monkeypatch.setenv("NVDLA_SIM_OPERAND_C", "1")
    assert sdp_operands.operand_c()
