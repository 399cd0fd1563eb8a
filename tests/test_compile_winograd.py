"""Winograd convolution chosen by the compiler (`winograd: auto` on nv_full, compiler/winograd.py):
compiled networks with Winograd layers against the float reference (SQNR floors) and, layer by
layer, the CACC output of every Winograd layer against the independent integer reference of
tests/test_winograd.py (padding, channel extension, B^T d B with PRA_TRUNCATE, 4x4 products,
A^T . A, CACC rounding), with weights transformed here from the document's G matrix."""
from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np
import pytest

from nvdla_sim.compiler.emit import read_output
from nvdla_sim.compiler.lower import lower
from nvdla_sim.datatype import FP16, INT8, INT16
from nvdla_sim.engine import Engine
from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.scenario.runner import context, execute, prepare
from nvdla_sim.scenario.schema import parse_scenario

import test_winograd as wino
from emit_helpers import compile_and_capture

REPO = Path(__file__).resolve().parent.parent
G = np.array([[1.0, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1.0]])


def scenario(layers, precision="int8", input_shape=(13, 12, 10), **extra):
    data = {"name": "wino", "hardware": "nv_full", "precision": precision,
            "network": {"input": list(input_shape), "layers": layers},
            "input": {"seed": 1}, "weights": {"seed": 1}, "winograd": "on", **extra}
    scn = parse_scenario(data, REPO)
    scn.outputs.plots = False
    return scn


TWO_3X3 = [{"type": "conv", "name": "c1", "out_channels": 19, "kernel": 3, "pad": 1, "relu": True},
           {"type": "conv", "name": "c2", "out_channels": 8, "kernel": 3, "pad": 1}]


def run_report(scn, tmp_path):
    with contextlib.redirect_stdout(io.StringIO()):
        return execute(prepare(scn), tmp_path)


def transformed(g: np.ndarray, scale: np.ndarray, dtype) -> np.ndarray:
    """scale_k * G g_k G^T of each kernel k, rounded half to even to the integer type (FP16: to
    float16); the scales are multiples of 2^-8, so the products are exact."""
    u = np.asarray(scale, np.float64)[:, None, None, None] * \
        np.einsum("ij,kcjl,ml->kcim", G, g.astype(np.float64), G)
    return u.astype(np.float16) if dtype.is_float else np.rint(u).astype(dtype.numpy)


def run_capturing(scn):
    """Compile and run; every cube the CACC delivers, the lowered program, the engine."""
    prep, _, lowered, engine, _, cubes = compile_and_capture(scn)
    return prep, lowered, engine, cubes


def extended_kernels(g: np.ndarray, stride: tuple[int, int], lanes: int) -> np.ndarray:
    """(K, C, R, S) -> (K, lanes * sy * sx, 3, 3): kernel row y * sy + i, column x * sx + j at
    row y, column x of channel phase (i * sx + j) * lanes + c (the document's channel extension
    for a strided Winograd layer; rows/columns beyond R, S zero)."""
    sy, sx = stride
    k, c, r, s = g.shape
    padded = np.zeros((k, c, 3 * sy, 3 * sx), g.dtype)
    padded[:, :, :r, :s] = g
    ext = np.zeros((k, lanes * sy * sx, 3, 3), g.dtype)
    for i in range(sy):
        for j in range(sx):
            phase = i * sx + j
            ext[:, phase * lanes:phase * lanes + c] = padded[:, :, i::sy, j::sx]
    return ext


def reference_of(layer, x, dtype):
    """The integer reference (test_winograd) of one compiled Winograd layer; its transformed
    weights fill the type's range kernel by kernel."""
    w = layer.lowering["winograd"]
    lanes = w.ext_channels // (w.stride[0] * w.stride[1])
    u = transformed(extended_kernels(layer.quant.weight, w.stride, lanes), w.weight_scale, dtype)
    peaks = np.abs(u.astype(np.int64)).reshape(len(u), -1).max(axis=1)
    q = dtype.integer_range()[1]
    assert np.all(peaks <= q) and np.all(peaks[peaks > 0] >= q * 0.99)
    top, left, bottom, right = w.pad
    return wino.WinoLayer(dtype, x, u, (w.out_w, w.out_h), (w.stride[1], w.stride[0]),
                          (left, right, top, bottom), 0, w.pra_truncate, w.clip_truncate), w


