"""Hostile scenarios on the DLA deployment surfaces (issue 13 on issue 11's work): the fields
`dla_cores`, `second_network`, `memory_pools`, `input_format` / `output_format`,
`precision: [int8, fp16]`, `sparse_weights`, and the layer kinds deconv, resize, slice, scale,
sub/div/pow/equal/greater/less, abs/sin/cos/atan, reduce and softmax.

Hand-written nonsense through `nvdla-sim run` and `compile` (exactly one `nvdla-sim: error:` line
naming the file and the field, exit 2), seeded mutations of a valid Orin scenario that uses every
one of them (each parses, compiles and runs in timing mode, or fails with one NvdlaSimError line),
and valid changes that must move the result (shapes, cycles, images/s).
NVDLA_FUZZ_SEED / NVDLA_FUZZ_ROUNDS vary and lengthen the mutation run."""
from __future__ import annotations

import copy
import json
import math
import os
import random
from pathlib import Path

import pytest
import yaml

from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.scenario.runner import execute, prepare
from nvdla_sim.scenario.schema import MAX_DIM, parse_scenario
from tests.test_fuzz_scenarios import _paths, assert_one_line_error, run_cli, scenario_file

SEED = int(os.environ.get("NVDLA_FUZZ_SEED", "13"))
ROUNDS = int(os.environ.get("NVDLA_FUZZ_ROUNDS", "1"))

