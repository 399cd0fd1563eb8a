"""Channel post-extension chosen by the compiler (`post_extension: auto` on nv_full) for an
image-input first layer: the CACC output of the compiled layer equals an int64 reference of the
convolution and the run without post-extension, bit for bit; the CSC is busy fewer cycles with
it; the weight image is the data-format document's post-extended layout (checked against the
independent packer of tests/test_post_extension.py); where it cannot be used, `auto` runs without
it and `on` is a one-line error."""
from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np
import pytest

from nvdla_sim import formats
from nvdla_sim.compiler.emit_conv import post_extension_rows
from nvdla_sim.config import load_hardware
from nvdla_sim.datatype import FP16, INT8, INT16
from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.scenario.runner import execute, prepare
from nvdla_sim.scenario.schema import parse_scenario

from emit_helpers import compile_and_capture
from test_post_extension import pack_post_extended

REPO = Path(__file__).resolve().parent.parent


def scenario(kernel, stride, pad, post_extension, precision="int8", input_shape=(3, 23, 21),
             hardware="nv_full", out_channels=20):
    layers = [{"type": "conv", "name": "c1", "out_channels": out_channels, "kernel": kernel,
               "stride": stride, "pad": pad, "relu": True},
              {"type": "conv", "name": "c2", "out_channels": 8, "kernel": 1}]
    data = {"name": "postext", "hardware": hardware, "precision": precision,
            "network": {"input": list(input_shape), "layers": layers},
            "input": {"seed": 2}, "weights": {"seed": 3}, "winograd": "off",
            "post_extension": post_extension}
    if load_hardware(hardware).features.weight_compression:
        data["weight_compression"] = "off"
    scn = parse_scenario(data, REPO)
    scn.outputs.plots = False
    return scn


def run(scn):
    """Compile and run: the first CACC cube, the CSC's busy cycles of the first layer's
    hardware layers, the plan, the quantised input."""
    prep, ctx, lowered, _, result, cubes = compile_and_capture(scn)
    return cubes, result.unit_stats["CSC"]["busy_cycles"], prep, ctx.input_int8, lowered


def reference(x: np.ndarray, w: np.ndarray, stride: int, pad: int) -> np.ndarray:
    """int64 convolution of the (C, H, W) int8 image with (K, C, R, S) weights, zero padding."""
    c, h, width = x.shape
    k, _, r, s = w.shape
    xp = np.zeros((c, h + 2 * pad, width + 2 * pad), np.int64)
    xp[:, pad:pad + h, pad:pad + width] = x
    out_h, out_w = (h + 2 * pad - r) // stride + 1, (width + 2 * pad - s) // stride + 1
    out = np.zeros((k, out_h, out_w), np.int64)
    wt = w.astype(np.int64)
    for i in range(r):
        for j in range(s):
            patch = xp[:, i:i + (out_h - 1) * stride + 1:stride, j:j + (out_w - 1) * stride + 1:stride]
            out += np.einsum("kc,chw->khw", wt[:, :, i, j], patch)
    return out


CASES = [  # kernel, stride, pad, expected rows (nv_full ATOMIC_C 64: S * 4 lanes * rows <= 64)
    (3, 1, 1, 4),
    (3, 2, 1, 4),
    (7, 1, 3, 2),
    (7, 2, 3, 2),
    (5, 2, 2, 2),
]


@pytest.mark.parametrize("kernel, stride, pad, rows", CASES,
                         ids=[f"{k}x{k}-s{s}" for k, s, _, _ in CASES])
def test_post_extension_is_bit_exact_and_faster(kernel, stride, pad, rows):
    off_cubes, off_busy, _, x, _ = run(scenario(kernel, stride, pad, "off"))
    on_cubes, on_busy, prep, _, lowered = run(scenario(kernel, stride, pad, "auto"))
    first = prep.plan.layers[0]
    assert first.lowering.get("post_extension") == rows
    assert any(f"{rows}-line post-extension" in n for n in lowered.notes.get("c1", []))
    k = first.quant.weight.shape[0]
    ref = reference(x, first.quant.weight, stride, pad)
    for got in (off_cubes[0], on_cubes[0]):
        np.testing.assert_array_equal(np.asarray(got)[:k].astype(np.int64), ref)
    # the second layer runs on feature input either way: same values
    np.testing.assert_array_equal(np.asarray(off_cubes[1]), np.asarray(on_cubes[1]))
    # ceil(R / rows) kernel-row packages per stripe instead of R
    assert on_busy < off_busy


