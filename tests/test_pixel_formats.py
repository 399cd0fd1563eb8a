"""16-bit, FP16 and 10-bit packed pitch-linear pixel formats in the CDMA (nv_full), with mean
subtraction and the INT8/INT16/FP16 output of the converter.  The memory images are written here
from the format names (components from the most to the least significant end of the packed pixel,
so the last-named component has the lowest address / bits) and the CBUF lines are checked against
the data-format and precision documents' converter: sat(round((p - mean) * scale / 2^truncate)),
FP16 from the 17-bit result (nearest even, saturating at 65504), FP16 components unconverted."""
from __future__ import annotations

import numpy as np
import pytest

from nvdla_sim.config import load_hardware
from nvdla_sim.datatype import FP16, INT8, INT16
from nvdla_sim.engine import Engine
from nvdla_sim.errors import NvdlaSimError

from conv_helpers import CONV_UNITS, conv_program, conv_registers, image_cdma_registers
from program_helpers import reg_writes
from test_conv_precision import pack_weights

LINE = 256                                   # line stride, 32-byte aligned
CBUF_ORDER = {"R": 0, "G": 1, "B": 2, "A": 3, "X": 3, "Y": 0, "U": 1, "V": 2}

# code: (name, component names from MSB to LSB, bits each, input type)
FORMATS = {
    3: ("R16", "R", 16, INT16),
    2: ("R12", "R", 16, INT16),
    5: ("R16_F", "R", 16, FP16),
    6: ("A16B16G16R16", "ABGR", 16, INT16),
    7: ("X16B16G16R16", "XBGR", 16, INT16),
    8: ("A16B16G16R16_F", "ABGR", 16, FP16),
    9: ("A16Y16U16V16", "AYUV", 16, INT16),
    10: ("V16U16Y16A16", "VUYA", 16, INT16),
    20: ("A2B10G10R10", "ABGR", (2, 10, 10, 10), INT16),
    21: ("A2R10G10B10", "ARGB", (2, 10, 10, 10), INT16),
    23: ("R10G10B10A2", "RGBA", (10, 10, 10, 2), INT16),
}


def pack_image(code: int, comps: np.ndarray) -> np.ndarray:
    """comps (H, W, E) in CBUF order (R,G,B,A / Y,U,V,A) -> memory lines LINE bytes apart."""
    _, names, bits, _ = FORMATS[code]
    h, w, _ = comps.shape
    img = np.zeros(h * LINE, np.uint8)
    for y in range(h):
        if isinstance(bits, tuple):          # one 32-bit word, last-named in the low bits
            word = np.zeros(w, np.uint64)
            shift = 0
            for name, nbits in zip(reversed(names), reversed(bits)):
                word |= comps[y, :, CBUF_ORDER[name]].astype(np.uint64) << np.uint64(shift)
                shift += nbits
            row = word.astype("<u4").view(np.uint8)
        else:                                # 16-bit components, last-named first in memory
            order = [CBUF_ORDER[n] for n in reversed(names)]
            row = np.ascontiguousarray(comps[y][:, order]).astype("<u2").view(np.uint8).ravel()
        img[y * LINE:y * LINE + row.size] = row
    return img