L = "network: {input: [8, 8, 8], layers: [%s]}\n"
SECOND = "hardware: orin_dla\ndla_cores: 2\nnetwork: lenet5\nsecond_network: %s\n"
HOSTILE = [
    # (scenario text, words the error must name)
    ("hardware: orin_dla\ndla_cores: 0\nnetwork: lenet5\n", ["dla_cores", ">= 1"]),
    ("hardware: orin_dla\ndla_cores: 3\nnetwork: lenet5\n", ["dla_cores", "orin_dla has 2"]),
    ("hardware: orin_dla\ndla_cores: '2'\nnetwork: lenet5\n", ["dla_cores", "integer"]),
    ("hardware: orin_dla\ndla_cores: true\nnetwork: lenet5\n", ["dla_cores", "integer"]),
    ("hardware: orin_dla\ndla_cores: 2.0\nnetwork: lenet5\n", ["dla_cores", "integer"]),
    ("hardware: orin_dla\ndla_cores: .nan\nnetwork: lenet5\n", ["dla_cores"]),
    ("hardware: nv_small\ndla_cores: 3\nnetwork: lenet5\n", ["dla_cores", "at most 2"]),
    ("hardware: orin_dla\nsecond_network: lenet5\nnetwork: lenet5\n",
     ["second_network", "needs dla_cores: 2"]),
    (SECOND % "nope", ["second_network", "unknown network 'nope'"]),
    (SECOND % "12", ["second_network", "expected a mapping"]),
    (SECOND % "''", ["second_network"]),
    (SECOND % "{onnx: /nonexistent.onnx}", ["second_network.onnx", "file not found"]),
    (SECOND % "{input: [0, 8, 8], layers: [{name: a, type: relu}]}", ["second_network.input"]),
    (SECOND % "{input: [3, 100000, 8], layers: [{name: a, type: relu}]}",
     ["second_network.input", "8192"]),
    (SECOND % "{input: [8, 8, 8], layers: [{name: a, type: bogus}]}",
     ["second_network.layers[0].type"]),
    (SECOND % "{input: [8, 8, 8], layers: [{name: a, type: conv, out_channels: 0, kernel: 3}]}",
     ["second_network.layers[0].out_channels"]),
    (SECOND % "{input: [8, 8, 8], layers: [{name: a, type: relu, input: nope}]}",
     ["second_network.layers[0].input", "unknown layer 'nope'"]),
    ("hardware: orin_dla\nmemory_pools: {managed_sram: 3000}\nnetwork: lenet5\n",
     ["memory_pools.managed_sram", "power of two of at least 4 KiB"]),
    ("hardware: orin_dla\nmemory_pools: {managed_sram: 6144}\nnetwork: lenet5\n",
     ["memory_pools.managed_sram", "power of two"]),
    ("hardware: orin_dla\nmemory_pools: {managed_sram: 2048}\nnetwork: lenet5\n",
     ["memory_pools.managed_sram", "at least 4 KiB"]),
    ("hardware: orin_dla\nmemory_pools: {local_dram: 1e30}\nnetwork: lenet5\n",
     ["memory_pools.local_dram", "write 1.0e30"]),
    ("hardware: orin_dla\nmemory_pools: {local_dram: 1.0e+30}\nnetwork: lenet5\n",
     ["memory_pools.local_dram"]),
    ("hardware: orin_dla\nmemory_pools: {managed_sram: .inf}\nnetwork: lenet5\n",
     ["memory_pools.managed_sram"]),
    ("hardware: orin_dla\nmemory_pools: {managed_sram: .nan}\nnetwork: lenet5\n",
     ["memory_pools.managed_sram"]),
    ("hardware: orin_dla\nmemory_pools: {managed_sram: -4096}\nnetwork: lenet5\n",
     ["memory_pools.managed_sram"]),
    ("hardware: orin_dla\nmemory_pools: {global_dram: '99999999999999999999 GiB'}\nnetwork: lenet5\n",
     ["memory_pools.global_dram", "<="]),
    ("hardware: orin_dla\nmemory_pools: {managed_sram: 2TiB}\nnetwork: lenet5\n",
     ["memory_pools.managed_sram"]),
    ("hardware: orin_dla\nmemory_pools: {managed_sram: true}\nnetwork: lenet5\n",
     ["memory_pools.managed_sram"]),
    ("hardware: orin_dla\nmemory_pools: {l2: 4096}\nnetwork: lenet5\n", ["memory_pools.l2", "unknown"]),
    ("hardware: orin_dla\nmemory_pools: [4096]\nnetwork: lenet5\n", ["memory_pools", "mapping"]),
    ("hardware: nv_small\nmemory_pools: {managed_sram: 4096}\nnetwork: lenet5\n",
     ["memory_pools", "not a DLA preset"]),
    ("hardware: xavier_dla\ndla_cores: 2\nmemory_pools: {managed_sram: 4MiB}\nnetwork: lenet5\n",
     ["memory_pools.managed_sram", "shares between its cores"]),
    ("hardware: orin_dla\ninput_format: chw64\nnetwork: lenet5\n", ["input_format", "chw16"]),
    ("hardware: orin_dla\ninput_format: [chw16]\nnetwork: lenet5\n", ["input_format"]),
    ("hardware: orin_dla\noutput_format: 16\nnetwork: lenet5\n", ["output_format"]),
    ("hardware: nv_small\ninput_format: chw16\nnetwork: lenet5\n", ["input_format", "io.precision"]),
    ("hardware: nv_small\noutput_format: chw32\nnetwork: lenet5\n", ["output_format", "io.chw_atom"]),
    ("hardware: orin_dla\noutput_format: dla_hwc4\nnetwork: lenet5\n",
     ["output_format", "io.hwc4_output"]),
    ("hardware: orin_dla\ninput_format: dla_hwc4\n"
     "network: {input: [16, 8, 8], layers: [{name: a, type: conv, out_channels: 4, kernel: 3}]}\n",
     ["input_format", "io.hwc4_channels"]),
    ("hardware: orin_dla\nprecision: [int8, int16]\nnetwork: lenet5\n", ["precision", "int16"]),
    ("hardware: orin_dla\nprecision: []\nnetwork: lenet5\n", ["precision"]),
    ("hardware: orin_dla\nprecision: [[int8]]\nnetwork: lenet5\n", ["precision"]),
    ("hardware: orin_dla\nprecision: [int8, .nan]\nnetwork: lenet5\n", ["precision"]),
    ("hardware: nv_small\nprecision: [int8, fp16]\nnetwork: lenet5\n", ["precision", "fp16"]),
    ("hardware: orin_dla\nprecision: {default: [int8, fp16], layers: {conv1: int16}}\n"
     "network: lenet5\n", ["precision.layers.conv1"]),
    ("hardware: orin_dla\nprecision: {default: [], layers: {}}\nnetwork: lenet5\n",
     ["precision.default"]),
    ("hardware: orin_dla\nprecision: {default: [int8, fp16], layers: {nope: fp16}}\n"
     "network: lenet5\n", ["precision.layers.nope", "no layer 'nope'"]),
    ("hardware: orin_dla\nsparse_weights: 'true'\nnetwork: lenet5\n", ["sparse_weights", "true or false"]),
    ("hardware: orin_dla\nsparse_weights: 1\nnetwork: lenet5\n", ["sparse_weights"]),
    ("hardware: xavier_dla\nsparse_weights: true\nnetwork: lenet5\n",
     ["sparse_weights", "sparsity.orin_only"]),
    # the new layer kinds
    ("hardware: nv_full\n" + L % "{name: d, type: deconv, out_channels: 4, kernel: 2, stride: 8192}",
     ["network.layers[0]", "above 8192"]),
    ("hardware: nv_full\n" + L % "{name: d, type: deconv, out_channels: 4, kernel: 2, pad: 9}",
     ["network.layers[0]", "padding larger"]),
    ("hardware: nv_full\n" + L % "{name: d, type: deconv, out_channels: 4, kernel: 0}",
     ["network.layers[0].kernel"]),
    ("hardware: nv_full\n" + L % "{name: d, type: deconv, out_channels: -4, kernel: 2}",
     ["network.layers[0].out_channels"]),
    ("hardware: nv_full\n" + L % "{name: d, type: deconv, out_channels: 4, kernel: 3, dilation: 2}",
     ["network.layers[0].dilation", "unknown field"]),
    ("hardware: nv_full\n" + L % "{name: r, type: resize, scale: 0}", ["network.layers[0].scale"]),
    ("hardware: nv_full\n" + L % "{name: r, type: resize, scale: 1.5}", ["network.layers[0].scale"]),
    ("hardware: nv_full\n" + L % "{name: r, type: resize, scale: [2, -1]}",
     ["network.layers[0].scale"]),
    ("hardware: nv_full\n" + L % "{name: r, type: resize, scale: 8192}",
     ["network.layers[0]", "above 8192"]),
    ("hardware: nv_full\n" + L % "{name: r, type: resize, scale: 2, mode: cubic}",
     ["network.layers[0].mode"]),
    ("hardware: nv_full\n" + L % "{name: s, type: slice, start: 8}", ["network.layers[0].start"]),
    ("hardware: nv_full\n" + L % "{name: s, type: slice, start: -1}", ["network.layers[0].start"]),
    ("hardware: nv_full\n" + L % "{name: s, type: slice, start: 4, channels: 5}",
     ["network.layers[0].channels"]),
    ("hardware: nv_full\n" + L % "{name: s, type: slice, channels: 0}", ["network.layers[0].channels"]),
    ("hardware: nv_full\n" + L % "{name: s, type: slice, start: .nan}", ["network.layers[0].start"]),
    ("hardware: orin_dla\n" + L % "{name: s, type: scale, scale: .nan}",
     ["network.layers[0].scale", "finite"]),
    ("hardware: orin_dla\n" + L % "{name: s, type: scale, shift: [1, .inf, 1, 1, 1, 1, 1, 1]}",
     ["network.layers[0].shift[1]", "finite"]),
    ("hardware: orin_dla\n" + L % "{name: s, type: scale, scale: [1, 2, 3]}",
     ["network.layers[0].scale", "list of 8"]),
    ("hardware: orin_dla\n" + L % "{name: s, type: scale, scale: []}", ["network.layers[0].scale"]),
    ("hardware: orin_dla\n" + L % "{name: s, type: scale, scale: [[1]]}",
     ["network.layers[0].scale[0]"]),
    ("hardware: orin_dla\n" + L % "{name: s, type: scale, scale: 1e+5}", ["network.layers[0].scale"]),
    ("hardware: orin_dla\n" + L % "{name: s, type: scale, power: .inf}", ["network.layers[0].power"]),
    ("hardware: orin_dla\n" + L % "{name: s, type: scale, power: 1e300}",
     ["network.layers[0].power", "write 1.0e300"]),
    ("hardware: orin_dla\n" + L % "{name: s, type: div, constant: 0}",
     ["network.layers[0].constant", "division by 0"]),
    ("hardware: orin_dla\n" + L % "{name: s, type: div, constant: 1e-7}",
     ["network.layers[0].constant", "write 1.0e-7"]),
    ("hardware: orin_dla\n" + L % "{name: s, type: pow, constant: .nan}",
     ["network.layers[0].constant", "finite"]),
    ("hardware: orin_dla\n" + L % "{name: s, type: equal, constant: -.inf}",
     ["network.layers[0].constant"]),
    ("hardware: orin_dla\n" + L % "{name: s, type: greater, constant_first: true}",
     ["network.layers[0].input", "2 input"]),
    ("hardware: orin_dla\n" + L % "{name: s, type: less, constant: 1, constant_first: 'yes'}",
     ["network.layers[0].constant_first"]),
    ("hardware: orin_dla\n" + L % "{name: s, type: sub, input: [data]}", ["network.layers[0].input"]),
    ("hardware: orin_dla\n" + L % "{name: s, type: atan, input: [data, data]}",
     ["network.layers[0].input", "1 input"]),
    ("hardware: orin_dla\n" + L % "{name: s, type: abs, bogus: 1}", ["network.layers[0].bogus"]),
    ("hardware: orin_dla\n" + L % "{name: s, type: reduce, axes: [1]}", ["network.layers[0].axes"]),
    ("hardware: orin_dla\n" + L % "{name: s, type: reduce, axes: [[c]]}", ["network.layers[0].axes"]),
    ("hardware: orin_dla\n" + L % "{name: s, type: reduce, axes: [c, c]}", ["network.layers[0].axes"]),
    ("hardware: orin_dla\n" + L % "{name: s, type: reduce, axes: n}", ["network.layers[0].axes"]),
    ("hardware: orin_dla\n" + L % "{name: s, type: reduce, axes: {c: 1}}", ["network.layers[0].axes"]),
    ("hardware: orin_dla\n" + L % "{name: s, type: reduce, op: prod}", ["network.layers[0].op"]),
    ("hardware: orin_dla\n" + L % "{name: s, type: softmax, axis: 1}", ["network.layers[0].axis"]),
    ("hardware: orin_dla\n" + L % "{name: s, type: softmax, axis: [c]}", ["network.layers[0].axis"]),
]


