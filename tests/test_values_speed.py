"""The BLAS convolution path (kernels/conv_gemm.py) against the exact kernel (kernels/conv.pyx
conv_lines) and an independent int64 numpy sum, on random shapes, strides, dilations, paddings,
grouped (block-diagonal) weights, image-input geometry, INT8 and INT16, extreme values; the
48-bit saturation fallback; the CMAC halves served from one product."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from nvdla_sim.kernels import blas
from nvdla_sim.kernels.conv import conv_lines
from nvdla_sim.kernels.conv_gemm import (ACCUMULATOR_LIMIT, INT8_SLICE, conv_lines_gemm,
                                         int8_slices)
from nvdla_sim.units.cmac import cell_kernels, mac_layer
from nvdla_sim.units.csc import ConvJob


def numpy_sums(lines, weights, out_h, out_w, kernel_w, kernel_c, x_step, s_step, y_step, r_step):
    """Exact (K, OH, OW) int64 sums written from the definition (no accumulator limit)."""
    n_k, n_r, _ = weights.shape
    out = np.zeros((n_k, out_h, out_w), np.int64)
    w = weights.astype(np.int64)
    for r in range(n_r):
        for s in range(kernel_w):
            for oy in range(out_h):
                row = lines[oy * y_step + r * r_step].astype(np.int64)
                for ox in range(out_w):
                    start = ox * x_step + s * s_step
                    out[:, oy, ox] += w[:, r, s * kernel_c:(s + 1) * kernel_c] @ \
                        row[start:start + kernel_c]
    return out


def saturating_sums(lines, weights, out_h, out_w, kernel_w, kernel_c, x_step, s_step, y_step,
                    r_step, block_c):
    """The hardware's INT16 order written out: atomic operations of block_c channels summed
    exactly, added into a 48-bit accumulator that saturates at every step (channel blocks, kernel
    rows, kernel columns)."""
    lo, hi = -(1 << 47), (1 << 47) - 1
    n_k, n_r, _ = weights.shape
    out = np.zeros((n_k, out_h, out_w), np.int64)
    for k in range(n_k):
        for oy in range(out_h):
            for ox in range(out_w):
                acc = 0
                for c0 in range(0, kernel_c, block_c):
                    c1 = min(kernel_c, c0 + block_c)
                    for r in range(n_r):
                        for s in range(kernel_w):
                            d = lines[oy * y_step + r * r_step,
                                      ox * x_step + s * s_step + c0:ox * x_step + s * s_step + c1]
                            wt = weights[k, r, s * kernel_c + c0:s * kernel_c + c1]
                            acc = min(hi, max(lo, acc + int(np.dot(d.astype(np.int64),
                                                                   wt.astype(np.int64)))))
                out[k, oy, ox] = acc
    return out


@st.composite
def layers(draw):
    dtype = draw(st.sampled_from([np.int8, np.int16]))
    info = np.iinfo(dtype)
    image = draw(st.booleans())                       # image input: one column, S*C channels
    c = draw(st.integers(1, 40))
    k = draw(st.integers(1, 24))
    r = draw(st.integers(1, 4))
    s = 1 if image else draw(st.integers(1, 4))
    stride_y, stride_x = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dil_y, dil_x = (1, 1) if image else (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pad = draw(st.integers(0, 2))
    h, w = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    groups = draw(st.sampled_from([g for g in (1, 2, 4) if c % g == 0 and k % g == 0]))
    values = draw(st.sampled_from(["random", "min", "max", "mixed_extremes"]))
    seed = draw(st.integers(0, 2 ** 32 - 1))
    return dtype, info, image, c, k, r, s, stride_y, stride_x, dil_y, dil_x, pad, h, w, groups, \
        values, seed


def build(layer):
    dtype, info, image, c, k, r, s, sy, sx, dy, dx, pad, h, w, groups, values, seed = layer
    rng = np.random.default_rng(seed)
    hp, wp = h + 2 * pad, w + 2 * pad
    span_y, span_x = dy * (r - 1) + 1, dx * (s - 1) + 1
    if image:       # pixel lines: kernel_c = S_img * C channels, one kernel column
        s_img = 3
        kernel_w, kernel_c = 1, s_img * c
        out_w = max(1, (wp - s_img) // sx + 1)
        line_len = (out_w - 1) * sx * c + kernel_c
        x_step, s_step = sx * c, kernel_c
    else:
        kernel_w, kernel_c = s, c
        out_w = max(1, (wp - span_x) // sx + 1)
        line_len = ((out_w - 1) * sx + span_x) * c
        x_step, s_step = sx * c, dx * c
    out_h = max(1, (hp - span_y) // sy + 1)
    rows = (out_h - 1) * sy + span_y
    if values == "min":
        lines = np.full((rows, line_len), info.min, dtype)
        wts = np.full((k, r, kernel_w * kernel_c), info.min, dtype)
    elif values == "max":
        lines = np.full((rows, line_len), info.max, dtype)
        wts = np.full((k, r, kernel_w * kernel_c), info.min, dtype)
    else:
        lo, hi = (info.min, info.max + 1)
        lines = rng.integers(lo, hi, (rows, line_len)).astype(dtype)
        wts = rng.integers(lo, hi, (k, r, kernel_w * kernel_c)).astype(dtype)
        if values == "mixed_extremes":
            lines = np.where(rng.random(lines.shape) < 0.5, info.min, info.max).astype(dtype)
            wts = np.where(rng.random(wts.shape) < 0.5, info.min, info.max).astype(dtype)
    if pad:         # the CSC's pad value (0) around the cube (direct lines only)
        if not image:
            lines.reshape(rows, -1, c)[:, :pad] = 0
            lines[:pad] = 0
    if groups > 1 and not image:   # grouped convolution as the CMAC sees it: block-diagonal
        cg, kg = c // groups, k // groups
        view = wts.reshape(k, r, kernel_w, c)
        for g in range(groups):
            view[g * kg:(g + 1) * kg, :, :, :g * cg] = 0
            view[g * kg:(g + 1) * kg, :, :, (g + 1) * cg:] = 0
    return lines, wts, out_h, out_w, kernel_w, kernel_c, x_step, s_step, sy, dy


@settings(max_examples=150, deadline=None)
@given(layers())
def test_gemm_path_equals_exact_kernel(layer):
    lines, wts, out_h, out_w, kernel_w, kernel_c, x_step, s_step, y_step, r_step = build(layer)
    n_k = wts.shape[0]
    exact = np.empty((n_k, out_h, out_w), np.int64)
    block_c = 64 if lines.dtype == np.int16 else 0
    conv_lines(lines, wts, exact, kernel_w, kernel_c, x_step, s_step, y_step, r_step, block_c)
    fast = np.full((n_k, out_h, out_w), -7, np.int64)
    assert conv_lines_gemm(lines, wts, fast, kernel_w, kernel_c, x_step, s_step, y_step, r_step)
    np.testing.assert_array_equal(fast, exact)
    np.testing.assert_array_equal(fast, numpy_sums(lines, wts, out_h, out_w, kernel_w, kernel_c,
                                                   x_step, s_step, y_step, r_step))


def test_int8_extremes_over_several_float32_slices_stay_exact():
    """All -128: every product is 2^14, 4608 of them per output (3x3x512) = 2^26.2, beyond
    float32's integers: the product runs in slices of at most 1024 columns (2^24 each) and the
    sums are exact (-128 * -128 * 4608)."""
    assert INT8_SLICE * 128 * 128 == 1 << 24
    slices = int8_slices(4608)
    assert len(slices) == 5 and slices[0] == (0, 922) and slices[-1][1] == 4608
    assert all(b - a <= INT8_SLICE for a, b in slices)
    assert int8_slices(1024) == [(0, 1024)] and int8_slices(1025) == [(0, 513), (513, 1025)]
    lines = np.full((5, 5 * 512), -128, np.int8)
    wts = np.full((8, 3, 3 * 512), -128, np.int8)
    out = np.empty((8, 3, 3), np.int64)
    assert conv_lines_gemm(lines, wts, out, 3, 512, 512, 512, 1, 1)
    assert (out == 128 * 128 * 4608).all()
    wts[::2] = 127                       # and mixed signs of the extremes
    assert conv_lines_gemm(lines, wts, out, 3, 512, 512, 512, 1, 1)
    assert (out[::2] == -128 * 127 * 4608).all() and (out[1::2] == 128 * 128 * 4608).all()


def test_int16_that_could_saturate_falls_back_to_the_hardware_order():
    """INT16 over 140,000 channels: 135,040 products of 2^30 (2,110 whole atomic operations of 64)
    saturate the 48-bit accumulator, the last 4,960 are negative.  The BLAS path refuses (its bound exceeds 2^47), and mac_layer's
    result is the hardware's (saturate, then subtract), not the exact sum clamped."""
    c = 140_000
    lines = np.full((1, c), -32768, np.int16)
    lines[0, 135_040:] = 32767
    wts = np.full((2, 1, c), -32768, np.int16)
    out = np.zeros((2, 1, 1), np.int64)
    assert 32768 * 32768 * c > ACCUMULATOR_LIMIT
    assert not conv_lines_gemm(lines, wts, out, 1, c, c, c, 1, 1)
    assert (out == 0).all()                # untouched
    job = ConvJob(lines, wts, kernel_w=1, kernel_c=c, x_step=c, s_step=c, y_step=1, r_step=1,
                  out_h=1, out_w=1, block_c=64, kernel_group=2)
    got = np.concatenate([mac_layer(job, cell_kernels(2, 2, half)) for half in (0, 1)])
    want = saturating_sums(lines, wts, 1, 1, 1, c, c, c, 1, 1, 64)
    np.testing.assert_array_equal(got, want)
    assert want[0, 0, 0] == (1 << 47) - 1 - 4960 * 32767 * 32768     # saturated, then fell
    assert want[0, 0, 0] != min((1 << 47) - 1, 135_040 * 2 ** 30 - 4960 * 32767 * 32768)


