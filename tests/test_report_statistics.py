"""Statistics registers in scenario reports (issue 12): the SDP / CACC saturation and LUT hit
counters the compiled program enables, read back per hardware layer, against independent
integer references written from the C model's rules (sdp_c.cpp: the output converter flags a
result that does not fit its 17-bit truncation; sdp_y_idx.cpp: linear LUT index and the
priority rules), and the report's rows, flags and files."""
from __future__ import annotations

import contextlib
import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest

from nvdla_sim.compiler.emit import IDENTITY
from nvdla_sim.compiler.lower import lower
from nvdla_sim.program import RegWrite
from nvdla_sim.report.statistics import (LUT_RANGE_FLAG, SATURATION_FLAG, lut_counts,
                                         statistics_flags)
from nvdla_sim.scenario.runner import context, execute, prepare
from nvdla_sim.scenario.schema import parse_scenario

REPO = Path(__file__).resolve().parent.parent


def _scenario(tmp_path: Path, hardware: str, network: dict, **extra):
    data = {"name": "stats", "hardware": hardware, "network": network,
            "input": {"seed": 5}, "weights": {"seed": 5},
            "outputs": {"directory": str(tmp_path / "out")}, **extra}
    return parse_scenario(data, REPO)


def _run(scn, tmp_path):
    with contextlib.redirect_stdout(io.StringIO()) as out:
        prep = prepare(scn)
        rep = execute(prep, tmp_path / "out")
    return prep, rep, out.getvalue()


def _shift_right_round(t: np.ndarray, n: int) -> np.ndarray:
    """t / 2^n rounded half away from zero (the SDP multiplier's rounding)."""
    if n <= 0:
        return t
    a = np.abs(t)
    q = (a >> n) + ((a >> (n - 1)) & 1)
    return np.where(t < 0, -q, q)


def _x1_values(prep, layer) -> np.ndarray:
    """The X1 stage output of a 1x1 convolution, in int64: the integer convolution of the
    quantised input and weights, + bias << ALU_SHIFT, * MUL >> MUL_SHIFT (rounded)."""
    q = layer.quant
    x = context(prep).input_int8.astype(np.int64)                 # (C, H, W)
    w = q.weight.astype(np.int64)[:, :, 0, 0]                      # (K, C)
    acc = _shift_right_round(np.einsum("kc,chw->khw", w, x), q.clip_truncate)   # CACC
    assert np.all(np.abs(acc) < 1 << 31)
    st = q.sdp.x1
    k = acc.shape[0]
    if st.alu == "sum":
        bias = np.broadcast_to(np.asarray(st.alu_operand, np.int64), (k,))
        acc = acc + (bias << st.alu_shift)[:, None, None]
    m = np.broadcast_to(np.asarray(st.mul_operand, np.int64), (k,))
    v = _shift_right_round(acc * m[:, None, None], st.mul_shift)
    assert np.all(np.abs(v) < 1 << 31)                             # no 32-bit saturation here
    return v


def test_sdp_saturation_count_matches_the_quantised_values(tmp_path):
    """An INT16 1x1 convolution (nv_full) calibrated at the median: the outputs spread to many
    times the INT16 range.  The SDP counter flags results beyond the output converter's 17-bit
    truncation (clipping to INT16 itself is not counted by the hardware); the report's count
    equals the count of X1 values, computed in numpy from the quantised input and weights, that
    leave 17 bits."""
    net = {"input": [32, 6, 6], "layers": [
        {"name": "c1", "type": "conv", "out_channels": 32, "kernel": 1}]}
    scn = _scenario(tmp_path, "nv_full", net, precision="int16",
                    quantization={"calibration": "percentile", "percentile": 50})
    prep, rep, out = _run(scn, tmp_path)
    layer = prep.plan.layers[0]
    assert layer.quant.sdp.out_cvt == IDENTITY and layer.quant.sdp.x2 is None
    v = _x1_values(prep, layer)
    expected = int(np.count_nonzero((v > 65535) | (v < -65536)))
    row = rep.rows[0]
    assert row.statistics["SDP.D_PERF_OUT_SATURATION"] == expected
    assert row.statistics["CACC.D_OUT_SATURATION"] == 0
    assert 10 < expected < v.size // 2                             # a real test: some, not all
    assert row.stats_flags and "saturated" in row.stats_flags[0]
    assert "FLAG c1:" in out
    files = {p.name for p in (tmp_path / "out").iterdir()}
    assert "layer_statistics.png" in files
    data = json.loads((tmp_path / "out" / "report.json").read_text())
    assert data["rows"][0]["statistics"]["SDP.D_PERF_OUT_SATURATION"] == expected
    rows = list(csv.DictReader(open(tmp_path / "out" / "report.csv")))
    assert int(rows[0]["saturated"]) == expected


