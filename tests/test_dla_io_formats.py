"""TensorRT's DLA I/O formats (`input_format` / `output_format`, compiler/io_formats.py).

For each format a small network is compiled and run on the simulated hardware; the input bytes
the program reads are compared with the document's C-array description of the format (written
here in numpy, independently of nvdla_sim.formats), the first layer's CDMA registers with its
strides, and the output, unpacked from memory with the document's description of the output
format, with the float reference (INT8 / FP16 SQNR floors used elsewhere).  Then the rules'
error cases, each naming its rule."""
from __future__ import annotations

import numpy as np
import pytest

from nvdla_sim.compiler.io_formats import io_tensors, pack_io, unpack_io
from nvdla_sim.compiler.lower import lower, run_lowered
from nvdla_sim.datatype import FP16, INT8
from nvdla_sim.errors import NvdlaSimError, UnsupportedError
from nvdla_sim.program import RegWrite
from nvdla_sim.scenario.reference import sqnr_db
from nvdla_sim.scenario.runner import context, prepare
from nvdla_sim.scenario.schema import parse_scenario

LAYERS = [{"name": "c1", "type": "conv", "out_channels": 40, "kernel": 3, "pad": 1, "relu": True},
          {"name": "c2", "type": "conv", "out_channels": 24, "kernel": 3, "pad": 1}]


def scenario(hardware, channels, precision="int8", fmt_in="auto", fmt_out="auto", layers=LAYERS,
             width=13):
    data = {"name": "io", "hardware": hardware, "precision": precision,
            "network": {"input": [channels, 9, width], "layers": layers}, "input": {"seed": 5},
            "weights": {"seed": 4}, "outputs": {"plots": False}, "gpu_fallback": False,
            "input_format": fmt_in, "output_format": fmt_out}
    return parse_scenario(data, ".")