@pytest.mark.parametrize("text, needles", HOSTILE, ids=[f"case{i}" for i in range(len(HOSTILE))])
def test_hostile_dla_scenario_is_one_line(tmp_path, text, needles):
    path = scenario_file(tmp_path, "mode: timing\n" + text)
    rc, out, err = run_cli(["run", str(path), "--out", str(tmp_path / "out"), "--no-progress"])
    assert_one_line_error(rc, err, str(path), *needles)
    rc, out, err = run_cli(["compile", str(path)])       # compile rejects what run rejects
    assert_one_line_error(rc, err, str(path))


def test_broken_onnx_second_network_is_one_line(tmp_path):
    """A second network from an ONNX file the importer refuses: `run` and `compile` both name
    the field and the node (compile prepares the second core's network too)."""
    onnx = pytest.importorskip("onnx", reason="the optional 'onnx' package is not installed")
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    g = helper.make_graph([helper.make_node("Div", ["x", "k"], ["y"], name="n0")], "m",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(np.array(np.nan, np.float32), "k")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)]),
              str(tmp_path / "bad.onnx"))
    path = scenario_file(tmp_path, "mode: timing\n" + SECOND % "{onnx: bad.onnx}")
    for argv in (["run", str(path), "--out", str(tmp_path / "out"), "--no-progress"],
                 ["compile", str(path)]):
        rc, out, err = run_cli(argv)
        assert_one_line_error(rc, err, str(path), "second_network.onnx",
                              "node 'n0' (Div): its constant holds NaN")
        assert err.count(str(path)) == 1, err