def _classify(x: np.ndarray, start: int, select: int, entries: int) -> np.ndarray:
    """Linear table: -1 underflow (x <= START), +1 overflow (index >= entries - 1), 0 hit."""
    idx = (x - start) >> select
    return np.where(x <= start, -1, np.where(idx >= entries - 1, 1, 0))


def test_sdp_lut_hit_counts_match_the_table_ranges(tmp_path):
    """A sigmoid on SDP (nv_large, INT8): the LUT input of every element (the X1 value in
    2^-12 units, computed in numpy) classified by the programmed tables' ranges and the
    priority registers gives the hardware's LE / LO hit, hybrid, under- and overflow counts;
    hits plus under- and overflows cover every element."""
    net = {"input": [32, 6, 6], "layers": [
        {"name": "c1", "type": "conv", "out_channels": 32, "kernel": 1},
        {"name": "sg", "type": "sigmoid"}]}
    prep, rep, _ = _run(_scenario(tmp_path, "nv_large", net), tmp_path)
    layer = prep.plan.layers[0]
    lut = layer.quant.sdp.y.lut
    assert lut.le_function == "LINEAR"
    x = _x1_values(prep, layer).ravel()
    le = _classify(x, lut.le_start, lut.le_index_select, 65)
    lo = _classify(x, lut.lo_start, lut.lo_index_select, 257)
    both_under, both_over = (le == -1) & (lo == -1), (le == 1) & (lo == 1)
    one_hit = (le == 0) != (lo == 0)
    hybrid_pick = np.where(lut.hybrid_priority == "LO", lo, le)    # both hit, or mixed misses
    chosen = np.where(both_under, -1, np.where(both_over, 1, np.where(one_hit, 0, hybrid_pick)))
    unit, counts = lut_counts(rep.rows[0].statistics)
    assert unit == "SDP"
    assert counts == {"le_hit": int(np.sum(le == 0)), "lo_hit": int(np.sum(lo == 0)),
                      "hybrid": int(np.sum(chosen == 0)), "uflow": int(np.sum(chosen == -1)),
                      "oflow": int(np.sum(chosen == 1))}
    assert counts["hybrid"] + counts["uflow"] + counts["oflow"] == x.size
    assert counts["le_hit"] > 0 and counts["lo_hit"] > 0           # both tables in use
    luts = rep.rows[0].luts
    assert luts[0]["function"] == "sigmoid" and luts[0]["lookups"] == x.size
    assert 0 < luts[0]["max_error"] < 1e-3


def test_timing_only_statistics_are_not_available(tmp_path):
    net = {"input": [32, 6, 6], "layers": [
        {"name": "c1", "type": "conv", "out_channels": 32, "kernel": 1},
        {"name": "sg", "type": "sigmoid"}]}
    prep, rep, out = _run(_scenario(tmp_path, "nv_large", net, mode="timing"), tmp_path)
    assert all(r.statistics is None for r in rep.rows)
    assert "statistics registers: n/a (timing-only run)" in out
    data = json.loads((tmp_path / "out" / "report.json").read_text())
    assert data["rows"][0]["statistics"] is None
    assert not (tmp_path / "out" / "layer_statistics.png").exists()


