"""Scenario benchmark: the figures issue 4 asks for, measured.

    python benchmarks/bench_scenarios.py [--quick]

- ResNet-50 on scenarios/resnet50_nv_large.yaml: wall time of `nvdla-sim run` in values+timing
  mode (target <= 60 s on 2 cores) and in timing-only mode (target <= 15 s);
- total ms of ResNet-50, GoogLeNet and AlexNet (nv_large, 1 GHz, 10 GB/s DRAM, no CVSRAM) beside
  the NVDLA performance estimator's figures;
- LeNet-5's end-to-end INT8 SQNR against the float32 reference on the seeded input (>= 20 dB
  required) and the lowest per-layer SQNR of ResNet-50.
`--quick` skips the values run of ResNet-50 (and so its SQNR).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"


def run(name: str, mode: str, out: Path):
    """Run scenarios/<name>.yaml in `mode` with reports written to `out` (console off)."""
    from nvdla_sim.scenario.runner import execute, prepare
    from nvdla_sim.scenario.schema import load_scenario
    start = time.perf_counter()
    scn = load_scenario(SCENARIOS / f"{name}.yaml")
    scn.mode = mode
    scn.outputs.formats = ("json",)
    scn.outputs.plots = False
    with contextlib.redirect_stdout(io.StringIO()):
        report = execute(prepare(scn), out / f"{name}_{mode}")
    return report, time.perf_counter() - start


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="skip the ResNet-50 values run")
    args = p.parse_args()
    from nvdla_sim.report.tables import ESTIMATOR_MS
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        print("ResNet-50 on nv_large (scenarios/resnet50_nv_large.yaml)")
        r50_t, wall_t = run("resnet50_nv_large", "timing", out)
        print(f"  timing-only   wall {wall_t:6.1f} s  (target <= 15 s)  {r50_t.ms:.3f} ms")
        r50_v = None
        if not args.quick:
            r50_v, wall_v = run("resnet50_nv_large", "values+timing", out)
            print(f"  values+timing wall {wall_v:6.1f} s  (target <= 60 s)  {r50_v.ms:.3f} ms")
        print("\nTotals (nv_large, 1 GHz, 10 GB/s DRAM, no CVSRAM) vs the NVDLA performance estimator")
        print(f"  {'network':<10} {'nvdla-sim ms':>12} {'estimator ms':>13} {'ratio':>6} {'fps':>7}")
        for net in ("resnet50", "googlenet", "alexnet"):
            rep = r50_t if net == "resnet50" else run(f"{net}_nv_large", "timing", out)[0]
            est = ESTIMATOR_MS[net]
            print(f"  {net:<10} {rep.ms:>12.3f} {est:>13.3f} {rep.ms / est:>6.2f} {rep.fps:>7.1f}")
        print("\nINT8 values against the float32 reference")
        lenet, _ = run("lenet5_nv_small", "values+timing", out)
        final = lenet.rows[-1]
        print(f"  LeNet-5 (nv_small, seeded input) end-to-end SQNR {final.sqnr_db:.1f} dB "
              f"(output '{final.layer}', required >= 20 dB); lowest layer "
              f"{lenet.lowest_sqnr[1]:.1f} dB ({lenet.lowest_sqnr[0]})")
        if r50_v is not None:
            name, db = r50_v.lowest_sqnr
            print(f"  ResNet-50 lowest layer SQNR {db:.1f} dB ({name}); output "
                  f"'{r50_v.rows[-1].layer}' {r50_v.rows[-1].sqnr_db:.1f} dB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
