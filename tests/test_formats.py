"""nvdla_sim.formats: a round-trip property test for every format (hypothesis), each packer
against a slow element-by-element mapping written from the data-format document, the existing
compiler/CSC/CDMA code that reads or writes the same bytes, and the alignment table's errors."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from nvdla_sim import formats as F
from nvdla_sim.datatype import FP16, INT8, INT16
from nvdla_sim.errors import NvdlaSimError

TYPES = (INT8, INT16, FP16)
PROPERTY = settings(max_examples=40, deadline=None)


def random_elements(rng: np.random.Generator, dtype, shape, sparsity: float = 0.0):
    """Random elements of `dtype`, FP16 as arbitrary non-NaN bit patterns (incl. -0, inf)."""
    if dtype is FP16:
        bits = rng.integers(0, 1 << 16, shape, dtype=np.uint32).astype(np.uint16)
        nan = ((bits & 0x7C00) == 0x7C00) & ((bits & 0x3FF) != 0)
        bits[nan] = 0x3C00
        values = bits.view(np.float16)
    else:
        lo, hi = dtype.integer_range()
        values = rng.integers(lo, hi + 1, shape).astype(dtype.numpy)
    if sparsity:
        values[rng.random(shape) < sparsity] = 0
    return values


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype == np.float16 or b.dtype == np.float16:
        return a.shape == b.shape and np.array_equal(a.view(np.uint16), b.view(np.uint16))
    return a.shape == b.shape and np.array_equal(a, b)


def le_bytes(value, dtype) -> bytes:
    return np.array([value], np.dtype(dtype.numpy).newbyteorder("<")).tobytes()


dtypes = st.sampled_from(TYPES)
seeds = st.integers(0, 2**32 - 1)


# -- feature cubes -----------------------------------------------------------------------------
@PROPERTY
@given(dtypes, st.integers(1, 70), st.integers(1, 6), st.integers(1, 6), st.integers(0, 3),
       st.integers(0, 3), seeds)
def test_feature_round_trip(dtype, c, h, w, line_gap, surf_gap, seed):
    cube = random_elements(np.random.default_rng(seed), dtype, (c, h, w))
    line = w * 32 + 32 * line_gap
    layout = F.FeatureLayout(w, h, c, dtype, line, h * line + 32 * surf_gap)
    raw = F.pack_feature(cube, line_stride=layout.line_stride,
                         surface_stride=layout.surface_stride)
    assert raw.size == layout.size_bytes
    assert same_bits(F.unpack_feature(raw, layout), cube)


@PROPERTY
@given(dtypes, st.integers(1, 4), st.integers(1, 40), st.integers(1, 4), st.integers(1, 4),
       st.integers(0, 3), seeds)
def test_feature_batch_round_trip(dtype, n, c, h, w, gap, seed):
    cubes = random_elements(np.random.default_rng(seed), dtype, (n, c, h, w))
    layout = F.FeatureLayout.packed(w, h, c, dtype)
    stride = layout.surfaces * layout.surface_stride + 32 * gap
    raw = F.pack_feature_batch(cubes, batch_stride=stride)
    last = raw[(n - 1) * stride:]
    assert last.tobytes() == F.pack_feature(cubes[-1]).tobytes() and raw.size % 32 == 0
    assert same_bits(F.unpack_feature_batch(raw, layout, n, stride), cubes)


@pytest.mark.parametrize("dtype", TYPES)
def test_feature_bytes_follow_the_document(dtype):
    """C' (32 bytes) -> W -> H -> C, padding lanes and gaps zero, element by element."""
    rng = np.random.default_rng(3)
    c, h, w, line, surf = 37, 3, 5, 5 * 32 + 64, 3 * (5 * 32 + 64) + 96
    cube = random_elements(rng, dtype, (c, h, w))
    raw = F.pack_feature(cube, line_stride=line, surface_stride=surf)
    a = 32 // dtype.bytes
    expect = bytearray(raw.size)
    for ci in range(c):
        for y in range(h):
            for x in range(w):
                at = (ci // a) * surf + y * line + x * 32 + (ci % a) * dtype.bytes
                expect[at:at + dtype.bytes] = le_bytes(cube[ci, y, x], dtype)
    assert raw.tobytes() == bytes(expect)


@pytest.mark.parametrize("dtype", TYPES)
def test_feature_matches_the_compiler_and_the_units(dtype):
    from nvdla_sim.compiler.emit import cube_image
    from nvdla_sim.compiler.placement import TensorPlacement
    from nvdla_sim.memory import AddressSpace
    cube = random_elements(np.random.default_rng(4), dtype, (21, 4, 3))
    placement = TensorPlacement("x", "DBB", 0, 3, 4, 21, 32, 3 * 32 + 32, 4 * 128 + 64, dtype)
    raw = F.pack_feature(cube, line_stride=128, surface_stride=4 * 128 + 64)
    image = cube_image(placement, cube)
    assert raw.tobytes() == image[:raw.size].tobytes() and not image[raw.size:].any()
    space = AddressSpace("dbb", 0, 1 << 16)
    space.write(0x100, raw)
    read = F.read_cube(space, 0x100, 3, 4, 21, 128, 4 * 128 + 64, 32 // dtype.bytes,
                       dtype.numpy)
    assert same_bits(read[:21], cube) and not read[21:].view(np.uint8).any()


def test_layout_module_re_exports_formats():
    from nvdla_sim import layout
    assert layout.read_cube is F.read_cube and layout.write_cube is F.write_cube
    assert layout.surfaces is F.surfaces


# -- pixels ------------------------------------------------------------------------------------
def random_image(rng, f: F.PixelFormat, h: int, w: int) -> np.ndarray:
    n = len(f.components)
    if f.kind == "fp16":
        return random_elements(rng, FP16, (h, w, n))
    if f.kind == "int":
        return random_elements(rng, INT16, (h, w, n))
    return np.stack([rng.integers(0, 1 << min(f.field_bits(i), 16), (h, w))
                     for i in range(n)], -1).astype(f.numpy)


@PROPERTY
@given(st.sampled_from(sorted(F.PIXEL_FORMATS)), st.integers(1, 5), st.integers(1, 40),
       st.data(), seeds)
def test_pixel_round_trip(name, h, w, data, seed):
    f = F.PIXEL_FORMATS[name]
    x_offset = data.draw(st.integers(0, f.max_x_offset))
    gap = data.draw(st.integers(0, 2)) * 32
    image = random_image(np.random.default_rng(seed), f, h, w)
    strides = [-(-(x_offset + w) * f.plane_bytes_per_pixel(p) // 32) * 32 + gap
               for p in range(f.plane_count)]
    packed = F.pack_pixels(image, name, strides[0], x_offset,
                           strides[1] if f.plane_count == 2 else None)
    assert packed.line_strides == tuple(strides)
    assert same_bits(F.unpack_pixels(packed.planes, name, w, h, packed.line_strides, x_offset),
                     image)


def test_pixel_formats_are_the_register_map_enum():
    regs = json.loads((Path(F.__file__).parents[1] / "regs" / "nvdla_registers.json").read_text())
    enum = regs["CDMA"]["regs"]["D_DATAIN_FORMAT"]["fields"]["PIXEL_FORMAT"][4]
    assert {"T_" + f.name: f.code for f in F.PIXEL_FORMATS.values()} == enum
    assert F.pixel_format("T_A2B10G10R10") is F.pixel_format(20)


def test_pixel_bytes_follow_the_component_names():
    """Packed words name components from the most significant end (A8B8G8R8: R in byte 0)."""
    image = np.array([[[1, 2, 3, 4]]])                    # R G B A / Y U V A
    one = lambda name: F.pack_pixels(image, name).planes[0][:4].tolist()   # noqa: E731
    assert one("A8B8G8R8") == [1, 2, 3, 4]
    assert one("A8R8G8B8") == [3, 2, 1, 4]
    assert one("B8G8R8A8") == [4, 1, 2, 3]
    assert one("R8G8B8A8") == [4, 3, 2, 1]
    assert one("A8Y8U8V8") == [3, 2, 1, 4]
    word = int.from_bytes(F.pack_pixels(np.array([[[1, 2, 3, 1]]]), "A2R10G10B10")
                          .planes[0][:4].tobytes(), "little")
    assert word == (1 << 30) | (1 << 20) | (2 << 10) | 3
    yuv = F.pack_pixels(np.array([[[7, 8, 9]]], np.uint16), "Y16___U16V16_N444")
    assert yuv.planes[0][:2].tolist() == [7, 0] and yuv.planes[1][:4].tolist() == [9, 0, 8, 0]
    cdma = F.cdma_values(np.array([[[1023, 1, 0, 3]]]), "A2B10G10R10")
    assert cdma.tolist() == [[[1023 << 6, 1 << 6, 0, 3 << 14]]]


@pytest.mark.parametrize("code", [0, 12, 13, 14, 15, 16, 17, 18, 19, 26, 27])
def test_pixels_read_by_the_cdma(code):
    """The CDMA's 8-bit image reader takes packed pixels back in CBUF component order."""
    from nvdla_sim.memory import AddressSpace
    from nvdla_sim.units.cdma import PIXEL_LAYOUTS, read_pixel_lines
    f = F.pixel_format(code)
    image = random_image(np.random.default_rng(code), f, 3, 11)
    packed = F.pack_pixels(image, f, x_offset=2)
    space = AddressSpace("dbb", 0, 1 << 14)
    space.write(0x200, packed.planes[0])
    lines = read_pixel_lines(space, 0x200, packed.line_strides[0], 11, 3, 2, PIXEL_LAYOUTS[code])
    assert np.array_equal(lines, image)


# -- direct weights ----------------------------------------------------------------------------
def slow_direct(w: np.ndarray, dtype, atomic_c: int, group: int) -> bytes:
    """The document's steps: groups of kernels; 1x1xC' cubes scanned C' -> K -> W -> H -> C."""
    k, c, r, s = w.shape
    out = bytearray()
    for k0 in range(0, k, group):
        for c0 in range(0, c, atomic_c):
            for y in range(r):
                for x in range(s):
                    for kk in range(k0, min(k0 + group, k)):
                        for cc in range(c0, min(c0 + atomic_c, c)):
                            out += le_bytes(w[kk, cc, y, x], dtype)
    out += bytes(-len(out) % 128)
    return bytes(out)


weight_shapes = st.tuples(st.integers(1, 40), st.integers(1, 70), st.integers(1, 3),
                          st.integers(1, 3))


@PROPERTY
@given(dtypes, weight_shapes, st.sampled_from([8, 32, 64]), seeds)
def test_direct_weights_round_trip(dtype, shape, atomic_c, seed):
    w = random_elements(np.random.default_rng(seed), dtype, shape)
    group = F.kernel_group(32, dtype)
    raw = F.pack_direct_weights(w, atomic_c=atomic_c, kernel_group_=group)
    assert raw.size % 128 == 0
    assert same_bits(F.unpack_direct_weights(raw, shape, dtype, atomic_c, group), w)


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("shape", [(5, 3, 3, 3), (40, 70, 2, 3), (17, 130, 1, 1)])
def test_direct_weights_are_the_documents_bytes_and_the_csc_reads_them(dtype, shape):
    from nvdla_sim.units.csc import unpack_weights
    w = random_elements(np.random.default_rng(sum(shape)), dtype, shape)
    group = F.kernel_group(32, dtype)
    raw = F.pack_direct_weights(w, dtype, 64, group)
    assert raw.tobytes() == slow_direct(w, dtype, 64, group)
    k, c, r, s = shape
    assert same_bits(unpack_weights(raw, k, r, s, c, 64, group, dtype), w.transpose(0, 2, 3, 1))


# -- image weights -----------------------------------------------------------------------------
@PROPERTY
@given(dtypes, st.integers(1, 33), st.integers(1, 4), st.integers(1, 7), st.integers(1, 7),
       st.sampled_from([1, 2, 4]), seeds)
def test_image_weights_round_trip(dtype, k, c, r, s, post, seed):
    c_pixel = 1 if c == 1 else 4
    if post > 1 and s * c_pixel * post > 64:
        post = 1
    w = random_elements(np.random.default_rng(seed), dtype, (k, c, r, s))
    group = F.kernel_group(32, dtype)
    raw = F.pack_image_weights(w, c_pixel, post_extension=post, kernel_group_=group)
    assert same_bits(F.unpack_image_weights(raw, w.shape, c_pixel, dtype, post,
                                            kernel_group_=group), w)


@pytest.mark.parametrize("post, rows", [(2, 5), (4, 7), (4, 8), (2, 2)])
def test_image_weights_post_extension_follows_the_csc_order(post, rows):
    """Per group: stripes of `post` kernel rows (the last R % post rows, nothing appended); in a
    stripe each kernel with its rows' pre-extended channels one after another."""
    dtype, group = INT16, 16
    w = random_elements(np.random.default_rng(rows), dtype, (20, 3, rows, 3))
    ext = F.pre_extend(w, 4)[:, :, :, 0]                  # (K, 12, R)
    expect = bytearray()
    for k0 in range(0, 20, group):
        for r0 in range(0, rows, post):
            for k in range(k0, min(k0 + group, 20)):
                for r in range(r0, min(r0 + post, rows)):
                    for c in range(12):
                        expect += le_bytes(ext[k, c, r], dtype)
    expect += bytes(-len(expect) % 128)
    raw = F.pack_image_weights(w, 4, dtype, post_extension=post, kernel_group_=group)
    assert raw.tobytes() == bytes(expect)


# -- Winograd ----------------------------------------------------------------------------------
@PROPERTY
@given(dtypes, st.integers(1, 40), st.integers(1, 40), st.sampled_from([1, 2, 3]), seeds)
def test_winograd_weights_round_trip(dtype, k, c, stride, seed):
    """Small integer weights transform exactly (scale 4 for integers, 1 for FP16), so the
    unpacked 4x4 kernels give back the original ones through G's left inverse."""
    rng = np.random.default_rng(seed)
    size = 3 * stride - rng.integers(0, stride)            # a kernel that folds to 3x3
    w = rng.integers(-7, 8, (k, c, size, size)).astype(np.float64)
    packed = F.pack_winograd_weights(w, dtype, (stride, stride))
    assert packed.exact and packed.scale == (1.0 if dtype is FP16 else 4.0)
    channels = F.winograd_channels(c, dtype, (stride, stride))
    t = F.unpack_winograd_weights(packed.image, k, channels, dtype)
    assert same_bits(t, packed.transformed) and packed.image.size % 128 == 0
    back = F.winograd_channel_unextend(F.winograd_inverse(t, packed.scale), w.shape,
                                       (stride, stride))
    assert np.array_equal(back, w)


@pytest.mark.parametrize("dtype", TYPES)
def test_winograd_image_follows_the_document(dtype):
    """4x4x4 small cubes (row, column, channel), scanned channel block -> kernel in groups of
    32 (INT8) / 16 kernels; channels padded to 32 bytes."""
    rng = np.random.default_rng(6)
    k, c = 35, 5
    w = rng.integers(-3, 4, (k, c, 3, 3))
    packed = F.pack_winograd_weights(w, dtype, scale=2.0)
    group, cp = F.kernel_group(32, dtype), 32 // dtype.bytes
    t = np.zeros((k, cp, 4, 4))
    t[:, :c] = np.einsum("ij,kcjl,ml->kcim", F.G, w.astype(float), F.G) * 2
    expect = bytearray()
    for k0 in range(0, k, group):
        for c0 in range(0, cp, 4):
            for kk in range(k0, min(k0 + group, k)):
                for y in range(4):
                    for x in range(4):
                        for cc in range(c0, c0 + 4):
                            v = t[kk, cc, y, x]
                            expect += le_bytes(v if dtype is FP16 else np.rint(v), dtype)
    expect += bytes(-len(expect) % 128)
    assert packed.image.tobytes() == bytes(expect)


def test_winograd_weights_compute_the_convolution():
    """A 2x2 output tile from 4x4 input through B^T d B, the packed 4x4 weights and A^T m A is
    `scale` times the direct 3x3 correlation (stride 2 via channel extension)."""
    rng = np.random.default_rng(8)
    bt = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]])
    at = np.array([[1, 1, 1, 0], [0, 1, -1, -1]])
    w = rng.integers(-9, 10, (3, 2, 6, 6))
    x = rng.integers(-9, 10, (2, 8, 8))                    # one tile of stride-2 input
    packed = F.pack_winograd_weights(w, INT16, (2, 2))
    assert packed.scale == 4
    # Extended input channel (sy*2 + sx)*C_pad + c is x[c, 2y + sy, 2x + sx] (C_pad 16 here).
    ext_x = np.zeros((4 * 16, 4, 4))
    for sy in range(2):
        for sx in range(2):
            for c in range(2):
                ext_x[(sy * 2 + sx) * 16 + c] = x[c, sy::2, sx::2]
    tile = np.einsum("ij,cjl,ml->cim", bt, ext_x, bt)
    m = np.einsum("kcyx,cyx->kyx", packed.transformed.astype(np.int64), tile)
    out = np.einsum("ij,kjl,ml->kim", at, m, at)            # (K, 2, 2)
    for oy in range(2):
        for ox in range(2):
            ref = np.einsum("kcrs,crs->k", w, np.pad(x, ((0, 0), (0, 4), (0, 4)))
                            [:, 2 * oy:2 * oy + 6, 2 * ox:2 * ox + 6])
            assert out[:, oy, ox].tolist() == (4 * ref).tolist()


