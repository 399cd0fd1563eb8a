"""DLA deployment like TensorRT's: `precision: [int8, fp16]`, subnetworks split by GPU fallback
(at most 16 loadables per core) and the three memory pools per subnetwork
(compiler/subnetworks.py, docs/dla-deployment.md)."""
from __future__ import annotations

import contextlib
import io

import pytest
import yaml

from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.scenario.runner import execute, prepare
from nvdla_sim.scenario.schema import parse_scenario


def scenario(tmp_path, layers: list[dict], shape=(8, 16, 16), **fields):
    # direct convolution, uncompressed weights: the pool sizes below count plain weight bytes
    hw = {"preset": fields.pop("hardware", "xavier_dla"),
          "features": {"winograd": False, "weight_compression": False}}
    d = {"name": "dla", "hardware": hw,
         "network": {"input": list(shape), "layers": layers},
         "input": {"seed": 1}, "weights": {"seed": 1},
         "outputs": {"directory": str(tmp_path / "out"), "formats": ["json"], "plots": False}}
    d.update(fields)
    return parse_scenario(yaml.safe_load(yaml.safe_dump(d)), tmp_path)


def run(scn):
    with contextlib.redirect_stdout(io.StringIO()):
        return execute(prepare(scn))


CONV = {"name": "c1", "type": "conv", "out_channels": 32, "kernel": 3, "pad": 1, "relu": True}
LRN = {"name": "n1", "type": "lrn", "size": 5}
CONV2 = {"name": "c2", "type": "conv", "out_channels": 16, "kernel": 1}


# -- precision: [int8, fp16] -------------------------------------------------------------------

def test_int8_where_possible(tmp_path):
    rep = run(scenario(tmp_path, [CONV, CONV2], precision=["int8", "fp16"]))
    assert {r.precision for r in rep.rows} == {"INT8"}
    assert {p for p, _ in rep.deployment["precisions"].values()} == {"int8"}


def test_lrn_is_upgraded_to_fp16(tmp_path):
    """LRN cannot run INT8 on a TensorRT DLA: LRN runs FP16 between INT8 convolutions in one
    program (reformat passes, compiler/reformat.py); LRN's reason names the upgrade rule; values
    within the INT8 floor."""
    rep = run(scenario(tmp_path, [CONV, LRN, CONV2], precision=["int8", "fp16"]))
    assert {r.layer: r.precision for r in rep.rows} == {"c1": "INT8", "n1": "FP16", "c2": "INT8"}
    assert rep.precision == "INT8+FP16"
    why = rep.deployment["precisions"]
    assert why["n1"][0] == "fp16" and "[rule lrn.int8_upgrade]" in why["n1"][1]
    assert tuple(why["c1"]) == ("int8", "INT8 where possible")
    assert min(r.sqnr_db for r in rep.rows) > 25          # INT8 against float32
    # plain int8 keeps INT8 LRN (NVDLA's CDP runs it): the upgrade is the flag pair's
    rep8 = run(scenario(tmp_path, [CONV, LRN, CONV2], precision="int8"))
    assert {r.precision for r in rep8.rows} == {"INT8"}


def test_mixed_precision_overrides(tmp_path):
    rep = run(scenario(tmp_path, [CONV, CONV2], precision={"default": ["int8", "fp16"],
                                                           "layers": {"c2": "fp16"}}))
    assert tuple(rep.deployment["precisions"]["c2"]) == ("fp16", "precision.layers names fp16")
    assert {r.layer: r.precision for r in rep.rows} == {"c1": "INT8", "c2": "FP16"}
    # an INT8 override beside an upgraded LRN: kept (reformats around the LRN)
    rep = run(scenario(tmp_path, [CONV, LRN, CONV2], precision={
        "default": ["int8", "fp16"], "layers": {"c1": "int8"}}))
    assert tuple(rep.deployment["precisions"]["c1"]) == ("int8", "precision.layers names int8")
    with pytest.raises(NvdlaSimError, match=r"precision: a list of precisions must be \[int8, fp16\]"):
        scenario(tmp_path, [CONV], hardware="nv_full", precision=["int8", "int16"])


# -- subnetworks and pools ---------------------------------------------------------------------

GPU_POOL = {"name": "p1", "type": "pool", "method": "max", "kernel": 9, "stride": 1}


def test_fallback_splits_into_subnetworks(tmp_path):
    rep = run(scenario(tmp_path, [CONV, GPU_POOL, CONV2], memory={"cvsram_bytes": 0}))
    subs = rep.deployment["subnetworks"]
    assert [s["layers"] for s in subs] == [["c1"], ["c2"]]
    assert subs[0]["gpu_before"] == [] and subs[1]["gpu_before"] == ["p1"]
    assert sum(s["cycles"] for s in subs) == pytest.approx(rep.total_cycles)
    # pools from the placement: weights (32x8x3x3 and 16x32x1x1 INT8, 128-byte multiples) plus
    # the small SDP operand arrays; no intermediate tensor inside a one-layer subnetwork
    assert 32 * 8 * 9 <= subs[0]["pools"]["global_dram"] < 32 * 8 * 9 + 1024
    assert 16 * 32 <= subs[1]["pools"]["global_dram"] < 16 * 32 + 1024
    assert all(s["pools"]["local_dram"] == 0 and s["pools"]["managed_sram"] == 0 for s in subs)


