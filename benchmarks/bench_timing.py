"""Timing-model throughput: SimPy events per second and wall time of the whole trace corpus.

    python benchmarks/bench_timing.py [--nvdla-hw DIR] [--project nv_small] [--memory PROFILE]

Runs every official trace test of the project with timing on (the only mode) and prints the wall
time, simulated cycles, SimPy events, events/s and simulated cycles/s, overall and per family.
The wall time includes everything a run does (parsing, the kernels' arithmetic, CRC checks).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

from nvdla_sim.config import load_hardware
from nvdla_sim.engine import Engine
from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.frontends.cfg_trace import parse_cfg


def main() -> int:
    here = Path(__file__).resolve().parent.parent
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nvdla-hw", default=os.environ.get("NVDLA_HW", str(here.parent / "shared" / "nvdla-hw")))
    p.add_argument("--project", default="nv_small")
    p.add_argument("--memory", default="rtl_testbench")
    args = p.parse_args()
    root = Path(args.nvdla_hw) / "verif" / "tests" / "trace_tests" / args.project
    if not root.is_dir():
        print(f"bench_timing: skipped ({root} missing)")
        return 0
    hw = load_hardware(args.project)
    tests = sorted(d for d in root.iterdir() if d.is_dir() and any(d.glob("*.cfg")))
    fam = defaultdict(lambda: [0, 0.0, 0.0, 0, 0])       # tests, wall, cycles, events, passed
    start = time.perf_counter()
    for t in tests:
        t0 = time.perf_counter()
        try:
            result = Engine(hw, args.memory).run(parse_cfg(t, hw.nvdla_version))
        except NvdlaSimError as exc:
            print(f"  {t.name}: {exc}", file=sys.stderr)
            continue
        f = fam[t.name.split("_")[0]]
        f[0] += 1
        f[1] += time.perf_counter() - t0
        f[2] += result.cycles
        f[3] += result.events
        f[4] += result.passed
    wall = time.perf_counter() - start
    print(f"{'family':<8} {'tests':>5} {'pass':>5} {'wall_s':>7} {'Mcycles':>9} {'events':>9} {'events/s':>10}")
    tot = [0, 0.0, 0.0, 0, 0]
    for name, (n, w, c, e, ok) in sorted(fam.items()):
        print(f"{name:<8} {n:>5} {ok:>5} {w:>7.2f} {c / 1e6:>9.3f} {e:>9,} {e / w:>10,.0f}")
        tot = [tot[0] + n, tot[1] + w, tot[2] + c, tot[3] + e, tot[4] + ok]
    print(f"{'all':<8} {tot[0]:>5} {tot[4]:>5} {tot[1]:>7.2f} {tot[2] / 1e6:>9.3f} {tot[3]:>9,} "
          f"{tot[3] / tot[1]:>10,.0f}")
    print(f"corpus {args.project}: {len(tests)} tests, wall {wall:.2f} s with timing on, "
          f"{tot[2] / wall:,.0f} simulated cycles/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