def test_cmac_halves_from_one_product_equal_the_exact_kernel_per_half():
    rng = np.random.default_rng(5)
    lines = rng.integers(-128, 128, (10, 10 * 32)).astype(np.int8)
    wts = rng.integers(-128, 128, (40, 3, 3 * 32)).astype(np.int8)
    job = ConvJob(lines, wts, kernel_w=3, kernel_c=32, x_step=32, s_step=32, y_step=1, r_step=1,
                  out_h=8, out_w=8, block_c=32, kernel_group=16)
    for half in (0, 1):
        kernels = cell_kernels(40, 16, half)
        want = np.empty((len(kernels), 8, 8), np.int64)
        conv_lines(lines, np.ascontiguousarray(wts[kernels]), want, 3, 32, 32, 32, 1, 1, 32)
        np.testing.assert_array_equal(mac_layer(job, kernels), want)


def test_single_thread_restores_the_blas_thread_count():
    entry = blas._openblas()
    if entry is None:                     # another BLAS: the context does nothing
        with blas.single_thread():
            pass
        return
    setter, getter = entry
    before = getter()
    with blas.single_thread():
        assert getter() == 1
    assert getter() == before


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 70), st.integers(1, 150), st.integers(1, 3), st.integers(1, 3),
       st.sampled_from([8, 32, 64]), st.sampled_from([1, 8, 16, 32]),
       st.sampled_from([np.int8, np.int16]), st.integers(0, 2 ** 32 - 1))