def test_local_dram_holds_the_intermediate_tensors(tmp_path):
    """c1 -> c2 inside one subnetwork: c1's output (32 channels x 16 x 16, one 32-channel INT8
    atom per pixel) is its local DRAM; with CVSRAM it goes to managed SRAM instead."""
    rep = run(scenario(tmp_path, [CONV, CONV2], memory={"cvsram_bytes": 0}))
    (sub,) = rep.deployment["subnetworks"]
    assert sub["pools"]["local_dram"] == 32 * 16 * 16
    rep = run(scenario(tmp_path, [CONV, CONV2], memory_pools={"managed_sram": "64KiB"}))
    (sub,) = rep.deployment["subnetworks"]
    assert sub["pools"]["local_dram"] == 0
    assert 32 * 16 * 16 <= sub["pools"]["managed_sram"] <= 64 << 10


def test_pool_overflow_errors_or_falls_back(tmp_path):
    layers = [CONV, GPU_POOL, {"name": "c3", "type": "conv", "out_channels": 128, "kernel": 3,
                               "pad": 1}, CONV2]
    pools = {"local_dram": "4KiB", "global_dram": "8KiB"}
    with pytest.raises(NvdlaSimError, match=r"subnetwork 0 \(c1\.\.c2\) needs \d+ bytes of "
                                            r"local_dram, memory_pools.local_dram is 4096 "
                                            r"\[rule pool.local_dram\]"):
        run(scenario(tmp_path, [CONV] + layers[2:], memory={"cvsram_bytes": 0},
                     memory_pools=pools, gpu_fallback=False))
    rep = run(scenario(tmp_path, layers, memory={"cvsram_bytes": 0}, memory_pools=pools))
    dev = {r.layer: r.device for r in rep.rows}
    assert dev == {"c1": "DLA", "p1": "GPU", "c3": "GPU", "c2": "GPU"}
    assert "[rule pool.local_dram]" in next(r.note for r in rep.rows if r.layer == "c3")
    assert [s["layers"] for s in rep.deployment["subnetworks"]] == [["c1"]]


@pytest.mark.parametrize("pools, message", [
    ({"managed_sram": 3000}, "memory_pools.managed_sram: a DLA memory pool must be a power of two of at least 4 KiB, got 3000"),
    ({"local_dram": "2KiB"}, "memory_pools.local_dram: a DLA memory pool must be a power of two of at least 4 KiB, got 2048"),
    ({"global_dram": "3 MiB"}, "memory_pools.global_dram: a DLA memory pool must be a power of two"),
    ({"global_dram": "lots"}, "memory_pools.global_dram: must be an integer"),
    ({"l2": 4096}, "memory_pools.l2: unknown field"),
])
def test_bad_pools_are_one_line_errors(tmp_path, pools, message):
    with pytest.raises(NvdlaSimError, match=message.replace("(", r"\(")):
        scenario(tmp_path, [CONV], memory_pools=pools)


def test_pools_need_a_dla_preset(tmp_path):
    with pytest.raises(NvdlaSimError, match="memory_pools: nv_full is not a DLA preset"):
        scenario(tmp_path, [CONV], hardware="nv_full", memory_pools={})
    scn = scenario(tmp_path, [CONV], hardware="orin_dla")
    assert scn.memory_pools == {"managed_sram": 512 << 10, "local_dram": 1 << 30,
                                "global_dram": 512 << 20}
    assert scn.memory.cvsram_bytes == 1 << 20                 # Orin: 1 MiB SRAM per core


def chain(n: int) -> list[dict]:
    """n DLA convolutions, each pair separated by a GPU-fallback pooling: n subnetworks."""
    layers = []
    for i in range(n):
        layers.append({"name": f"c{i}", "type": "conv", "out_channels": 8, "kernel": 1})
        if i < n - 1:
            layers.append({"name": f"g{i}", "type": "pool", "method": "max", "kernel": 9,
                           "stride": 1, "pad": 4})
    return layers


def test_at_most_16_loadables_per_core(tmp_path):
    rep = run(scenario(tmp_path, chain(16), shape=(8, 4, 4), mode="timing"))
    assert len(rep.deployment["subnetworks"]) == 16
    with pytest.raises(NvdlaSimError, match=r"17 DLA subnetworks \(loadables\) on one core, at "
                                            r"most 16 \[rule general.loadables\]"):
        run(scenario(tmp_path, chain(17), shape=(8, 4, 4), mode="timing"))


def test_larger_managed_sram_is_faster(tmp_path):
    """The managed-SRAM pool as a sweep axis (`memory_pools.managed_sram`): ResNet-50's tensors
    that fit it leave DRAM, so the run moves fewer DRAM bytes and takes fewer cycles."""
    from nvdla_sim.sweep.spec import load_sweep
    spec = tmp_path / "sweep.yaml"
    spec.write_text(yaml.safe_dump({
        "base": {"hardware": "xavier_dla", "network": "resnet50", "mode": "timing",
                 "memory": {"dram_gbps": 20}},
        "grid": {"memory_pools.managed_sram": [4096, 1 << 20]}}))
    points = load_sweep(spec).points
    reps = []
    for p in points:
        scn = parse_scenario(p.scenario, tmp_path)
        scn.outputs.formats, scn.outputs.plots = (), False
        reps.append(run(scn))
    small, large = reps
    assert small.deployment["pool_limits"]["managed_sram"] == 4096
    assert large.deployment["subnetworks"][0]["pools"]["managed_sram"] > 4096
    assert large.total_dram_bytes < small.total_dram_bytes
    assert large.total_cycles < small.total_cycles