# -- seeded mutations of a scenario using every new surface ---------------------------------

BASE = {
    "name": "fuzz_dla", "hardware": "orin_dla", "mode": "timing",
    "memory": {"dram_gbps": 10, "dram_latency_ns": 100},
    "network": {"input": [8, 8, 8], "layers": [
        {"name": "c1", "type": "conv", "out_channels": 16, "kernel": 3, "pad": 1},
        {"name": "d1", "type": "deconv", "out_channels": 8, "kernel": 2, "stride": 2},
        {"name": "r1", "type": "resize", "scale": 2},
        {"name": "s1", "type": "slice", "start": 0, "channels": 4},
        {"name": "sc", "type": "scale", "scale": 2.0, "shift": 0.5, "power": 1},
        {"name": "sb", "type": "sub", "constant": 1.0},
        {"name": "ab", "type": "abs"},
        {"name": "rd", "type": "reduce", "op": "max", "axes": "c"},
        {"name": "sm", "type": "softmax", "axis": "w"}]},
    "precision": ["int8", "fp16"], "dla_cores": 2, "memory_pools": {"managed_sram": "256KiB"},
    "input_format": "chw16", "output_format": "auto", "sparse_weights": True,
    "outputs": {"plots": False, "formats": ["json"]},
}
SECOND_NET = {"input": [4, 8, 8], "layers": [
    {"name": "x", "type": "resize", "scale": 2}, {"name": "y", "type": "slice", "start": 1},
    {"name": "z", "type": "deconv", "out_channels": 4, "kernel": 3, "stride": 2}]}