STRIDED = [{"type": "conv", "name": "c1", "out_channels": 21, "kernel": 5, "stride": 2, "pad": 2,
            "relu": True},
           {"type": "conv", "name": "c2", "out_channels": 8, "kernel": 3, "pad": 1}]


@pytest.mark.parametrize("precision, layers", [("int8", TWO_3X3), ("int16", TWO_3X3),
                                               ("int8", STRIDED)],
                         ids=["int8-3x3", "int16-3x3", "int8-5x5s2"])
def test_winograd_layers_equal_the_integer_reference(precision, layers):
    """Odd channel counts (13, 19, 21), padding, 3x3 stride 1 and 5x5 stride 2 (channel-extended
    to 3x3): each layer's CACC output equals the integer Winograd reference built from the
    layer's input cube in memory, the quantised weights extended and transformed here, and the
    PRA_TRUNCATE / CLIP_TRUNCATE the compiler chose."""
    dtype = {"int8": INT8, "int16": INT16}[precision]
    prep, lowered, engine, cubes = run_capturing(scenario(layers, precision))
    convs = [layer for layer in prep.plan.layers if layer.kind == "conv"]
    assert len(cubes) == len(convs) == 2
    for layer, cube in zip(convs, cubes):
        x = read_output(engine, lowered.buffers[layer.inputs[0].tensor])
        ref_layer, w = reference_of(layer, x, dtype)
        k = layer.quant.weight.shape[0]
        got = cube[:k, :w.out_h, :w.out_w].astype(np.int64)
        np.testing.assert_array_equal(got, wino.int_reference(ref_layer))


def test_fp16_winograd_layer_within_the_cc_bound():
    prep, lowered, engine, cubes = run_capturing(scenario(TWO_3X3[:1], "fp16"))
    layer = prep.plan.layers[0]
    w = layer.lowering["winograd"]
    assert np.all(w.weight_scale == 1.0) and w.pra_truncate == 0
    x = read_output(engine, lowered.buffers[layer.inputs[0].tensor]).astype(np.float64)
    g = layer.quant.weight.astype(np.float64)
    k, c = g.shape[:2]
    # direct 3x3 convolution in float64 of the FP16 inputs and weights
    xp = np.zeros((c, x.shape[1] + 2, x.shape[2] + 2))
    xp[:, 1:-1, 1:-1] = x
    ref = sum(np.einsum("kc,cyx->kyx", g[:, :, r, s], xp[:, r:r + x.shape[1], s:s + x.shape[2]])
              for r in range(3) for s in range(3))
    got = cubes[0][:k, :x.shape[1], :x.shape[2]].view(np.float32).astype(np.float64)
    # FP16 transformed weights (G has halves) and the FP17 pre-addition: a few 2^-11 relative
    err = np.abs(got - ref) / (np.abs(ref).max() + 1e-30)
    assert err.max() < 2e-3


@pytest.mark.parametrize("precision, floor_db", [("int8", 25.0), ("int16", 60.0), ("fp16", 50.0)])
def test_compiled_winograd_network_meets_the_sqnr_floor(tmp_path, precision, floor_db):
    report = run_report(scenario(TWO_3X3, precision), tmp_path)
    rows = [r for r in report.rows if r.device == "DLA"]
    assert len(rows) == 2 and all("Winograd (" in r.note for r in rows)
    assert all(r.sqnr_db >= floor_db for r in rows), [(r.layer, r.sqnr_db) for r in rows]


