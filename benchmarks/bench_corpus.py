"""Wall time of the whole official trace corpus, and the direct-convolution kernel's MAC/s.

    python benchmarks/bench_corpus.py [--nvdla-hw DIR] [--project nv_small]

Prints: corpus wall time and pass count; the conv kernel's throughput on a 56x56x64 int8 input,
3x3 kernel, 64 kernels (MAC/s), the BLAS path's (kernels/conv_gemm.py, what the CMAC runs for
INT8), next to a float64 matrix-multiply ceiling measured in the same run.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

from nvdla_sim.config import load_hardware
from nvdla_sim.conformance import find_tests, run_test


def bench_corpus(root: Path, project: str) -> None:
    hw = load_hardware(project)
    tests = find_tests(root / "verif" / "tests" / "trace_tests" / project)
    start = time.perf_counter()
    passed = 0
    for i, t in enumerate(tests, 1):
        passed += run_test(t, hw).status == "pass"
        print(f"\r  {i}/{len(tests)} {t.name:<50}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    wall = time.perf_counter() - start
    print(f"corpus {project}: {len(tests)} tests, {passed} pass, wall {wall:.2f} s")


def bench_conv_kernel(hw_name: str = "nv_small") -> None:
    from nvdla_sim.kernels.conv import benchmark_direct_conv
    rng = np.random.default_rng(0)
    h = w = 56
    c, k, r, s = 64, 64, 3, 3
    data = rng.integers(-128, 128, (c, h, w), dtype=np.int8)
    weights = rng.integers(-128, 128, (k, c, r, s), dtype=np.int8)
    hw = load_hardware(hw_name)
    benchmark_direct_conv(data, weights, hw.atomic_c, hw.atomic_k)   # warm-up
    reps = 3
    start = time.perf_counter()
    for _ in range(reps):
        benchmark_direct_conv(data, weights, hw.atomic_c, hw.atomic_k)
    per = (time.perf_counter() - start) / reps
    out_h, out_w = h - r + 1, w - s + 1
    macs = out_h * out_w * k * c * r * s
    print(f"conv kernel int8 56x56x64, 3x3, 64 kernels: {macs / per / 1e9:.2f} GMAC/s ({per * 1e3:.1f} ms)")
    # the BLAS path the CMAC takes for INT8 (kernels/conv_gemm.py), CPU seconds (one thread)
    from nvdla_sim.kernels.conv_gemm import conv_lines_gemm
    lines = np.ascontiguousarray(np.transpose(data, (1, 2, 0))).reshape(h, w * c)
    wt = np.ascontiguousarray(np.transpose(weights, (0, 2, 3, 1))).reshape(k, r, s * c)
    out = np.empty((k, out_h, out_w), np.int64)
    conv_lines_gemm(lines, wt, out, s, c, c, c, 1, 1)
    start = time.process_time()
    for _ in range(reps):
        conv_lines_gemm(lines, wt, out, s, c, c, c, 1, 1)
    per = (time.process_time() - start) / reps
    print(f"conv BLAS path (conv_gemm), same layer: {macs / per / 1e9:.2f} GMAC per CPU second "
          f"({per * 1e3:.1f} ms)")
    a = rng.standard_normal((1024, 1024))
    b = rng.standard_normal((1024, 1024))
    a @ b
    start = time.perf_counter()
    for _ in range(3):
        a @ b
    per = (time.perf_counter() - start) / 3
    print(f"float64 matmul ceiling (1024^3, numpy BLAS): {1024 ** 3 / per / 1e9:.2f} GMAC/s")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--nvdla-hw", default=os.environ.get("NVDLA_HW", "../shared/nvdla-hw"))
    p.add_argument("--project", default="nv_small")
    args = p.parse_args()
    root = Path(args.nvdla_hw)
    if (root / "verif").is_dir():
        bench_corpus(root, args.project)
    else:
        print(f"corpus: skipped ({root} has no verif/tests)")
    bench_conv_kernel(args.project)


if __name__ == "__main__":
    main()
