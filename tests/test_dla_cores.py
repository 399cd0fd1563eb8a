"""`dla_cores: 2`: two NVDLA cores on one SimPy environment sharing the DRAM (and Xavier's SRAM)
(compiler/multicore.py, engine/multicore.py).  References: the single-core run of the same
program (cycles and values bit for bit), the sequential run of both images, and the DRAM
bandwidth law (bytes moved / the cap is a floor on the makespan)."""
from __future__ import annotations

import contextlib
import io
import json
from dataclasses import replace

import numpy as np
import pytest
import yaml

from nvdla_sim.compiler.lower import lower, run_lowered
from nvdla_sim.compiler.multicore import alone_cycles, dram_footprint, next_dram_base, run_cores
from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.report.tables import format_console
from nvdla_sim.scenario.runner import context, execute, prepare
from nvdla_sim.scenario.schema import parse_scenario

CONV = {"name": "c1", "type": "conv", "out_channels": 32, "kernel": 3, "pad": 1, "relu": True}
POOL = {"name": "p1", "type": "pool", "method": "max", "kernel": 2, "stride": 2}
CONV2 = {"name": "c2", "type": "conv", "out_channels": 64, "kernel": 1}
FC = {"name": "fc", "type": "fc", "out_features": 10}


def scenario(tmp_path, preset="nv_large", mode="timing", layers=(CONV, POOL, CONV2, FC),
             shape=(16, 16, 16), **fields):
    d = {"name": "cores", "hardware": preset, "mode": mode,
         "network": {"input": list(shape), "layers": list(layers)},
         "input": {"seed": 1}, "weights": {"seed": 1},
         "outputs": {"directory": str(tmp_path / "out"), "formats": ["json"], "plots": False}}
    d.update(fields)
    return parse_scenario(yaml.safe_load(yaml.safe_dump(d)), tmp_path)


def lowered_pair(scn, second_seed: int = 2):
    """Core 0's and core 1's (lowered, ctx): the same network, core 1 on another image and at
    the next DRAM region."""
    prep = prepare(scn)
    ctx = context(prep)
    low0 = lower(prep.plan, ctx)
    prep1 = prepare(replace(scn, input=replace(scn.input, seed=second_seed)))
    ctx1 = context(prep1)
    low1 = lower(prep1.plan, ctx1, dbb_base=next_dram_base(low0))
    return (low0, ctx), (low1, ctx1), prep1


def test_one_core_alone_has_the_single_core_cycles(tmp_path, monkeypatch):
    # (without run_lowered's repeated-step cache, which replays to a few ulps)
    monkeypatch.setenv("NVDLA_SIM_NO_STEP_CACHE", "1")
    for preset, memory in (("nv_large", {}), ("xavier_dla", {"cvsram_bytes": 1 << 20})):
        scn = scenario(tmp_path, preset, memory=memory)
        prep = prepare(scn)
        ctx = context(prep)
        single = run_lowered(lower(prep.plan, ctx), ctx)
        [core] = run_cores([(lower(prep.plan, ctx), ctx)], share_cvsram=True)
        assert core.result.total_cycles == single.total_cycles > 0
        assert [(t.name, t.start_cycle, t.end_cycle, t.dram_read_bytes, t.cvsram_read_bytes)
                for t in core.result.layers] == \
            [(t.name, t.start_cycle, t.end_cycle, t.dram_read_bytes, t.cvsram_read_bytes)
             for t in single.layers]


def test_two_cores_contend_for_the_dram(tmp_path):
    # 10 GB/s at 1 GHz: 10 bytes per cycle for both cores
    (low0, ctx0), (low1, ctx1), _ = lowered_pair(scenario(tmp_path))
    alone = alone_cycles(low0, ctx0)
    runs = run_cores([(low0, ctx0), (low1, ctx1)], share_cvsram=False)
    latencies = [r.result.total_cycles for r in runs]
    makespan = max(latencies)
    for lat in latencies:
        assert lat > 1.2 * alone                 # slower per core than alone...
    assert makespan < 2 * alone                  # ...faster than one core doing both in turn
    moved = sum(t.dram_read_bytes + t.dram_write_bytes for r in runs for t in r.result.layers)
    cap = ctx0.dram.bytes_per_cycle_cap(ctx0.clock_mhz)
    assert makespan >= moved / cap               # the shared cap bounds both cores together
    # each core moves the bytes it moves alone
    single = run_lowered(low0, ctx0)
    assert sum(t.dram_read_bytes for t in runs[1].result.layers) == \
        sum(t.dram_read_bytes for t in single.layers)