NAN, INF = float("nan"), float("inf")
ANY = [None, True, 0, -1, 2 ** 64, 1e308, INF, -INF, NAN, "", "x", "2", "1e30", [], [0], {},
       {"a": 1}, MAX_DIM + 1]
# per field: mostly values a user might write (valid or nearly), then anything
FIELD_VALUES = {
    "scale": [1, 2, 3, [2, 1], [1, 3], 0.5, -1.0, [1.0] * 4, [0.0] * 4, [NAN], 65504, 8192],
    "shift": [0, -3.5, [1.0] * 4, [1.0] * 3, 65504.0, -65504.0, 1e5],
    "power": [0, 1, 2, 3, 0.5, -1, -2, 1.5, 100],
    "axes": ["c", "h", "w", "hw", "chw", ["c"], ["h", "w"], "cc", "x", "", [0], ["c", 1]],
    "op": ["max", "min", "sum", "mean", "prod"], "axis": ["c", "h", "w", 1],
    "start": [0, 1, 3, 7, 15, 16, -1], "channels": [1, 2, 4, 8, 16, 0, 17],
    "constant": [0, 0.0, -1, 1e-5, 65504, -65504, 3, 2, 0.5],
    "kernel": [1, 2, 3, 4, 5, 7, [1, 3], [3, 1], 9, 16, 33],
    "stride": [1, 2, 3, 4, 8, [2, 1], 16, 32, 64],
    "pad": [0, 1, 2, [0, 1], [1, 0, 0, 1], 3, 5],
    "out_channels": [1, 3, 8, 16, 17, 64, 1024],
    "dla_cores": [1, 2, 3, 0, "2", True],
    "managed_sram": ["4KiB", "1MiB", "256KiB", 4096, 1 << 20, "2MiB", "512 KiB", "4 MiB",
                     1 << 40, "0.5MiB", "1.5KiB", 6000],
    "precision": ["int8", "fp16", ["int8", "fp16"], ["fp16", "int8"], ["int8"], "int16",
                  {"default": ["int8", "fp16"]}, {"default": "fp16", "layers": {"c1": "int8"}}],
    "input_format": ["auto", "dla_linear", "dla_hwc4", "chw16", "chw32", "chw64"],
    "output_format": ["auto", "dla_linear", "dla_hwc4", "chw16", "chw32"],
    "sparse_weights": [True, False, "true"],
    "hardware": ["orin_dla", "xavier_dla", "nv_full", "nv_small"],
    "input": [[8, 8, 8], [1, 1, 1], [3, 5, 7], [16, 2, 2], [64, 16, 16], [4, 1, 64]],
    "dram_gbps": [1, 10, 100, 0.01],
}
DROPPABLE = ("dla_cores", "memory_pools", "input_format", "output_format", "sparse_weights",
             "precision")