def test_winograd_runs_fewer_mac_cycles_than_direct(tmp_path):
    """A 3x3 layer with many channels: MAC-bound direct, Winograd's CMAC busy cycles ~2.25x fewer."""
    layers = [{"type": "conv", "name": "c", "out_channels": 64, "kernel": 3, "pad": 1}]
    runs = {}
    for mode in ("on", "off"):
        scn = scenario(layers, "int8", (64, 16, 16), winograd=mode, mode="timing")
        prep = prepare(scn)
        lowered = lower(prep.plan, context(prep))
        engine = Engine(scn.hardware, scn.memory.dram, scn.clock_mhz, compute_values=False)
        runs[mode] = engine.run(lowered.program).unit_stats["CMAC_A"]["busy_cycles"]
    assert 2.0 < runs["off"] / runs["on"] <= 2.25


def test_what_auto_leaves_direct():
    """Image input, 1x1 and 3x3 stride-2 kernels (no fewer MACs), a fused pool, an element-wise
    operand: direct, with the reason noted; 5x5 stride 2 is Winograd after channel extension in
    INT16, direct in INT8."""
    layers = [
        {"type": "conv", "name": "img", "out_channels": 8, "kernel": 3, "pad": 1, "relu": True},
        {"type": "conv", "name": "s2", "out_channels": 16, "kernel": 3, "stride": 2, "pad": 1},
        {"type": "conv", "name": "k5", "out_channels": 16, "kernel": 5, "stride": 2, "pad": 2},
        {"type": "conv", "name": "one", "out_channels": 16, "kernel": 1},
        {"type": "conv", "name": "c3", "out_channels": 16, "kernel": 3, "pad": 1},
        {"type": "add", "name": "sum", "input": ["c3", "one"]},
        {"type": "conv", "name": "p3", "out_channels": 16, "kernel": 3, "pad": 1},
        {"type": "pool", "name": "pool", "kernel": 2}]
    for precision in ("int8", "int16"):
        prep = prepare(scenario(layers, precision, (3, 16, 16), mode="timing", winograd="auto",
                                memory={"dram_gbps": 1000}))    # MAC-bound: auto takes Winograd
        lowered = lower(prep.plan, context(prep))
        notes = {name: " ".join(n) for name, n in lowered.notes.items()}
        # not Winograd shapes: no note either (INT8: the 3-channel input is an image)
        for name in ("img", "s2", "one") if precision == "int8" else ("s2", "one"):
            assert "Winograd" not in notes.get(name, "")
            assert "winograd" not in prep.plan.layers[[x.name for x in prep.plan.layers]
                                                      .index(name)].lowering
        # INT8 stays direct in auto (the PRA's precision: test_winograd_accuracy.py)
        assert ("Winograd (" if precision == "int16" else
                "direct (Winograd: INT8: the CSC pre-addition") in notes["k5"]
        assert "direct (Winograd: per-element SDP operand)" in notes["c3"]
        assert "direct (Winograd: feeds a PDP on the fly)" in notes["p3"]


def test_winograd_values_equal_with_and_without_a_kernel_group_split(tmp_path):
    """Many kernels: the weights take two kernel groups' banks (ping-pong) or all; the values
    do not depend on how the CBUF holds the weights."""
    layers = [{"type": "conv", "name": "c", "out_channels": 300, "kernel": 3, "pad": 1}]
    scn = scenario(layers, "int16", (130, 28, 28))
    prep, lowered, engine, cubes = run_capturing(scn)
    layer = prep.plan.layers[0]
    from nvdla_sim.compiler.emit_conv import conv_cbuf_plan
    from nvdla_sim.compiler.lower import _conv_layer
    src = lowered.buffers[layer.inputs[0].tensor]
    cbuf = conv_cbuf_plan(scn.hardware, _conv_layer(layer, lowered.buffers, scn.hardware), src)
    assert cbuf.mode != "full"                      # the kernel groups stream through CBUF
    ref_layer, w = reference_of(layer, read_output(engine, src), INT16)
    k = layer.quant.weight.shape[0]
    np.testing.assert_array_equal(cubes[0][:k, :w.out_h, :w.out_w].astype(np.int64),
                                  wino.int_reference(ref_layer))


