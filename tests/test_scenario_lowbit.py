"""Sub-8-bit what-if in scenarios (`quantization: {weight_bits, activation_bits, rounding, seed}`):
the schema's one-line errors, the weights and activations the compiled INT8 program carries,
checked against the gemmlowp formula written out here, and the sweep axes."""
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from nvdla_sim.compiler.lower import lower_and_run
from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.scenario.runner import context, dla_tensors, output_sqnr_db, prepare
from nvdla_sim.scenario.schema import load_scenario, parse_scenario
from nvdla_sim.sweep.spec import parse_sweep

BASE = {"hardware": "nv_large", "network": "lenet5", "input": {"seed": 1}, "weights": {"seed": 1}}


def scenario(**quant):
    return parse_scenario({**BASE, "quantization": quant}, Path("."))


def run(**quant):
    prep = prepare(scenario(**quant))
    result = lower_and_run(prep.plan, replace(context(prep), timeline=False))
    return prep, result, dla_tensors(prep.plan, result.outputs)


@pytest.mark.parametrize("quant,message", [
    ({"weight_bits": 0}, "quantization.weight_bits: must be >= 1, got 0"),
    ({"weight_bits": 9}, "quantization.weight_bits: must be <= 8 (the INT8 container holds at most "
                         "8 bits), got 9"),
    ({"activation_bits": 9}, "quantization.activation_bits: must be <= 8"),
    ({"activation_bits": 2.5}, "quantization.activation_bits: must be an integer, got 2.5"),
    ({"rounding": "stochastic"}, "quantization.rounding: must be one of nearest, probabilistic, "
                                 "addmod97, got 'stochastic'"),
    ({"seed": -1}, "quantization.seed: must be >= 0"),
])
def test_bad_quantization_fields_are_one_line_errors(quant, message):
    with pytest.raises(NvdlaSimError, match=message.replace("(", r"\(").replace(")", r"\)")) as e:
        scenario(**quant)
    assert "\n" not in str(e.value)


def test_sub_8_bit_needs_int8_and_the_file_is_named(tmp_path):
    f = tmp_path / "q.yaml"
    f.write_text("hardware: nv_full\nnetwork: lenet5\nprecision: int16\n"
                 "quantization: {weight_bits: 4}\n")
    with pytest.raises(NvdlaSimError, match=r"q.yaml: quantization.weight_bits: 4 bits need "
                                            r"precision int8 .* not int16"):
        load_scenario(f)
    f.write_text("hardware: nv_large\nnetwork: lenet5\nquantization: {activation_bits: 1}\n")
    with pytest.raises(NvdlaSimError, match="activation_bits: 1 bit has no code for 0, and "
                                            "tensor 'data' has negative values"):
        prepare(load_scenario(f))


def _int8_weights(w: np.ndarray) -> np.ndarray:
    """Per-kernel symmetric INT8 weights, round half away from zero (the compiler's rule)."""
    k = w.shape[0]
    amax = np.abs(w.reshape(k, -1)).max(axis=1).astype(np.float64)
    v = w / (amax / 127)[:, None, None, None]
    return np.clip(np.trunc(v + np.copysign(0.5, v)), -127, 127).astype(np.int64)


@pytest.mark.parametrize("bits", [2, 4, 6])
def test_weights_are_the_documents_requantization_of_the_int8_weights(bits):
    prep = prepare(scenario(weight_bits=bits, rounding="nearest"))
    half = (1 << (bits - 1)) - 1
    for layer in prep.plan.layers:
        if layer.kind != "conv":
            continue
        q8 = _int8_weights(layer.conv.weight)
        # symmetric form: src = q + 127 over 254, maxval 2^N - 2, offset 127, minus the middle
        want = ((q8 + 127) * (2 * half) + 127) // 254 - half
        assert layer.quant.weight.dtype == np.int8
        assert np.array_equal(layer.quant.weight.astype(np.int64), want), layer.name
        assert np.abs(layer.quant.weight).max() == half
        k = want.shape[0]
        amax = np.abs(layer.conv.weight.reshape(k, -1)).max(axis=1)
        assert np.allclose(layer.quant.weight_scale, amax / half, rtol=1e-6)


def test_add_mod_dither_runs_on_across_the_layers_weights():
    seed = 3
    prep = prepare(scenario(weight_bits=3, rounding="addmod97", seed=seed))
    used = 0
    for layer in prep.plan.layers:
        if layer.kind != "conv":
            continue
        q8 = _int8_weights(layer.conv.weight)
        n = q8.size
        offsets = (seed + 97 * (used + np.arange(1, n + 1))) % 254
        want = ((q8.ravel() + 127) * 6 + offsets) // 254 - 3
        assert np.array_equal(layer.quant.weight.astype(np.int64).ravel(), want), layer.name
        used += n


def test_eight_bits_is_the_ordinary_int8_program_in_every_mode():
    _, r0, v0 = run()
    for mode in ("probabilistic", "addmod97"):
        _, r, v = run(weight_bits=8, activation_bits=8, rounding=mode, seed=5)
        assert r.total_cycles == r0.total_cycles
        assert all(np.array_equal(v[k], v0[k]) for k in v0)


