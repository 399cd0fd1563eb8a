"""Convolution pipeline in INT16 and FP16 (NVDLA v1 nv_full): whole layers through CDMA, CBUF, CSC,
CMAC_A/B and CACC against independent numpy references written from the data-format rules
(feature atoms, weight groups of 16 kernels and 64-channel blocks), the precision rules of
D_MISC_CFG, and timing per precision."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from nvdla_sim.config import load_hardware
from nvdla_sim.datatype import FP16, INT8, INT16, DataType
from nvdla_sim.engine import Engine
from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.kernels.conv import conv_lines
from nvdla_sim.kernels.nvfloat_py import cacc_fp48_add, cmac_fp16_dot
from nvdla_sim.program import RegisterProgram

from conv_helpers import SRC, WT, conv_program, conv_registers, image_cdma_registers

ATOM_BYTES = 32                  # nv_full memory atom
ENTRY_BYTES = 128                # nv_full CBUF entry
BANK_ENTRIES = 256
BLOCK_C = 64                     # channels per atomic operation (all precisions)


@dataclass
class Layer:
    dtype: DataType
    data: np.ndarray                     # (C, H, W) of dtype
    weights: np.ndarray                  # (K, C, R, S) of dtype
    stride: tuple = (1, 1)               # x, y
    dilation: tuple = (1, 1)
    pad: tuple = (0, 0)                  # left, top (right, bottom alike)
    pad_bits: int = 0                    # ZERO_PADDING_VALUE, 16 bits
    clip: int = 0
    keep_weights: bool = True            # SKIP_WEIGHT_RLS: all weights resident
    cvt: tuple | None = None             # (offset, scale, truncate) for CVT_EN
    overrides: dict = field(default_factory=dict)

    @property
    def kernels(self) -> int:
        return self.weights.shape[0]

    def out_size(self) -> tuple[int, int]:
        c, h, w = self.data.shape
        _, _, r, s = self.weights.shape
        ow = (w + 2 * self.pad[0] - ((s - 1) * self.dilation[0] + 1)) // self.stride[0] + 1
        oh = (h + 2 * self.pad[1] - ((r - 1) * self.dilation[1] + 1)) // self.stride[1] + 1
        return ow, oh


# -- memory images, written from the in-memory data format rules ---------------------------------
def pack_feature(data: np.ndarray) -> tuple[np.ndarray, int, int]:
    """Feature cube: 32-byte atoms of C' channels, lines of W atoms, surfaces of H lines."""
    c, h, w = data.shape
    per_atom = ATOM_BYTES // data.dtype.itemsize
    n_surf = -(-c // per_atom)
    line, surf = w * ATOM_BYTES, h * w * ATOM_BYTES
    cube = np.zeros((n_surf * per_atom, h, w), data.dtype)
    cube[:c] = data
    # (S, C', H, W) -> (S, H, W, C'): C' fastest, then W, H, surfaces
    img = cube.reshape(n_surf, per_atom, h, w).transpose(0, 2, 3, 1)
    return np.ascontiguousarray(img).astype(data.dtype.newbyteorder("<")).view(np.uint8).ravel(), \
        line, surf


def pack_weights(weights: np.ndarray, group: int) -> np.ndarray:
    """Direct-convolution weights: groups of `group` kernels; in a group 1x1xC' cubes of up to 64
    channels scanned C' -> K -> S -> R -> C; groups back to back; 128-byte aligned end."""
    k_total, c_total, r_total, s_total = weights.shape
    out = []
    for g0 in range(0, k_total, group):
        for c0 in range(0, c_total, BLOCK_C):
            for r in range(r_total):
                for s in range(s_total):
                    for k in range(g0, min(g0 + group, k_total)):
                        out.append(weights[k, c0:c0 + BLOCK_C, r, s])
    flat = np.concatenate(out).astype(weights.dtype.newbyteorder("<")).view(np.uint8)
    return np.concatenate([flat, np.zeros(-flat.size % 128, np.uint8)])


def entries_per_slice(channels: int, width: int, elem_bytes: int) -> int:
    """CBUF entries of one input line (4 atoms per 128-byte entry; a last partial entry packs
    2 or 4 lines' atoms), as the C model's CSC checks ENTRY_PER_SLICE."""
    atoms = -(-channels * elem_bytes // ATOM_BYTES)
    entries = atoms // 4 * width
    entries += {3: width, 2: (width + 1) // 2, 1: (width + 3) // 4, 0: 0}[atoms % 4]
    return entries


# -- program -------------------------------------------------------------------------------------
def layer_program(layer: Layer) -> RegisterProgram:
    dt = layer.dtype
    c, h, w = layer.data.shape
    k, _, r, s = layer.weights.shape
    ow, oh = layer.out_size()
    group = 32 if dt == INT8 else 16
    feature, line, surf = pack_feature(layer.data)
    wts = pack_weights(layer.weights, group)
    byte_per_kernel = c * r * s * dt.bytes
    slice_entries = entries_per_slice(c, w, dt.bytes)
    data_banks = -(-slice_entries * h // BANK_ENTRIES)
    need = wts.size if layer.keep_weights else min(k, group) * byte_per_kernel
    weight_banks = -(-need // (BANK_ENTRIES * ENTRY_BYTES))
    misc = {"CONV_MODE": 0, "IN_PRECISION": dt.code, "PROC_PRECISION": dt.code,
            "SKIP_WEIGHT_RLS": int(layer.keep_weights)}
    bank = {"DATA_BANK": data_banks - 1, "WEIGHT_BANK": weight_banks - 1}
    cdma = {"D_MISC_CFG": misc, "D_DATAIN_FORMAT": {"DATAIN_FORMAT": 0},
            "D_DATAIN_SIZE_0": {"DATAIN_WIDTH": w - 1, "DATAIN_HEIGHT": h - 1},
            "D_DATAIN_SIZE_1": {"DATAIN_CHANNEL": c - 1},
            "D_DAIN_RAM_TYPE": {"DATAIN_RAM_TYPE": 1},
            "D_DAIN_ADDR_LOW_0": {"DATAIN_ADDR_LOW_0": SRC},
            "D_LINE_STRIDE": {"LINE_STRIDE": line}, "D_SURF_STRIDE": {"SURF_STRIDE": surf},
            "D_ENTRY_PER_SLICE": {"ENTRIES": slice_entries - 1},
            "D_WEIGHT_SIZE_0": {"BYTE_PER_KERNEL": byte_per_kernel - 1},
            "D_WEIGHT_SIZE_1": {"WEIGHT_KERNEL": k - 1},
            "D_WEIGHT_RAM_TYPE": {"WEIGHT_RAM_TYPE": 1},
            "D_WEIGHT_ADDR_LOW": {"WEIGHT_ADDR_LOW": WT}, "D_WEIGHT_BYTES": {"WEIGHT_BYTES": wts.size},
            "D_CONV_STRIDE": {"CONV_X_STRIDE": layer.stride[0] - 1,
                              "CONV_Y_STRIDE": layer.stride[1] - 1},
            "D_ZERO_PADDING": {"PAD_LEFT": layer.pad[0], "PAD_TOP": layer.pad[1],
                               "PAD_RIGHT": layer.pad[0], "PAD_BOTTOM": layer.pad[1]},
            "D_ZERO_PADDING_VALUE": {"PAD_VALUE": layer.pad_bits & 0xFFFF}, "D_BANK": bank}
    if layer.cvt is not None:
        offset, scale, truncate = layer.cvt
        cdma.update({"D_CVT_CFG": {"CVT_EN": 1, "CVT_TRUNCATE": truncate},
                     "D_CVT_OFFSET": {"CVT_OFFSET": offset & 0xFFFF},
                     "D_CVT_SCALE": {"CVT_SCALE": scale & 0xFFFF}})
    csc = {"D_MISC_CFG": misc, "D_DATAIN_FORMAT": {"DATAIN_FORMAT": 0},
           "D_DATAIN_SIZE_EXT_0": {"DATAIN_WIDTH_EXT": w - 1, "DATAIN_HEIGHT_EXT": h - 1},
           "D_DATAIN_SIZE_EXT_1": {"DATAIN_CHANNEL_EXT": c - 1},
           "D_WEIGHT_SIZE_EXT_0": {"WEIGHT_WIDTH_EXT": s - 1, "WEIGHT_HEIGHT_EXT": r - 1},
           "D_WEIGHT_SIZE_EXT_1": {"WEIGHT_CHANNEL_EXT": c - 1, "WEIGHT_KERNEL": k - 1},
           "D_DATAOUT_SIZE_0": {"DATAOUT_WIDTH": ow - 1, "DATAOUT_HEIGHT": oh - 1},
           "D_DATAOUT_SIZE_1": {"DATAOUT_CHANNEL": k - 1},
           "D_CONV_STRIDE_EXT": {"CONV_X_STRIDE_EXT": layer.stride[0] - 1,
                                 "CONV_Y_STRIDE_EXT": layer.stride[1] - 1},
           "D_DILATION_EXT": {"X_DILATION_EXT": layer.dilation[0] - 1,
                              "Y_DILATION_EXT": layer.dilation[1] - 1},
           "D_ZERO_PADDING": {"PAD_LEFT": layer.pad[0], "PAD_TOP": layer.pad[1]},
           "D_ZERO_PADDING_VALUE": {"PAD_VALUE": layer.pad_bits & 0xFFFF}, "D_BANK": bank}
    regs = conv_registers(cdma, csc, dt, ow, oh, k, conv_mode=0, clip=layer.clip,
                          overrides=layer.overrides)
    return conv_program(f"conv_{dt}", regs, feature, wts, cdma_interrupts=True)


def run_layer(layer: Layer, compute_values: bool = True) -> tuple[np.ndarray | None, Engine]:
    engine = Engine(load_hardware("nv_full"), compute_values=compute_values)
    result = engine.run(layer_program(layer))
    items = engine.channel("cacc->sdp").items
    assert len(items) == 1
    return items[0], engine, result


# -- integer reference ---------------------------------------------------------------------------
def padded_input(layer: Layer, values: np.ndarray, pad_value) -> np.ndarray:
    c, h, w = values.shape
    pl, pt = layer.pad
    big = np.full((c, h + 2 * pt + 64, w + 2 * pl + 64), pad_value, values.dtype)
    big[:, pt:pt + h, pl:pl + w] = values
    return big


def int_reference(layer: Layer) -> np.ndarray:
    """int64 convolution with the CSC pad value, then the CACC clip (round half away) and sat32."""
    data = layer.data.astype(np.int64)
    if layer.cvt is not None:
        offset, scale, truncate = layer.cvt
        data = round_shift((data - offset) * scale, truncate)
        lo, hi = layer.dtype.integer_range()
        data = np.clip(data, lo, hi)
    pad = layer.pad_bits & 0xFFFF
    pad = (pad & 0xFF) - ((pad & 0x80) << 1) if layer.dtype == INT8 else pad - ((pad & 0x8000) << 1)
    x = padded_input(layer, data, pad)
    w = layer.weights.astype(np.int64)
    ow, oh = layer.out_size()
    sx, sy = layer.stride
    dx, dy = layer.dilation
    acc = np.zeros((layer.kernels, oh, ow), np.int64)
    for r in range(w.shape[2]):
        for s in range(w.shape[3]):
            patch = x[:, r * dy: r * dy + (oh - 1) * sy + 1: sy, s * dx: s * dx + (ow - 1) * sx + 1: sx]
            acc += np.einsum("kc,chw->khw", w[:, :, r, s], patch)
    return np.clip(round_shift(acc, layer.clip), -2 ** 31, 2 ** 31 - 1)


def round_shift(v: np.ndarray, t: int) -> np.ndarray:
    if t == 0:
        return v
    mag = (np.abs(v) + (1 << (t - 1))) >> t
    return np.where(v < 0, -mag, mag)


def random_layer(rng, dtype: DataType, c: int, h: int, w: int, k: int, r: int, s: int,
                 **kw) -> Layer:
    lo, hi = dtype.integer_range()
    data = rng.integers(lo, hi + 1, (c, h, w)).astype(dtype.numpy)
    weights = rng.integers(lo, hi + 1, (k, c, r, s)).astype(dtype.numpy)
    return Layer(dtype, data, weights, **kw)


def check_int_layer(layer: Layer) -> np.ndarray:
    out, engine, _ = run_layer(layer)
    ref = int_reference(layer)
    per_atom = ATOM_BYTES // layer.dtype.bytes
    assert out.dtype == np.int32
    assert out.shape == (-(-layer.kernels // per_atom) * per_atom,) + ref.shape[1:]
    np.testing.assert_array_equal(out[:layer.kernels], ref)
    assert not out[layer.kernels:].any()
    return out


# -- INT16 ---------------------------------------------------------------------------------------
INT16_CASES = {
    "odd_channels_3x3": dict(c=37, h=6, w=7, k=5, r=3, s=3, clip=12),
    "two_channel_blocks": dict(c=100, h=4, w=5, k=3, r=2, s=2, clip=14),
    "stride_pad_value": dict(c=20, h=9, w=8, k=7, r=3, s=3, stride=(2, 2), pad=(1, 2),
                             pad_bits=0xFF85, clip=10),            # pad -123 in all 16 bits
    "dilation": dict(c=16, h=9, w=9, k=4, r=3, s=2, dilation=(2, 3), clip=8),
    "three_kernel_groups": dict(c=24, h=5, w=5, k=40, r=1, s=3, clip=9),
    "streamed_groups": dict(c=64, h=4, w=4, k=35, r=3, s=3, keep_weights=False, clip=16),
    "no_clip_saturates": dict(c=65, h=3, w=3, k=2, r=3, s=3, clip=0),
}


@pytest.mark.parametrize("case", sorted(INT16_CASES))
def test_int16_layer_is_bit_exact(case):
    kw = dict(INT16_CASES[case])
    rng = np.random.default_rng(sorted(INT16_CASES).index(case) + 16)
    dims = {key: kw.pop(key) for key in ("c", "h", "w", "k", "r", "s")}
    check_int_layer(random_layer(rng, INT16, **dims, **kw))


def test_int16_saturation_count():
    rng = np.random.default_rng(5)
    layer = random_layer(rng, INT16, c=65, h=3, w=3, k=2, r=3, s=3, clip=0)
    out, engine, _ = run_layer(layer)
    ref = int_reference(layer)
    expected = int(np.count_nonzero((ref == 2 ** 31 - 1) | (ref == -2 ** 31)))
    assert expected > 0
    assert engine.regs["CACC"].view(0).word("D_OUT_SATURATION") == expected


def test_int16_input_converter():
    """CVT on INT16 feature input: sat16(round((x - offset) * scale / 2^truncate))."""
    rng = np.random.default_rng(7)
    layer = random_layer(rng, INT16, c=18, h=4, w=4, k=3, r=2, s=2, clip=10,
                         cvt=(-1234, -3, 2))
    check_int_layer(layer)


def test_int8_layer_on_nv_full():
    """nv_full INT8: groups of 32 kernels, 128-byte CBUF entries."""
    rng = np.random.default_rng(8)
    check_int_layer(random_layer(rng, INT8, c=70, h=5, w=6, k=33, r=3, s=3, pad=(1, 1),
                                 pad_bits=0x1F7, clip=3))


def test_int16_accumulator_saturates_in_issue_order():
    """48-bit saturating accumulation of 64-channel partial sums, channel blocks in order: 2048
    blocks of 64 products of 2^30 reach 2^47 (saturating at 2^47 - 1), then a block of -2^36."""
    blocks = 2049
    lines = np.full((1, blocks * BLOCK_C), -32768, np.int16)
    weights = np.full((1, 1, blocks * BLOCK_C), -32768, np.int16)
    weights[0, 0, -BLOCK_C:] = 32767
    out = np.zeros((1, 1, 1), np.int64)
    conv_lines(lines, weights, out, 1, blocks * BLOCK_C, 1, 1, 1, 1, BLOCK_C)
    acc, top = 0, (1 << 47) - 1
    for b in range(blocks):
        partial = int(np.dot(lines[0, b * 64:(b + 1) * 64].astype(np.int64),
                             weights[0, 0, b * 64:(b + 1) * 64].astype(np.int64)))
        acc = max(-top - 1, min(top, acc + partial))
    assert out[0, 0, 0] == acc
    assert acc != int(np.dot(lines[0].astype(np.int64), weights[0, 0].astype(np.int64)))


# -- precision rules ----------------------------------------------------------------------------
def _misc_override(layer: Layer, unit: str, **fields) -> Layer:
    layer.overrides[f"{unit}.D_MISC_CFG"] = fields
    return layer


def test_direct_conv_does_not_convert_precision():
    layer = random_layer(np.random.default_rng(1), INT16, c=8, h=2, w=2, k=1, r=1, s=1)
    _misc_override(layer, "CDMA", IN_PRECISION=INT8.code)
    with pytest.raises(NvdlaSimError, match=r"CDMA.D_MISC_CFG: IN_PRECISION=INT8 with "
                                            r"PROC_PRECISION=INT16"):
        run_layer(layer)


def test_reserved_precision_code_names_the_field():
    layer = random_layer(np.random.default_rng(1), INT16, c=8, h=2, w=2, k=1, r=1, s=1)
    _misc_override(layer, "CACC", PROC_PRECISION=3)
    with pytest.raises(NvdlaSimError, match=r"CACC.D_MISC_CFG.PROC_PRECISION=3"):
        run_layer(layer)


def test_int16_on_an_int8_only_configuration_is_an_error():
    from nvdla_sim.units.cdma import conv_precision

    class View:
        def field(self, reg, name):
            return {"CONV_MODE": 0, "PROC_PRECISION": 1, "IN_PRECISION": 1}.get(name, 0)

    class FakeUnit:
        block = "CDMA"
        hw = load_hardware("nv_large")

    with pytest.raises(NvdlaSimError, match=r"PROC_PRECISION=INT16: nv_large supports INT8 only"):
        conv_precision(FakeUnit(), View())


# -- timing per precision ------------------------------------------------------------------------
def _mac_busy(layer: Layer) -> tuple[float, float]:
    _, _, result = run_layer(layer, compute_values=False)
    return result.unit_stats["CMAC_A"]["busy_cycles"], result.cycles


def test_int16_takes_twice_the_mac_cycles_of_int8():
    """Same layer (64 channels, 64 kernels, 3x3 over 16x16): INT16 kernel groups hold 16 kernels
    instead of 32, so the MACs work twice as long; timing-only runs need no values."""
    rng = np.random.default_rng(3)
    shape = dict(c=64, h=16, w=16, k=64, r=3, s=3)
    mac8, total8 = _mac_busy(random_layer(rng, INT8, **shape))
    mac16, total16 = _mac_busy(random_layer(rng, INT16, **shape))
    assert mac16 == pytest.approx(2 * mac8, rel=0.02)
    assert total16 > 1.5 * total8


def test_int16_memory_moves_twice_the_bytes():
    """Feature and weight fetches of an INT16 layer read twice the bytes of the INT8 one."""
    rng = np.random.default_rng(4)
    shape = dict(c=32, h=8, w=8, k=16, r=3, s=3)
    r8 = run_layer(random_layer(rng, INT8, **shape), compute_values=False)[2]
    r16 = run_layer(random_layer(rng, INT16, **shape), compute_values=False)[2]
    for client in ("CDMA_DAT", "CDMA_WT"):
        assert r16.memory_bytes["MCIF"][client]["read"] == 2 * r8.memory_bytes["MCIF"][client]["read"]


# -- FP16 ----------------------------------------------------------------------------------------
def fp16_values(bits: np.ndarray) -> np.ndarray:
    """float64 values of binary16 patterns as the convolution pipeline reads them: INF is an
    ordinary exponent (+-65536), NaN stays NaN."""
    bits = np.asarray(bits, np.uint16)
    v = bits.view(np.float16).astype(np.float64)
    inf = (bits & 0x7FFF) == 0x7C00
    return np.where(inf, np.where(bits >> 15, -65536.0, 65536.0), v)


def fp16_exp(bits: np.ndarray) -> np.ndarray:
    """exp(a) = ((a >> 10) & 0x1f) - 15 (precision-preservation document)."""
    return ((np.asarray(bits, np.int64) >> 10) & 0x1F) - 15


def fp16_reference(layer: Layer) -> tuple[np.ndarray, np.ndarray]:
    """float64 convolution of the layer and the CC direct-convolution threshold of each output:
    2^(max_exp - 20) * R * S * C * 2 * scale + 2^(exp(a) - 10), scale 1, max_exp the largest
    (exp(data) & ~3) + (exp(wt) & ~3) in the output's window, a the reference value."""
    c, h, w = layer.data.shape
    k, _, r_n, s_n = layer.weights.shape
    ow, oh = layer.out_size()
    sx, sy = layer.stride
    dx, dy = layer.dilation
    data_bits = layer.data.view(np.uint16)
    if layer.overrides.get("CDMA.D_NAN_FLUSH_TO_ZERO", {}).get("NAN_TO_ZERO"):
        nan = ((data_bits & 0x7C00) == 0x7C00) & ((data_bits & 0x3FF) != 0)
        data_bits = np.where(nan, np.uint16(0), data_bits)
    pad_bits = np.uint16(layer.pad_bits & 0xFFFF)
    xb = padded_input(layer, data_bits, pad_bits)
    x = fp16_values(xb)
    wb = layer.weights.view(np.uint16)
    wv = fp16_values(wb)
    ref = np.zeros((k, oh, ow))
    max_exp = np.full((k, oh, ow), -10 ** 6, np.int64)
    for r in range(r_n):
        for s in range(s_n):
            ys = slice(r * dy, r * dy + (oh - 1) * sy + 1, sy)
            xs = slice(s * dx, s * dx + (ow - 1) * sx + 1, sx)
            patch, pbits = x[:, ys, xs], xb[:, ys, xs]
            ref += np.einsum("kc,chw->khw", wv[:, :, r, s], patch)
            e = (fp16_exp(pbits)[None] & ~3) + (fp16_exp(wb[:, :, r, s])[:, :, None, None] & ~3)
            max_exp = np.maximum(max_exp, e.max(axis=1))
    with np.errstate(divide="ignore"):
        exp_a = np.floor(np.log2(np.abs(np.where(np.isfinite(ref) & (ref != 0), ref, 1.0))))
    exp_a = np.clip(exp_a, -14, 15)                   # the FP16 exponent range of the output
    threshold = 2.0 ** (max_exp - 20) * r_n * s_n * c * 2 + 2.0 ** (exp_a - 10)
    return ref, threshold


SPECIALS = np.array([0x7C00, 0xFC00, 0x7E00, 0xFD55, 0x0001, 0x83FF, 0x0200, 0x7BFF, 0xFBFF,
                     0x7BFE, 0x0000, 0x8000], np.uint16)   # INF, NaN, denormals, +-65504, +-0


def random_fp16(rng, shape, special_rate: float, nan: bool) -> np.ndarray:
    exps = rng.integers(-14, 12, shape)
    v = rng.uniform(-1, 1, shape) * 2.0 ** exps
    bits = v.astype(np.float16).view(np.uint16)
    pick = rng.random(shape) < special_rate
    pool = SPECIALS if nan else SPECIALS[(SPECIALS & 0x7FFF) <= 0x7C00]
    bits = np.where(pick, rng.choice(pool, shape), bits).astype(np.uint16)
    return bits.view(np.float16)


def random_fp16_layer(rng, special_rate: float = 0.02, nan: bool = True) -> Layer:
    c, h, w = int(rng.integers(1, 80)), int(rng.integers(1, 6)), int(rng.integers(1, 6))
    k, r, s = int(rng.integers(1, 20)), int(rng.integers(1, 4)), int(rng.integers(1, 4))
    stride = (int(rng.integers(1, 3)), int(rng.integers(1, 3)))
    dilation = (int(rng.integers(1, 3)), int(rng.integers(1, 3)))
    pad = (int(rng.integers(0, 2)), int(rng.integers(0, 2)))
    if (w + 2 * pad[0] - ((s - 1) * dilation[0] + 1)) < 0 or \
            (h + 2 * pad[1] - ((r - 1) * dilation[1] + 1)) < 0:
        dilation, pad = (1, 1), (s, r)
    pad_bits = int(rng.choice([0x0000, 0x3C00, 0xC500, 0x8000]))
    nan = nan and rng.random() < 0.3                  # NaNs in some layers only: they spread
    return Layer(FP16, random_fp16(rng, (c, h, w), special_rate, nan),
                 random_fp16(rng, (k, c, r, s), special_rate, nan), stride=stride,
                 dilation=dilation, pad=pad, pad_bits=pad_bits)


def fp16_error_ratio(cases: int, seed: int = 0, special_rate: float = 0.02) -> float:
    """Run `cases` random FP16 layers (special values included) through the pipeline; the largest
    |CACC output - float64 reference| / threshold.  NaN must come out exactly where the reference
    is NaN.  (python -c 'import test_conv_precision as t; print(t.fp16_error_ratio(1000))')"""
    rng = np.random.default_rng(seed)
    worst = 0.0
    for _ in range(cases):
        layer = random_fp16_layer(rng, special_rate)
        out, engine, _ = run_layer(layer)
        assert out.dtype == np.uint32
        with np.errstate(invalid="ignore"):
            got = out[:layer.kernels].view(np.float32).astype(np.float64)
        ref, threshold = fp16_reference(layer)
        assert np.array_equal(np.isnan(got), np.isnan(ref)), "NaN where the reference has none"
        assert not out[layer.kernels:].any()
        ok = ~np.isnan(ref)
        if ok.any():
            worst = max(worst, float((np.abs(got[ok] - ref[ok]) / threshold[ok]).max()))
    return worst


def test_fp16_layers_within_the_cc_threshold():
    assert fp16_error_ratio(200, seed=11) <= 1.0


def test_fp16_single_product_is_exact():
    """One active channel: the Booth product is not shifted, so the 44-bit result is exact
    (value = mantissa * 2^(exponent - 50))."""
    rng = np.random.default_rng(12)
    for _ in range(500):
        d, wt = random_fp16(rng, (2,), 0.1, nan=False)
        if (d.view(np.uint16) & 0x7FFF) == 0 or (wt.view(np.uint16) & 0x7FFF) == 0:
            continue
        cell = fp16_mac_cell(np.array([d]).view(np.uint16), np.array([wt]).view(np.uint16))
        mant = cell & ((1 << 38) - 1)
        mant -= (mant >> 37) << 38
        assert mant * 2.0 ** ((cell >> 38) - 50) == fp16_values(np.array([d]).view(np.uint16))[0] \
            * fp16_values(np.array([wt]).view(np.uint16))[0]


def test_fp16_cell_truncates_at_most_one_unit_per_product():
    """The C model's own CMAC check: each shifted product is within one unit of the exact one."""
    rng = np.random.default_rng(13)
    for _ in range(300):
        n = int(rng.integers(1, 65))
        d = random_fp16(rng, (n,), 0.05, nan=False).view(np.uint16)
        wt = random_fp16(rng, (n,), 0.05, nan=False).view(np.uint16)
        cell = fp16_mac_cell(d, wt)
        mant = cell & ((1 << 38) - 1)
        mant -= (mant >> 37) << 38
        unit = 2.0 ** ((cell >> 38) - 50)
        exact = float(np.dot(fp16_values(d), fp16_values(wt)))
        assert abs(mant * unit - exact) <= n * unit


def test_fp16_nan_result_carries_the_first_nan_weight():
    d = np.array([0x7E01, 0x3C00, 0x3C00], np.uint16)         # data NaN in channel 0
    wt = np.array([0x3C00, 0xFD55, 0x7E02], np.uint16)        # weight NaNs in channels 1, 2
    cell = fp16_mac_cell(d, wt)
    assert cell >> 38 == 0x3F and (cell >> 37) & 1 == 1 and (cell >> 27) & 0x3FF == 0x155


def fp16_mac_cell(data: np.ndarray, weights: np.ndarray) -> int:
    """One CMAC cell (the pipeline's masks: +-0 operands off) as a 44-bit pattern."""
    return int(cmac_fp16_dot(data, weights))


def fp48_accumulate(acc: int, cell: int) -> int:
    return int(cacc_fp48_add(np.uint64(acc), np.uint64(cell)))


def test_fp48_accumulator_within_one_unit():
    """The C model's own CACC check: the sum is within one unit of its last place."""
    rng = np.random.default_rng(14)

    def fp48_value(acc):
        mant = acc & ((1 << 40) - 1)
        mant -= (mant >> 39) << 40
        return mant * 2.0 ** ((acc >> 40) - 101), 2.0 ** ((acc >> 40) - 101)

    for _ in range(200):
        acc, exact = 0, 0.0
        for _ in range(int(rng.integers(1, 12))):
            n = int(rng.integers(1, 65))
            cell = fp16_mac_cell(random_fp16(rng, (n,), 0.02, nan=False).view(np.uint16),
                                 random_fp16(rng, (n,), 0.02, nan=False).view(np.uint16))
            mant = cell & ((1 << 38) - 1)
            mant -= (mant >> 37) << 38
            before, _ = fp48_value(acc)
            acc = fp48_accumulate(acc, cell)
            value, unit = fp48_value(acc)
            assert abs(value - (before + mant * 2.0 ** ((cell >> 38) - 50))) <= unit


def test_fp16_nan_flush_to_zero():
    rng = np.random.default_rng(15)
    layer = random_fp16_layer(rng, special_rate=0.1)
    layer.overrides["CDMA.D_NAN_FLUSH_TO_ZERO"] = {"NAN_TO_ZERO": 1}
    data_bits = layer.data.view(np.uint16)
    data_bits[0, 0, 0] = 0x7E00                               # at least one NaN to flush
    layer.weights.view(np.uint16)[:] &= 0xFDFF                 # no NaN weights (quiet bit off)
    layer.weights.view(np.uint16)[((layer.weights.view(np.uint16) & 0x7C00) == 0x7C00)] = 0x7C00
    out, engine, _ = run_layer(layer)
    got = out[:layer.kernels].view(np.float32).astype(np.float64)
    ref, threshold = fp16_reference(layer)
    assert not np.isnan(got).any() and not np.isnan(ref).any()
    assert (np.abs(got - ref) <= threshold).all()
    nans = ((data_bits & 0x7C00) == 0x7C00) & ((data_bits & 0x3FF) != 0)
    assert engine.regs["CDMA"].view(0).word("D_NAN_INPUT_DATA_NUM") >= int(nans.sum()) > 0


def test_fp16_timing_only_run():
    """Timing-only FP16 layers run the same processes (no values): INT16's MAC cycles."""
    rng = np.random.default_rng(16)
    shape = dict(c=64, h=8, w=8, k=32, r=3, s=3)
    fp = Layer(FP16, random_fp16(rng, (64, 8, 8), 0, False),
               random_fp16(rng, (32, 64, 3, 3), 0, False))
    out, _, result = run_layer(fp, compute_values=False)
    assert out is None
    mac16, _ = _mac_busy(random_layer(rng, INT16, **shape))
    assert result.unit_stats["CMAC_A"]["busy_cycles"] == mac16


# -- image input converted to INT16 / FP16 -------------------------------------------------------
@pytest.mark.parametrize("dtype", [INT16, FP16], ids=["int16", "fp16"])
def test_8bit_image_converted_to_16_bit_types(dtype):
    """A8R8G8B8 pixels (B,G,R,A in memory), means per element, scale 1000, truncate 1: INT16
    saturates at 16 bits, FP16 rounds the 17-bit result to nearest even, saturating at 65504
    (the C model's FpIntToFloat); a 2x2-pixel kernel over padded lines (one pad pixel left)."""
    rng = np.random.default_rng(21 + dtype.code)
    h, w, k, r, s = 3, 3, 5, 2, 2
    raw = rng.integers(0, 256, (h, w, 4)).astype(np.uint8)
    raw[0, 0] = [255, 255, 255, 255]                           # far beyond 16 bits once scaled
    means, scale, trunc = np.array([7, 100, -20, 3]), 1000, 1
    pad_bits = 0x3C00 if dtype == FP16 else 0xFFF9            # 1.0 / -7
    rgba = raw[:, :, [2, 1, 0, 3]].astype(np.int64)            # memory B,G,R,A -> R,G,B,A
    conv = round_shift((rgba - means) * scale, trunc)
    if dtype == INT16:
        px = np.clip(conv, -32768, 32767)
        pad = pad_bits - 0x10000
        wts = rng.integers(-300, 300, (k, 4 * s, r, 1)).astype(np.int16)
    else:
        with np.errstate(over="ignore"):                        # 65520.. saturate at 65504
            px16 = np.clip(conv, -65536, 65535).astype(np.float16)
        px16 = np.where(np.isinf(px16), np.copysign(np.float16(65504), px16), px16)
        px = fp16_values(px16.astype(np.float16).view(np.uint16))
        pad = 1.0
        wts = random_fp16(rng, (k, 4 * s, r, 1), 0, False)
    lines = np.full((h, (1 + w) * 4), pad, np.float64)
    lines[:, 4:] = px.reshape(h, -1)
    wv = wts.astype(np.int64) if dtype == INT16 else fp16_values(wts.view(np.uint16))
    ref = np.zeros((k, h - r + 1, w + 1 - s + 1))
    for oy in range(ref.shape[1]):
        for ox in range(ref.shape[2]):
            for rr in range(r):
                ref[:, oy, ox] += wv[:, :, rr, 0] @ lines[oy + rr, ox * 4: ox * 4 + 4 * s]
    img = np.zeros(32 * h, np.uint8)
    for y in range(h):
        img[32 * y: 32 * y + 12] = raw[y].reshape(-1)
    packed = pack_weights(wts, 16)
    misc = {"CONV_MODE": 0, "IN_PRECISION": INT8.code, "PROC_PRECISION": dtype.code}
    bank = {"DATA_BANK": 0, "WEIGHT_BANK": 0}
    ow, oh = ref.shape[2], ref.shape[1]
    cdma = {
        **image_cdma_registers(misc, 13, w, h, 4, 32, 4 * s * r * 2, k, packed.size),
        "D_CVT_CFG": {"CVT_EN": 1, "CVT_TRUNCATE": trunc},
        "D_CVT_SCALE": {"CVT_SCALE": scale}, "D_MEAN_FORMAT": {"MEAN_FORMAT": 1},
        "D_MEAN_GLOBAL_0": {"MEAN_RY": means[0], "MEAN_GU": means[1]},
        "D_MEAN_GLOBAL_1": {"MEAN_BV": means[2] & 0xFFFF, "MEAN_AX": means[3]},
        "D_ZERO_PADDING": {"PAD_LEFT": 1}, "D_ZERO_PADDING_VALUE": {"PAD_VALUE": pad_bits},
        "D_BANK": bank}
    csc = {
        "D_MISC_CFG": misc, "D_DATAIN_FORMAT": {"DATAIN_FORMAT": 1},
        "D_DATAIN_SIZE_EXT_0": {"DATAIN_WIDTH_EXT": w - 1, "DATAIN_HEIGHT_EXT": h - 1},
        "D_DATAIN_SIZE_EXT_1": {"DATAIN_CHANNEL_EXT": 3},
        "D_WEIGHT_SIZE_EXT_0": {"WEIGHT_WIDTH_EXT": 0, "WEIGHT_HEIGHT_EXT": r - 1},
        "D_WEIGHT_SIZE_EXT_1": {"WEIGHT_CHANNEL_EXT": 4 * s - 1, "WEIGHT_KERNEL": k - 1},
        "D_DATAOUT_SIZE_0": {"DATAOUT_WIDTH": ow - 1, "DATAOUT_HEIGHT": oh - 1},
        "D_DATAOUT_SIZE_1": {"DATAOUT_CHANNEL": k - 1},
        "D_ZERO_PADDING": {"PAD_LEFT": 1}, "D_ZERO_PADDING_VALUE": {"PAD_VALUE": pad_bits},
        "D_BANK": bank}
    regs = conv_registers(cdma, csc, dtype, ow, oh, k)
    engine = Engine(load_hardware("nv_full"))
    engine.run(conv_program("image16", regs, img, packed))
    out = engine.channel("cacc->sdp").items[0][:k]
    if dtype == INT16:
        np.testing.assert_array_equal(out, ref.astype(np.int64))
    else:
        got = out.view(np.float32).astype(np.float64)
        assert np.abs(got - ref).max() <= 2.0 ** -20 * np.abs(ref).max() * 2 * r * s * 4 + 1e-30
