"""Image input of the first convolution (emit_conv with ConvLayer.image): the pre-extended kernel,
the pixel formats, and the run against an integer reference, with padding, stride and a CBUF
partial-height split."""
from __future__ import annotations

import numpy as np
import pytest

from emit_helpers import conv_reference, random_cube, sat8
from nvdla_sim.compiler.emit import ProgramBuilder, read_output
from nvdla_sim.compiler.emit_conv import (ConvLayer, conv_cbuf_plan, emit_conv, image_entry_per_slice,
                                          image_placement, pixel_channels, pre_extend)
from nvdla_sim.compiler.placement import DBB, Allocator
from nvdla_sim.config import load_hardware
from nvdla_sim.engine import Engine


def test_pre_extend_puts_kernel_columns_into_channels():
    w = np.arange(1, 1 + 2 * 3 * 2, dtype=np.int8).reshape(1, 3, 2, 2)   # K=1, C=3, R=2, S=2
    ext = pre_extend(w, 4)
    assert ext.shape == (1, 8, 2, 1)
    # row r: column 0's channels, a zero alpha lane, then column 1's channels, a zero.
    assert ext[0, :, 0, 0].tolist() == [1, 5, 9, 0, 2, 6, 10, 0]
    # w[0, c, r, s] = 1 + 4c + 2r + s: row 1 is 3, 7, 11 (column 0) and 4, 8, 12 (column 1).
    assert ext[0, :, 1, 0].tolist() == [3, 7, 11, 0, 4, 8, 12, 0]


def test_pixel_formats_and_entries():
    assert [pixel_channels(c) for c in (1, 2, 3, 4, 5)] == [1, 4, 4, 4, None]
    p = image_placement("x", DBB, 0x8000_0000, 3, 10, 9)
    assert (p.atom, p.line_stride, p.surf_stride) == (4, 64, 640)      # 9 x 4 bytes -> 64
    hw = load_hardware("nv_small")
    assert image_entry_per_slice(hw, 51, 4) == 26      # the official img_51x96x4 tests' value


def _run(preset, x, w, stride=(1, 1), pad=(0, 0, 0, 0)):
    hw = load_hardware(preset)
    alloc = Allocator(hw)
    b = ProgramBuilder(hw, "img")
    probe = image_placement("x", DBB, 0, *x.shape)
    src = image_placement("x", DBB, alloc.buffer("x", probe.size_bytes).address, *x.shape)
    b.load_cube(src, x)
    ref = conv_reference(x, w, stride, pad)
    dst = alloc.feature("y", *ref.shape)
    layer = ConvLayer(w, stride, pad, image=True, name="c")
    emit_conv(b, alloc, layer, src, dst)
    result = Engine(hw).run(b.build())
    return read_output(result.engine, dst), ref, conv_cbuf_plan(hw, layer, src)


def test_hand_computed_r8_image():
    x = np.arange(1, 10, dtype=np.int8).reshape(1, 3, 3)
    w = np.array([[[[1, 0], [0, -1]]]], np.int8)             # x[y, x] - x[y+1, x+1]
    got, _, _ = _run("nv_small", x, w)
    assert got.tolist() == [[[-4, -4], [-4, -4]]]
    got, _, _ = _run("nv_small", x, w, pad=(1, 1, 0, 0))    # top row / left column read 0
    assert got.tolist() == [[[-1, -2, -3], [-4, -4, -4], [-7, -4, -4]]]


@pytest.mark.parametrize("preset", ["nv_small", "nv_large"])
@pytest.mark.parametrize("c,k,stride,pad", [(3, 7, (2, 2), (3, 3, 3, 3)), (1, 5, (1, 1), (0, 0, 0, 0)),
                                            (4, 3, (1, 2), (1, 0, 1, 2)), (2, 11, (4, 4), (2, 2, 2, 2))])
def test_image_conv_matches_the_reference(preset, c, k, stride, pad):
    rng = np.random.default_rng(c * 100 + k)
    x = rng.integers(-3, 4, (c, 23, 21), dtype=np.int8)
    w = rng.integers(-2, 3, (40, c, k, k), dtype=np.int8)
    got, ref, _ = _run(preset, x, w, stride, pad)
    assert np.array_equal(got, sat8(ref))


def test_image_conv_split_by_height():
    rng = np.random.default_rng(7)
    x = random_cube(rng, (3, 300, 200)) // 16
    w = rng.integers(-3, 4, (8, 3, 3, 3), dtype=np.int8)
    got, ref, plan = _run("nv_small", x, w, pad=(1, 1, 1, 1))
    assert plan.split
    assert np.array_equal(got, sat8(ref))