def test_winograd_scale_keeps_quantised_weights_in_range():
    w = np.full((2, 3, 3, 3), 127)
    assert F.winograd_max_scale(w, INT8) == 0.25            # (1/4)*9*127*s must stay <= 127
    packed = F.pack_winograd_weights(w, INT8)
    assert packed.scale == 0.25 and packed.transformed.max() <= 127
    with pytest.raises(NvdlaSimError, match="overflow INT8"):
        F.pack_winograd_weights(w, INT8, scale=4)


# -- sparse compression ------------------------------------------------------------------------
@PROPERTY
@given(dtypes, weight_shapes, st.floats(0, 1), seeds)
def test_compression_round_trip(dtype, shape, sparsity, seed):
    w = random_elements(np.random.default_rng(seed), dtype, shape, sparsity)
    group = F.kernel_group(32, dtype)
    raw = F.pack_direct_weights(w, kernel_group_=group)
    per_kernel = int(np.prod(shape[1:])) * dtype.bytes
    cw = F.compress_weights(raw, dtype, shape[0], per_kernel, group)
    for surface in (cw.wmb, cw.wgs, cw.weights):
        assert surface.size % 128 == 0
    back = F.decompress_weights(cw.wmb, cw.wgs, cw.weights, dtype, shape[0], per_kernel, group)
    assert back.tobytes() == raw[:shape[0] * per_kernel].tobytes()