# -- the document's layouts, as C arrays ------------------------------------------------------
def round_up(v, m):
    return -(-v // m) * m


def doc_pack(x, fmt, elem_bytes, hwc4_w_stride_bytes=32):
    """The bytes of (C, H, W) `x` as the document describes format `fmt`."""
    c, h, w = x.shape
    if fmt in ("chw32", "chw16"):           # [C/n][H][W][n], C padded to 32 bytes
        n = 32 // elem_bytes
        a = np.zeros((round_up(c, n) // n, h, w, n), x.dtype)
        for ch in range(c):
            a[ch // n, :, :, ch % n] = x[ch]
    elif fmt == "dla_hwc4":                 # [H][W'][C'], C' in {1, 4}, W stride 32 / 64 bytes
        cp = 1 if c == 1 else 4
        a = np.zeros((h, round_up(w * cp * elem_bytes, hwc4_w_stride_bytes) // (cp * elem_bytes),
                      cp), x.dtype)
        a[:, :w, :c] = x.transpose(1, 2, 0)
    else:                                   # dla_linear: [C][H][roundUp(W, 64 / elementSize)]
        a = np.zeros((c, h, round_up(w, 64 // elem_bytes)), x.dtype)
        a[:, :, :w] = x
    return a.reshape(-1).view(np.uint8)


def doc_unpack(raw, fmt, shape, dtype):
    c, h, w = shape
    n = 32 // dtype(0).itemsize
    a = np.frombuffer(raw[:round_up(c, n) * h * w * dtype(0).itemsize].tobytes(), dtype)
    a = a.reshape(round_up(c, n) // n, h, w, n)
    return np.stack([a[ch // n, :, :, ch % n] for ch in range(c)])


def regs(program, name):
    return [c.value for c in program.commands if isinstance(c, RegWrite) and c.name == name]


def memory(engine, tensor):
    """The address space (DBB or CVSRAM) an io_tensors entry lives in."""
    return engine.memory.space(1 if tensor.space == "DBB" else 0)


def compile_and_run(scn):
    prep = prepare(scn)
    ctx = context(prep)
    lowered = lower(prep.plan, ctx)
    result = run_lowered(lowered, ctx)
    return prep, ctx, lowered, result.engine_result.engine


CASES = [  # hardware, C, precision, input format, output format, W stride of kDLA_HWC4
    ("nv_full", 16, "int8", "chw32", "chw32", None),
    ("nv_full", 3, "int8", "chw32", "chw32", None),      # C <= 4 read as a feature cube
    ("nv_full", 5, "fp16", "chw16", "chw16", None),
    ("xavier_dla", 3, "int8", "dla_hwc4", "chw32", 32),
    ("orin_dla", 3, "int8", "dla_hwc4", "chw32", 64),
    ("orin_dla", 4, "int8", "dla_hwc4", "chw32", 64),
    ("orin_dla", 1, "int8", "dla_hwc4", "chw32", 64),
    ("orin_dla", 1, "int8", "dla_linear", "chw32", None),
]


@pytest.mark.parametrize("hardware, c, precision, fmt_in, fmt_out, hwc4", CASES)
def test_program_reads_and_writes_the_formats(hardware, c, precision, fmt_in, fmt_out, hwc4):
    scn = scenario(hardware, c, precision, fmt_in, fmt_out)
    prep, ctx, lowered, engine = compile_and_run(scn)
    dtype = FP16 if precision == "fp16" else INT8
    e = dtype.bytes
    io = io_tensors(lowered, ctx)
    # the input bytes in memory are the document's layout of the quantised input
    x = ctx.input_int8
    want = doc_pack(x, fmt_in, e, hwc4 or 32)
    packed = pack_io(x, fmt_in, dtype, scn.hardware)    # ends after the last element
    assert np.array_equal(packed, want[:packed.size]) and not want[packed.size:].any()
    inp = io[prep.network.input_name]
    got = memory(engine, inp).read(inp.address, packed.size)
    assert np.array_equal(got, packed)
    assert np.array_equal(unpack_io(got, fmt_in, *x.shape, dtype, scn.hardware), x)
    # the first layer's CDMA reads it with the format's strides
    fmt_reg = regs(lowered.program, "CDMA.D_DATAIN_FORMAT")[0]
    line = regs(lowered.program, "CDMA.D_LINE_STRIDE")[0]
    h, w = x.shape[1:]
    if fmt_in in ("dla_hwc4", "dla_linear"):
        assert fmt_reg & 1 == 1                                   # DATAIN_FORMAT = PIXEL
        assert line == (64 if fmt_in == "dla_linear" else hwc4) * -(-w * (1 if c == 1 else 4)
                                                                   // (64 if fmt_in == "dla_linear" else hwc4))
    else:
        assert fmt_reg & 1 == 0                                   # FEATURE
        assert line == w * 32
        assert regs(lowered.program, "CDMA.D_SURF_STRIDE")[0] == w * h * 32
    # the output, unpacked from memory as the document describes it, against the float reference
    name = prep.network.outputs[0]
    out = io[name]
    t = prep.plan.tensors[prep.plan.root(name)[0]]
    nbytes = round_up(out.channels, 32 // e) * out.height * out.width * e
    raw = memory(engine, out).read(out.address, nbytes)
    cube = doc_unpack(raw, fmt_out, (out.channels, out.height, out.width), dtype.numpy)
    value = t.from_stored(cube).astype(np.float64) * t.scale
    assert sqnr_db(prep.reference[name], value) > (25 if dtype == INT8 else 40)


def test_auto_keeps_the_compilers_choice():
    """auto: the 3-channel INT8 input is an image with 32-byte lines, as before the formats."""
    scn = scenario("orin_dla", 3)
    prep, ctx, lowered, _ = compile_and_run(scn)
    assert regs(lowered.program, "CDMA.D_DATAIN_FORMAT")[0] & 1 == 1
    assert regs(lowered.program, "CDMA.D_LINE_STRIDE")[0] == round_up(13 * 4, 32)


@pytest.mark.parametrize("hardware, c, precision, fmt_in, fmt_out, layers, rule", [
    ("orin_dla", 5, "int8", "dla_hwc4", "auto", LAYERS, "io.hwc4_channels"),
    ("orin_dla", 2, "int8", "dla_hwc4", "auto", LAYERS, "io.hwc4_channels"),
    ("orin_dla", 3, "int8", "dla_hwc4", "auto",
     [{"name": "p", "type": "pool", "kernel": 2}] + LAYERS, "io.hwc4_first_conv"),
    ("orin_dla", 3, "int8", "auto", "dla_hwc4", LAYERS, "io.hwc4_output"),
    ("orin_dla", 8, "int8", "chw16", "auto", LAYERS, "io.precision"),
    ("orin_dla", 8, "fp16", "chw32", "auto", LAYERS, "io.precision"),
    ("orin_dla", 8, "int8", "auto", "chw16", LAYERS, "io.precision"),
    ("nv_full", 8, "int16", "dla_linear", "auto", LAYERS, "io.precision"),
    ("nv_small", 8, "int8", "chw32", "auto", LAYERS, "io.chw_atom"),
    ("nv_small", 8, "int8", "auto", "chw32", LAYERS, "io.chw_atom"),
])
def test_broken_formats_are_one_line_errors_naming_the_rule(hardware, c, precision, fmt_in,
                                                              fmt_out, layers, rule):
    scn = scenario(hardware, c, precision, fmt_in, fmt_out, layers)
    with pytest.raises(NvdlaSimError) as err:
        compile_and_run(scn)
    msg = str(err.value)
    assert f"[rule {rule}]" in msg and "\n" not in msg and not isinstance(err.value,
                                                                          UnsupportedError)


@pytest.mark.parametrize("c, fmt_in, fmt_out", [(3, "dla_linear", "auto"),
                                                (1, "auto", "dla_linear")])
def test_planar_tensors_need_rubik(c, fmt_in, fmt_out):
    with pytest.raises(UnsupportedError, match="RUBIK"):
        compile_and_run(scenario("orin_dla", c, "int8", fmt_in, fmt_out))


def test_unknown_format_is_a_field_error():
    with pytest.raises(NvdlaSimError, match="input_format"):
        scenario("orin_dla", 3, fmt_in="nhwc")


@pytest.mark.parametrize("hardware, c, fmt_in, hwc4", [("orin_dla", 3, "dla_hwc4", 64),
                                                       ("nv_full", 16, "chw32", None)])
def test_a_batch_is_the_documents_n_dimension(hardware, c, fmt_in, hwc4):
    """batch 2: [N][...] -- image n's input and output one whole tensor after image n-1."""
    data = {"name": "iob", "hardware": hardware, "precision": "int8", "batch": 2,
            "network": {"input": [c, 9, 13], "layers": LAYERS}, "input": {"seed": 6},
            "weights": {"seed": 4}, "outputs": {"plots": False}, "gpu_fallback": False,
            "input_format": fmt_in, "output_format": "chw32"}
    prep, ctx, lowered, engine = compile_and_run(parse_scenario(data, "."))
    io = io_tensors(lowered, ctx)
    x = ctx.input_int8
    want = np.concatenate([doc_pack(image, fmt_in, 1, hwc4 or 32) for image in x])
    inp = io[prep.network.input_name]
    one = want.size // 2
    assert lowered.batch_strides[prep.plan.root(prep.network.input_name)[0]] == one
    assert np.array_equal(memory(engine, inp).read(inp.address, one), want[:one])
    packed = pack_io(x[1], fmt_in, INT8, prep.scenario.hardware)    # image 1 ends early
    assert np.array_equal(memory(engine, inp).read(inp.address + one, packed.size),
                          want[one:one + packed.size])
    name = prep.network.outputs[0]
    out = io[name]
    t = prep.plan.tensors[prep.plan.root(name)[0]]
    nbytes = round_up(out.channels, 32) * out.height * out.width
    assert lowered.batch_strides[prep.plan.root(name)[0]] == nbytes
    raw = memory(engine, out).read(out.address, 2 * nbytes)
    for i in range(2):
        cube = doc_unpack(raw[i * nbytes:], "chw32", (out.channels, out.height, out.width),
                          np.int8)
        value = t.from_stored(cube).astype(np.float64) * t.scale
        assert sqnr_db(prep.reference[name][i], value) > 25


def test_a_padded_last_layer_cannot_write_a_packed_output():
    """A Winograd last layer writes whole 4x4 output blocks (lines padded to 16 atoms here):
    not kCHW32's packed strides; auto accepts it (the report unpacks with the real strides)."""
    data = {"name": "iow", "hardware": "nv_full", "precision": "int8", "winograd": "on",
            "network": {"input": [32, 9, 13], "layers": LAYERS[1:]}, "input": {"seed": 1},
            "weights": {"seed": 2}, "outputs": {"plots": False}, "mode": "timing-only"}
    prep = prepare(parse_scenario(data, "."))
    lowered = lower(prep.plan, context(prep))
    out = lowered.buffers[prep.plan.root(prep.network.outputs[0])[0]]
    assert out.line_stride == 16 * 32 != 13 * 32
    with pytest.raises(NvdlaSimError, match=r"\[rule io.output_packed\]"):
        compile_and_run(parse_scenario({**data, "output_format": "chw32"}, "."))
