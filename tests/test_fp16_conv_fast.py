"""The fast FP16 convolution (nvfloat.cmac_fp16_booth_fast / cmac_fp16_dot_fast, conv_lines' FP16
path: operands decoded once per layer, branch-free vectorised cells, kernels shared between
threads) against the readable reference (cmac_fp16_booth, conv_lines_fp16_reference): identical
bits on every product checked and on whole layers.

The full cross product of decoded operands (4608 x 4608 mantissas, both signs, every shift: 4.2e8
products) is run by `python benchmarks/bench_fp16_conv.py --exhaustive`; here every weight
mantissa meets a sample of data mantissas, and 10^7 random products are compared."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nvdla_sim.kernels.conv import conv_lines, conv_lines_fp16_reference, fp16_booth_mismatches

ROOT = Path(__file__).resolve().parents[1]


def decoded_mantissas() -> np.ndarray:
    """Every mantissa a CMAC cell multiplies: 11 bits with the implied 1, pre-shifted 0..3 by the
    low exponent bits, and denormals (no implied 1, shifted by 1)."""
    m = np.arange(1024, dtype=np.uint32)
    return np.unique(np.concatenate([(m | 1024) << s for s in range(4)] + [m << 1])).astype(np.uint32)


def test_decoded_mantissa_domain():
    vals = decoded_mantissas()
    assert len(vals) == 4608 and vals.max() == 2047 << 3 and vals.min() == 0


def test_every_weight_mantissa_against_sampled_data():
    vals = decoded_mantissas()
    rng = np.random.default_rng(5)
    data = np.concatenate([vals[:8], vals[-8:], rng.choice(vals, 48, replace=False)])
    bad, seen = fp16_booth_mismatches(vals, np.ascontiguousarray(data))
    assert seen == len(vals) * len(data) * 2 * 10
    assert bad == 0


def test_ten_million_random_products():
    vals = decoded_mantissas()
    rng = np.random.default_rng(6)
    w = np.ascontiguousarray(rng.choice(vals, 500_000))
    d = np.ascontiguousarray(rng.choice(vals, 500_000))
    bad, seen = fp16_booth_mismatches(w, d, cross=False)
    assert seen == 10_000_000
    assert bad == 0


def test_mismatch_counter_sees_differences():
    """Outside the operand domain (a data mantissa with bit 16 set) the reference ORs the
    positive-row marker bit where the fast rows XOR it: the comparison must report it."""
    bad, seen = fp16_booth_mismatches(np.array([1 << 10], np.uint32),
                                      np.array([(1 << 16) | 5], np.uint32))
    assert seen == 20 and bad > 0
    with pytest.raises(ValueError):
        fp16_booth_mismatches(np.zeros(2, np.uint32), np.zeros(3, np.uint32), cross=False)


def random_fp16_bits(rng, shape, special_rate: float) -> np.ndarray:
    """Normal values over the whole exponent range, with zeros, denormals, INF and NaN."""
    v = np.clip(rng.standard_normal(shape) * 2.0 ** rng.integers(-16, 16, shape),
                -65504, 65504).astype(np.float16)
    bits = v.view(np.uint16).copy()
    pick = rng.random(shape)
    specials = np.array([0x0000, 0x8000, 0x0001, 0x83ff, 0x7c00, 0xfc00, 0x7e00, 0xfd55, 0x7bff],
                        np.uint16)
    bits[pick < special_rate] = rng.choice(specials, int((pick < special_rate).sum()))
    relu = pick > 1 - special_rate * 10          # runs of zeros, as after a ReLU
    bits[relu] = 0
    return bits


def layer_case(rng, special_rate: float):
    c = int(rng.integers(1, 150))
    r, s = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    sx, sy = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    dx, dy = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    oh, ow = int(rng.integers(1, 6)), int(rng.integers(1, 6))
    k = int(rng.integers(1, 9))
    h = (oh - 1) * sy + (r - 1) * dy + 1
    w = (ow - 1) * sx + (s - 1) * dx + 1
    lines = random_fp16_bits(rng, (h, w * c), special_rate)
    weights = random_fp16_bits(rng, (k, r, s * c), special_rate)
    block_c = int(rng.choice([0, 64, 32, 16, 7] if c <= 64 else [64, 32, 16, 7]))
    args = (s, c, sx * c, dx * c, sy, dy, block_c)
    return lines, weights, (k, oh, ow), args


@pytest.mark.parametrize("special_rate", [0.0, 0.01, 0.1])
def test_random_layers_identical_to_the_reference(special_rate):
    rng = np.random.default_rng(int(special_rate * 1000) + 17)
    for _ in range(60):
        lines, weights, shape, args = layer_case(rng, special_rate)
        fast = np.empty(shape, np.int64)
        ref = np.empty(shape, np.int64)
        conv_lines(lines, weights, fast, *args)
        conv_lines_fp16_reference(lines, weights, ref, *args)
        assert np.array_equal(fast, ref), args


def test_every_fp16_pattern_through_a_layer():
    """A 1x1 layer whose data holds all 65536 fp16 patterns (NaN included): every operand
    decoding and the NaN fallback agree with the reference."""
    rng = np.random.default_rng(3)
    lines = np.arange(65536, dtype=np.uint32).astype(np.uint16).reshape(1, 65536)
    rng.shuffle(lines[0])
    weights = random_fp16_bits(rng, (3, 1, 64), 0.05)
    weights[0, 0, :] = rng.integers(0, 0x7c00, 64).astype(np.uint16)     # no NaN in kernel 0
    fast = np.empty((3, 1, 1024), np.int64)
    ref = np.empty((3, 1, 1024), np.int64)
    conv_lines(lines, weights, fast, 1, 64, 64, 64, 1, 1, 64)
    conv_lines_fp16_reference(lines, weights, ref, 1, 64, 64, 64, 1, 1, 64)
    assert np.array_equal(fast, ref)
    assert len(np.unique(fast[0])) > 900                 # real, varied sums


def test_result_does_not_depend_on_the_thread_count(tmp_path):
    script = (
        "import numpy as np, sys\n"
        "sys.path.insert(0, %r)\n"
        "from test_fp16_conv_fast import random_fp16_bits\n"
        "from nvdla_sim.kernels.conv import conv_lines\n"
        "rng = np.random.default_rng(8)\n"
        "lines = random_fp16_bits(rng, (10, 10 * 96), 0.02)\n"
        "weights = random_fp16_bits(rng, (24, 3, 3 * 96), 0.02)\n"
        "out = np.empty((24, 8, 8), np.int64)\n"
        "conv_lines(lines, weights, out, 3, 96, 96, 96, 1, 1, 64)\n"
        "np.save(sys.argv[1], out)\n" % str(Path(__file__).parent))
    outs = []
    for threads in ("1", "2", "3"):
        path = tmp_path / f"out{threads}.npy"
        env = dict(os.environ, OMP_NUM_THREADS=threads)
        subprocess.run([sys.executable, "-c", script, str(path)], check=True, env=env, cwd=ROOT)
        outs.append(np.load(path))
    assert np.array_equal(outs[0], outs[1]) and np.array_equal(outs[0], outs[2])
