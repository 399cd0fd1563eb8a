"""Micro-benchmark of the bit-exact FP16 convolution (kernels/conv.pyx conv_lines): one ResNet-50
3x3 layer shape (res3 / res4 style, ReLU activations, He-initialised weights rounded to FP16),
a subset of the kernels so one run takes seconds.

    python benchmarks/bench_fp16_conv.py [--kernels K] [--size HW] [--channels C] [--check]

Prints the wall time, MAC/s and ns per MAC; with --check also runs the single-threaded reference
path (conv_lines_fp16_reference) and asserts the FP48 patterns are identical; --exhaustive compares
every product of the operand domain.  OMP_NUM_THREADS sets the threads.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from nvdla_sim.kernels import conv


def layer(size: int, channels: int, kernels: int, seed: int = 1):
    """Padded lines (H+2, (W+2)*C) and weights (K, 3, 3*C) of a 3x3 stride-1 layer, FP16 bits."""
    rng = np.random.default_rng(seed)
    act = np.maximum(rng.standard_normal((size + 2, size + 2, channels)), 0) * 0.7
    act[0, :, :] = act[-1, :, :] = 0
    act[:, 0, :] = act[:, -1, :] = 0
    wt = rng.standard_normal((kernels, 3, 3, channels)) * np.sqrt(2.0 / (9 * channels))
    lines = act.astype(np.float16).view(np.uint16).reshape(size + 2, (size + 2) * channels)
    weights = wt.astype(np.float16).view(np.uint16).reshape(kernels, 3, 3 * channels)
    return np.ascontiguousarray(lines), np.ascontiguousarray(weights)


def run(fn, lines, weights, size, channels, block_c=64):
    out = np.empty((weights.shape[0], size, size), np.int64)
    t0 = time.perf_counter()
    fn(lines, weights, out, 3, channels, channels, channels, 1, 1, block_c)
    return out, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=32, help="output kernels computed")
    ap.add_argument("--size", type=int, default=28, help="output height = width")
    ap.add_argument("--channels", type=int, default=128, help="input channels")
    ap.add_argument("--check", action="store_true", help="also run the reference path and compare")
    ap.add_argument("--exhaustive", action="store_true",
                    help="compare the fast CMAC product with the reference on every pair of decoded "
                         "mantissas (4608 x 4608), both signs, shifts 0..36 (about a minute)")
    args = ap.parse_args()
    if args.exhaustive:
        m = np.arange(1024, dtype=np.uint32)
        vals = np.unique(np.concatenate([(m | 1024) << s for s in range(4)] + [m << 1]))
        vals = vals.astype(np.uint32)
        t0 = time.perf_counter()
        bad, seen = conv.fp16_booth_mismatches(vals, vals)
        print(f"exhaustive products: {bad} mismatches of {seen} ({time.perf_counter() - t0:.0f} s)")
        assert bad == 0
    lines, weights = layer(args.size, args.channels, args.kernels)
    macs = args.kernels * args.size * args.size * 9 * args.channels
    out, secs = run(conv.conv_lines, lines, weights, args.size, args.channels)
    print(f"conv_lines FP16 {args.size}x{args.size}x{args.channels} 3x3 -> {args.kernels}: "
          f"{secs:.3f} s, {macs / secs / 1e6:.1f} MMAC/s, {secs / macs * 1e9:.1f} ns/MAC")
    if args.check and hasattr(conv, "conv_lines_fp16_reference"):
        ref, rsecs = run(conv.conv_lines_fp16_reference, lines, weights, args.size, args.channels)
        print(f"reference path: {rsecs:.3f} s ({rsecs / secs:.1f}x slower); "
              f"identical: {np.array_equal(out, ref)}")
        assert np.array_equal(out, ref)


if __name__ == "__main__":
    main()