def test_uncapped_memory_does_not_couple_the_cores(tmp_path, monkeypatch):
    monkeypatch.setenv("NVDLA_SIM_NO_STEP_CACHE", "1")
    # rtl_testbench: no bandwidth cap, so the shared memory is no bottleneck in this model;
    # each core keeps its own request ports, outstanding reads and data bus
    scn = scenario(tmp_path, memory={"profile": "rtl_testbench"})
    scn = replace(scn, memory=replace(scn.memory, dram=replace(scn.memory.dram,
                                                               bandwidth_gbps=None)))
    (low0, ctx0), (low1, ctx1), _ = lowered_pair(scn)
    alone = alone_cycles(low0, ctx0)
    runs = run_cores([(low0, ctx0), (low1, ctx1)], share_cvsram=False)
    assert [r.result.total_cycles for r in runs] == [alone, alone]


def test_values_are_the_single_core_values_bit_for_bit(tmp_path):
    scn = scenario(tmp_path, mode="values+timing")
    (low0, ctx0), (low1, ctx1), prep1 = lowered_pair(scn)
    lo0, hi0 = dram_footprint(low0)
    lo1, _ = dram_footprint(low1)
    assert lo1 >= hi0                            # core 1's tensors after core 0's
    runs = run_cores([(low0, ctx0), (low1, ctx1)], share_cvsram=False)
    e0, e1 = (r.result.engine_result.engine for r in runs)
    assert e0.memory.primary is e1.memory.primary        # one DRAM holds both
    single0 = run_lowered(lower(prepare(scn).plan, ctx0), ctx0)
    single1 = run_lowered(lower(prep1.plan, ctx1), ctx1)        # core 1's image at base 0
    for run, single in ((runs[0], single0), (runs[1], single1)):
        assert run.result.outputs.keys() == single.outputs.keys()
        for name, cube in single.outputs.items():
            np.testing.assert_array_equal(run.result.outputs[name], cube)
    out = next(iter(single0.outputs))
    assert not np.array_equal(runs[0].result.outputs[out], runs[1].result.outputs[out])


def test_xavier_shares_the_sram_bandwidth_orin_does_not(tmp_path):
    # Xavier's SRAM is shared by both cores: its CVIF bandwidth too
    scn = scenario(tmp_path, "xavier_dla", memory={"cvsram_bytes": 1 << 20, "cvsram_gbps": 4,
                                                   "dram_gbps": 1000})
    (low0, ctx0), (low1, ctx1), _ = lowered_pair(scn)
    assert any(t.cvsram_read_bytes for t in run_lowered(low0, ctx0).layers)
    shared = run_cores([(low0, ctx0), (low1, ctx1)], share_cvsram=True)
    apart = run_cores([(low0, ctx0), (low1, ctx1)], share_cvsram=False)
    assert max(r.result.total_cycles for r in shared) > max(r.result.total_cycles for r in apart)


def run(scn):
    with contextlib.redirect_stdout(io.StringIO()) as out:
        rep = execute(prepare(scn))
    return rep, out.getvalue()


def test_scenario_report_has_the_cores_section(tmp_path):
    rep, _ = run(scenario(tmp_path, "xavier_dla", dla_cores=2, mode="values+timing"))
    cores = rep.cores
    assert cores["dla_cores"] == 2 and cores["sram_shared"]
    c0, c1 = cores["cores"]
    assert rep.total_cycles == c0["latency_cycles"]
    assert cores["makespan_cycles"] == max(c0["latency_cycles"], c1["latency_cycles"])
    ms = cores["makespan_cycles"] / (rep.clock_mhz * 1e3)
    assert cores["images_per_s"] == pytest.approx(2 * 1000 / ms)
    for c in (c0, c1):
        assert c["latency_cycles"] >= c["alone_cycles"]
        assert c["output_sqnr_db"] > 20
        assert c["layers"][-1]["end_cycle"] == c["latency_cycles"]
    assert c1["dram_base"] >= c0["dram_base"] + c0["dram_footprint_bytes"]
    saved = json.loads((tmp_path / "out" / "report.json").read_text())
    assert saved["cores"]["images"] == 2
    text = format_console(rep)
    assert "DLA cores: 2 sharing the DRAM and the SRAM" in text and "images/s" in text