def test_direct_weight_pieces_are_the_offset_formula(k, c, r, s, atomic_c, group, dtype, seed):
    """pack/unpack_direct_weights (whole pieces) against the per-element offsets of
    direct_weight_offsets, partial kernel groups and channel blocks included."""
    from nvdla_sim import formats
    from nvdla_sim.datatype import INT8, INT16
    dt = INT8 if dtype == np.int8 else INT16
    w = np.random.default_rng(seed).integers(np.iinfo(dtype).min, np.iinfo(dtype).max + 1,
                                             (k, c, r, s)).astype(dtype)
    want = np.zeros(w.size, dtype)
    want[formats.direct_weight_offsets(k, c, r, s, atomic_c, group)] = w
    raw = formats.pack_direct_weights(w, dt, atomic_c, group)
    np.testing.assert_array_equal(raw[:w.size * w.itemsize].view(dtype), want)
    assert not raw[w.size * w.itemsize:].any()
    np.testing.assert_array_equal(formats.unpack_direct_weights(raw, w.shape, dt, atomic_c, group),
                                  w)


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 3), st.integers(1, 5), st.integers(1, 5), st.sampled_from([8, 16, 32]),
       st.sampled_from([np.int8, np.int16]), st.integers(0, 96), st.integers(0, 640),
       st.integers(0, 2 ** 32 - 1))