def test_perf_enable_takes_redundant_slots_and_keeps_cycles(tmp_path):
    """Both SDP register groups get D_PERF_ENABLE (LUT, saturation, NaN counting) in place of a
    write of a reset value to a fresh group: same number of writes, same cycles as the program
    without it."""
    from nvdla_sim.compiler import perf_enable
    from nvdla_sim.compiler.lower import run_lowered
    from nvdla_sim.regs import register_map
    scn = parse_scenario({"name": "l", "hardware": "nv_small", "network": "lenet5",
                          "input": {"seed": 1}, "weights": {"seed": 1}}, REPO)
    with contextlib.redirect_stdout(io.StringIO()):
        prep = prepare(scn)
    ctx = context(prep)
    on = lower(prep.plan, ctx)
    real = perf_enable.enable_perf_counters
    try:
        perf_enable.enable_perf_counters = lambda b, steps: None
        off = lower(prep.plan, ctx)
    finally:
        perf_enable.enable_perf_counters = real
    rmap = register_map(2)
    perf = rmap.units["SDP"].regs["D_PERF_ENABLE"]
    writes = [c for c in on.program.commands if isinstance(c, RegWrite)]
    enables = [c for c in writes if c.name == "SDP.D_PERF_ENABLE"]
    assert len(enables) == 2
    fields = {n for n, f in perf.fields.items() if enables[0].value >> f.lo & 1}
    assert fields == {"PERF_LUT_EN", "PERF_SAT_EN", "PERF_NAN_INF_COUNT_EN"}
    assert len(writes) == sum(isinstance(c, RegWrite) for c in off.program.commands)
    changed = [(a, b) for a, b in zip(on.program.commands, off.program.commands)
               if isinstance(a, RegWrite) and a != b]
    assert all(type(a) is type(b) for a, b in zip(on.program.commands, off.program.commands))
    assert len(changed) == 2
    for new, old in changed:                                        # the replaced writes
        _, reg = rmap.decode_address(old.addr)
        assert old.value == reg.reset_value and old.name.startswith("SDP.D_")
    a, b = run_lowered(on, ctx), run_lowered(off, ctx)
    assert [(t.start_cycle, t.end_cycle) for t in a.layers] == \
        [(t.start_cycle, t.end_cycle) for t in b.layers]
    sdp_stats = [t.statistics for t in b.layers if t.name.startswith(("conv", "ip"))]
    assert all("SDP.D_PERF_OUT_SATURATION" not in s for s in sdp_stats)   # not enabled: not counted
    assert all("SDP.D_PERF_OUT_SATURATION" in t.statistics for t in a.layers
               if t.name.startswith(("conv", "ip")))


def test_flag_thresholds():
    stats = {"CACC.D_OUT_SATURATION": 1, "SDP.D_PERF_OUT_SATURATION": 0}
    assert statistics_flags(stats, int(1 / SATURATION_FLAG)) == []          # exactly 0.1 %: not above
    assert statistics_flags(stats, int(1 / SATURATION_FLAG) - 1)
    lut = {f"CDP.D_PERF_LUT_{k}": 0 for k in ("LE_HIT", "LO_HIT", "HYBRID", "UFLOW", "OFLOW")}
    lut["CDP.D_PERF_LUT_HYBRID"] = 99
    lut["CDP.D_PERF_LUT_OFLOW"] = 1                                        # 1 of 100: not above 1 %
    assert statistics_flags(lut, 100) == []
    lut["CDP.D_PERF_LUT_UFLOW"] = 1
    flags = statistics_flags(lut, 100)
    assert len(flags) == 1 and "CDP LUT out of range" in flags[0]
    assert LUT_RANGE_FLAG == 0.01


def test_lrn_table_is_the_better_of_hand_design_and_fit():
    """INT8 LRN: the compiler's table is whichever of the hand design and lut.fit errs less on
    the CDP kernel, against f in float64 at the square sums the kernel saw; INT16 square sums
    (beyond 32 bits) keep the hand design."""
    from nvdla_sim.compiler.lut import lrn_lut, lrn_lut_hand
    from nvdla_sim.lut.cdp import run_cdp_lut, square_sums
    n, alpha, beta, k, s_in = 5, 1e-4, 0.75, 1.0, 0.05
    chosen, hand = lrn_lut(n, alpha, beta, k, s_in), lrn_lut_hand(n, alpha, beta, k, s_in)

    def max_error(lut):
        ss, y, _ = run_cdp_lut(lut, square_sums(hand.max_square_sum))
        return float(np.max(np.abs(y * hand.entry_lsb - (k + alpha / n * ss * s_in ** 2) ** -beta)))

    assert max_error(chosen.lut) <= max_error(hand.lut) < 1e-4
    assert chosen.lut.measured["max_error"] == pytest.approx(max_error(chosen.lut))
    assert chosen.entry_lsb == hand.entry_lsb
    wide = lrn_lut(n, alpha, beta, k, 1e-3, 32768)
    assert "hand design" in wide.lut.measured["design"]
    assert wide.lut.measured["max_error"] < 1e-4