def _mutate(rng: random.Random, base: dict) -> dict:
    scn = copy.deepcopy(base)
    for _ in range(rng.randint(1, 3)):
        paths = [p for p, _ in _paths(scn) if p and isinstance(p[-1], str) and p[-1] in FIELD_VALUES]
        path = rng.choice(paths)
        node = scn
        for k in path[:-1]:
            node = node[k]
        pool = FIELD_VALUES[path[-1]] if rng.random() < 0.85 else ANY
        node[path[-1]] = copy.deepcopy(rng.choice(pool))
    if rng.random() < 0.2:                      # a layer less: other shapes downstream
        layers = scn["network"]["layers"]
        del layers[rng.randrange(len(layers))]
    if rng.random() < 0.3:                      # a field left to its default
        scn.pop(rng.choice(DROPPABLE), None)
    return scn


def _check_accepted(scn, prep) -> None:
    """What the schema promises of an accepted scenario."""
    assert scn.dla_cores in (1, 2)
    assert scn.second_network is None or scn.dla_cores == 2
    for v in (scn.memory_pools or {}).values():
        assert v >= 4096 and v & (v - 1) == 0
    assert scn.sparse_weights in (True, False)
    for s in prep.network.shapes.values():
        assert 1 <= s.h <= MAX_DIM and 1 <= s.w <= MAX_DIM and s.c >= 1


def test_mutated_dla_scenarios_fail_cleanly_or_run(tmp_path):
    """Each mutation parses and compiles (prepare), or fails with one NvdlaSimError line; every
    fourth one accepted also runs (timing) to a positive cycle count or a one-line error."""
    rng = random.Random(SEED)
    accepted = refused = ran = 0
    for i in range(160 * ROUNDS):
        base = copy.deepcopy(BASE)
        if i % 2:
            base["second_network"] = copy.deepcopy(SECOND_NET)
        scn = _mutate(rng, base)
        try:
            parsed = parse_scenario(scn, tmp_path)
            prep = prepare(parsed)
            _check_accepted(parsed, prep)
            accepted += 1
            if accepted % 4:
                continue
            report = execute(prep, tmp_path / "out")
            assert report.total_cycles > 0 and math.isfinite(report.total_cycles), scn
            ran += 1
        except NvdlaSimError as exc:
            msg = str(exc)
            assert msg and "\n" not in msg and "Traceback" not in msg, (i, scn, msg)
            refused += 1
    assert accepted > 30 and refused > 30 and ran > 5, (accepted, refused, ran)