def test_strided_atom_views_are_the_byte_offsets(n_surf, h, w, atom, dtype, line_gap, surf_gap,
                                                 seed):
    """read_cube / write_cube through strided views against gathering and scattering with
    byte_offsets; strides below one line or surface (overlapping atoms) included, where
    write_cube keeps the index array's order."""
    from nvdla_sim.formats.feature import byte_offsets, read_cube, write_cube
    from nvdla_sim.memory import AddressSpace
    rng = np.random.default_rng(seed)
    elem = np.dtype(dtype).itemsize
    atom_bytes = atom * elem
    line = w * atom_bytes + line_gap - 48          # may be below one line: overlapping atoms
    line = max(line, 0)
    surf = max(0, (h - 1) * line + w * atom_bytes + surf_gap - 320)
    offsets = byte_offsets(w, h, n_surf * atom, line, surf, atom, elem)
    span = int(offsets.max()) + 1
    image = rng.integers(0, 256, span + 64, dtype=np.uint8)
    space = AddressSpace("dbb", 0, 1 << 16)
    space.write(0x100, image)
    got = read_cube(space, 0x100, w, h, n_surf * atom, line, surf, atom, dtype)
    want = image[offsets].reshape(n_surf, h, w, atom * elem).copy().view(dtype)
    np.testing.assert_array_equal(got, want.transpose(0, 3, 1, 2).reshape(n_surf * atom, h, w))
    cube = rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max + 1,
                        (n_surf * atom, h, w)).astype(dtype)
    write_cube(space, 0x100, cube, line, surf, atom)
    expect = image.copy()
    expect[offsets] = np.ascontiguousarray(cube.reshape(n_surf, atom, h, w).transpose(0, 2, 3, 1)) \
        .view(np.uint8).reshape(offsets.shape)
    np.testing.assert_array_equal(space.read(0x100, span + 64), expect)


@pytest.mark.parametrize("scenario", ["lenet5_nv_small.yaml", "lenet5_nv_full_int16.yaml",
                                      "tinymix_nv_large.yaml"])
def test_scenario_values_are_the_same_with_the_exact_kernel(scenario, monkeypatch):
    """A whole network, INT8 and INT16: every tensor the DLA wrote and every layer's cycles and
    statistics equal those of the run with NVDLA_SIM_CONV_GEMM=0 (conv_lines for every layer),
    and the BLAS path did run."""
    from pathlib import Path
    from nvdla_sim.compiler.lower import lower_and_run
    from nvdla_sim.kernels import conv_gemm
    from nvdla_sim.scenario.runner import context, prepare
    from nvdla_sim.scenario.schema import load_scenario
    from nvdla_sim.units import cmac
    path = Path(__file__).resolve().parent.parent / "scenarios" / scenario
    calls = []
    real = conv_gemm.conv_lines_gemm
    monkeypatch.setattr(cmac, "conv_lines_gemm", lambda *a: calls.append(1) or real(*a))

    def run():
        prep = prepare(load_scenario(path))
        return lower_and_run(prep.plan, context(prep))

    fast = run()
    assert calls
    monkeypatch.setenv("NVDLA_SIM_CONV_GEMM", "0")
    n = len(calls)
    exact = run()
    assert len(calls) == n                     # the switch turned the BLAS path off
    assert fast.outputs.keys() == exact.outputs.keys()
    for name in exact.outputs:
        np.testing.assert_array_equal(fast.outputs[name], exact.outputs[name], err_msg=name)
    assert [(t.name, t.start_cycle, t.end_cycle, t.statistics) for t in fast.layers] == \
        [(t.name, t.start_cycle, t.end_cycle, t.statistics) for t in exact.layers]


@pytest.mark.parametrize("shape", [(300, 70, 3, 3), (5, 1, 1, 1), (1, 9000, 2, 2)])
@pytest.mark.parametrize("q, dtype", [(127, np.int8), (32767, np.int16)])
def test_weight_codes_by_kernel_blocks_equal_the_whole_array_rounding(shape, q, dtype):
    """quantize.weight_codes against clip(trunc(v + copysign(0.5, v))) of the whole tensor,
    with exact ties (k + 0.5), values beyond the range and a broadcast stand-in view."""
    from nvdla_sim.scenario.quantize import weight_codes
    rng = np.random.default_rng(sum(shape))
    w = rng.standard_normal(shape, dtype=np.float32)
    s_w = np.abs(w.reshape(shape[0], -1)).max(axis=1).astype(np.float64) / q
    w.flat[::7] = (np.arange(w.size)[::7] % 11 - 5.5).astype(np.float32) * \
        np.repeat(s_w.astype(np.float32), w[0].size)[::7]          # ties after the division
    w.flat[::13] *= 3                                                 # beyond +-q
    for weights in (w, np.broadcast_to(w[:, :1, :1, :1], shape)):
        v = weights / s_w.astype(np.float32)[:, None, None, None]
        want = np.clip(np.trunc(v + np.copysign(np.float32(0.5), v)), -q, q).astype(dtype)
        np.testing.assert_array_equal(weight_codes(weights, s_w, q, dtype), want)