def test_activations_land_on_the_n_bit_grid_and_timing_moves_by_the_clamp_stages_only():
    _, r8, _ = run()
    prep, r4, values = run(activation_bits=4)
    cal = prep.calibration
    # the INT8 register program plus the grid clamp's ALU stages (BN / EW: test_lowbit_clamp.py),
    # each a few cycles of SDP pipeline depth per layer (timing/params.yaml sdp.stage_cycles 7)
    assert set(cal.clamps) == {l.name for l in prep.plan.layers if l.kind == "conv"}
    for a, b in zip(r8.layers, r4.layers):         # (a fused pooling lasts as long as its conv)
        grown = (b.end_cycle - b.start_cycle) - (a.end_cycle - a.start_cycle)
        assert 0 <= grown <= 2 * 7 * 2, b.name    # at most two stages, a few cycles each
    assert r8.total_cycles < r4.total_cycles < r8.total_cycles + 2 * 7 * 2 * len(r4.layers)
    for name, v in values.items():
        ref = prep.reference[name]
        grid = 15 if ref.min() >= 0 else 7             # unsigned / signed 4-bit codes
        assert cal.grid[name] == grid
        codes = v.astype(np.float64) / cal.scales[name]
        assert np.allclose(codes, np.round(codes), atol=1e-3)
        # the SDP clamps to the grid (emit_sdp.grid_clamp): no code beyond it
        assert np.abs(np.round(codes)).max() <= grid, name
        group = [t for t, g in cal.groups.items() if g == cal.groups[name]]   # pool in = out
        amax = max(np.abs(prep.reference[t]).max() for t in group)
        assert np.allclose(cal.scales[name], amax / grid, rtol=1e-6)
    # the input is the host's: INT8 at amax / 127, then requantized with the rounding offset 127
    x = prep.input.astype(np.float64)
    s8 = np.abs(x).max() / 127
    q8 = np.clip(np.trunc(x / s8 + np.copysign(0.5, x)), -127, 127).astype(np.int64)
    want = ((q8 + 127) * 14 + 127) // 254 - 7
    assert np.array_equal(np.round(values["data"] / cal.scales["data"]), want)


def test_sqnr_falls_with_bits_per_layer_and_end_to_end():
    out, lowest = [], []
    for bits in (8, 6, 4, 2):
        prep, _, values = run(weight_bits=bits, activation_bits=bits)
        out.append(output_sqnr_db(prep, values))
        name = prep.network.outputs[0]
        assert out[-1] == pytest.approx(_sqnr(prep.reference[name], values[name]))
        lowest.append(min(_sqnr(prep.reference[k], v) for k, v in values.items()))
    assert out == sorted(out, reverse=True) and lowest == sorted(lowest, reverse=True)
    assert out[0] > 25 and out[2] < out[0] - 10


def _sqnr(ref, got) -> float:
    ref = ref.astype(np.float64)
    err = got.astype(np.float64) - ref
    return 10 * np.log10((ref ** 2).sum() / (err ** 2).sum())


def test_sweep_axes_for_bits_and_rounding(tmp_path):
    spec = parse_sweep({"base": {**BASE}, "grid": {"weight_bits": [8, 4],
                                                   "rounding": ["nearest", "addmod97"]}}, tmp_path)
    assert [p.scenario["quantization"] for p in spec.points] == [
        {"weight_bits": 8, "rounding": "nearest"}, {"weight_bits": 8, "rounding": "addmod97"},
        {"weight_bits": 4, "rounding": "nearest"}, {"weight_bits": 4, "rounding": "addmod97"}]
    for axis, bad, message in (("activation_bits", 9, "must be a bit width in 1..8, got 9"),
                               ("weight_bits", 0, "must be a bit width in 1..8, got 0"),
                               ("rounding", "up", "unknown rounding mode 'up'")):
        with pytest.raises(NvdlaSimError, match=rf"grid.{axis}\[1\]: {message}"):
            parse_sweep({"base": {**BASE}, "grid": {axis: [4, bad] if axis != "rounding"
                                                    else ["nearest", bad]}}, tmp_path)


def test_probabilistic_weights_follow_the_seed():
    def weights(seed):
        prep = prepare(scenario(weight_bits=3, rounding="probabilistic", seed=seed))
        return [layer.quant.weight for layer in prep.plan.layers if layer.kind == "conv"]
    a, b, c = weights(1), weights(1), weights(2)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c))
    # every code is one of the two grid points around the exact value q8 * 3 / 127
    for layer_w, q in zip(a, [layer.conv.weight for layer in prepare(scenario()).plan.layers
                              if layer.kind == "conv"]):
        exact = _int8_weights(q) * 3 / 127
        assert np.all((layer_w >= np.floor(exact)) & (layer_w <= np.ceil(exact)))


def test_report_states_the_output_sqnr_and_the_what_if(tmp_path):
    import json
    from nvdla_sim.report.tables import format_console
    from nvdla_sim.scenario.runner import execute
    scn = parse_scenario({**BASE, "quantization": {"weight_bits": 4, "activation_bits": 6,
                                                   "rounding": "addmod97"},
                          "outputs": {"directory": str(tmp_path), "plots": False,
                                      "formats": ["json"]}}, Path("."))
    prep = prepare(scn)
    rep = execute(prep, tmp_path)
    out = prep.network.outputs[0]
    _, _, values = run(weight_bits=4, activation_bits=6, rounding="addmod97")
    assert rep.output_sqnr_db == pytest.approx(_sqnr(prep.reference[out], values[out]))
    text = format_console(rep)
    assert f"network output SQNR: {rep.output_sqnr_db:.1f} dB" in text
    assert "4-bit weights, 6-bit activations" in text and "round activations to nearest" in text
    data = json.loads(next(tmp_path.glob("*.json")).read_text())
    assert data["quantization"] == {"weight_bits": 4, "activation_bits": 6,
                                    "rounding": "addmod97", "seed": 0}
