"""The timing model responds the right way, and its pieces keep their documented rules.

Most cases build timing geometry objects by hand and run the timing processes on a bare engine, so
they need no trace corpus; the calibration case compares with the RTL cycle counts when the CSV
and the corpus are present.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from nvdla_sim.config import load_hardware
from nvdla_sim.engine import Engine
from nvdla_sim.engine.memif import load_memory_profile
from nvdla_sim.errors import UnsupportedError
from nvdla_sim.timing import cdp, conv, pdp, sdp
from nvdla_sim.timing.dma import token_atoms

from conftest import NO_CORPUS, REPO, nvdla_hw_root

NV_SMALL = load_hardware("nv_small")
CSV = REPO.parent / "shared" / "calibration" / "rtl_cycles_nv_small.csv"


def fake_unit(engine: Engine, block: str = "TEST") -> SimpleNamespace:
    return SimpleNamespace(engine=engine, env=engine.env, hw=engine.hw, block=block,
                           unsupported=lambda why: UnsupportedError(f"{block}: {why}"))


def run_conv(hw=NV_SMALL, memory="rtl_testbench", timing=None, *, w: int, h: int, c: int,
             r: int, s: int, k: int, weight_banks: int | None = None):
    """A direct convolution (stride 1, no padding) through CDMA, CSC, CACC and SDP (flying);
    returns (cycles from CDMA's start to the last write, engine, MACs)."""
    eng = Engine(hw, memory, timing=timing)
    atom = hw.memory_atomic_bytes
    data_bytes = w * h * -(-c // atom) * atom
    entries = data_bytes // hw.cbuf.bank_width_bytes
    data_banks = -(-entries // hw.cbuf.bank_depth)
    if weight_banks is None:
        weight_banks = hw.cbuf.banks - data_banks
    bpk = r * s * c
    ow, oh = w - s + 1, h - r + 1
    cdma_g = conv.cdma_geometry(hw, data_bytes, entries, bpk * k, bpk, k, data_banks, weight_banks)
    csc_g = conv.csc_geometry(hw, False, ow, oh, r, s, c, k)
    sdp_g = sdp.SdpGeometry(atoms=ow * oh * -(-k // atom), flying=True, to_pdp=False, stages=0,
                            ram_type=1)
    unit, env = fake_unit(eng), eng.env
    layer = eng.timing.layer("conv", 0)
    eng.timing.announce(conv.CH_SDP)                    # CACC streams to SDP
    for proc in (conv.cdma(unit, cdma_g), conv.csc(unit, csc_g, layer), conv.cacc(unit)):
        env.process(proc)
    done = env.process(sdp.core(unit, sdp_g))
    env.run(until=done)
    eng.timing.finish()
    return env.now, eng, ow * oh * k * c * r * s


def run_pdp(hw=NV_SMALL, memory="rtl_testbench", timing=None, *, w=16, h=16, c=32, kernel=2,
            stride=2, pad=0):
    """A pooling layer read from memory; returns (cycles, engine)."""
    eng = Engine(hw, memory, timing=timing)
    atom = hw.memory_atomic_bytes
    ow = (w + 2 * pad - kernel) // stride + 1
    oh = (h + 2 * pad - kernel) // stride + 1
    geom = pdp.geometry(h, c, atom, oh, kernel, kernel, stride, stride, pad, pad,
                        [(w, ow, pad, pad)], on_flying=False, ram_type=1)
    unit, env = fake_unit(eng), eng.env
    chunks = pdp.read_chunks([w], -(-c // atom), h, token_atoms(eng.timing))
    eng.timing.announce(pdp.CH_RDMA)
    env.process(pdp.rdma(unit, chunks, 1))
    done = env.process(pdp.core(unit, geom))
    env.run(until=done)
    eng.timing.finish()
    return env.now, eng


# -- memory interface ---------------------------------------------------------------------------
def memif(profile="rtl_testbench", **over):
    eng = Engine(NV_SMALL, load_memory_profile({"profile": profile, **over}))
    return eng, eng.mcif


def test_rtl_testbench_read_times():
    """One request every 2 cycles, data exactly 32 cycles after acceptance."""
    _, m = memif()
    one = m.reserve("A", "read", 8)
    assert (one.start, one.first, one.last, one.port_free) == (0, 32, 32, 2)
    eight = m.reserve("A", "read", 64)            # 8 single-beat requests, from cycle 2
    assert (eight.start, eight.first, eight.last, eight.port_free) == (2, 34, 48, 18)
    assert eight.beat(3) == 40


def test_clients_alternate_request_by_request():
    """Two clients that each book one 8-beat request and wait for the port share it in turn."""
    eng, m = memif()
    order = []

    def client(name):
        for _ in range(3):
            tr = m.reserve(name, "read", 64)
            order.append((tr.start, name))
            yield eng.env.timeout(tr.port_free - eng.env.now)

    eng.env.process(client("CDMA_DAT"))
    eng.env.process(client("CDMA_WT"))
    eng.env.run()
    assert [name for _, name in sorted(order)] == ["CDMA_DAT", "CDMA_WT"] * 3
    assert sorted(order)[-1][0] == 5 * 16
    assert m.bytes_by_client["CDMA_WT"]["read"] == 3 * 64


def test_outstanding_limit_caps_the_request_rate():
    """10 reads in flight, 100-cycle latency, 1-beat requests: one request per 10.1 cycles."""
    _, m = memif(read_latency_cycles=100, max_outstanding_reads=10, read_request_interval_cycles=1)
    tr = m.reserve("A", "read", 8 * 11)
    assert tr.last == pytest.approx(10 * 10.1 + 100)


def test_writes_follow_the_data_and_the_bandwidth_cap():
    _, m = memif(write_latency_cycles=5)
    tr = m.reserve("W", "write", 5 * 8, ready_first=0, ready_last=80)
    assert tr.last == 80 and tr.done == 85             # last request when the last data is ready
    _, capped = memif(bandwidth_gbps=2.0, read_request_interval_cycles=1)   # 2 B/cycle at 1 GHz
    tr = capped.reserve("A", "read", 10 * 8)
    assert tr.last - tr.first == pytest.approx(10 * 4 - 1)


# -- parameters ---------------------------------------------------------------------------------
def test_rates_scale_with_the_hardware():
    from nvdla_sim.timing import TimingParams
    small, large = TimingParams(NV_SMALL).rates, TimingParams(load_hardware("nv_large")).rates
    assert (small.pdp_cycles_per_atom, small.cacc_cycles_per_atom, small.cacc_credits) == (8, 9, 16)
    assert small.latency_fifo_atoms == 64 and small.macs_per_cycle == 64
    # nv_large: 32-byte atoms at 8 PDP elements/cycle; CACC 32 kernels at 16/cycle + RAM read
    assert (large.pdp_cycles_per_atom, large.cacc_cycles_per_atom, large.cacc_credits) == (4, 3, 64)
    assert large.stripe_atoms == 64 and large.macs_per_cycle == 64 * 32


def test_timing_overrides_are_checked():
    from nvdla_sim.errors import NvdlaSimError
    from nvdla_sim.timing import TimingParams
    assert TimingParams(NV_SMALL, {"glb": {"interrupt_cycles": 20}}).glb.interrupt_cycles == 20
    with pytest.raises(NvdlaSimError, match="unknown parameter 'interrupt'"):
        TimingParams(NV_SMALL, {"glb": {"interrupt": 20}})


# -- rules of the unit models -------------------------------------------------------------------
def test_csc_stripes():
    """16 while at least 32 remain, 8 while more than 16 remain, then the rest."""
    assert conv.stripes(40, 16, 8) == [16, 8, 16]
    assert conv.stripes(33, 16, 8) == [16, 8, 9]
    assert conv.stripes(6, 16, 8) == [6]
    assert conv.stripes(64, 16, 8) == [16, 16, 16, 16]


def test_kernel_groups_and_packages():
    g = conv.cdma_geometry(NV_SMALL, data_bytes=64, data_entries=8, weight_bytes=3 * 3 * 16 * 20,
                           byte_per_kernel=3 * 3 * 16, kernels=20, data_banks=1, weight_banks=1)
    assert g.group_atoms == (144, 144, 72)             # 8, 8 and 4 kernels of 144 bytes
    c = conv.csc_geometry(NV_SMALL, False, 5, 4, 3, 3, 16, 20)
    assert c.packages == 9 * 2 and c.group_kernels == (8, 8, 4) and c.stripes == (8, 12)
    img = conv.csc_geometry(NV_SMALL, True, 40, 2, 10, 1, 40, 8)
    assert img.stripes == (16, 16, 8) * 2 and img.packages == 10 * 5


def test_pdp_padding_bubbles():
    assert pdp.flush_windows(6, 1) == 6
    assert pdp.flush_windows(2, 2) == 1
    assert pdp.flush_windows(20, 1) == 7               # at most 7 pending windows
    assert pdp.bubbles(6, 8, 2) == 1                   # first = 6: flush - first + 1
    assert pdp.bubbles(2, 3, 0) == 0                   # pending outputs overlap the next line


def test_pdp_core_adds_bubble_atoms():
    """Core-bound PDP: 8 cycles per input atom plus 8 per bubble atom; with padding the time
    grows by exactly the documented bubbles."""
    plain, _ = run_pdp(w=8, h=8, c=8, kernel=3, stride=1, pad=0)
    padded, _ = run_pdp(w=8, h=8, c=8, kernel=3, stride=1, pad=2)
    # pad 2, stride 1, kernel 3: flush 2, first 1 -> 2 bubbles after each of 7 lines, 2 at the
    # end; vertically 2 bubble rows of 10 output atoms at the end of the (single) surface.
    assert padded - plain == 8 * (7 * 2 + 2 + 2 * 10)


def test_cdp_holds_and_flush():
    """The core ends at start + 8 per atom + 4 per missing pixel when chunks narrow + 4 per pixel
    of the last chunk (RTL bufferin), with the parameters of params.yaml."""
    eng = Engine(NV_SMALL)
    p = eng.timing.params
    geom = cdp.CdpGeometry(width=9, height=2, surfaces=1, lrn=False, ram_type=1)
    unit, env = fake_unit(eng), eng.env
    eng.timing.announce(cdp.CH_RDMA)
    env.process(cdp.rdma(unit, geom, 1))
    env.run(until=env.process(cdp.core(unit, geom)))
    eng.timing.finish()
    core_end = max(e for u, k, s, e, _ in eng.activity.spans if u == "CDP" and k == "busy")
    hold = p.cdp.hold_cycles_per_pixel
    # chunks 8, 1, 8, 1: two drops of 7 pixels, last chunk 1 pixel
    assert core_end == p.cdp.start_cycles + 8 * 18 + hold * (7 + 7 + 1)


# -- the model responds the right way ------------------------------------------------------------
READ_BOUND = dict(w=4, h=4, c=192, r=3, s=3, k=32)      # weights dominate: read-port bound


def test_lower_bandwidth_slows_a_memory_bound_convolution():
    base, _, _ = run_conv(**READ_BOUND)
    half, _, _ = run_conv(memory=load_memory_profile(
        {"profile": "rtl_testbench", "read_request_interval_cycles": 4}), **READ_BOUND)
    capped, _, _ = run_conv(memory=load_memory_profile(
        {"profile": "rtl_testbench", "read_request_interval_cycles": 1, "bandwidth_gbps": 2.0}),
        **READ_BOUND)
    assert half > 1.6 * base
    assert capped > 1.6 * base                          # 2 B/cycle: one 8-byte beat per 4 cycles


def test_higher_latency_slows_memory_bound_work():
    base, _, _ = run_conv(**READ_BOUND)
    slow, _, _ = run_conv(memory=load_memory_profile(
        {"profile": "rtl_testbench", "read_latency_cycles": 200}), **READ_BOUND)
    assert slow >= base + 150
    s_base, _ = run_pdp()
    s_slow, _ = run_pdp(memory=load_memory_profile(
        {"profile": "rtl_testbench", "read_latency_cycles": 200}))
    assert s_slow >= s_base + 150


def test_streaming_unit_becomes_memory_bound():
    """PDP needs 8 cycles per atom; a read every 16 cycles makes memory the limit."""
    fast, eng = run_pdp(w=32, h=32, c=8)
    atoms = 32 * 32
    assert fast == pytest.approx(8 * atoms, rel=0.05)
    slow, _ = run_pdp(w=32, h=32, c=8, memory=load_memory_profile(
        {"profile": "rtl_testbench", "read_request_interval_cycles": 16}))
    assert slow == pytest.approx(16 * atoms, rel=0.05)
    assert eng.mcif.bytes_by_client["PDP_RDMA"]["read"] == atoms * 8
    assert eng.mcif.bytes_by_client["PDP_WDMA"]["write"] == 16 * 16 * 8


def test_mac_bound_convolution_approaches_the_mac_array_peak():
    cycles, eng, macs = run_conv(w=28, h=28, c=64, r=3, s=3, k=64)
    peak = NV_SMALL.atomic_c * NV_SMALL.atomic_k
    assert 0.9 * peak <= macs / cycles <= peak
    large = load_hardware("nv_large")
    cycles_l, _, macs_l = run_conv(large, w=28, h=28, c=256, r=3, s=3, k=128)
    assert macs_l / cycles_l > 0.5 * large.atomic_c * large.atomic_k


# A kernel group is 3*3*128 = 1152 CBUF entries: 4 banks leave 3 weight banks (1544 entries),
# room for one group and a third of the next.
CBUF_BOUND = dict(w=5, h=5, c=128, r=3, s=3, k=32)


def test_smaller_cbuf_slows_a_convolution_that_no_longer_fits():
    full, eng, _ = run_conv(**CBUF_BOUND)
    small_hw = load_hardware("nv_small", {"cbuf": {"banks": 4}})
    small, eng_small, _ = run_conv(small_hw, **CBUF_BOUND)
    assert small > 1.1 * full
    assert eng_small.activity.totals()["CDMA_WT"].get("stall", 0) > 0    # the ring ran full
    assert not eng.activity.totals()["CDMA_WT"].get("stall", 0)
    assert eng_small.timing.cbuf_summary()["peak_entries"] <= 4 * 512 + 8
    with pytest.raises(UnsupportedError, match="kernel group"):
        run_conv(load_hardware("nv_small", {"cbuf": {"banks": 2}}), **CBUF_BOUND)


def test_token_size_changes_events_not_cycles():
    coarse, eng_c = run_pdp(w=64, h=16, c=16)
    fine, eng_f = run_pdp(w=64, h=16, c=16, timing={"dma": {"stream_token_atoms": 4}})
    assert fine == pytest.approx(coarse, rel=0.01)
    assert next(eng_f.env._eid) > 2 * next(eng_c.env._eid)


def test_events_grow_with_tokens_not_cycles(monkeypatch):
    """A 4x longer memory latency adds cycles but hardly any events (token by token: the
    reads PDP_RDMA books in the core's step, timing/dma.py `release`, save more events where
    the core, not the memory, is the bottleneck; they never add any)."""
    slow_memory = load_memory_profile({"profile": "rtl_testbench", "read_latency_cycles": 4 * 32,
                                       "read_request_interval_cycles": 16})
    _, fast = run_pdp(w=32, h=32, c=8)
    _, fast_slow = run_pdp(w=32, h=32, c=8, memory=slow_memory)
    monkeypatch.setenv("NVDLA_SIM_STREAM_READS", "0")
    _, eng = run_pdp(w=32, h=32, c=8)
    _, eng_slow = run_pdp(w=32, h=32, c=8, memory=slow_memory)
    assert next(eng_slow.env._eid) < 1.2 * next(eng.env._eid)
    assert next(fast.env._eid) < next(eng.env._eid)
    assert next(fast_slow.env._eid) <= next(eng_slow.env._eid)


# -- whole traces ---------------------------------------------------------------------------------
def _test_dir(name: str) -> Path:
    root = nvdla_hw_root()
    if root is None:
        pytest.skip(NO_CORPUS)
    return root / "verif" / "tests" / "trace_tests" / "nv_small" / name


def test_replay_reports_units_memory_and_cbuf(tmp_path):
    from nvdla_sim.conformance import TestOutcome, write_timeline
    from nvdla_sim.frontends.cfg_trace import parse_cfg
    from nvdla_sim.report.timing_summary import format_summary
    test = _test_dir("dc_6x8x192_3x3x192x32_int8_0")
    r = Engine(NV_SMALL).run(parse_cfg(test, 2))
    assert r.passed
    assert r.unit_stats["CSC"]["busy_cycles"] > 0 and r.unit_stats["CDMA_WT"]["busy_cycles"] > 0
    assert 0 < r.unit_stats["CSC"]["utilization"] <= 1
    assert r.unit_stats["CMAC_A"]["busy_cycles"] == r.unit_stats["CSC"]["busy_cycles"]
    assert r.memory_bytes["MCIF"]["CDMA_WT"]["read"] == 3 * 3 * 192 * 32
    assert 0 < r.cbuf["peak_entries"] <= r.cbuf["capacity_entries"]
    text = format_summary(r)
    assert "CDMA_DAT" in text and "CBUF peak" in text
    doc = TestOutcome(test.name, "pass", r.checks, r.cycles, result=r).to_json()
    assert doc["cycles"] == r.cycles and doc["timing"]["units"]["CSC"]["busy_cycles"] > 0
    json_path, png_path = write_timeline(r, tmp_path, test.name)
    events = json.loads(json_path.read_text())["traceEvents"]
    assert any(e.get("cat") == "stall" for e in events) and png_path.stat().st_size > 0


def test_calibration_against_rtl_cycles():
    """Median |error| <= 5 % and worst <= 20 % against the RTL cycle counts (rtl_testbench)."""
    root = nvdla_hw_root()
    if not CSV.is_file() or root is None:
        pytest.skip(f"calibration CSV ({CSV}) or trace corpus absent: {NO_CORPUS}")
    from nvdla_sim.timing.calibration import calibrate, summary
    rows = calibrate(CSV, root / "verif" / "tests" / "trace_tests" / "nv_small", NV_SMALL)
    s = summary(rows)
    assert s["median"] <= 0.05, s
    assert s["worst"] <= 0.20, s
    assert all(math.isfinite(r.model_cycles) and r.model_cycles > 0 for r in rows)
