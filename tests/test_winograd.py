"""Winograd convolution (NVDLA v1 nv_full, CONV_MODE=WINOGRAD) through CDMA, CBUF, CSC, CMAC_A/B
and CACC, against independent numpy references written from the data-format document and the
C model's arithmetic: CDMA padding and channel extension by the stride, CSC pre-addition
B^T d B truncated by PRA_TRUNCATE, CMAC 4x4-domain products with A^T . A post-addition, CACC
accumulation per super channel of 4 channels; and the Winograd identity itself (weights
transformed with G, 4 x direct convolution).  Timing: 2.25x fewer MAC cycles for 3x3 layers."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from nvdla_sim.config import load_hardware
from nvdla_sim.datatype import FP16, INT8, INT16, DataType
from nvdla_sim.engine import Engine
from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.program import RegisterProgram
from nvdla_sim.timing.conv import csc_geometry

from conv_helpers import SRC, WT, conv_program, conv_registers
from test_conv_precision import pack_feature

BANK_ENTRIES = 256

B_T = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.int64)
A_T = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.int64)
G2 = np.array([[2, 0, 0], [1, 1, 1], [1, -1, 1], [0, 0, 2]], np.int64)      # 2 x G


@dataclass
class WinoLayer:
    dtype: DataType
    data: np.ndarray                     # (C, H, W)
    weights: np.ndarray                  # (K, C_ext, 4, 4): 4x4-domain kernels
    out: tuple                           # (OW, OH)
    stride: tuple = (1, 1)
    pad: tuple = (1, 1, 1, 1)            # left, right, top, bottom
    pad_bits: int = 0
    pra_truncate: int = 0
    clip: int = 0
    overrides: dict = field(default_factory=dict)

    @property
    def atom(self) -> int:
        return 32 // self.dtype.bytes

    def ext_shape(self) -> tuple[int, int, int]:
        c, h, w = self.data.shape
        sx, sy = self.stride
        left, right, top, bottom = self.pad
        lanes = -(-c // self.atom) * self.atom
        return lanes * sx * sy, (top + h + bottom) // sy, (left + w + right) // sx


def pack_winograd_weights(u: np.ndarray, group: int) -> np.ndarray:
    """4x4-domain kernels as the data-format document maps them: groups of `group` kernels; in a
    group, 4x4x4-element small cubes (channels fastest, then x, then y) scanned K -> C; groups
    back to back; 128-byte aligned end."""
    k_total, c_total = u.shape[:2]
    out = []
    for g0 in range(0, k_total, group):
        for c0 in range(0, c_total, 4):
            for k in range(g0, min(g0 + group, k_total)):
                out.append(np.transpose(u[k, c0:c0 + 4], (1, 2, 0)).ravel())
    flat = np.concatenate(out).astype(u.dtype.newbyteorder("<")).view(np.uint8)
    return np.concatenate([flat, np.zeros(-flat.size % 128, np.uint8)])


def wino_program(layer: WinoLayer) -> RegisterProgram:
    dt = layer.dtype
    c, h, w = layer.data.shape
    k, c_ext = layer.weights.shape[:2]
    ext_c, ext_h, ext_w = layer.ext_shape()
    ow, oh = layer.out
    sx, sy = layer.stride
    left, right, top, bottom = layer.pad
    group = 32 if dt == INT8 else 16
    feature, line, surf = pack_feature(layer.data)
    wts = pack_winograd_weights(layer.weights, group)
    slice_entries = ext_w // 4 * (ext_c // layer.atom)
    data_banks = -(-slice_entries * ext_h // BANK_ENTRIES)
    weight_banks = -(-wts.size // (BANK_ENTRIES * 128))
    misc = {"CONV_MODE": 1, "IN_PRECISION": dt.code, "PROC_PRECISION": dt.code,
            "SKIP_WEIGHT_RLS": 1}
    bank = {"DATA_BANK": data_banks - 1, "WEIGHT_BANK": weight_banks - 1}
    cdma = {"D_MISC_CFG": misc, "D_DATAIN_FORMAT": {"DATAIN_FORMAT": 0},
            "D_DATAIN_SIZE_0": {"DATAIN_WIDTH": w - 1, "DATAIN_HEIGHT": h - 1},
            "D_DATAIN_SIZE_1": {"DATAIN_CHANNEL": c - 1},
            "D_DATAIN_SIZE_EXT_0": {"DATAIN_WIDTH_EXT": ext_w - 1, "DATAIN_HEIGHT_EXT": ext_h - 1},
            "D_DAIN_RAM_TYPE": {"DATAIN_RAM_TYPE": 1},
            "D_DAIN_ADDR_LOW_0": {"DATAIN_ADDR_LOW_0": SRC},
            "D_LINE_STRIDE": {"LINE_STRIDE": line}, "D_SURF_STRIDE": {"SURF_STRIDE": surf},
            "D_ENTRY_PER_SLICE": {"ENTRIES": slice_entries - 1},
            "D_WEIGHT_SIZE_0": {"BYTE_PER_KERNEL": 16 * c_ext * dt.bytes - 1},
            "D_WEIGHT_SIZE_1": {"WEIGHT_KERNEL": k - 1},
            "D_WEIGHT_RAM_TYPE": {"WEIGHT_RAM_TYPE": 1},
            "D_WEIGHT_ADDR_LOW": {"WEIGHT_ADDR_LOW": WT}, "D_WEIGHT_BYTES": {"WEIGHT_BYTES": wts.size},
            "D_CONV_STRIDE": {"CONV_X_STRIDE": sx - 1, "CONV_Y_STRIDE": sy - 1},
            "D_ZERO_PADDING": {"PAD_LEFT": left, "PAD_RIGHT": right, "PAD_TOP": top,
                               "PAD_BOTTOM": bottom},
            "D_ZERO_PADDING_VALUE": {"PAD_VALUE": layer.pad_bits & 0xFFFF}, "D_BANK": bank}
    csc = {"D_MISC_CFG": misc, "D_DATAIN_FORMAT": {"DATAIN_FORMAT": 0},
           "D_DATAIN_SIZE_EXT_0": {"DATAIN_WIDTH_EXT": ext_w - 1, "DATAIN_HEIGHT_EXT": ext_h - 1},
           "D_DATAIN_SIZE_EXT_1": {"DATAIN_CHANNEL_EXT": c_ext - 1},
           "D_WEIGHT_SIZE_EXT_0": {"WEIGHT_WIDTH_EXT": 3, "WEIGHT_HEIGHT_EXT": 3},
           "D_WEIGHT_SIZE_EXT_1": {"WEIGHT_CHANNEL_EXT": c_ext - 1, "WEIGHT_KERNEL": k - 1},
           "D_WEIGHT_BYTES": {"WEIGHT_BYTES": wts.size},
           "D_DATAOUT_SIZE_0": {"DATAOUT_WIDTH": ow - 1, "DATAOUT_HEIGHT": oh - 1},
           "D_DATAOUT_SIZE_1": {"DATAOUT_CHANNEL": k - 1},
           "D_ENTRY_PER_SLICE": {"ENTRIES": slice_entries - 1},
           "D_PRA_CFG": {"PRA_TRUNCATE": layer.pra_truncate},
           "D_ZERO_PADDING_VALUE": {"PAD_VALUE": layer.pad_bits & 0xFFFF}, "D_BANK": bank}
    regs = conv_registers(cdma, csc, dt, ow, oh, k, conv_mode=1, clip=layer.clip,
                          overrides=layer.overrides)
    return conv_program(f"wino_{dt}", regs, feature, wts, cdma_interrupts=True)


def run(layer: WinoLayer, compute_values: bool = True):
    engine = Engine(load_hardware("nv_full"), compute_values=compute_values)
    result = engine.run(wino_program(layer))
    items = engine.channel("cacc->sdp").items
    assert len(items) == 1
    return items[0], engine, result


# -- independent reference ---------------------------------------------------------------------
def pad_value(layer: WinoLayer) -> int:
    v = layer.pad_bits & 0xFFFF
    if layer.dtype == INT8:
        v &= 0xFF
        return v - 256 if v >= 128 else v
    return v - 65536 if v >= 32768 else v


def extended_input(layer: WinoLayer, pad) -> np.ndarray:
    """The padded cube (atoms filled with 0 beyond C, as pack_feature writes them), channel-
    extended element by element as the data-format document's Winograd extension reads."""
    c, h, w = layer.data.shape
    left, right, top, bottom = layer.pad
    sx, sy = layer.stride
    lanes = -(-c // layer.atom) * layer.atom
    padded = np.full((lanes, top + h + bottom, left + w + right), pad, layer.data.dtype)
    padded[:, top:top + h, left:left + w] = 0
    padded[:c, top:top + h, left:left + w] = layer.data
    ext_c, ext_h, ext_w = layer.ext_shape()
    ext = np.zeros((ext_c, ext_h, ext_w), layer.data.dtype)
    for i in range(sy):
        for j in range(sx):
            phase = i * sx + j
            ext[phase * lanes:(phase + 1) * lanes] = padded[:, i::sy, j::sx][:, :ext_h, :ext_w]
    return ext


def int_reference(layer: WinoLayer) -> np.ndarray:
    """Integer Winograd in int64 from the C model's rules, outputs (K, OH, OW) after the CACC."""
    dt = layer.dtype
    bits = 8 * dt.bytes
    ext = extended_input(layer, pad_value(layer)).astype(np.int64)
    ow, oh = layer.out
    th, tw = oh // 2, ow // 2
    tiles = np.stack([np.stack([ext[:, 2 * y:2 * y + 4, 2 * x:2 * x + 4] for x in range(tw)], 1)
                      for y in range(th)], 1)                          # (C, th, tw, 4, 4)
    v = np.einsum("ij,ctujk,lk->ctuil", B_T, tiles, B_T)
    t = layer.pra_truncate
    if t:
        v = np.sign(v) * ((np.abs(v) + (1 << (t - 1))) >> t)
    v = np.clip(v, -2 ** (bits - 1), 2 ** (bits - 1) - 1)
    u = layer.weights.astype(np.int64)
    k = u.shape[0]
    acc = np.zeros((k, th, tw, 2, 2), np.int64)
    for s in range(ext.shape[0] // 4):
        m = np.einsum("ctuij,kcij->ktuij", v[4 * s:4 * s + 4], u[:, 4 * s:4 * s + 4])
        y = np.einsum("ai,ktuij,bj->ktuab", A_T, m, A_T)
        acc = np.clip(acc + y, -2 ** 47, 2 ** 47 - 1)
    out = acc.transpose(0, 1, 3, 2, 4).reshape(k, oh, ow)
    if layer.clip:
        out = np.sign(out) * ((np.abs(out) + (1 << (layer.clip - 1))) >> layer.clip)
    return np.clip(out, -2 ** 31, 2 ** 31 - 1)


def random_layer(rng, dtype: DataType, c: int, h: int, w: int, k: int, out: tuple,
                 stride=(1, 1), pad=(1, 1, 1, 1), **kw) -> WinoLayer:
    lo, hi = dtype.integer_range()
    data = rng.integers(lo, hi + 1, size=(c, h, w)).astype(dtype.numpy)
    layer = WinoLayer(dtype, data, np.zeros((k, 4), dtype.numpy), out, stride, pad, **kw)
    c_ext = layer.ext_shape()[0]
    layer.weights = rng.integers(lo, hi + 1, size=(k, c_ext, 4, 4)).astype(dtype.numpy)
    return layer


def delivered(cube: np.ndarray, layer: WinoLayer) -> np.ndarray:
    ow, oh = layer.out
    return cube[:layer.weights.shape[0], :oh, :ow].astype(np.int64)


# -- tests ---------------------------------------------------------------------------------------
INT_CASES = [
    # dtype, C, H, W, K, out, stride, pad, pra_truncate, pad_bits
    (INT8, 5, 8, 8, 7, (8, 8), (1, 1), (1, 3, 1, 3), 0, 0),
    (INT8, 37, 6, 10, 33, (8, 4), (1, 1), (1, 1, 1, 1), 2, 0x1F3),
    (INT16, 3, 8, 8, 5, (4, 4), (2, 2), (1, 7, 1, 7), 1, 0),
    (INT16, 19, 12, 4, 17, (4, 12), (1, 1), (1, 3, 1, 3), 3, 0x8001),
    (INT8, 9, 6, 14, 40, (4, 4), (2, 1), (1, 1, 1, 1), 1, 0x7F),
]


@pytest.mark.parametrize("case", INT_CASES, ids=lambda c: f"{c[0]}-C{c[1]}-K{c[4]}-s{c[6]}")
def test_integer_winograd_is_bit_exact(case):
    dtype, c, h, w, k, out, stride, pad, trunc, pad_bits = case
    rng = np.random.default_rng(c * 1000 + k)
    layer = random_layer(rng, dtype, c, h, w, k, out, stride, pad, pra_truncate=trunc,
                         pad_bits=pad_bits, clip=4 if dtype == INT16 else 0)
    cube, _, _ = run(layer)
    assert cube.dtype == np.int32
    np.testing.assert_array_equal(delivered(cube, layer), int_reference(layer))
    assert not cube[k:].any()                    # lanes beyond K are 0


@pytest.mark.parametrize("dtype", [INT8, INT16])
def test_winograd_equals_direct_convolution_with_transformed_weights(dtype):
    """With U = (2G) g (2G)^T and no truncation or saturation, Winograd gives 4x the direct
    3x3 convolution of the padded input (the identity the weight pre-transform relies on)."""
    rng = np.random.default_rng(11)
    c, h, w, k = 6, 8, 12, 9
    data = rng.integers(-7, 8, size=(c, h, w)).astype(dtype.numpy)
    g = rng.integers(-7, 8, size=(k, c, 3, 3))
    layer = WinoLayer(dtype, data, np.zeros((k, 4)), (w, h), pad=(1, 3, 1, 3))
    c_ext = layer.ext_shape()[0]
    u = np.zeros((k, c_ext, 4, 4), np.int64)
    u[:, :c] = np.einsum("ij,kcjl,ml->kcim", G2, g, G2)
    layer.weights = u.astype(dtype.numpy)
    cube, _, _ = run(layer)
    x = np.zeros((c, h + 2, w + 2), np.int64)
    x[:, 1:1 + h, 1:1 + w] = data
    direct = np.zeros((k, h, w), np.int64)
    for r in range(3):
        for s in range(3):
            direct += np.einsum("kc,cyx->kyx", g[:, :, r, s], x[:, r:r + h, s:s + w])
    np.testing.assert_array_equal(delivered(cube, layer), 4 * direct)


def test_fp16_winograd():
    """FP16: the PRA in FP17 equals float16 arithmetic for moderate values (no denormals or
    overflow), so the reference pre-adds in numpy float16; the CMAC/CACC sums then agree with
    float64 sums of the same products within the precision document's CC bound."""
    rng = np.random.default_rng(5)
    c, h, w, k = 7, 8, 8, 5
    data = rng.uniform(-2, 2, size=(c, h, w)).astype(np.float16)
    layer = WinoLayer(FP16, data, np.zeros((k, 4)), (8, 8), pad=(1, 3, 1, 3))
    c_ext = layer.ext_shape()[0]
    u = np.zeros((k, c_ext, 4, 4), np.float16)
    u[:, :c] = rng.uniform(-1, 1, size=(k, c, 4, 4)).astype(np.float16)
    layer.weights = u
    cube, engine, _ = run(layer)
    got = cube[:k, :8, :8].view(np.float32).astype(np.float64)
    ext = extended_input(layer, np.float16(0))
    out = np.zeros((k, 8, 8))
    bound = np.zeros((k, 8, 8))
    for ty in range(4):
        for tx in range(4):
            # B^T d B in float16, rows then columns, in the C model's operation order
            d = ext[:, 2 * ty:2 * ty + 4, 2 * tx:2 * tx + 4]
            m = np.stack([d[:, 0] - d[:, 2], d[:, 1] + d[:, 2], d[:, 2] - d[:, 1],
                          d[:, 1] - d[:, 3]], 1)
            v = np.stack([m[:, :, 0] - m[:, :, 2], m[:, :, 1] + m[:, :, 2],
                          m[:, :, 2] - m[:, :, 1], m[:, :, 1] - m[:, :, 3]], 2)
            prod = v.astype(np.float64)[None] * u.astype(np.float64)       # (K, C, 4, 4)
            y = np.einsum("ai,kcij,bj->kab", A_T, prod, A_T)
            out[:, 2 * ty:2 * ty + 2, 2 * tx:2 * tx + 2] = y
            # precision document, CC Winograd: 2^(max_exp - 20) * 18 * C * 2, max_exp of the
            # largest product; plus the FP32 delivery's rounding
            max_exp = np.floor(np.log2(np.abs(prod).max(axis=(1, 2, 3))))
            bound[:, 2 * ty:2 * ty + 2, 2 * tx:2 * tx + 2] = \
                (2.0 ** (max_exp - 20) * 18 * c_ext * 2)[:, None, None]
    err = np.abs(got - out)
    assert np.all(err <= bound + np.abs(out) * 2.0 ** -23)


def test_timing_only_run_matches_values_run():
    rng = np.random.default_rng(3)
    layer = random_layer(rng, INT16, 20, 8, 8, 17, (8, 8), pad=(1, 3, 1, 3))
    _, _, with_values = run(layer)
    none, _, timing_only = run(layer, compute_values=False)
    assert none is None
    assert timing_only.cycles == with_values.cycles


def test_three_by_three_layer_needs_2_25x_fewer_mac_cycles():
    hw = load_hardware("nv_full")
    direct = csc_geometry(hw, False, 16, 16, 3, 3, 64, 32)
    wino = csc_geometry(hw, False, 16, 16, 4, 4, 64, 32, winograd=True)
    assert direct.mac_cycles / wino.mac_cycles == 2.25
    # on the simulated hardware: a 16x16x64 -> 32 layer, direct vs Winograd
    rng = np.random.default_rng(4)
    layer = random_layer(rng, INT8, 64, 16, 16, 32, (16, 16), pad=(1, 3, 1, 3))
    _, _, wino = run(layer, compute_values=False)
    from test_conv_precision import Layer, run_layer
    direct_layer = Layer(INT8, layer.data, np.zeros((32, 64, 3, 3), np.int8), pad=(1, 1))
    _, _, direct_run = run_layer(direct_layer, compute_values=False)
    ratio = direct_run.unit_stats["CMAC_A"]["busy_cycles"] / \
        wino.unit_stats["CMAC_A"]["busy_cycles"]
    assert 2.1 < ratio <= 2.25


@pytest.mark.parametrize("override, message", [
    ({"CDMA.D_ZERO_PADDING": {"PAD_RIGHT": 2}}, "multiple of 4"),
    ({"CDMA.D_ENTRY_PER_SLICE": {"ENTRIES": 0}}, "ENTRIES="),
    ({"CSC.D_DATAOUT_SIZE_0": {"DATAOUT_WIDTH": 5}}, "multiple of 4"),
    ({"CSC.D_WEIGHT_SIZE_EXT_0": {"WEIGHT_WIDTH_EXT": 2}}, "4x4"),
])
def test_bad_winograd_registers_are_one_line_errors(override, message):
    rng = np.random.default_rng(1)
    layer = random_layer(rng, INT8, 5, 8, 8, 4, (8, 8), pad=(1, 3, 1, 3), overrides=override)
    with pytest.raises(NvdlaSimError, match=message) as err:
        run(layer)
    assert "\n" not in str(err.value)