def test_auto_is_refused_where_the_preset_has_no_winograd():
    with pytest.raises(NvdlaSimError, match="winograd: nv_small has no winograd") as err:
        parse_scenario({"hardware": "nv_small", "network": "lenet5", "winograd": "auto"}, REPO)
    assert "\n" not in str(err.value)
    scn = parse_scenario({"hardware": "nv_small", "network": "lenet5"}, REPO)
    assert scn.winograd == "off"
    assert parse_scenario({"hardware": "nv_full", "network": "lenet5"}, REPO).winograd == "auto"
    assert parse_scenario({"hardware": "nv_full", "network": "lenet5", "winograd": False},
                          REPO).winograd == "off"


def test_auto_keeps_memory_bound_layers_direct():
    """Small layers at 10 GB/s: Winograd's 16/9 weight bytes cost more than its MAC cycles save;
    auto keeps them direct (noted), on runs them in Winograd, and the measured cycles agree (INT16:
    auto keeps INT8 layers direct in any case)."""
    layers = [{"type": "conv", "name": "c", "out_channels": 64, "kernel": 3, "pad": 1}]
    cycles = {}
    for mode in ("auto", "on", "off"):
        scn = scenario(layers, "int16", (64, 16, 16), winograd=mode, mode="timing")
        prep = prepare(scn)
        lowered = lower(prep.plan, context(prep))
        assert ("winograd" in prep.plan.layers[0].lowering) == (mode == "on")
        if mode == "auto":
            assert "direct (Winograd: memory-bound" in lowered.notes["c"][0]
        engine = Engine(scn.hardware, scn.memory.dram, scn.clock_mhz, compute_values=False)
        cycles[mode] = engine.run(lowered.program).cycles
    assert cycles["auto"] == cycles["off"] < cycles["on"]


# -- v1 traces of the compiled networks (tools/make_traces.py, traces/nv_full/) ---------------------
FEATURE_TRACES = {"lenet5_3x3_winograd_nv_full_int16": ("CDMA.D_MISC_CFG", 0x1),       # CONV_MODE
                  "lenet5_sparse_nv_full_int16": ("CDMA.D_WEIGHT_FORMAT", 0x1)}     # COMPRESSED


@pytest.mark.parametrize("name", sorted(FEATURE_TRACES))
def test_feature_traces_replay_and_are_what_the_compiler_writes(tmp_path, name):
    """The committed trace replays with every dump_mem passing, its register program uses the
    feature (Winograd mode / compressed weights) in two conv layers, and compiling its scenario
    again writes the same files byte for byte."""
    import filecmp
    from nvdla_sim.compiler.lower import emit_trace
    from nvdla_sim.conformance import run_test
    from nvdla_sim.config import load_hardware
    from nvdla_sim.frontends.txn_trace import parse_txn
    from nvdla_sim.program import RegWrite
    from nvdla_sim.scenario.schema import load_scenario
    committed = REPO / "traces" / "nv_full" / name
    outcome = run_test(committed, load_hardware("nv_full"))
    assert outcome.status == "pass", outcome.error
    dumps = [c for c in outcome.checks if c.kind == "dump_mem"]
    assert len(dumps) == 4 and all(c.passed for c in dumps)
    reg, bit = FEATURE_TRACES[name]
    writes = [c for c in parse_txn(committed / "input.txn").commands
              if isinstance(c, RegWrite) and c.name == reg]
    assert sum(bool(c.value & bit) for c in writes) == (2 if "winograd" in name else 4)
    scn = load_scenario(REPO / "tools" / "trace_scenarios" / f"{name}.yaml")
    with contextlib.redirect_stdout(io.StringIO()):
        prep = prepare(scn)
    emit_trace(prep.plan, context(prep), tmp_path, name)
    files = sorted(p.name for p in committed.iterdir())
    assert sorted(p.name for p in (tmp_path / name).iterdir()) == files
    match, mismatch, errors = filecmp.cmpfiles(committed, tmp_path / name, files, shallow=False)
    assert not mismatch and not errors
