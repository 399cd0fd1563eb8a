"""Sweep wall time with --jobs 1 and --jobs 2 (and the speed-up), from empty result folders.

    python benchmarks/bench_sweep.py                  # scenarios/cbuf_sweep_resnet50.yaml, full runs
    python benchmarks/bench_sweep.py --conv-chain     # the same 24-point grid on a conv-only trunk

The first form is the issue's measurement: 24 points of timing-only ResNet-50 on nv_large, CBUF
banks x DRAM GB/s, with the default runner (the scenario lowering).  If that lowering is not
built, every feasible point ends in an error that says so; the wall time is then compile and
feasibility checks only, and this script says so instead of presenting it as the sweep's.

`--conv-chain` runs the same grid (4/8/16/32 banks x 2.5..80 GB/s, nv_large, 1 GHz) on a network
of seven 3x3 convolutions (64 -> 512 channels, 112x112 input) with the conv-chain runner: register
programs from the compiler's convolution emitter on the engine.  It measures the sweep machinery's
parallel speed-up on real engine runs, not ResNet-50.
"""
from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
from pathlib import Path

from nvdla_sim.sweep.backends import LocalBackend
from nvdla_sim.sweep.driver import runner_by_name, run_sweep
from nvdla_sim.sweep.spec import load_sweep, parse_sweep

HERE = Path(__file__).resolve().parent.parent
GRID = {"cbuf_banks": [4, 8, 16, 32], "dram_gbps": [2.5, 5, 10, 20, 40, 80]}
CONV_TRUNK = {
    "name": "conv_trunk", "input": [64, 112, 112],
    "layers": [
        {"name": "c1", "type": "conv", "out_channels": 64, "kernel": 3, "pad": 1},
        {"name": "c2", "type": "conv", "out_channels": 128, "kernel": 3, "stride": 2, "pad": 1},
        {"name": "c3", "type": "conv", "out_channels": 128, "kernel": 3, "pad": 1},
        {"name": "c4", "type": "conv", "out_channels": 256, "kernel": 3, "stride": 2, "pad": 1},
        {"name": "c5", "type": "conv", "out_channels": 256, "kernel": 3, "pad": 1},
        {"name": "c6", "type": "conv", "out_channels": 512, "kernel": 3, "stride": 2, "pad": 1},
        {"name": "c7", "type": "conv", "out_channels": 512, "kernel": 3, "pad": 1},
    ]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sweep", default=str(HERE / "scenarios" / "cbuf_sweep_resnet50.yaml"))
    p.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    p.add_argument("--conv-chain", action="store_true",
                   help="the same grid on a conv-only trunk with the conv-chain runner")
    args = p.parse_args()
    if args.conv_chain:
        spec = parse_sweep({"name": "conv_trunk_sweep", "grid": GRID, "base": {
            "hardware": "nv_large", "clock_mhz": 1000, "mode": "timing", "network": CONV_TRUNK,
            "memory": {"dram_latency_ns": 100}}}, HERE)
        runner = runner_by_name("conv-chain")
    else:
        spec = load_sweep(args.sweep)
        runner = runner_by_name("scenario")
    print(f"{spec.name}: {len(spec.points)} points, "
          f"{'conv-chain runner' if args.conv_chain else 'scenario runner'}")
    print(f"{'jobs':>4} {'wall_s':>8} {'s/point':>8} {'ok':>4} {'infeasible':>10} {'error':>6}")
    walls = {}
    summary = None
    for jobs in args.jobs:
        with tempfile.TemporaryDirectory() as out:
            t0 = time.perf_counter()
            summary = run_sweep(spec, LocalBackend(jobs), runner, Path(out), stream=io.StringIO(),
                                plots=False)
            walls[jobs] = time.perf_counter() - t0
        c = summary.counts
        print(f"{jobs:>4} {walls[jobs]:>8.2f} {walls[jobs] / len(spec.points):>8.2f} {c['ok']:>4} "
              f"{c['infeasible']:>10} {c['error']:>6}", flush=True)
    if 1 in walls and len(walls) > 1:
        best = min(walls, key=walls.get)
        print(f"speed-up of --jobs {best} over --jobs 1: {walls[1] / walls[best]:.2f}x")
    if summary is not None and summary.counts["ok"] == 0:
        errors = [r for r in summary.rows if r["status"] == "error"]
        why = errors[0]["reason"] if errors else "every point is infeasible"
        print(f"NOTE: no point ran to completion ({why}); the times above are compile and "
              "feasibility checks only, not the sweep's", file=sys.stderr)
        return 1
    if summary is not None:
        ok = [r for r in summary.rows if r["status"] == "ok"]
        fastest = min(ok, key=lambda r: r["ms"])
        slowest = max(ok, key=lambda r: r["ms"])
        print(f"latency {fastest['ms']:.3f} ms ({fastest['params']}) .. {slowest['ms']:.3f} ms "
              f"({slowest['params']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