def image_program(code, proc, comps, kernels=3, cvt=None, means=None, sign_override=0,
                  nan_to_zero=0):
    _, names, _, in_type = FORMATS[code]
    h, w, e = comps.shape
    rng = np.random.default_rng(code)
    if proc == FP16:
        wts = rng.uniform(-1, 1, (kernels, e, 1, 1)).astype(np.float16)
    else:
        wts = rng.integers(-50, 50, (kernels, e, 1, 1)).astype(proc.numpy)
    packed = pack_weights(wts, 32 if proc == INT8 else 16)
    misc = {"CONV_MODE": 0, "IN_PRECISION": in_type.code, "PROC_PRECISION": proc.code}
    bank = {"DATA_BANK": 0, "WEIGHT_BANK": 0}
    cdma = {
        **image_cdma_registers(misc, code, w, h, e, LINE, e * proc.bytes, kernels, packed.size,
                               PIXEL_SIGN_OVERRIDE=sign_override),
        "D_NAN_FLUSH_TO_ZERO": {"NAN_TO_ZERO": nan_to_zero},
        "D_BANK": bank}
    csc = {
        "D_MISC_CFG": misc, "D_DATAIN_FORMAT": {"DATAIN_FORMAT": 1},
        "D_DATAIN_SIZE_EXT_0": {"DATAIN_WIDTH_EXT": w - 1, "DATAIN_HEIGHT_EXT": h - 1},
        "D_DATAIN_SIZE_EXT_1": {"DATAIN_CHANNEL_EXT": e - 1},
        "D_WEIGHT_SIZE_EXT_0": {"WEIGHT_WIDTH_EXT": 0, "WEIGHT_HEIGHT_EXT": 0},
        "D_WEIGHT_SIZE_EXT_1": {"WEIGHT_CHANNEL_EXT": e - 1, "WEIGHT_KERNEL": kernels - 1},
        "D_DATAOUT_SIZE_0": {"DATAOUT_WIDTH": w - 1, "DATAOUT_HEIGHT": h - 1},
        "D_DATAOUT_SIZE_1": {"DATAOUT_CHANNEL": kernels - 1},
        "D_BANK": bank}
    regs = conv_registers(cdma, csc, proc, w, h, kernels)
    if cvt is not None:
        scale, trunc, offset = cvt
        regs.update({"CDMA.D_CVT_CFG": {"CVT_EN": 1, "CVT_TRUNCATE": trunc},
                     "CDMA.D_CVT_SCALE": {"CVT_SCALE": scale & 0xFFFF},
                     "CDMA.D_CVT_OFFSET": {"CVT_OFFSET": offset & 0xFFFF}})
    if means is not None:
        regs.update({"CDMA.D_MEAN_FORMAT": {"MEAN_FORMAT": 1},
                     "CDMA.D_MEAN_GLOBAL_0": {"MEAN_RY": means[0] & 0xFFFF,
                                              "MEAN_GU": means[1] & 0xFFFF},
                     "CDMA.D_MEAN_GLOBAL_1": {"MEAN_BV": means[2] & 0xFFFF,
                                              "MEAN_AX": means[3] & 0xFFFF}})
    program = conv_program(f"image_{code}", regs, pack_image(code, comps), packed)
    return program, wts


def expected_lines(comps, proc, cvt, means, signed) -> np.ndarray:
    """The converter on each component, as the documents state it (int64 / float64)."""
    p = comps.astype(np.int64)
    if signed:
        p = np.where(p >= 32768, p - 65536, p)
    if cvt is None:
        return p
    scale, trunc, offset = cvt
    m = np.array(means if means is not None else [offset] * 4)[:comps.shape[2]]
    v = (p - m) * scale
    if trunc:
        v = np.sign(v) * ((np.abs(v) + (1 << (trunc - 1))) >> trunc)
    v = np.clip(v, -65536, 65535)                                    # the 17-bit result
    if proc == FP16:
        with np.errstate(over="ignore"):
            f = v.astype(np.float16)
        return np.where(np.isinf(f), np.copysign(np.float16(65504), f), f).astype(np.float64)
    lo, hi = proc.integer_range()
    return np.clip(v, lo, hi)


def random_components(code, h=3, w=5, seed=0) -> np.ndarray:
    _, names, bits, _ = FORMATS[code]
    rng = np.random.default_rng(seed + code)
    widths = bits if isinstance(bits, tuple) else (bits,) * len(names)
    comps = np.zeros((h, w, len(names)), np.uint16)
    for name, nbits in zip(names, widths):
        comps[:, :, CBUF_ORDER[name]] = rng.integers(0, 1 << nbits, (h, w))
    return comps


def widened(code, comps) -> np.ndarray:
    """10-bit packed components as the CDMA widens them: MSB-aligned in 16 bits."""
    _, names, bits, _ = FORMATS[code]
    if not isinstance(bits, tuple):
        return comps
    out = comps.copy()
    for name, nbits in zip(names, bits):
        out[:, :, CBUF_ORDER[name]] = comps[:, :, CBUF_ORDER[name]] << (16 - nbits)
    return out


