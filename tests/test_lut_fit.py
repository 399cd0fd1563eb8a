"""LUT programming (nvdla_sim.lut): designs, measured errors against independent float64 /
integer references, out-of-range paths, replay of the written registers on the engine, the CLI
and bad inputs."""
import math
import re

import numpy as np
import pytest

from nvdla_sim import lut
from nvdla_sim.cli import main
from nvdla_sim.compiler.emit import ProgramBuilder, read_output
from nvdla_sim.compiler.emit_sdp import SdpLayer, YStage, emit_sdp
from nvdla_sim.compiler.placement import Allocator
from nvdla_sim.datatype import INT8, INT16
from nvdla_sim.engine import Engine
from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.frontends.cfg_trace import parse_cfg
from nvdla_sim.program import RegWrite


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-np.asarray(x, np.float64)))


def rha(v):
    v = np.asarray(v, np.float64)
    return np.trunc(v + np.copysign(0.5, v))


def interp_reference(r, table, design_table):
    """Independent model of a linear table hit: entries interpolated linearly between nodes."""
    nodes = design_table.nodes()
    return np.interp(r.lut_only.x / r.in_scale, nodes, np.asarray(table, np.float64))


# -- the target -------------------------------------------------------------------------
def test_cli_sigmoid_on_nv_large_is_within_two_percent(capsys, tmp_path):
    assert main(["lut", "fit", "--function", "sigmoid", "--range", "-8", "8",
                 "--project", "nv_large", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    pct = float(re.search(r"= ([0-9.]+) % of the output range", out).group(1))
    assert pct < 2.0
    assert (tmp_path / "lut.cfg").exists() and (tmp_path / "lut.png").stat().st_size > 1000
    # the printed error is the one an independent float64 evaluation of the output gives
    r = lut.fit("sigmoid", (-8, 8), "int8", "nv_large")
    err = np.abs(r.output.y - sigmoid(r.output.x)).max()
    assert err == pytest.approx(r.max_error, rel=1e-12)
    assert 100 * err / (sigmoid(8) - sigmoid(-8)) == pytest.approx(pct, abs=1e-3)


# -- table modes against independent references ----------------------------------------------------
def test_lo_linear_raw_int16_is_the_interpolated_table():
    r = lut.fit("tanh", (-4, 4), "int16", "nv_full", designs="linear")
    d = r.design
    assert not d.lo.exponent and d.lo.select == 8       # 65534 inputs / 256 steps
    u = r.lut_only.x / r.in_scale
    lo_only = np.ones(u.size, bool) if d.le.disabled else \
        (u <= d.le.nodes()[0]) | (u >= d.le.nodes()[-1])     # outside a density table
    ref = interp_reference(r, r.lut.lo_table, d.lo)
    got = r.lut_only.y / r.out_scale
    assert lo_only.sum() > 1000
    assert np.abs(got - ref)[lo_only].max() <= 0.5 + 1e-9     # one rounding of the interpolation
    # entries are f at the nodes, rounded to int16 units
    nodes = d.lo.nodes()
    expect = rha(np.tanh(np.clip(nodes, r.lut_only.x.min() / r.in_scale,
                                 r.lut_only.x.max() / r.in_scale) * r.in_scale) / r.out_scale)
    inside = (nodes >= r.lut_only.x.min() / r.in_scale) & (nodes <= r.lut_only.x.max() / r.in_scale)
    assert np.array_equal(np.asarray(r.lut.lo_table)[inside], expect[inside])
    assert r.lut_only.max_error < 4 * r.out_scale


def test_le_linear_density_wins_where_both_hit():
    r = lut.fit("sigmoid", (-8, 8), "int16", "nv_full", designs="linear")
    d = r.design
    assert "LE linear density" in d.description and not d.hybrid_lo and d.uflow_lo and d.oflow_lo
    stats = r.lut_only.counters
    assert stats["lut_le_hit"] > 0 and stats["lut_lo_hit"] > stats["lut_le_hit"]
    u = r.lut_only.x / r.in_scale
    le_nodes = d.le.nodes()
    in_le = (u > le_nodes[0]) & (u < le_nodes[-1])
    ref = np.interp(u[in_le], le_nodes, np.asarray(r.lut.le_table, np.float64))
    assert np.abs(r.lut_only.y[in_le] / r.out_scale - ref).max() <= 0.5 + 1e-9
    # the density table does not make the LUT worse than the raw one alone
    raw = [c for c in r.candidates if c[0] == "LO linear raw table"][0]
    assert r.lut_only.max_error <= raw[1] + 1e-12


def test_le_exponent_raw_with_lo_density_for_rsqrt():
    r = lut.fit("rsqrt", (1, 1e6), "int16", "nv_full", designs="exponent")
    d = r.design
    assert d.le.exponent and d.le.offset == 0
    u = r.lut_only.x / r.in_scale
    # exponent hits: octave of u - start picks the entry, the remainder interpolates
    only_le = u > d.lo.end if not d.lo.disabled else np.ones(u.size, bool)
    ref = np.interp(u[only_le], d.le.nodes()[:33], np.asarray(r.lut.le_table[:33], np.float64))
    assert np.abs(r.lut_only.y[only_le] / r.out_scale - ref).max() <= 0.5 + 1e-9
    # LRN-like: an error of a few % of the output range at most with the exponent design
    assert r.relative_max_error < 0.05
    assert lut.fit("rsqrt", (1, 1e6), "int16", "nv_full").max_error <= r.max_error


@pytest.mark.parametrize("designs", ["linear", "exponent"])
def test_fp16_tables_against_float64(designs):
    r = lut.fit("sigmoid", (-6, 6), "fp16", "nv_full", designs=designs)
    assert r.in_scale == r.out_scale == 1.0
    err = np.abs(r.output.y - sigmoid(r.output.x))
    assert err.max() == pytest.approx(r.max_error, rel=1e-12)
    if designs == "linear":
        assert r.max_error < 2e-3          # FP16 output rounding near 1 is 2^-11
    else:
        assert r.design.le.exponent and r.max_error < 0.3


# -- out-of-range paths: under/overflow along the tangent -----------------------------------------
@pytest.mark.parametrize("precision,hw", [("int16", "nv_full"), ("int8", "nv_large"),
                                          ("fp16", "nv_full")])
def test_linear_function_extrapolates_exactly_beyond_the_range(precision, hw):
    # entries of 4 / 32767 leave room for f up to 4 beyond the range (INT outputs saturate)
    out_scale = None if precision == "fp16" else 4 / 32767
    r = lut.fit("0.25*x + 1", (-4, 4), precision, hw, out_scale=out_scale, designs="linear")
    wide = r.measure((-6, 6))
    assert wide.counters["lut_uflow"] > 0 and wide.counters["lut_oflow"] > 0
    ref = 0.25 * wide.x + 1
    lsb = r.output_scale if precision != "fp16" else 2.0 ** -9
    assert np.abs(wide.y - ref).max() <= 1.5 * lsb


def test_exponent_underflow_and_overflow_paths_fp16():
    r = lut.fit("0.5*x", (1, 8), "fp16", "nv_full", designs="exponent")
    below = r.measure((-2, 1))
    assert below.counters["lut_uflow"] > 0
    assert np.abs(below.y - 0.5 * below.x).max() < 0.01
    assert np.abs(r.output.y - 0.5 * r.output.x).max() < 0.01


def test_slope_fixed_encoding():
    assert lut.slope_fixed(0.0) == (0, 0) or lut.slope_fixed(0.0).scale == 0
    s = lut.slope_fixed(0.3)
    assert s.shift == 15 and s.scale == round(0.3 * 2 ** 15)
    s = lut.slope_fixed(1000.5)
    assert s.scale / 2.0 ** s.shift == pytest.approx(1000.5, rel=1e-4) and abs(s.scale) <= 32767
    s = lut.slope_fixed(5e6)                    # needs a left shift
    assert s.shift < 0 and s.scale * 2.0 ** -s.shift == pytest.approx(5e6, rel=1e-3)


# -- replay of the written registers on the engine -------------------------------------------
@pytest.mark.parametrize("precision,hw,shape", [("int8", "nv_large", (1, 15, 17)),
                                                ("int16", "nv_full", (4, 64, 256))])
def test_replaying_the_written_registers_reproduces_the_error(precision, hw, shape, tmp_path):
    r = lut.fit("sigmoid", (-8, 8), precision, hw)
    dtype = INT8 if precision == "int8" else INT16
    u = np.round(r.output.x / r.in_scale).astype(np.int64)
    n = int(np.prod(shape))
    assert u.size <= n
    cube = np.zeros(n, np.int64)
    cube[:u.size] = u
    cube = cube.reshape(shape).astype(dtype.numpy)

    alloc = Allocator(r.hw)
    b = ProgramBuilder(r.hw, "lut_replay")
    src = alloc.feature("x", *shape, dtype=dtype)
    dst = alloc.feature("y", *shape, dtype=dtype)
    b.load_cube(src, cube)
    b.mem_fill(dst.address, dst.size_bytes)
    emit_sdp(b, alloc, SdpLayer(y=YStage(lut=r.lut), out_cvt=r.output_converter, dtype=dtype),
             src, dst)
    program = b.build()
    # the program's LUT writes are exactly the .cfg fragment the tool writes
    paths = r.write(tmp_path)
    fragment = [(c.addr, c.value) for c in parse_cfg(paths["cfg"], r.hw.nvdla_version).commands
                if isinstance(c, RegWrite)]
    lut_writes = [(c.addr, c.value) for c in program.commands
                  if isinstance(c, RegWrite) and ".S_LUT_" in c.name]
    assert lut_writes == fragment and len(fragment) == 65 + 257 + 2 + 10
    result = Engine(r.hw).run(program)
    out = read_output(result.engine, dst).reshape(-1)[:u.size].astype(np.float64)
    y = out * r.output_scale
    assert np.array_equal(y, r.output.y)
    assert np.abs(y - sigmoid(r.output.x)).max() == pytest.approx(r.max_error, rel=1e-12)


def test_registers_dict_names_every_lut_register():
    r = lut.fit("tanh", (-3, 3), "int8", "nv_large")
    d = r.registers()
    assert d["registers"]["SDP.S_LUT_CFG"]["LUT_HYBRID_PRIORITY"] in (0, 1)
    assert set(d["registers"]) >= {"SDP.S_LUT_CFG", "SDP.S_LUT_INFO", "SDP.S_LUT_LO_START",
                                   "SDP.S_LUT_LO_END", "SDP.S_LUT_LE_SLOPE_SCALE"}
    assert len(d["lo_table"]) == 257 and len(d["le_table"]) == 65
    assert d["max_error"] == r.max_error and "lut_lo_hit" in d["hit_statistics"]


# -- functions and bad inputs -------------------------------------------------------------------
def test_expressions_are_evaluated_with_numpy_only():
    f = lut.parse_function("np.exp(-x**2) + sin(x) * pi")
    x = np.array([0.0, 1.0])
    assert np.allclose(f(x), np.exp(-x ** 2) + np.sin(x) * math.pi)
    for bad in ("__import__('os').system('true')", "x.__class__", "open('f')", "[x]",
                "lambda: x", "np.load(x)", "cos", "x +"):
        with pytest.raises(NvdlaSimError):
            lut.parse_function(bad)


@pytest.mark.parametrize("kwargs,message", [
    (dict(function="log(x)", x_range=(-1, 1)), "not finite at x="),
    (dict(function="1/x", x_range=(-1, 1), precision="fp16", hw="nv_full"), "not finite"),
    (dict(function="sigmoid", x_range=(8, -8)), "LOW must be below HIGH"),
    (dict(function="sigmoid", x_range=(-8, 8), precision="fp16"), "supports INT8 only"),
    (dict(function="sigmoid", x_range=(-8, 8), hw="nv_small"), "no SDP lookup table"),
    (dict(function="sigmoid", x_range=(-8, 8), precision="int4"), "not one of int8"),
])
def test_bad_inputs_are_one_line_errors(kwargs, message):
    with pytest.raises(NvdlaSimError, match=message) as exc:
        lut.fit(**kwargs)
    assert "\n" not in str(exc.value)


def test_cli_bad_function_is_a_one_line_error(capsys):
    assert main(["lut", "fit", "--function", "log(x)", "--range", "-1", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("nvdla-sim: error: function 'log(x)' is not finite") and "\n" not in err


def test_fp16_registers_replay_on_the_engine(tmp_path):
    """The compiler does not emit FP16 LUT layers yet: an FP16 SDP layer with an empty Y stage is
    emitted, the LUT fragment inserted before D_DP_EW_CFG and EW_LUT_BYPASS cleared."""
    from dataclasses import replace
    from nvdla_sim.datatype import FP16
    from nvdla_sim.regs import register_map
    r = lut.fit("tanh", (-3, 3), "fp16", "nv_full")
    x = r.output.x.astype(np.float16)
    shape = (2, 8, -(-x.size // 16))
    n = int(np.prod(shape))
    cube = np.zeros(n, np.float16)
    cube[:x.size] = x
    cube = cube.reshape(shape)
    alloc = Allocator(r.hw)
    b = ProgramBuilder(r.hw, "lut_fp16")
    src = alloc.feature("x", *shape, dtype=FP16)
    dst = alloc.feature("y", *shape, dtype=FP16)
    b.load_cube(src, cube)
    b.mem_fill(dst.address, dst.size_bytes)
    emit_sdp(b, alloc, SdpLayer(y=YStage(), dtype=FP16), src, dst)
    program = b.build()
    fragment = [c for c in parse_cfg(r.write(tmp_path)["cfg"], r.hw.nvdla_version).commands
                if isinstance(c, RegWrite)]
    ew_cfg = register_map(r.hw.nvdla_version).units["SDP"].regs["D_DP_EW_CFG"]
    lut_bypass = ew_cfg.fields["EW_LUT_BYPASS"].mask
    commands = []
    for c in program.commands:
        if isinstance(c, RegWrite) and c.name == "SDP.D_DP_EW_CFG":
            commands += fragment
            c = replace(c, value=c.value & ~lut_bypass)
        commands.append(c)
    program = replace(program, commands=commands)
    result = Engine(r.hw).run(program)
    y = read_output(result.engine, dst).reshape(-1)[:x.size].astype(np.float64)
    assert np.array_equal(y, r.output.y)
    assert np.abs(y - np.tanh(r.output.x)).max() == pytest.approx(r.max_error, rel=1e-12)
    assert r.max_error < 2e-3