def test_post_extension_with_a_cbuf_height_split():
    # 420 lines of 406 padded pixels do not fit the data banks: two parts, each post-extended
    shape = (3, 420, 400)
    off_cubes, off_busy, _, x, _ = run(scenario(7, 2, 3, "off", input_shape=shape, out_channels=8))
    on_cubes, on_busy, prep, _, lowered = run(scenario(7, 2, 3, "auto", input_shape=shape,
                                                       out_channels=8))
    assert any("split by height into 2 parts" in n for n in lowered.notes["c1"])
    assert prep.plan.layers[0].lowering.get("post_extension") == 2
    ref = reference(x, prep.plan.layers[0].quant.weight, 2, 3)
    for cubes in (off_cubes, on_cubes):
        got = np.concatenate([np.asarray(c)[:8] for c in cubes[:2]], axis=1)
        np.testing.assert_array_equal(got.astype(np.int64), ref)
    assert on_busy < off_busy


def test_eleven_by_eleven_cannot_and_on_is_a_one_line_error():
    # 11 columns x 4 lanes = 44 > 32 = ATOMIC_C / 2: no post-extension on nv_full
    cubes, _, prep, x, lowered = run(scenario(11, 4, 2, "auto", input_shape=(3, 31, 27)))
    first = prep.plan.layers[0]
    assert "post_extension" not in first.lowering
    np.testing.assert_array_equal(np.asarray(cubes[0])[:first.quant.weight.shape[0]],
                                  reference(x, first.quant.weight, 4, 2))
    with pytest.raises(NvdlaSimError, match="c1 cannot use channel post-extension") as err:
        run(scenario(11, 4, 2, "on", input_shape=(3, 31, 27)))
    assert "\n" not in str(err.value)


def test_rows_rule():
    hw = load_hardware("nv_full")
    assert post_extension_rows(hw, (3, 3), 4, (1, 1), False) == (4, None)
    assert post_extension_rows(hw, (2, 4), 4, (1, 1), False) == (2, None)   # 4 rows: no gain
    assert post_extension_rows(hw, (7, 7), 4, (1, 1), False) == (2, None)
    assert post_extension_rows(hw, (7, 7), 1, (1, 1), False) == (4, None)   # R8: 7 lanes a row
    assert post_extension_rows(hw, (1, 3), 4, (1, 1), False)[0] == 1
    assert post_extension_rows(hw, (3, 3), 4, (2, 2), False)[0] == 1
    assert post_extension_rows(hw, (3, 3), 4, (1, 1), True)[0] == 1
    assert post_extension_rows(hw, (11, 11), 4, (1, 1), False)[0] == 1


@pytest.mark.parametrize("rows, dtype, group", [(2, INT8, 32), (4, INT8, 32), (2, INT16, 16),
                                                (4, FP16, 16)])
def test_formats_pack_the_documented_layout(rows, dtype, group):
    rng = np.random.default_rng(rows)
    k, c, r, s = 37, 3, 7, 3
    w = rng.integers(-100, 100, (k, c, r, s)).astype(dtype.numpy)
    packed = formats.pack_image_weights(w, 4, dtype, rows, 64, group)
    ext = formats.pre_extend(w, 4)[:, :, :, 0]                 # (K, S * 4, R)
    np.testing.assert_array_equal(packed, pack_post_extended(ext, rows, group))
    back = formats.unpack_image_weights(packed, w.shape, 4, dtype, rows, 64, group)
    np.testing.assert_array_equal(back, w)


@pytest.mark.parametrize("precision", ["int16", "fp16"])
def test_sixteen_bit_networks_read_features_without_post_extension(precision):
    # the compiler reads INT16 / FP16 inputs as feature cubes (no 16-bit pixel formats): nothing
    # to post-extend; the run still matches itself with auto and off
    cubes = {}
    for mode in ("off", "auto"):
        got, _, prep, _, _ = run(scenario(7, 2, 3, mode, precision=precision))
        assert "post_extension" not in prep.plan.layers[0].lowering
        cubes[mode] = np.asarray(got[0])
    np.testing.assert_array_equal(cubes["off"].view(np.uint32), cubes["auto"].view(np.uint32))


def test_defaults_and_bad_values():
    assert scenario(3, 1, 1, "auto").post_extension == "auto"
    data = {"name": "d", "hardware": "nv_small", "network": {"input": [3, 8, 8], "layers": [
        {"type": "conv", "name": "c", "out_channels": 4, "kernel": 3}]}}
    assert parse_scenario(data, REPO).post_extension == "off"
    assert parse_scenario({**data, "hardware": "nv_full"}, REPO).post_extension == "auto"
    with pytest.raises(NvdlaSimError, match="post_extension") as err:
        parse_scenario({**data, "post_extension": "sometimes"}, REPO)
    assert "\n" not in str(err.value)


def test_report_notes_the_post_extension(tmp_path):
    with contextlib.redirect_stdout(io.StringIO()) as out:
        execute(prepare(scenario(7, 2, 3, "auto")), tmp_path)
    assert "2-line post-extension" in out.getvalue() + "".join(
        p.read_text() for p in tmp_path.rglob("*") if p.is_file() and p.suffix in (".md", ".txt",
                                                                                   ".json"))
