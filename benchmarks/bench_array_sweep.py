"""What the 1,000-point array sweep costs (issue 20), from a stratified sample.

    python benchmarks/bench_array_sweep.py [--sweep scenarios/array_sweep_resnet50.yaml]
                                           [--dram 4,25] [--jobs 2]

`scenarios/array_sweep_resnet50.yaml` crosses MAC arrays x CBUF configurations x DRAM
bandwidths.  This script, in one process (as a sweep worker runs its points):
1. compiles every (array, CBUF) configuration once and records whether it is feasible (the
   sweep's own feasibility check) and the CPU seconds of that compilation;
2. runs the points of each feasible configuration at the `--dram` bandwidths and records the
   CPU seconds per point (the compilation is shared, as in the sweep);
3. extrapolates: every configuration costs one compilation, every feasible one
   (bandwidths in the sweep) x its mean CPU per point; the whole sweep's CPU seconds, and the
   wall time with `--jobs` workers on an otherwise idle machine (CPU / jobs).
CPU seconds (time.process_time) are used because they hold on a busy machine, where wall
seconds do not.  Nothing is asserted (no timed tests); docs/performance.md records the figures.
`--all-dram` runs every bandwidth instead of a sample (the whole sweep, in one process).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sweep", type=Path, default=ROOT / "scenarios" / "array_sweep_resnet50.yaml")
    ap.add_argument("--dram", default="4,25", help="bandwidths (GB/s) sampled per configuration")
    ap.add_argument("--all-dram", action="store_true", help="every bandwidth of the sweep")
    ap.add_argument("--jobs", type=int, default=2, help="workers of the extrapolated sweep")
    ap.add_argument("--arrays", help="comma-separated array names (hardware.name) to sample only")
    args = ap.parse_args()

    from nvdla_sim.sweep import point as sweep_point
    from nvdla_sim.sweep.spec import load_sweep
    spec = load_sweep(args.sweep)
    sample = None if args.all_dram else {float(x) for x in args.dram.split(",")}
    arrays = set(args.arrays.split(",")) if args.arrays else None

    def config_of(p) -> tuple:
        hw = p.scenario["hardware"]
        return hw.get("name", ""), hw["cbuf"]["banks"], hw["cbuf"]["bank_depth"]

    by_config: dict[tuple, list] = defaultdict(list)
    for p in spec.points:
        by_config[config_of(p)].append(p)
    print(f"{spec.name}: {len(spec.points)} points, {len(by_config)} (array, CBUF) configurations")
    print(f"{'array':<8}{'banks':>6}{'depth':>6}{'status':>12}{'compile s':>10}{'points':>8}"
          f"{'cpu s/point':>12}{'cycles (first)':>16}")
    total_cpu, measured = 0.0, defaultdict(list)
    rows = []
    for cfg, points in by_config.items():
        if arrays and cfg[0] not in arrays:
            continue
        sweep_point._compiled = None
        c0 = time.process_time()
        row = sweep_point.evaluate_point(points[0], _compile_only, spec.bytes_per_mac)
        compile_s = time.process_time() - c0
        feasible = row["status"] == "ok"
        per_point = []
        first_cycles = None
        if feasible:
            for p in points:
                if sample is not None and float(p.scenario["memory"]["dram_gbps"]) not in sample:
                    continue
                c0 = time.process_time()
                r = sweep_point.evaluate_point(p, sweep_point.run_scenario_point, spec.bytes_per_mac)
                per_point.append(time.process_time() - c0)
                first_cycles = first_cycles or r.get("cycles")
                if r["status"] != "ok":
                    print(f"  {p.label()}: {r['status']} {r.get('reason', '')[:100]}")
            measured[cfg[0]] += per_point
        mean = statistics.mean(per_point) if per_point else 0.0
        cost = compile_s + (len(points) * mean if feasible else 0.0)
        total_cpu += cost
        rows.append((cfg, feasible, cost))
        print(f"{cfg[0]:<8}{cfg[1]:>6}{cfg[2]:>6}{'ok' if feasible else 'infeasible':>12}"
              f"{compile_s:>10.2f}{len(points):>8}{mean:>12.2f}"
              f"{(f'{first_cycles:,.0f}' if first_cycles else ''):>16}", flush=True)
    feasible_points = sum(len(by_config[c]) for c, ok, _ in rows if ok)
    print(f"\nfeasible points {feasible_points} of {sum(len(by_config[c]) for c, _, _ in rows)}")
    for name, cpus in measured.items():
        if cpus:
            print(f"  {name}: {statistics.mean(cpus):.2f} CPU s per feasible point "
                  f"({len(cpus)} measured)")
    print(f"whole sweep (extrapolated): {total_cpu:,.0f} CPU s; with {args.jobs} workers on an idle "
          f"machine about {total_cpu / args.jobs / 60:.1f} min")
    return 0


def _compile_only(scenario: dict, base_dir: str) -> dict:
    """A runner that stops after the feasibility check (evaluate_point compiles the point)."""
    return {"cycles": 0, "dram_bytes": 0}


if __name__ == "__main__":
    raise SystemExit(main())
