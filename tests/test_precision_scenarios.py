"""Scenarios in INT16 and FP16 on nv_full: precision validation, the registers and memory images
the compiler emits per precision (checked against the in-memory formats written out here), INT8
programs unchanged, and end-to-end SQNR floors against the float32 reference."""
from __future__ import annotations

import filecmp
import io
import contextlib
from pathlib import Path

import numpy as np
import pytest

from nvdla_sim.cli import main as cli_main
from nvdla_sim import formats
from nvdla_sim.compiler.emit_conv import kernel_group
from nvdla_sim.compiler.emit_pdp import fp17_bits
from nvdla_sim.compiler.lower import emit_trace, lower
from nvdla_sim.config import load_hardware
from nvdla_sim.datatype import FP16, INT8, INT16
from nvdla_sim.errors import NvdlaSimError, UnsupportedError
from nvdla_sim.program import MemLoad, RegWrite
from nvdla_sim.regs import register_map
from nvdla_sim.scenario.quantize import quantize_tensor, to_fp16
from nvdla_sim.scenario.runner import context, execute, prepare
from nvdla_sim.scenario.schema import load_scenario, parse_scenario

REPO = Path(__file__).resolve().parent.parent
SCENARIOS = REPO / "scenarios"
TRACES = REPO / "traces"
BASE = {"hardware": "nv_full", "network": "lenet5", "input": {"seed": 1}, "weights": {"seed": 1}}


def scenario(**change):
    return parse_scenario({**BASE, **change}, REPO)


# --------------------------------------------------------------------------------------------------
# Validation

@pytest.mark.parametrize("preset", ["nv_small", "nv_large"])
@pytest.mark.parametrize("precision", ["int16", "fp16"])
def test_v2_presets_refuse_16_bit_precisions(tmp_path, capsys, preset, precision):
    path = tmp_path / "s.yaml"
    path.write_text(f"hardware: {preset}\nnetwork: lenet5\nprecision: {precision}\n")
    assert cli_main(["run", str(path)]) != 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert f"precision: {precision} is not a data type of {preset} (it has int8" in err


def test_precision_names():
    assert scenario().dtype is INT8
    assert scenario(precision="INT16").dtype is INT16
    assert scenario(precision="fp16").dtype is FP16
    with pytest.raises(NvdlaSimError, match="precision: must be one of int8, int16, fp16, got 'fp32'"):
        scenario(precision="fp32")


# --------------------------------------------------------------------------------------------------
# Registers and memory images of the lowered programs

def lowered(precision: str, mode: str = "values+timing"):
    scn = scenario(precision=precision, mode=mode)
    with contextlib.redirect_stdout(io.StringIO()):
        prep = prepare(scn)
    return prep, lower(prep.plan, context(prep))


def writes(program, unit: str, register: str) -> list[dict[str, int]]:
    """Every write of UNIT.REGISTER in program order, decoded into its fields."""
    regmap = register_map(1)
    u, r = regmap.resolve(unit, register)
    addr = regmap.base(u.name) + r.offset
    return [{name: (c.value & f.mask) >> f.lo for name, f in r.fields.items()}
            for c in program.commands if isinstance(c, RegWrite) and c.addr == addr]


@pytest.mark.parametrize("precision", ["int8", "int16", "fp16"])
@pytest.mark.parametrize("mode", ["values+timing", "timing"])
def test_every_unit_is_told_the_precision(precision, mode):
    _, low = lowered(precision, mode)
    code = {"int8": 0, "int16": 1, "fp16": 2}[precision]
    program = low.program
    fields = [("CDMA", "D_MISC_CFG", "IN_PRECISION"), ("CDMA", "D_MISC_CFG", "PROC_PRECISION"),
              ("CSC", "D_MISC_CFG", "IN_PRECISION"), ("CSC", "D_MISC_CFG", "PROC_PRECISION"),
              ("CMAC_A", "D_MISC_CFG", "PROC_PRECISION"), ("CMAC_B", "D_MISC_CFG", "PROC_PRECISION"),
              ("CACC", "D_MISC_CFG", "PROC_PRECISION"), ("SDP", "D_DATA_FORMAT", "PROC_PRECISION"),
              ("SDP", "D_DATA_FORMAT", "OUT_PRECISION"), ("PDP", "D_DATA_FORMAT", "INPUT_DATA")]
    for unit, register, name in fields:
        values = [w[name] for w in writes(program, unit, register)]
        assert values and set(values) == {code}, (unit, register, name, values)
    # LeNet-5: 4 convolutions with 2 pools on the fly
    assert len(writes(program, "CDMA", "D_MISC_CFG")) == 4
    assert len(writes(program, "PDP", "D_DATA_FORMAT")) == 2