def _classify_exponent(x: np.ndarray, start: int, offset: int, entries: int) -> np.ndarray:
    """Exponent table: d = x - START; d <= 0 or log2(d) below INDEX_OFFSET underflows,
    log2(d) - offset >= entries - 1 overflows."""
    d = x - start
    log2 = np.floor(np.log2(np.maximum(d, 1))).astype(np.int64)
    idx = log2 - offset
    return np.where((d <= 0) | (idx < 0), -1, np.where(idx >= entries - 1, 1, 0))


def test_cdp_lut_counters_of_a_relu_lrn_layer(tmp_path):
    """ReLU -> LRN on nv_large (40 channels: the last atom has 24 padding lanes): the CDP's five
    LUT counters are the document's disjoint cases of every lane's lookup at its window's square
    sum (from the convolution's INT8 output), and all-zero windows hit the table (it starts at
    -1), so nothing is flagged."""
    from nvdla_sim.compiler.lower import lower_and_run
    from nvdla_sim.report.statistics import layer_lut
    net = {"input": [8, 12, 12], "layers": [
        {"name": "c1", "type": "conv", "out_channels": 40, "kernel": 3, "pad": 1, "relu": True},
        {"name": "n1", "type": "lrn", "size": 5, "alpha": 1e-4, "beta": 0.75, "k": 1}]}
    scn = _scenario(tmp_path, "nv_large", net)
    with contextlib.redirect_stdout(io.StringIO()):
        prep = prepare(scn)
    res = lower_and_run(prep.plan, context(prep))
    cdp = next(layer for layer in prep.plan.layers if layer.kind == "cdp")
    lut = layer_lut(cdp)
    x = res.outputs["c1"].astype(np.int64)                          # (40, 12, 12) int8
    lanes = -(-x.shape[0] // 32) * 32
    xl = np.zeros((lanes,) + x.shape[1:], np.int64)
    xl[:x.shape[0]] = x
    sq = np.pad(xl ** 2, ((2, 2), (0, 0), (0, 0)))
    ss = sum(sq[i:i + lanes] for i in range(5)).ravel()            # window of 5, clipped at 0
    le = (_classify_exponent(ss, lut.le_start, lut.le_index_offset, 65)
          if lut.le_function == "EXPONENT" else _classify(ss, lut.le_start, lut.le_index_select, 65))
    lo = _classify(ss, lut.lo_start, lut.lo_index_select, 257)
    expected = {"uflow": int(np.sum((le == -1) & (lo == -1))),
                "oflow": int(np.sum((le == 1) & (lo == 1))),
                "le_hit": int(np.sum((le == 0) & (lo != 0))),
                "lo_hit": int(np.sum((lo == 0) & (le != 0)))}
    expected["hybrid"] = ss.size - sum(expected.values())
    t = next(t for t in res.layers if t.name == cdp.name)
    unit, counts = lut_counts(t.statistics)
    assert unit == "CDP" and counts == expected
    assert np.count_nonzero(ss == 0) > 24 * 144 and counts["uflow"] == 0
    assert statistics_flags(t.statistics, 40 * 144) == []


def test_batch_statistics_cover_every_image(tmp_path):
    """batch 2 (nv_full; nv_large has no batch): the LUT lookups of each hardware layer are
    those of both images."""
    net = {"input": [32, 6, 6], "layers": [
        {"name": "c1", "type": "conv", "out_channels": 32, "kernel": 1},
        {"name": "sg", "type": "sigmoid"}]}
    _, rep, _ = _run(_scenario(tmp_path, "nv_full", net, batch=2), tmp_path)
    unit, counts = lut_counts(rep.rows[0].statistics)
    assert counts["hybrid"] + counts["uflow"] + counts["oflow"] == 2 * 32 * 6 * 6
    assert rep.rows[0].luts[0]["lookups"] == 2 * 32 * 6 * 6


def test_fp16_lrn_table_carries_its_measured_error():
    """The FP16 LRN table (lrn_lut_fp16) is measured on the FP16 CDP kernel over its square
    sums; the FP16 output's error stays within a few FP16 steps of f."""
    from nvdla_sim.compiler.lut import lrn_lut_fp16
    d = lrn_lut_fp16(5, 1e-4, 0.75, 1.0, 10.0)
    m = d.lut.measured
    assert m["range"][1] == pytest.approx(d.max_square_sum, rel=1e-3)
    assert 0 < m["max_error"] < 4 * 2.0 ** -11                      # f <= 1: FP16 step 2^-11
    assert m["rms_error"] < m["max_error"]
