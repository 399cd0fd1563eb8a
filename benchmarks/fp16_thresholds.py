"""FP16 checked the way NVIDIA checks it: per-module error against the precision document's
thresholds, on random cases that include INF, NaN, denormals and values near 65504.

    python benchmarks/fp16_thresholds.py [CASES]      (default 1000 per module)

Prints, per module, the number of random cases and the largest error seen relative to the
module's threshold (<= 1.0 passes):
  - CC direct convolution: 2^(max_exp-20)*R*S*C*2*scale + 2^(exp(a)-10) per output;
  - PDP (max, min, average) and CDP (LRN): max(0.0001, 0.001 * window maximum);
  - SDP: bit-identical to an FP32 reference in the C model's order of operations (mismatching
    elements are counted; the threshold is zero mismatches).
The sweeps live beside the tests that run smaller versions of them (tests/test_*precision.py,
tests/test_cdp_fp16.py), so the benchmark and the test suite check the same thing.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import test_cdp_fp16 as cdp_tests          # noqa: E402
import test_conv_precision as conv_tests   # noqa: E402
import test_pool_precision as pool_tests   # noqa: E402
import test_sdp_precision as sdp_tests     # noqa: E402


def sdp_mismatches(cases: int, seed: int = 0) -> int:
    """Random SDP FP16 layers of 64 elements each through X1/X2/Y/C; elements that differ from
    the C-model-order FP32 reference."""
    rng = np.random.default_rng(seed)
    n = 64
    bad = 0
    for case in range(cases):
        x32 = sdp_tests.nf.fp16_to_fp32(sdp_tests.random_fp16_bits(rng, n)).astype(np.int64)
        algo = (sdp_tests.ALGO_SUM, sdp_tests.ALGO_MAX, sdp_tests.ALGO_MIN)[case % 3]
        ops = {k: sdp_tests.random_fp16_bits(rng, n) for k in ("x1_alu", "x1_mul", "x2_mul",
                                                                 "y_mul")}
        ops["y_alu"] = int(sdp_tests.f32(np.float32(rng.normal())))
        cfg = sdp_tests.config(
            sdp_tests.FP16, sdp_tests.FP16,
            x1={"bypass": 0, "alu_bypass": 0, "alu_algo": algo, "alu_shift": 0, "mul_bypass": 0},
            x2={"bypass": 0, "mul_bypass": 0, "mul_prelu": case % 2, "relu_bypass": case % 3 != 0},
            y={"bypass": 0, "mul_bypass": 0, "mul_mem": 1, "alu_bypass": 0,
               "alu_algo": sdp_tests.ALGO_SUM},
            c={"nan_to_zero": case % 2, "offset": 0, "scale": 1, "shift": 0})
        out, _ = sdp_tests.run_kernel(x32, cfg, ops)
        expected = sdp_tests.fp_reference(x32, cfg, ops).astype(np.uint16)
        bad += int(np.count_nonzero(out.view(np.uint16) != expected))
    return bad


def main() -> None:
    cases = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    print(f"FP16 error against the precision document's thresholds, {cases} random cases per "
          "module (INF, NaN, denormals, values near 65504 included)")
    rows = []
    start = time.perf_counter()
    rows.append(("CC direct convolution", conv_tests.fp16_error_ratio(cases)))
    for method, ratio in pool_tests.pdp_fp16_sweep(cases).items():
        rows.append((f"PDP {method}", ratio))
    rows.append(("CDP LRN", cdp_tests.sweep(cases)))
    for name, ratio in rows:
        print(f"  {name:<24} worst error / threshold = {ratio:.3f}  "
              f"{'PASS' if ratio <= 1.0 else 'FAIL'}")
    mismatches = sdp_mismatches(cases)
    print(f"  {'SDP X/Y/C datapath':<24} {cases * 64} elements, {mismatches} differ from the "
          f"C-model-order FP32 reference  {'PASS' if mismatches == 0 else 'FAIL'}")
    print(f"wall time {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