INT_CASES = [
    # code, proc, cvt (scale, truncate, offset), means, sign override
    (6, INT16, (3, 2, 0), (1000, -20000, 7, 30000), 0),
    (7, INT16, None, None, 0),
    (9, INT8, (1, 8, 0), (-100, 100, 0, 5), 1),
    (10, INT16, (-2, 1, 0), (0, 1, 2, 3), 1),
    (3, FP16, (5, 0, -300), None, 0),
    (2, INT16, (1, 0, 2048), None, 0),
    (20, INT16, (1, 1, 0), (512, 0, -512, 100), 0),
    (21, INT8, (1, 8, 32768 - 65536), None, 0),
    (23, FP16, (1, 0, 0), (0, 0, 0, 0), 1),
]


@pytest.mark.parametrize("case", INT_CASES, ids=lambda c: f"{FORMATS[c[0]][0]}-{c[1]}")
def test_integer_pixel_formats(case):
    code, proc, cvt, means, signed = case
    comps = random_components(code)
    program, wts = image_program(code, proc, comps, cvt=cvt, means=means, sign_override=signed)
    engine = Engine(load_hardware("nv_full"))
    engine.run(program)
    lines = engine.units["CDMA"].cbuf.data.array                  # (H, W * E), no padding
    want = expected_lines(widened(code, comps), proc, cvt, means, signed)
    h, w, e = comps.shape
    if proc == FP16:
        np.testing.assert_array_equal(lines.astype(np.float64).reshape(h, w, e), want)
    elif cvt is None:                         # unconverted: the component's bits in the lane
        np.testing.assert_array_equal(lines.view(np.uint16).reshape(h, w, e), comps)
    else:
        np.testing.assert_array_equal(lines.astype(np.int64).reshape(h, w, e), want)
    out = engine.channel("cacc->sdp").items[0][:wts.shape[0]]
    if proc != FP16:                          # and the convolution of those lines
        ref = np.einsum("ke,hwe->khw", wts[:, :, 0, 0].astype(np.int64),
                        lines.astype(np.int64).reshape(h, w, e))
        np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("code", [5, 8])
def test_fp16_pixels_pass_unconverted_with_nan_handling(code):
    """FP16 components bypass the converter (means too: the C model's and RTL's converter cell
    passes FP16 input); NaNs are counted and, with NAN_TO_ZERO, flushed; INFs counted."""
    rng = np.random.default_rng(code)
    _, names, _, _ = FORMATS[code]
    h, w, e = 2, 6, len(names)
    vals = rng.uniform(-8, 8, (h, w, e)).astype(np.float16)
    vals[0, 1, 0] = np.float16(np.nan)
    vals[1, 2, e - 1] = np.float16(-np.inf)
    comps = vals.view(np.uint16)
    program, wts = image_program(code, FP16, comps, cvt=(7, 3, 100), means=(1, 2, 3, 4),
                                 nan_to_zero=1)
    engine = Engine(load_hardware("nv_full"))
    engine.run(program)
    lines = engine.units["CDMA"].cbuf.data.array.view(np.uint16).reshape(h, w, e)
    want = comps.copy()
    want[0, 1, 0] = 0
    np.testing.assert_array_equal(lines, want)
    regs = engine.regs["CDMA"].view(0)
    assert regs.word("D_NAN_INPUT_DATA_NUM") == 1
    assert regs.word("D_INF_INPUT_DATA_NUM") == 1


def test_pixel_format_needs_its_input_precision():
    comps = random_components(6)
    program, _ = image_program(6, INT16, comps)
    bad = [c for c in program.commands]
    engine = Engine(load_hardware("nv_full"))
    from dataclasses import replace
    extra = reg_writes({"CDMA.D_MISC_CFG": {"IN_PRECISION": 0, "PROC_PRECISION": 1}}, version=1)
    n = len(CONV_UNITS)
    program = replace(program, commands=bad[:-n] + list(extra) + bad[-n:])
    with pytest.raises(NvdlaSimError, match="must be INT16"):
        engine.run(program)