def test_16_bit_strides_atoms_and_cbuf():
    """conv2 reads pool1 (20 x 12 x 12): 20 INT8 channels are one 32-byte atom, 20 INT16/FP16
    channels two (16 per atom); sizes of weights, kernels and CBUF lines are in bytes."""
    hw = load_hardware("nv_full")
    got = {}
    for precision in ("int8", "int16", "fp16"):
        _, low = lowered(precision)
        p = low.program
        got[precision] = dict(
            line=[w["LINE_STRIDE"] for w in writes(p, "CDMA", "D_LINE_STRIDE")][1],
            surf=[w["SURF_STRIDE"] for w in writes(p, "CDMA", "D_SURF_STRIDE")][1],
            bpk=[w["BYTE_PER_KERNEL"] for w in writes(p, "CDMA", "D_WEIGHT_SIZE_0")][1] + 1,
            wbytes=[w["WEIGHT_BYTES"] for w in writes(p, "CDMA", "D_WEIGHT_BYTES")][1],
            eps=[w["ENTRIES"] for w in writes(p, "CDMA", "D_ENTRY_PER_SLICE")][1] + 1,
            channels=[w["DATAIN_CHANNEL"] for w in writes(p, "CDMA", "D_DATAIN_SIZE_1")][1] + 1,
            pool1=low.buffers["pool1"])
    atom = hw.memory_atomic_bytes
    for precision, size in (("int8", 1), ("int16", 2), ("fp16", 2)):
        g = got[precision]
        surfaces = -(-20 * size // atom)
        assert g["channels"] == 20
        assert g["line"] == 12 * atom and g["surf"] == 12 * 12 * atom
        assert g["pool1"].surfaces == surfaces
        assert g["pool1"].size_bytes == surfaces * 12 * 12 * atom
        assert g["bpk"] == 20 * 5 * 5 * size
        assert g["wbytes"] == -(-50 * 20 * 25 * size // 128) * 128
        # a line of 12 pixels, `surfaces` atoms each, in CBUF entries of bank_width_bytes
        assert g["eps"] == -(-12 * surfaces * atom // hw.cbuf.bank_width_bytes)
    assert got["int16"]["eps"] == 2 * got["int8"]["eps"]


def reference_weight_image(w: np.ndarray, block_c: int, group_k: int) -> bytes:
    """In-memory-data-formats, direct convolution: groups of `group_k` kernels; in a group the
    1 x 1 x block_c cubes scanned C' -> K -> W -> H -> C (C' fastest)."""
    k, c, r, s = w.shape
    out = bytearray()
    for k0 in range(0, k, group_k):
        for c0 in range(0, c, block_c):
            for y in range(r):
                for x in range(s):
                    for kk in range(k0, min(k0 + group_k, k)):
                        out += w[kk, c0:c0 + block_c, y, x].astype(w.dtype.newbyteorder("<")).tobytes()
    return bytes(out)


@pytest.mark.parametrize("dtype", [INT8, INT16, FP16])
def test_weight_image_groups_by_precision(dtype):
    hw = load_hardware("nv_full")
    rng = np.random.default_rng(3)
    w = rng.integers(-300, 300, (37, 70, 2, 3)).astype(dtype.numpy)
    group = kernel_group(hw, dtype)
    assert group == (32 if dtype is INT8 else 16)
    image = formats.pack_direct_weights(w, dtype, hw.atomic_c, group)
    want = reference_weight_image(w, hw.atomic_c, group)
    assert image.tobytes()[:len(want)] == want and not image[len(want):].any()


def test_fp16_memory_images_are_round_to_nearest_even():
    prep, low = lowered("fp16")
    loads = {c.source: c.data for c in low.program.commands if isinstance(c, MemLoad)}
    # the input: FP16 bits of the float input, 1 channel in a 16-channel atom
    x = prep.input.astype(np.float64)
    data = loads["data"].view(np.float16).reshape(28, 28, 16)
    assert np.array_equal(data[:, :, 0], x[0].astype(np.float16))
    assert not np.any(data[:, :, 1:].view(np.uint16))
    # ip2's weights (10 kernels of 500 channels, 1x1) in blocks of 64 channels
    w = prep.plan.layers[-2].conv.weight if prep.plan.layers[-1].kind == "gpu" else \
        prep.plan.layers[-1].conv.weight
    got = loads["ip2_weights"].view(np.float16)[:w.size]
    want = np.frombuffer(reference_weight_image(w.astype(np.float16), 64, 16), np.float16)
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16))
    # ip2's bias: one FP16 value per channel, TWO_BYTE, PER_KERNEL, no output converter
    bias = next(p for p in prep.plan.layers[-2 if prep.plan.layers[-1].kind == "gpu" else -1]
                .sdp.post_ops if p.kind == "bias").bias
    operand = next(v for k, v in loads.items() if k.startswith("ip2") and "operand" in k)
    assert np.array_equal(operand.view(np.float16)[:10].view(np.uint16),
                          bias.astype(np.float16).view(np.uint16))
    brdma = writes(low.program, "SDP_RDMA", "D_BRDMA_CFG")
    assert brdma and all(w["BRDMA_DATA_SIZE"] == 1 and w["BRDMA_DATA_MODE"] == 0 for w in brdma
                         if not w["BRDMA_DISABLE"])
    assert all(w["CVT_SCALE"] == 1 for w in writes(low.program, "SDP", "D_CVT_SCALE"))
    assert all(w["CVT_SHIFT"] == 0 for w in writes(low.program, "SDP", "D_CVT_SHIFT"))


def test_fp16_conversion_saturates_and_rounds_to_nearest_even():
    # 1 + 2^-11 is halfway between 1 and the next FP16 value: even mantissa (1) wins
    got = to_fp16([1 + 2 ** -11, 1 + 3 * 2 ** -11, 1e6, -1e6])
    assert got.tolist() == [1.0, 1 + 2 ** -9, 65504.0, -65504.0]
    assert quantize_tensor(np.array([1e6, -1e6, 0.4]), 1 / 32767, INT16).tolist() == \
        [32767, -32768, round(0.4 * 32767)]


def test_fp16_pdp_reciprocals_are_fp17():
    """FP17: 1 sign, 6 exponent bits (bias 31), 10 mantissa bits; the nearest value to 1/k."""
    for k in range(1, 9):
        bits = fp17_bits(1.0 / k)
        e, m = bits >> 10, bits & 0x3FF
        value = 2.0 ** (e - 31) * (1 + m / 1024)
        ulp = 2.0 ** (e - 31 - 10)
        assert abs(value - 1.0 / k) <= ulp / 2, k
    assert fp17_bits(1.0) == 31 << 10 and fp17_bits(0.5) == 30 << 10


def test_fp16_average_pooling_registers():
    scn = scenario(precision="fp16", network={"input": [16, 6, 6], "layers": [
        {"name": "c", "type": "conv", "out_channels": 16, "kernel": 1},
        {"name": "s", "type": "add", "input": ["c", "data"]},
        {"name": "p", "type": "pool", "method": "avg", "kernel": 3, "stride": 3}]})
    with contextlib.redirect_stdout(io.StringIO()):
        prep = prepare(scn)
    program = lower(prep.plan, context(prep)).program
    (pdp,) = writes(program, "PDP", "D_RECIP_KERNEL_WIDTH")
    assert pdp["RECIP_KERNEL_WIDTH"] == fp17_bits(1 / 3)
    assert [w["INPUT_DATA"] for w in writes(program, "PDP", "D_DATA_FORMAT")] == [2]
    # the element-wise operand is the FP16 input cube itself: TWO_BYTE, PER_ELEMENT
    (brdma,) = [w for w in writes(program, "SDP_RDMA", "D_BRDMA_CFG") if not w["BRDMA_DISABLE"]] \
        or [w for w in writes(program, "SDP_RDMA", "D_NRDMA_CFG") if not w["NRDMA_DISABLE"]]
    assert list(brdma.values()).count(1) >= 2


def test_googlenet_fp16_timing_only(tmp_path):
    """GoogLeNet (two LRN layers) compiles and runs in FP16 on nv_full, timing only."""
    scn = parse_scenario({"hardware": "nv_full", "network": "googlenet", "precision": "fp16",
                          "mode": "timing", "input": {"seed": 1}, "weights": {"seed": 1}}, REPO)
    scn.outputs.formats, scn.outputs.plots = (), False
    with contextlib.redirect_stdout(io.StringIO()):
        report = execute(prepare(scn), tmp_path)
    dla = [r for r in report.rows if r.device == "DLA"]
    assert {r.precision for r in dla} == {"FP16"} and sum(r.kinds == "cdp" for r in dla) == 2
    assert report.total_cycles > 0


# --------------------------------------------------------------------------------------------------
# INT8 unchanged: the compiler still writes the committed v2 traces byte for byte

@pytest.mark.parametrize("name", ["lenet5_nv_small", "tinymix_nv_large"])
def test_int8_programs_are_unchanged(tmp_path, name):
    scn = load_scenario(SCENARIOS / f"{name}.yaml")
    with contextlib.redirect_stdout(io.StringIO()):
        prep = prepare(scn)
    emit_trace(prep.plan, context(prep), tmp_path, name)
    committed = TRACES / scn.hardware.name / name
    files = sorted(p.name for p in committed.iterdir())
    assert sorted(p.name for p in (tmp_path / name).iterdir()) == files
    match, mismatch, errors = filecmp.cmpfiles(committed, tmp_path / name, files, shallow=False)
    assert not mismatch and not errors


# --------------------------------------------------------------------------------------------------
# End to end

def run(name: str, tmp_path: Path, **change):
    """Run a shipped scenario; skips (naming the unit) while a unit still refuses the precision."""
    scn = load_scenario(SCENARIOS / f"{name}.yaml")
    for k, v in change.items():
        setattr(scn, k, v)
    scn.outputs.formats = ()
    scn.outputs.plots = False
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            return execute(prepare(scn), tmp_path)
    except UnsupportedError as exc:
        pytest.skip(f"{name}: a unit does not run {scn.precision} yet: {exc}")


@pytest.mark.parametrize("name, floor_db", [("lenet5_nv_full_int16", 60.0),
                                            ("lenet5_nv_full_fp16", 50.0)])
def test_lenet5_16_bit_sqnr(tmp_path, name, floor_db):
    report = run(name, tmp_path)
    rows = [r for r in report.rows if r.device == "DLA"]
    assert len(rows) == 4 and all(r.precision == name.rsplit("_", 1)[1].upper() for r in rows)
    assert all(r.sqnr_db >= floor_db for r in rows), [(r.layer, r.sqnr_db) for r in rows]
    assert report.macs_per_cycle == 1024


@pytest.mark.parametrize("name", ["lenet5_nv_full_int16", "lenet5_nv_full_fp16"])
def test_16_bit_timing_only_matches_values_cycles(tmp_path, name):
    values = run(name, tmp_path)
    timing = run(name, tmp_path, mode="timing")
    assert timing.total_cycles == values.total_cycles > 0
    assert all(r.sqnr_db is None for r in timing.rows)


# --------------------------------------------------------------------------------------------------
# v1 traces of the compiled networks

V1_TRACES = sorted((TRACES / "nv_full").glob("*/input.txn"))


def test_v1_traces_exist():
    assert {p.parent.name for p in V1_TRACES} >= {"lenet5_nv_full_int16", "lenet5_nv_full_fp16"}, \
        "run python tools/make_traces.py"


@pytest.mark.parametrize("txn", V1_TRACES, ids=[p.parent.name for p in V1_TRACES])
def test_v1_trace_replays_and_passes(txn):
    from nvdla_sim.conformance import run_test
    outcome = run_test(txn.parent, load_hardware("nv_full"))
    assert outcome.status == "pass", outcome.error
    dumps = [c for c in outcome.checks if c.kind == "dump_mem"]
    assert len(dumps) == 4 and all(c.passed for c in dumps)


def test_resnet50_fp16_timing_against_int8(tmp_path):
    """The shipped ResNet-50 FP16 scenario, timing only, against the same network in INT8 on
    nv_full: every DLA row runs FP16, the feature maps and weights move twice the bytes, and the
    layers take longer (half the MACs per cycle, twice the DRAM traffic)."""
    fp16 = run("resnet50_nv_full_fp16", tmp_path, mode="timing")
    int8 = run("resnet50_nv_full_fp16", tmp_path, mode="timing", precision="int8")
    assert {r.precision for r in fp16.rows if r.device == "DLA"} == {"FP16"}
    assert {r.precision for r in int8.rows if r.device == "DLA"} == {"INT8"}
    assert (fp16.macs_per_cycle, int8.macs_per_cycle) == (1024, 2048)
    assert fp16.total_macs == int8.total_macs
    assert 1.8 < fp16.total_dram_bytes / int8.total_dram_bytes < 2.2
    assert fp16.total_cycles > 1.3 * int8.total_cycles


MIXED = {"input": [8, 12, 12], "layers": [
    {"name": "c1", "type": "conv", "out_channels": 16, "kernel": 3, "pad": 1},
    {"name": "s1", "type": "sigmoid"},
    {"name": "c2", "type": "conv", "out_channels": 16, "kernel": 3, "pad": 1},
    {"name": "t2", "type": "tanh"},
    {"name": "c3", "type": "conv", "out_channels": 16, "kernel": 1, "relu": True},
    {"name": "a3", "type": "add", "input": ["c3", "t2"]},
    {"name": "p3", "type": "pool", "method": "avg", "kernel": 2}]}


@pytest.mark.parametrize("precision", ["int16", "fp16"])
def test_lut_activations_elementwise_and_average_pooling(tmp_path, precision):
    """Sigmoid / tanh through the SDP LUT (INT16: the INT8 table design at 16 bits; FP16: a table
    fitted in FP16), an element-wise add and an FP17-reciprocal average pooling, end to end."""
    scn = scenario(precision=precision, network=MIXED, input={"seed": 2}, weights={"seed": 2})
    scn.outputs.formats, scn.outputs.plots = (), False
    with contextlib.redirect_stdout(io.StringIO()):
        prep = prepare(scn)
        report = execute(prep, tmp_path)
    assert [r.precision for r in report.rows] == [precision.upper()] * 3
    assert all(r.sqnr_db >= 55.0 for r in report.rows), [(r.layer, r.sqnr_db) for r in report.rows]
    luts = [layer.quant.sdp.y for layer in prep.plan.layers if layer.kind == "conv"]
    assert luts[0] is not None and luts[1] is not None and luts[2] is None


@pytest.mark.parametrize("precision, floor_db", [("int16", 60.0), ("fp16", 50.0)])
def test_16_bit_lrn(tmp_path, precision, floor_db):
    """LRN in INT16 (the CDP table covers every square sum of INT16 inputs) and in FP16 (a table
    of FP16 entries over the calibrated FP32 square sums), against the float32 reference."""
    net = {"input": [8, 12, 12], "layers": [
        {"name": "c1", "type": "conv", "out_channels": 40, "kernel": 3, "pad": 1, "relu": True},
        {"name": "n1", "type": "lrn", "size": 5, "alpha": 1e-4, "beta": 0.75, "k": 1},
        {"name": "c2", "type": "conv", "out_channels": 16, "kernel": 3, "pad": 1},
        {"name": "n2", "type": "lrn", "size": 3, "alpha": 0.01, "beta": 0.75, "k": 2}]}
    scn = scenario(precision=precision, network=net, input={"seed": 2}, weights={"seed": 2})
    scn.outputs.formats, scn.outputs.plots = (), False
    with contextlib.redirect_stdout(io.StringIO()):
        report = execute(prepare(scn), tmp_path)
    assert [r.kinds for r in report.rows] == ["conv", "cdp", "conv", "cdp"]
    assert [r.precision for r in report.rows] == [precision.upper()] * 4
    assert all(r.sqnr_db >= floor_db for r in report.rows), \
        [(r.layer, r.sqnr_db) for r in report.rows]


# --------------------------------------------------------------------------------------------------
# Per-layer precision: INT8 layers feeding INT16 ones through the SDP's INT8 -> INT16 output

MIXED_LENET = {"default": "int8", "layers": {"pool2": "int16", "ip1": "int16", "ip2": "int16"}}


def test_per_layer_precision_registers_and_values(tmp_path):
    prep, low = lowered(MIXED_LENET)
    assert [prep.plan.layer_dtype(layer).name for layer in prep.plan.layers
            if layer.on_dla] == ["INT8", "INT8", "INT8", "INT16", "INT16", "INT16"]
    p = low.program
    # conv2's SDP computes INT8 and writes INT16 to the fused pool2
    assert [(w["PROC_PRECISION"], w["OUT_PRECISION"]) for w in writes(p, "SDP", "D_DATA_FORMAT")] \
        == [(0, 0), (0, 1), (1, 1), (1, 1)]
    assert [w["INPUT_DATA"] for w in writes(p, "PDP", "D_DATA_FORMAT")] == [0, 1]
    assert [w["IN_PRECISION"] for w in writes(p, "CDMA", "D_MISC_CFG")] == [0, 0, 1, 1]
    assert low.buffers["pool1"].dtype is INT8 and low.buffers["pool2"].dtype is INT16
    assert low.buffers["pool2"].surfaces == 4          # 50 INT16 channels, 16 per atom
    scn = scenario(precision=MIXED_LENET)
    scn.outputs.formats, scn.outputs.plots = (), False
    with contextlib.redirect_stdout(io.StringIO()):
        report = execute(prepare(scn), tmp_path)
    assert [r.precision for r in report.rows if r.device == "DLA"] == ["INT8", "INT8", "INT16",
                                                                       "INT16"]
    assert all(r.sqnr_db >= 35.0 for r in report.rows if r.device == "DLA")


@pytest.mark.parametrize("precision, expect", [
    ({"layers": {"ip1": "int16"}},
     "precision.layers: 'pool2' computes in INT8 but its output is read in INT16; PDP cannot "
     "convert (give 'pool2' INT16 too)"),
    ({"default": "int16", "layers": {"ip1": "int8"}},
     "precision.layers: 'pool2' computes in INT16 but its output is read in INT8"),
    ({"layers": {"ip3": "int16"}}, "precision.layers.ip3: no layer 'ip3' in network 'lenet5'"),
    ({"layers": {"ip1": "fp16"}}, "precision.layers.ip1: fp16 does not mix with int8 layers"),
    ({"default": "int4"}, "precision.default: must be one of int8, int16, fp16"),
    ({"layers": ["ip1"]}, "precision.layers: expected a mapping of layer names to precisions"),
])
def test_per_layer_precision_errors(precision, expect):
    with pytest.raises(NvdlaSimError) as exc:
        with contextlib.redirect_stdout(io.StringIO()):
            prepare(scenario(precision=precision))
    assert expect in str(exc.value) and "\n" not in str(exc.value)


def test_a_buffer_has_one_precision():
    net = {"input": [8, 6, 6], "layers": [
        {"name": "a", "type": "conv", "out_channels": 8, "kernel": 1},
        {"name": "b", "type": "conv", "out_channels": 8, "kernel": 1, "input": "data"},
        {"name": "s", "type": "add", "input": ["a", "b"]}]}
    with pytest.raises(NvdlaSimError, match="'data' is read in INT8 by 'a' and in INT16 by 'b'"):
        with contextlib.redirect_stdout(io.StringIO()):
            prepare(scenario(network=net, precision={"layers": {"b": "int16"}}))


def test_per_layer_precision_timing_only_matches_values(tmp_path):
    runs = []
    for mode in ("values+timing", "timing"):
        scn = scenario(precision=MIXED_LENET, mode=mode)
        scn.outputs.formats, scn.outputs.plots = (), False
        with contextlib.redirect_stdout(io.StringIO()):
            runs.append(execute(prepare(scn), tmp_path))
    assert runs[0].total_cycles == runs[1].total_cycles > 0
