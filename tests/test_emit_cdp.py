"""CDP emitter: LRN layers and LUT loading, checked on the engine against integer references
(reference map 5.9) and, for the LRN table design, against float LRN."""
from __future__ import annotations

import numpy as np
import pytest

from emit_helpers import random_cube, rha, run_layer, sat, sat8
from nvdla_sim.compiler.emit import Converter, ProgramBuilder
from nvdla_sim.compiler.emit_cdp import CdpLayer, emit_cdp, lrn_layer
from nvdla_sim.compiler.lut import LE_ENTRIES, LO_ENTRIES, Lut, constant_lut, lrn_lut_hand, \
    write_lut
from nvdla_sim.config import load_hardware
from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.program import RegWrite


def lrn_on_engine(preset, x, layer):
    def emit(b, alloc, p):
        emit_cdp(b, layer, p["x"], p["y"])
    cubes, _, program = run_layer(preset, {"x": x}, {"y": x.shape}, emit)
    return cubes["y"], program


def test_constant_table_hand_computed():
    # LUT 300 everywhere, multiply by x, output >> 8: 5*300/256 = 5.86 -> 6; -3*300/256 = -3.52
    # -> -4; 127*300/256 = 148.8 saturates; 0 -> 0
    x = np.array([5, -3, 127, 0], np.int8).reshape(4, 1, 1)
    out, _ = lrn_on_engine("nv_small", x, CdpLayer(3, constant_lut(300), out_cvt=Converter(0, 1, 8)))
    assert out.reshape(-1).tolist() == [6, -4, 127, 0]


@pytest.mark.parametrize("preset", ["nv_small", "nv_large"])
@pytest.mark.parametrize("local_size", [3, 9])
def test_converters_and_multiplier_with_a_constant_table(preset, local_size):
    rng = np.random.default_rng(local_size)
    x = random_cube(rng, (37, 3, 5))
    layer = CdpLayer(local_size, constant_lut(-700), in_cvt=Converter(3, 5, 2),
                     out_cvt=Converter(-70, 11, 12))
    out, _ = lrn_on_engine(preset, x, layer)
    xc = sat(rha((x.astype(np.int64) - 3) * 5, 2), -256, 255)
    assert np.array_equal(out, sat8(rha((xc * -700 + 70) * 11, 12)))


def test_mul_bypass_outputs_the_table():
    x = random_cube(np.random.default_rng(2), (9, 2, 2))
    out, _ = lrn_on_engine("nv_small", x, CdpLayer(5, constant_lut(1000), mul_bypass=True,
                                                   out_cvt=Converter(0, 3, 5)))
    assert (out == 94).all()              # 1000 * 3 / 32 = 93.75 -> 94


def test_lo_table_lookup_with_square_sum_bypassed():
    # ss = xc when the square sum is bypassed; a linear LO table from -128 with step 1 returns
    # (x + 128) * 100, which the output converter divides by 128.
    lo = tuple(i * 100 for i in range(LO_ENTRIES))
    never = (1 << 37) - 1                 # LE starts above every input: it always underflows
    lut = Lut(le_table=(0,) * LE_ENTRIES, lo_table=lo, le_function="LINEAR", le_start=never,
              le_end=never, lo_start=-128, lo_end=128, lo_index_select=0,
              uflow_priority="LO", oflow_priority="LO", hybrid_priority="LO")
    x = np.arange(-128, 128, dtype=np.int64).astype(np.int8).reshape(16, 4, 4)
    out, _ = lrn_on_engine("nv_small", x, CdpLayer(3, lut, sqsum_bypass=True, mul_bypass=True,
                                                   out_cvt=Converter(0, 1, 7)))
    assert np.array_equal(out, sat8(rha((x.astype(np.int64) + 128) * 100, 7)))


@pytest.mark.parametrize("preset", ["nv_small", "nv_large"])
@pytest.mark.parametrize("n, alpha, beta, k, s_in", [(5, 1e-4, 0.75, 1.0, 0.8),
                                                   (3, 2e-3, 0.75, 2.0, 0.3),
                                                   (9, 1.0, 0.5, 1.0, 0.02)])
def test_lrn_design_matches_float_lrn(preset, n, alpha, beta, k, s_in):
    x = random_cube(np.random.default_rng(n), (37, 4, 6))
    s_out = s_in * 0.6
    out, _ = lrn_on_engine(preset, x, lrn_layer(n, alpha, beta, k, s_in, s_out))
    xf = x.astype(np.float64) * s_in
    padded = np.pad(xf ** 2, ((n // 2, n // 2), (0, 0), (0, 0)))
    ss = sum(padded[i:i + x.shape[0]] for i in range(n))
    reference = np.clip(np.rint(xf / (k + alpha / n * ss) ** beta / s_out), -128, 127)
    assert np.abs(out - reference).max() <= 1


def test_lrn_table_design():
    d = lrn_lut_hand(5, 1e-4, 0.75, 1.0, 0.8)
    assert d.max_square_sum == 5 * 128 * 128
    assert d.lut.lo_index_select == 9          # 256 * 2^9 = 131072 >= 81921 > 256 * 2^8
    assert d.lut.lo_table[0] == 2 ** 14 == round(1 / d.entry_lsb)   # f(-1) ~ f(0) = 1 at 2^14
    assert (d.lut.lo_start, d.lut.lo_end) == (-1, 256 * 512 - 1)   # ss = 0 hits the table


def test_lut_loading_registers():
    lut = Lut(le_table=(1,) * LE_ENTRIES, lo_table=(-2,) * LO_ENTRIES, lo_start=-5,
              le_end=(1 << 33), lo_index_select=-3)
    b = ProgramBuilder(load_hardware("nv_small"))
    write_lut(b, "CDP", lut)
    regs = [(c.name, c.value) for c in b.commands if isinstance(c, RegWrite)]
    data = [v for name, v in regs if name == "CDP.S_LUT_ACCESS_DATA"]
    assert data == [1] * LE_ENTRIES + [0xFFFE] * LO_ENTRIES
    cfg = [v for name, v in regs if name == "CDP.S_LUT_ACCESS_CFG"]
    assert cfg == [1 << 17, 1 << 17 | 1 << 16]                # write LE, then write LO
    d = dict(regs)
    assert (d["CDP.S_LUT_LO_START_LOW"], d["CDP.S_LUT_LO_START_HIGH"]) == (0xFFFFFFFB, 0x3F)
    assert (d["CDP.S_LUT_LE_END_LOW"], d["CDP.S_LUT_LE_END_HIGH"]) == (0, 2)
    assert d["CDP.S_LUT_INFO"] == 0xFD << 16                  # exponent mode: offset 0, LO select -3


def test_registers_and_errors():
    x = random_cube(np.random.default_rng(0), (8, 2, 2))
    _, program = lrn_on_engine("nv_small", x, CdpLayer(7, None, sqsum_bypass=True))
    regs = {c.name: c.value for c in program.commands if isinstance(c, RegWrite)}
    assert regs["CDP.D_LRN_CFG"] == 2 and regs["CDP.D_FUNC_BYPASS"] == 1
    assert "CDP.S_LUT_ACCESS_CFG" not in regs                 # no table: keep the loaded one
    with pytest.raises(NvdlaSimError, match="LRN window 4"):
        lrn_on_engine("nv_small", x, CdpLayer(4, None))
    with pytest.raises(NvdlaSimError, match="input converter"):
        lrn_on_engine("nv_small", x, CdpLayer(3, None, in_cvt=Converter(0, 1, 32)))
