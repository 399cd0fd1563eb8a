"""Coarse convolution tokens (issue 20, NVDLA_SIM_COARSE_STRIPES): how far they move the cycles.

    python benchmarks/bench_stripes.py [--stripes M] [--only official|scenarios|calibration]

Runs what tests/data/speed_baseline.json holds (the exact token path's cycles, recorded by
benchmarks/record_cycles.py) with NVDLA_SIM_COARSE_STRIPES=M (default 16: up to 16 stripes of
a kernel group handed to SDP as one token) and prints, per network, the worst layer's relative
deviation of its length and of its end cycle, and the events against the baseline's; for the
official traces the relative deviation of each test's cycles.  Nothing is asserted here
(tests/test_speed_stripes.py holds the bound); docs/performance.md records the figures.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))


def layer_deviation(old: list, new: list) -> tuple[float, str]:
    """Worst relative deviation over the layers: |length change| / length and |end change| /
    end (the larger), and that layer's name."""
    worst, name = 0.0, ""
    for (n0, s0, e0), (n1, s1, e1) in zip(old, new):
        d = max(abs((e1 - s1) - (e0 - s0)) / max(1.0, e0 - s0), abs(e1 - e0) / max(1.0, e0))
        if d > worst:
            worst, name = d, n0
    return worst, name


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stripes", type=int, default=16)
    ap.add_argument("--only", choices=("official", "scenarios", "calibration"))
    args = ap.parse_args()
    os.environ["NVDLA_SIM_COARSE_STRIPES"] = str(args.stripes)
    import record_cycles as rc
    base = json.loads(rc.BASELINE.read_text())
    overall = (0.0, "")
    if args.only in (None, "official"):
        new = rc.official()
        worst = (0.0, "")
        for name, n in sorted(new.items()):
            o = base["official"].get(name)
            if o is None or o["cycles"] is None or n["cycles"] is None:
                continue
            d = abs(n["cycles"] - o["cycles"]) / max(1.0, o["cycles"])
            if d > worst[0] or n["status"] != o["status"]:
                worst = (d, name if n["status"] == o["status"] else f"{name} status {n['status']}")
        print(f"official ({len(new)} tests): worst {worst[0]:.2e} {worst[1]}", flush=True)
        overall = max(overall, worst)
    sections = [s for s in ("scenarios", "calibration") if args.only in (None, s)]
    for section in sections:
        paths = rc.scenario_files() if section == "scenarios" else \
            sorted(rc.calibration_root().glob("*.yaml")) if rc.calibration_root() else []
        for p in paths:
            o = base[section].get(p.stem)
            if o is None:
                continue
            n = rc.scenario_cycles(p)
            d, layer = layer_deviation(o["layers"], n["layers"])
            print(f"{section}/{p.stem}: worst layer {d:.2e} {layer}; total "
                  f"{abs(n['total'] - o['total']) / o['total']:.2e}; events {o['events']} -> "
                  f"{n['events']}", flush=True)
            overall = max(overall, (d, f"{section}/{p.stem}/{layer}"))
    print(f"worst of all: {overall[0]:.2e} {overall[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