def test_compression_surfaces_follow_the_document():
    dtype, group = INT16, 16
    rng = np.random.default_rng(9)
    w = random_elements(rng, dtype, (20, 5, 3, 3), sparsity=0.6)
    w[0, 0, 0, 0] = -0.0 if dtype is FP16 else 0
    raw = F.pack_direct_weights(w, kernel_group_=group)
    per_kernel = 5 * 9 * 2
    cw = F.compress_weights(raw, dtype, 20, per_kernel, group)
    elements = raw[:20 * per_kernel].view("<i2")
    bits = [int(e != 0) for e in elements]
    wmb = bytes(sum(b << i for i, b in enumerate(bits[j:j + 8])) for j in range(0, len(bits), 8))
    assert cw.wmb.tobytes()[:len(wmb)] == wmb and not cw.wmb[len(wmb):].any()
    kept = elements[elements != 0]
    assert cw.weights.tobytes()[:kept.size * 2] == kept.astype("<i2").tobytes()
    first = 16 * 45
    sizes = [int((elements[:first] != 0).sum()) * 2, int((elements[first:] != 0).sum()) * 2]
    assert cw.group_bytes == tuple(sizes)
    assert cw.wgs[:8].view("<u4").tolist() == sizes and not cw.wgs[8:].any()
    bad = cw.wgs.copy()
    bad[0] ^= 2
    with pytest.raises(NvdlaSimError, match="WGS of kernel group 0"):
        F.decompress_weights(cw.wmb, bad, cw.weights, dtype, 20, per_kernel, group)