def test_second_network(tmp_path):
    rep, _ = run(scenario(tmp_path, "orin_dla", dla_cores=2, mode="values+timing",
                          second_network="lenet5"))
    c0, c1 = rep.cores["cores"]
    assert (c0["network"], c1["network"]) == ("network", "lenet5")
    assert not rep.cores["sram_shared"]
    assert c1["alone_cycles"] != c0["alone_cycles"]
    assert c1["output_sqnr_db"] > 20


@pytest.mark.parametrize("fields, message", [
    ({"hardware": "xavier_dla", "dla_cores": 3}, "dla_cores: must be <= 2 (xavier_dla has 2 DLA cores)"),
    ({"dla_cores": 3}, "dla_cores: must be <= 2 (a non-DLA preset runs at most 2 instances"),
    ({"dla_cores": 0}, "dla_cores: must be >= 1"),
    ({"dla_cores": 1.5}, "dla_cores"),
    ({"second_network": "lenet5"}, "second_network: needs dla_cores: 2"),
    ({"dla_cores": 2, "second_network": "nosuch"}, "second_network.builtin: unknown network 'nosuch'"),
    ({"dla_cores": 2, "second_network": {"builtin": "lenet5", "onnx": "x.onnx"}},
     "second_network: give exactly one of"),
    ({"hardware": "xavier_dla", "dla_cores": 2, "memory_pools": {"managed_sram": "4MiB"}},
     "memory_pools.managed_sram: 2 cores' managed SRAM pools (2 x 4096 KiB) exceed the 4 MiB SRAM"),
])
def test_bad_fields_are_one_line_errors(tmp_path, fields, message):
    preset = fields.pop("hardware", "nv_large")
    with pytest.raises(NvdlaSimError) as exc:
        scenario(tmp_path, preset, **fields)
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_orin_pools_are_per_core(tmp_path):
    # Orin: 1 MiB of SRAM per core, so two 1 MiB pools are fine
    scn = scenario(tmp_path, "orin_dla", dla_cores=2, memory_pools={"managed_sram": "1MiB"})
    assert scn.dla_cores == 2 and scn.second_network is None


def test_batch_and_gpu_fallback_on_two_cores(tmp_path):
    # nv_full batch 2 on each core, a GPU-fallback layer between DLA layers (LRN of size 4 is
    # not an NVDLA window), values mode: each core's images equal the single-core run's
    lrn = {"name": "n1", "type": "lrn", "size": 4}
    scn = scenario(tmp_path, "nv_full", mode="values+timing", batch=2,
                   layers=(CONV, lrn, CONV2, FC))
    (low0, ctx0), (low1, ctx1), prep1 = lowered_pair(scn)
    assert any(step.gpu for step in low0.steps)
    assert dram_footprint(low1)[0] >= dram_footprint(low0)[1]
    runs = run_cores([(low0, ctx0), (low1, ctx1)], share_cvsram=False)
    single1 = run_lowered(lower(prep1.plan, ctx1), ctx1)
    assert len(runs[1].result.batch_outputs) == 2
    for got, want in zip(runs[1].result.batch_outputs, single1.batch_outputs):
        for name, cube in want.items():
            np.testing.assert_array_equal(got[name], cube)


def test_api_and_sweep_points_run_both_cores(tmp_path):
    from nvdla_sim.api import run as api_run
    from nvdla_sim.sweep.point import run_scenario_point
    d = {"hardware": "nv_large", "mode": "timing", "dla_cores": 2,
         "network": {"input": [16, 16, 16], "layers": [CONV, POOL, CONV2, FC]},
         "outputs": {"directory": str(tmp_path / "o"), "formats": ["json"], "plots": False}}
    rep = api_run(d).report
    assert rep.cores["dla_cores"] == 2
    one = run_scenario_point({**d, "dla_cores": 1}, str(tmp_path))
    two = run_scenario_point(d, str(tmp_path))
    assert two["cycles"] == rep.cores["cores"][0]["latency_cycles"] > one["cycles"]
    # the sweep's fps column: both cores' images over the makespan
    from nvdla_sim.sweep.results import metric_columns
    scn = parse_scenario(d, tmp_path)
    assert metric_columns(two, scn, {})["fps"] == rep.cores["images_per_s"]
    assert metric_columns(one, scn, {})["fps"] == pytest.approx(1e9 / one["cycles"])
