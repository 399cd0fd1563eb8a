"""Runs of identical tokens booked in one step (issue 20) give the run every token on its own
gives.  Reference: the same program with NVDLA_SIM_TOKEN_RUNS=0 (each CDMA request booked by
`MemoryInterface.reserve`, each token handed to a waiting process through the event queue, each
CSC stripe handed to CACC through its channel instead of `CaccDelivery.step`).
Compared with `==`: every layer's start, end, bytes and bound, each interface's bytes per client,
every per-request transfer record, every busy/stall span of the activity log and the CBUF peak;
and the runs must have been used (fewer SimPy events, CDMA requests booked by `read_run`)."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from nvdla_sim.compiler.lower import lower_and_run
from nvdla_sim.engine.memif import MemoryInterface
from nvdla_sim.scenario.runner import context, prepare
from nvdla_sim.scenario.schema import load_scenario, parse_scenario
from nvdla_sim.timing.tokens import Pool, Tracker

ROOT = Path(__file__).resolve().parent.parent


def _bottleneck(name: str, src: str, c_in: int, mid: int, stride: int, project: bool) -> list:
    layers = [{"name": f"{name}_2a", "type": "conv", "input": src, "out_channels": mid,
               "kernel": 1, "stride": stride, "relu": True},
              {"name": f"{name}_2b", "type": "conv", "out_channels": mid, "kernel": 3, "pad": 1,
               "relu": True},
              {"name": f"{name}_2c", "type": "conv", "out_channels": 4 * mid, "kernel": 1}]
    short = src
    if project:
        layers.append({"name": f"{name}_1", "type": "conv", "input": src, "out_channels": 4 * mid,
                       "kernel": 1, "stride": stride})
        short = f"{name}_1"
    layers.append({"name": name, "type": "add", "input": [f"{name}_2c", short], "relu": True})
    return layers


# ResNet-50's first layers at their sizes: conv1, pool1, res2a (projection) and res2b, then
# res3a's strided projection block (56x56 -> 28x28).
RESNET_BLOCKS = {"name": "resnet50_blocks", "input": [3, 224, 224],
                 "layers": [{"name": "conv1", "type": "conv", "out_channels": 64, "kernel": 7,
                             "stride": 2, "pad": 3, "relu": True},
                            {"name": "pool1", "type": "pool", "method": "max", "kernel": 3,
                             "stride": 2, "pad": 1}]
                 + _bottleneck("res2a", "pool1", 64, 64, 1, True)
                 + _bottleneck("res2b", "res2a", 256, 64, 1, False)
                 + _bottleneck("res3a", "res2b", 256, 128, 2, True)}


def _scenarios():
    yield "resnet50_blocks_nv_small", parse_scenario(
        {"hardware": "nv_small", "mode": "timing-only", "network": RESNET_BLOCKS,
         "memory": {"dram_gbps": 10, "dram_latency_ns": 100}}, None)
    yield "googlenet_nv_small", replace(load_scenario(ROOT / "scenarios" / "googlenet_nv_small.yaml"),
                                        mode="timing-only")


def _run(prep, runs: bool, monkeypatch) -> dict:
    monkeypatch.setenv("NVDLA_SIM_TOKEN_RUNS", "1" if runs else "0")
    monkeypatch.setenv("NVDLA_SIM_COARSE_STRIPES", "0")     # exact: test_speed_stripes.py
    res = lower_and_run(prep.plan, replace(context(prep), timeline=True))
    engine = res.engine_result.engine
    booked = sum(m.run_requests for m in (engine.mcif, engine.cvif) if m is not None)
    return {**run_record(res), "run_requests": booked}


def run_record(res) -> dict:
    """What a timing shortcut must leave as it was: every layer's start, end, bytes and bound,
    the total, the bytes per client, every transfer record in booking order, every activity
    span, the CBUF peak; and the SimPy events the run scheduled."""
    from nvdla_sim.timing.sdp import kept_event_numbers
    engine = res.engine_result.engine
    return {
        "layers": [(t.name, t.start_cycle, t.end_cycle, t.dram_read_bytes, t.dram_write_bytes,
                    t.bound) for t in res.layers],
        "total": res.total_cycles,
        "bytes": {m.name: m.bytes_by_client for m in (engine.mcif, engine.cvif) if m is not None},
        "transfers": {m.name: m.transfers for m in (engine.mcif, engine.cvif) if m is not None},
        "spans": sorted(engine.activity.spans),
        "cbuf_peak": engine.timing.cbuf_peak_entries,
        "events": next(engine.env._eid) - kept_event_numbers(engine.env),
    }


@pytest.mark.parametrize("name,scn", list(_scenarios()), ids=lambda v: v if isinstance(v, str) else "")
def test_token_runs_give_the_cycles_bytes_and_spans_of_single_tokens(name, scn, monkeypatch):
    prep = prepare(scn)
    fast, single = _run(prep, True, monkeypatch), _run(prep, False, monkeypatch)
    assert single["run_requests"] == 0
    assert fast["run_requests"] > 1000, "the runs were not used"
    assert fast["events"] < 0.9 * single["events"], "the relays still go through the queue"
    for key in ("layers", "total", "bytes", "transfers", "spans", "cbuf_peak"):
        assert fast[key] == single[key], key
    assert fast["transfers"]["MCIF"], "the transfers were recorded"


class _Env:
    """Just the clock and queue `read_run` reads."""

    def __init__(self, now: float, due: list):
        self._now = now
        self._queue = [(t, 1, i, None) for i, t in enumerate(due)]


def _loop(memif: MemoryInterface, env: _Env, pool: Pool, tracker: Tracker, count: int,
          nbytes: int, need: float) -> tuple[int, float]:
    """The CDMA request loop written the plain way: sleep, grant, reserve, busy."""
    port_free, booked = memif._port_free["read"], 0
    peek = env._queue[0][0] if env._queue else float("inf")
    while booked < count:
        if port_free > env._now:
            wake = env._now + (port_free - env._now)
            if not wake < peek:
                break
        elif not peek > env._now:
            break
        else:
            wake = env._now
        if not need <= pool.free + 1e-6:
            break
        env._now = wake
        pool.free -= need
        pool.peak = max(pool.peak, pool.capacity - pool.free)
        tr = memif.reserve("CDMA_WT", "read", nbytes)
        tracker.busy(tr.port_free - tr.port_cycles, tr.port_free, "read")
        port_free = tr.port_free
        booked += 1
    return booked, port_free


@pytest.mark.parametrize("profile,clock,bytes_,due,credits", [
    ("dram", 1000.0, 64, [], 10_000),            # nv_small: 8 single-beat requests, shared cap
    ("dram", 1000.0, 512, [333.3], 10_000),      # an event due: the run stops before it
    ("dram", 700.0, 256, [], 70.5),              # credits run out (fractional CBUF entries)
    ("rtl_testbench", 1000.0, 256, [], 10_000),
    ("ddr4_2400", 1300.0, 96, [1e5], 10_000),    # refresh and row misses: non-integer cycles
])
@pytest.mark.parametrize("record,open_end", [(True, 17.25), (False, 17.25), (False, 10.0)])
def test_read_run_books_as_the_request_loop(profile, clock, bytes_, due, credits, record,
                                            open_end):
    """The C loop (kernels/read_run.pyx) against the plain loop, with transfers recorded or
    not; `open_end` 10: the open busy span ends before the first request, which opens a new
    one."""
    from nvdla_sim.engine.activity import ActivityLog
    from nvdla_sim.engine.memif import load_memory_profile
    runs = []
    for one_call in (True, False):
        env = _Env(17.25, due)
        memif = MemoryInterface(env, "MCIF", load_memory_profile(profile), 8, clock,
                                record_transfers=record)
        memif._memory_free = 40.1                 # writes earlier on the shared cap
        memif._bus_free["read"] = 20.0
        pool = Pool(env, "weights", credits)
        log = ActivityLog()
        tracker = Tracker(log, "CDMA_WT")
        tracker.busy(0.0, open_end, "read")
        if one_call:
            out = memif.read_run("CDMA_WT", bytes_, 500, memif._port_free["read"], pool, 1.5,
                                 tracker, "read")
        else:
            out = _loop(memif, env, pool, tracker, 500, bytes_, 1.5)
        tracker.flush()
        runs.append((out, env._now, pool.free, pool.peak, memif._port_free, memif._bus_free,
                     memif._memory_free, memif.bytes_by_client, memif.transfers, log.spans))
    assert runs[0] == runs[1]
    assert runs[0][0][0] > 1
