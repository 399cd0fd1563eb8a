"""Sparse weight compression chosen by the compiler (`weight_compression: auto` on nv_full) on
pruned networks (`weights: {sparsity, pattern}`): the WMB / WGS / compressed surfaces the
program loads decompress to the dense weight image packed here; values equal the dense run's;
the CDMA weight port fetches the compressed bytes plus the masks."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nvdla_sim import formats
from nvdla_sim.compiler.lower import lower
from nvdla_sim.compiler.network import Network, Shape
from nvdla_sim.datatype import INT8
from nvdla_sim.engine import Engine
from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.program import MemLoad
from nvdla_sim.scenario.runner import context, prepare
from nvdla_sim.scenario.schema import parse_scenario
from nvdla_sim.scenario.weights import prune, random_weights

REPO = Path(__file__).resolve().parent.parent
LAYERS = [{"type": "conv", "name": "c1", "out_channels": 40, "kernel": 3, "pad": 1, "relu": True},
          {"type": "conv", "name": "c2", "out_channels": 24, "kernel": 1, "relu": True},
          {"type": "fc", "name": "fc", "out_features": 10}]


def scenario(precision="int8", sparsity=0.5, pattern="random", **extra):
    weights = {"seed": 3, "sparsity": sparsity, "pattern": pattern}
    data = {"name": "sparse", "hardware": "nv_full", "precision": precision,
            "network": {"input": [37, 8, 8], "layers": LAYERS}, "input": {"seed": 2},
            "weights": weights, "winograd": "off", **extra}
    return parse_scenario(data, REPO)


def run(scn, compute_values=True):
    prep = prepare(scn)
    ctx = context(prep)
    lowered = lower(prep.plan, ctx)
    engine = Engine(ctx.hw, ctx.dram, ctx.clock_mhz, compute_values=compute_values)
    result = engine.run(lowered.program)
    return prep, lowered, engine, result


def loads(program) -> dict[str, np.ndarray]:
    return {c.source: c.data for c in program.commands if isinstance(c, MemLoad)}


def weight_port_bytes(result) -> int:
    total = 0
    for clients in result.memory_bytes.values():
        entry = clients.get("CDMA_WT")
        if entry:
            total += entry.get("read", 0) if isinstance(entry, dict) else entry
    return total


@pytest.mark.parametrize("precision", ["int8", "int16", "fp16"])
def test_compressed_surfaces_decompress_to_the_dense_weights(precision):
    prep, lowered, _, _ = run(scenario(precision))
    images = loads(lowered.program)
    convs = [layer for layer in prep.plan.layers if layer.kind == "conv"]
    assert all(layer.lowering.get("compress") for layer in convs)
    dtype = prep.plan.layer_dtype(convs[0])
    group = formats.kernel_group(prep.scenario.hardware.atomic_k, dtype)
    for layer in convs:
        w = layer.quant.weight
        dense = formats.pack_direct_weights(w, dtype, prep.scenario.hardware.atomic_c, group)
        k = w.shape[0]
        bpk = int(np.prod(w.shape[1:])) * dtype.bytes
        got = formats.decompress_weights(images[f"{layer.name}_wmb"], images[f"{layer.name}_wgs"],
                                         images[f"{layer.name}_weights"], dtype, k, bpk, group)
        np.testing.assert_array_equal(got, dense[:k * bpk])


@pytest.mark.parametrize("winograd", ["off", "auto"])
def test_values_equal_the_dense_run(winograd):
    outs = {}
    for mode in ("auto", "off"):
        prep, lowered, engine, _ = run(scenario("int8", weight_compression=mode,
                                                winograd=winograd))
        compressed = [layer.name for layer in prep.plan.layers if layer.lowering.get("compress")]
        assert bool(compressed) == (mode == "auto")
        from nvdla_sim.compiler.emit import read_output
        outs[mode] = {name: read_output(engine, p) for name, p in lowered.buffers.items()}
    for name in outs["off"]:
        np.testing.assert_array_equal(outs["auto"][name], outs["off"][name])


def test_weight_port_fetches_compressed_bytes_plus_masks():
    """Each compressed layer: the compressed surface, the WMB and the WGS words (whole 32-byte
    atoms); timing-only runs fetch the same bytes."""
    scn = scenario("int8")
    prep, lowered, _, result = run(scn)
    images = loads(lowered.program)
    expected = dense_total = 0
    for layer in (x for x in prep.plan.layers if x.kind == "conv"):
        groups = -(-layer.quant.weight.shape[0] // 32)
        expected += images[f"{layer.name}_weights"].size + images[f"{layer.name}_wmb"].size \
            + -(-4 * groups // 32) * 32
        dense_total += formats.pack_direct_weights(layer.quant.weight, INT8).size
    assert weight_port_bytes(result) == expected < dense_total
    scn_t = scenario("int8", mode="timing")
    _, _, _, timing = run(scn_t, compute_values=False)
    assert weight_port_bytes(timing) == expected


def test_dense_weights_are_not_compressed():
    prep, _, _, _ = run(scenario("int8", sparsity=0.0))
    assert not any(layer.lowering.get("compress") for layer in prep.plan.layers)


def test_two_of_four_pruning():
    net = Network("n", "data", Shape(10, 4, 4))
    net.conv("c", "data", 6, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, True, False, False)
    w = random_weights(net, 1)
    pruned = prune(net, w, 0.5, "2:4")["c"]["weight"]
    blocks = pruned[:, :8].reshape(6, 2, 4, 3, 3)
    assert np.all((blocks == 0).sum(axis=2) == 2)
    kept = np.sort(np.abs(w["c"]["weight"][:, :8].reshape(6, 2, 4, 3, 3)), axis=2)[:, :, 2:]
    np.testing.assert_array_equal(np.sort(np.abs(blocks), axis=2)[:, :, 2:], kept)
    np.testing.assert_array_equal(pruned[:, 8:], w["c"]["weight"][:, 8:])   # channels 8, 9 kept
    rnd = prune(net, w, 0.5, "random", seed=4)["c"]["weight"]
    assert 0.35 < np.mean(rnd == 0) < 0.65


@pytest.mark.parametrize("weights, message", [
    ({"seed": 1, "sparsity": 1.0}, "weights.sparsity: must be < 1"),
    ({"seed": 1, "sparsity": 0.3, "pattern": "2:4"}, "pattern 2:4 prunes exactly 0.5"),
    ({"seed": 1, "pattern": "4:8"}, "weights.pattern"),
])
def test_bad_sparsity_fields_are_one_line_errors(weights, message):
    with pytest.raises(NvdlaSimError, match=message) as err:
        parse_scenario({"hardware": "nv_full", "network": "lenet5", "weights": weights}, REPO)
    assert "\n" not in str(err.value)


def test_compression_refused_where_the_preset_has_none():
    with pytest.raises(NvdlaSimError, match="weight_compression: nv_large has no weight "
                                            "compression"):
        parse_scenario({"hardware": "nv_large", "network": "lenet5",
                        "weight_compression": "auto"}, REPO)


def test_sweep_axes_for_winograd_compression_and_sparsity(tmp_path):
    """The sweep axes set the scenario fields; each point compiles with what it asks for, and the
    layer bound the report gives comes from the measured CMAC cycles and weight bytes."""
    from nvdla_sim.sweep.spec import parse_sweep
    from nvdla_sim.scenario.runner import execute
    base = {"hardware": "nv_full", "mode": "timing", "outputs": {"plots": False},
            "network": {"input": [128, 32, 32], "layers": [
                {"type": "conv", "name": "c", "out_channels": 128, "kernel": 3, "pad": 1}]}}
    spec = parse_sweep({"base": base, "grid": {"winograd": ["on", False],   # auto: INT8 direct
                                               "sparsity": [0.0, 0.75],
                                               "weight_compression": ["auto", "off"]}}, tmp_path)
    assert len(spec.points) == 8
    results = {}
    for p in spec.points:
        scn = parse_scenario(p.scenario, tmp_path)
        assert (scn.winograd, scn.weights.sparsity, scn.weight_compression) == \
            (p.params["winograd"], p.params["sparsity"], p.params["weight_compression"])
        with __import__("contextlib").redirect_stdout(__import__("io").StringIO()):
            report = execute(prepare(scn), tmp_path / str(p.index))
        row = report.rows[0]
        results[(scn.winograd, scn.weights.sparsity, scn.weight_compression)] = row
    compressed = results[("off", 0.75, "auto")]
    dense = results[("off", 0.75, "off")]
    assert "weights compressed" in compressed.note and compressed.dram_bytes < dense.dram_bytes
    assert "weights compressed" not in results[("off", 0.0, "auto")].note
    assert results[("on", 0.0, "off")].cycles < results[("off", 0.0, "off")].cycles
    assert results[("off", 0.0, "off")].bound == "MAC"
    with pytest.raises(NvdlaSimError, match=r"grid.sparsity\[0\]: must be a share"):
        parse_sweep({"base": base, "grid": {"sparsity": [1.5]}}, tmp_path)