def test_mutated_dla_scenario_files_through_the_cli(tmp_path):
    """A sample written as YAML and run by `nvdla-sim run`: exit 0 with a report, or exit 2 with
    one line naming the file."""
    rng = random.Random(SEED + 1)
    for i in range(6 * ROUNDS):
        scn = _mutate(rng, BASE)
        path = tmp_path / f"m{i}.yaml"
        path.write_text(yaml.safe_dump(scn))
        rc, out, err = run_cli(["run", str(path), "--out", str(tmp_path / f"out{i}"),
                                "--no-progress"])
        assert rc in (0, 2), (scn, err)
        if rc == 2:
            assert_one_line_error(rc, err, str(path))
        else:
            assert (tmp_path / f"out{i}" / "report.json").is_file()


# -- valid but changed: the result moves where it must -----------------------------------------

SMALL = {"name": "v", "hardware": "orin_dla", "mode": "timing",
         "memory": {"dram_gbps": 10, "dram_latency_ns": 100},
         "network": {"input": [8, 8, 8], "layers": [
             {"name": "c1", "type": "conv", "out_channels": 16, "kernel": 3, "pad": 1},
             {"name": "sm", "type": "softmax"}]},
         "outputs": {"plots": False, "formats": ["json"]}}


def _report(tmp_path: Path, tag: str, **change) -> dict:
    scn = {**copy.deepcopy(SMALL), **change}
    p = tmp_path / f"{tag}.yaml"
    p.write_text(yaml.safe_dump(scn))
    rc, out, err = run_cli(["run", str(p), "--out", str(tmp_path / tag), "--no-progress"])
    assert rc == 0, err
    return json.loads((tmp_path / tag / "report.json").read_text())


def test_changed_dla_fields_change_the_result(tmp_path):
    one = _report(tmp_path, "one")
    two = _report(tmp_path, "two", dla_cores=2)
    assert two["cores"]["dla_cores"] == 2 and not one.get("cores")
    assert two["cores"]["images_per_s"] > 1.5 * one["fps"]     # two images at a time
    other = _report(tmp_path, "other", dla_cores=2, second_network={
        "input": [8, 16, 16], "layers": [{"name": "c", "type": "conv", "out_channels": 64,
                                          "kernel": 3, "pad": 1}]})
    assert json.dumps(other["cores"]) != json.dumps(two["cores"])
    mixed = _report(tmp_path, "mixed", precision=["int8", "fp16"])
    chw16 = _report(tmp_path, "chw16", precision=["int8", "fp16"], input_format="chw16")
    assert chw16["total_cycles"] > mixed["total_cycles"]   # an FP16 input reformatted to INT8
    sparse = _report(tmp_path, "sparse", sparse_weights=True)
    assert sparse.get("sparse_total_cycles") and not one.get("sparse_total_cycles")


def _shapes(layers: list[dict], hw: str = "nv_full") -> dict:
    scn = parse_scenario({"name": "s", "hardware": hw, "mode": "timing",
                          "network": {"input": [8, 6, 6], "layers": layers}}, Path("."))
    return {k: (s.c, s.h, s.w) for k, s in scn.network.network.shapes.items()}


def test_changed_layer_attributes_change_the_shapes():
    d = {"name": "d", "type": "deconv", "out_channels": 4, "kernel": 2, "stride": 2}
    assert _shapes([d])["d"] == (4, 12, 12)
    assert _shapes([{**d, "stride": 3}])["d"] == (4, 17, 17)
    assert _shapes([{**d, "pad": 1}])["d"] == (4, 10, 10)
    r = {"name": "r", "type": "resize", "scale": 2}
    assert _shapes([r])["r"] == (8, 12, 12) and _shapes([{**r, "scale": [3, 1]}])["r"] == (8, 18, 6)
    s = {"name": "s", "type": "slice", "start": 2}
    assert _shapes([s])["s"] == (6, 6, 6) and _shapes([{**s, "channels": 3}])["s"] == (3, 6, 6)
    red = {"name": "x", "type": "reduce", "axes": "c"}
    assert _shapes([red], "orin_dla")["x"] == (1, 6, 6)
    assert _shapes([{**red, "axes": "hw"}], "orin_dla")["x"] == (8, 1, 1)