def test_compression_keeps_negative_zero():
    w = np.array([-0.0, 0.0, 1.0, -0.0], np.float16).reshape(1, 4, 1, 1)
    raw = F.pack_direct_weights(w)
    cw = F.compress_weights(raw, FP16, 1, 8, 16)
    back = F.decompress_weights(cw.wmb, cw.wgs, cw.weights, FP16, 1, 8, 16)
    assert back.tobytes() == raw[:8].tobytes() and cw.group_bytes == (6,)


# -- SDP operands ------------------------------------------------------------------------------
def operand_values(rng, proc, size, shape):
    if proc is FP16:
        return random_elements(rng, FP16, shape)
    return random_elements(rng, INT8 if size == 1 else INT16, shape)


proc_sizes = st.sampled_from([(INT8, 1), (INT8, 2), (INT16, 1), (INT16, 2), (FP16, 2)])


@PROPERTY
@given(proc_sizes, st.integers(1, 2), st.integers(1, 80), seeds)
def test_per_channel_operands_round_trip(proc_size, components, c, seed):
    proc, size = proc_size
    rng = np.random.default_rng(seed)
    parts = [operand_values(rng, proc, size, (c,)) for _ in range(components)]
    raw = F.pack_per_channel(parts, proc, size)
    epa = F.elements_per_atom(proc)
    assert raw.size == -(-c // epa) * epa * components * size
    back = F.unpack_per_channel(raw, c, components, proc, size)
    assert all(same_bits(a, b) for a, b in zip(back, parts))


@PROPERTY
@given(proc_sizes, st.integers(1, 2), st.integers(1, 40), st.integers(1, 4), st.integers(1, 4),
       st.integers(0, 2), seeds)
def test_per_element_operands_round_trip(proc_size, components, c, h, w, gap, seed):
    proc, size = proc_size
    rng = np.random.default_rng(seed)
    parts = [operand_values(rng, proc, size, (c, h, w)) for _ in range(components)]
    atom = F.elements_per_atom(proc) * components * size
    line = -(-w * atom // 32) * 32 + 32 * gap
    raw = F.pack_per_element(parts, proc, size, line_stride=line)
    back = F.unpack_per_element(raw, (c, h, w), components, proc, size, line_stride=line)
    assert all(same_bits(a, b) for a, b in zip(back, parts))


def test_operand_bytes_follow_the_document():
    """BytesPerAtom = ElementPerAtom (32 INT8 / 16 INT16, FP16) * components * bytes; the two
    components of an element together, ALU first."""
    rng = np.random.default_rng(10)
    alu = rng.integers(-300, 300, (20, 2, 3))
    mul = rng.integers(-300, 300, (20, 2, 3))
    raw = F.pack_elementwise(alu, mul, INT16, size=2)      # atoms of 16 * 2 * 2 = 64 bytes
    expect = bytearray(raw.size)
    for c in range(20):
        for y in range(2):
            for x in range(3):
                at = (c // 16) * (2 * 3 * 64) + y * 3 * 64 + x * 64 + (c % 16) * 4
                expect[at:at + 4] = np.array([alu[c, y, x], mul[c, y, x]], "<i2").tobytes()
    assert raw.tobytes() == bytes(expect)
    bn = F.pack_batchnorm(np.arange(3), np.arange(10, 13), INT8)
    assert bn.tolist()[:6] == [0, 10, 1, 11, 2, 12] and bn.size == 64
    assert F.pack_prelu(np.arange(3), FP16).view("<f2")[:3].tolist() == [0, 1, 2]
    assert F.pack_bias(np.array([-200, 5]), INT8).view("<i2")[:2].tolist() == [-200, 5]


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("per_element", [False, True])
def test_operands_are_the_compilers_bytes(dtype, per_element):
    """The compiler's SDP operand packer (emit_sdp.place_operands) writes the same bytes."""
    from nvdla_sim.compiler.emit import ProgramBuilder
    from nvdla_sim.compiler.emit_sdp import place_operands
    from nvdla_sim.compiler.placement import Allocator
    from nvdla_sim.config import load_hardware
    from nvdla_sim.program import MemLoad
    hw = load_hardware("nv_full")
    rng = np.random.default_rng(11)
    shape = (37, 3, 2)
    part_shape = shape if per_element else shape[:1]
    alu = rng.integers(-300, 300, part_shape)
    mul = rng.integers(-300, 300, part_shape)
    if dtype is FP16:
        alu, mul = alu.astype(np.float16), mul.astype(np.float16)
    b = ProgramBuilder(hw, "operands")
    op = place_operands(b, Allocator(hw), "x", {"alu": alu, "mul": mul}, shape, dtype)
    loaded = [c.data for c in b.commands if isinstance(c, MemLoad)][-1]
    size = 2
    if per_element:
        ours = F.pack_per_element([alu, mul], dtype, size, line_stride=op.line_stride,
                                  surface_stride=op.surf_stride)
    else:
        ours = F.pack_per_channel([alu, mul], dtype, size)
    assert ours.tobytes() == loaded[:ours.size].tobytes() and not loaded[ours.size:].any()


# -- alignment table ---------------------------------------------------------------------------
@pytest.mark.parametrize("call, message", [
    (lambda: F.pack_feature(np.zeros((4, 2, 2), np.int8), line_stride=80),
     "feature format: line stride 0x50 is not a multiple of 32"),
    (lambda: F.pack_feature(np.zeros((40, 2, 2), np.int8), surface_stride=100),
     "feature format: surface stride 0x64"),
    (lambda: F.pack_feature(np.zeros((4, 2, 2), np.int8), address=0x1010),
     "feature format: start address 0x1010"),
    (lambda: F.pack_feature_batch(np.zeros((2, 4, 2, 2), np.int8), batch_stride=144),
     "feature format: planar stride 0x90 is not a multiple of 32"),
    (lambda: F.pack_feature_batch(np.zeros((2, 4, 2, 2), np.int8), batch_stride=64),
     "batch stride 64 is below one cube of 128 bytes"),
    (lambda: F.pack_feature(np.zeros((4, 2, 2), np.int8), line_stride=32),
     "line stride 32 is below one line"),
    (lambda: F.pack_direct_weights(np.ones((1, 1, 1, 1), np.int8), address=0x80),
     "weight format: start address 0x80 is not a multiple of 256"),
    (lambda: F.compress_weights(np.ones(128, np.uint8), INT8, 1, 128, 32, wmb_address=0x20),
     "wmb format: start address 0x20"),
    (lambda: F.pack_pixels(np.zeros((2, 2, 4), np.uint8), "A8B8G8R8", line_stride=48),
     "pixel format: line stride 0x30"),
    (lambda: F.pack_pixels(np.zeros((2, 2, 4), np.uint8), "A8B8G8R8", x_offset=8),
     "x offset 8 outside 0..7"),
    (lambda: F.pack_pixels(np.full((1, 1, 4), 4), "A2B10G10R10"),
     "component A outside 0..3"),
    (lambda: F.pack_bias(np.zeros((4, 2, 2), np.int8), INT8, line_stride=40),
     "bias format: line stride 0x28"),
    (lambda: F.pack_prelu(np.zeros(4, np.int8), INT8, address=8),
     "prelu format: start address 0x8"),
    (lambda: F.pack_elementwise(np.zeros((1, 1, 1), np.int8), proc=INT8, size=1,
                                line_stride=32, surface_stride=32),
     None),
    (lambda: F.pack_elementwise(np.zeros((3, 1, 1), np.int8), proc=INT16, size=1,
                                line_stride=48),
     "elementwise format: line stride 0x30"),
    (lambda: F.pack_image_weights(np.zeros((1, 4, 3, 5), np.int8), 4, post_extension=4),
     "post-extension 4 needs at most 16 pre-extended channels, not 20"),
    (lambda: F.pack_winograd_weights(np.zeros((1, 1, 5, 5)), INT8),
     "a 5x5 kernel with stride 1x1 is not 3x3"),
    (lambda: F.pack_direct_weights(np.full((1, 1, 1, 1), 300)),
     "array of int64, expected int8"),
    (lambda: F.pack_direct_weights(np.full((1, 1, 1, 1), 300), INT8),
     "values outside INT8"),
    (lambda: F.pixel_format("T_RGB"), "not a pixel format"),
])
def test_pack_refuses_with_one_line(call, message):
    if message is None:
        call()
        return
    with pytest.raises(NvdlaSimError) as err:
        call()
    assert message in str(err.value) and "\n" not in str(err.value)


def test_the_documented_example_runs():
    text = (Path(__file__).parents[1] / "docs" / "formats.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(code, "docs/formats.md", "exec"), {})
