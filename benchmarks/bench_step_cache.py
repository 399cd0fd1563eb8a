"""Repeated-layer timing reuse (engine/step_cache.py, issue 20): the simulation with the step cache
on and off.

    python benchmarks/bench_step_cache.py [--presets nv_large,nv_small_256,nv_small] [--repeat 3]

For timing-only ResNet-50 (`scenarios/resnet50_nv_large.yaml` with the preset swapped) on each
preset, in this process: CPU seconds of the simulation alone (`lower_and_run`, the median of
`--repeat` runs, time.process_time: they hold on a busy machine), SimPy events, steps replayed,
simulated cycles, and the largest difference of any layer's end cycle between the two runs
(relative).  Prints figures only; tests/test_step_cache.py holds the equality.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def simulate(preset: str, cache: bool):
    from bench_speed import simulate
    from nvdla_sim.config import load_hardware
    from nvdla_sim.engine import step_cache
    from nvdla_sim.scenario.schema import load_scenario
    if cache:
        os.environ.pop(step_cache.ENV_OFF, None)
    else:
        os.environ[step_cache.ENV_OFF] = "1"
    scn = load_scenario(ROOT / "scenarios" / "resnet50_nv_large.yaml")
    scn.hardware = load_hardware(preset)
    scn.mode = "timing"
    out = simulate(scn)
    engine = out["result"].engine_result.engine
    replayed = engine.step_cache.replayed if engine.step_cache else 0
    return out["result"], out["cpu"], out["events"], replayed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--presets", default="nv_large,nv_small_256,nv_small")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"{'preset':<14}{'cache':>6}{'sim CPU s':>11}{'events':>10}{'replayed':>10}"
          f"{'cycles':>14}{'max layer diff':>16}")
    simulate("nv_large", False)         # imports and first-use costs out of the figures
    for preset in args.presets.split(","):
        runs = {}
        for cache in (False, True):
            out = [simulate(preset, cache) for _ in range(args.repeat)]
            runs[cache] = out[0][0], statistics.median(o[1] for o in out), out[0][2], out[0][3]
        off = runs[False][0]
        for cache in (False, True):
            res, cpu, events, replayed = runs[cache]
            diff = max(abs(a.end_cycle - b.end_cycle) / max(1.0, b.end_cycle - b.start_cycle)
                       for a, b in zip(res.layers, off.layers))
            print(f"{preset:<14}{'on' if cache else 'off':>6}{cpu:>11.2f}{events:>10,}"
                  f"{replayed:>10}{res.total_cycles:>14,.0f}{diff:>16.1e}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
