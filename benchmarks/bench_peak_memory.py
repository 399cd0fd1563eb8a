"""Peak memory (RSS) of timing-only runs, each in a fresh interpreter, beside the estimate the
scenario memory check makes before building anything (scenario/limits.py).

    python benchmarks/bench_peak_memory.py            # the table
    python benchmarks/bench_peak_memory.py --check    # exit 1 if a run passes its bound

Cases: ResNet-50 on nv_large; the largest legal square input (3 x 8192 x 8192) through two
convolutions and pooling, and again ending in a fully connected layer; an 8192-wide strip with a
fully connected layer; an 8192 -> 8192 fully connected layer (64 M weights).  Timing-only runs
hold no weight arrays (stand-ins stay broadcast views: compiler/weight_views.py).  The bounds are memory
bounds (what the machine must have), not times; the wall time is printed for information.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
MIB = 1 << 20

CASES = [
    # (name, scenario file or mapping, bound in MiB)
    ("resnet50_nv_large", ROOT / "scenarios/resnet50_nv_large.yaml", 250),   # issue 20: 250 MiB
    ("square_8192", {"hardware": "nv_large", "network": {"input": [3, 8192, 8192], "layers": [
        {"name": "c1", "type": "conv", "out_channels": 16, "kernel": 3, "stride": 2, "pad": 1},
        {"name": "p1", "type": "pool", "kernel": 2},
        {"name": "c2", "type": "conv", "out_channels": 32, "kernel": 3, "stride": 2, "pad": 1},
        {"name": "p2", "type": "pool", "kernel": 8, "stride": 8}]}}, 4096),
    ("strip_8192_fc", {"hardware": "nv_large", "network": {"input": [3, 32, 8192], "layers": [
        {"name": "c1", "type": "conv", "out_channels": 16, "kernel": 3, "stride": 2, "pad": 1},
        {"name": "p1", "type": "pool", "kernel": 2},
        {"name": "fc", "type": "fc", "out_features": 10}]}}, 1024),
    # the square input ending in a fully connected layer on the DLA (8 x 8 x 64 -> 1000)
    ("square_8192_fc", {"hardware": "nv_large", "network": {"input": [3, 8192, 8192], "layers": [
        {"name": "c1", "type": "conv", "out_channels": 16, "kernel": 3, "stride": 2, "pad": 1},
        {"name": "p1", "type": "pool", "kernel": 8, "stride": 8},
        {"name": "c2", "type": "conv", "out_channels": 64, "kernel": 3, "stride": 2, "pad": 1},
        {"name": "p2", "type": "pool", "kernel": 32, "stride": 32},
        {"name": "fc", "type": "fc", "out_features": 1000}]}}, 4096),
    # an 8192-channel fully connected layer: 64 M weights (4 GiB as the float32 arrays the
    # plan held before stand-ins stayed views, 1 GiB peak; 16 GiB with an 8192 x 4 x 4 input)
    ("fc_8192x8192", {"hardware": "nv_large", "network": {"input": [8192, 1, 1], "layers": [
        {"name": "fc", "type": "fc", "out_features": 8192}]}}, 256),
]

CHILD = """
import json, resource, sys, time
from nvdla_sim.scenario.limits import memory_need_bytes
from nvdla_sim.scenario.runner import execute, prepare
from nvdla_sim.scenario.schema import load_scenario
scn = load_scenario(sys.argv[1])
scn.mode = "timing"
scn.outputs.plots = False
t = time.perf_counter()
prep = prepare(scn)
need = sum(memory_need_bytes(prep.network, False, input_image=False, weights=False,
                              gpu_ops=set(prep.support.fallback_ops)).values())
report = execute(prep, sys.argv[2])
print(json.dumps({"peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "estimate": need, "cycles": report.total_cycles,
                  "wall_s": time.perf_counter() - t}))
"""


def measure(scenario, folder: Path) -> dict:
    if isinstance(scenario, dict):
        path = folder / "scenario.yaml"
        path.write_text(yaml.safe_dump({"name": "bench", "mode": "timing", **scenario}))
    else:
        path = scenario
    r = subprocess.run([sys.executable, "-c", CHILD, str(path), str(folder / "out")], cwd=ROOT,
                       capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"{path}: {r.stderr.strip().splitlines()[-1]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if a peak passes its bound")
    args = ap.parse_args()
    failed = 0
    print(f"{'case':<20} {'peak MiB':>9} {'bound':>7} {'estimate MiB':>13} {'cycles':>13} "
          f"{'wall s':>7}")
    for name, scenario, bound in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            m = measure(scenario, Path(tmp))
        over = m["peak"] > bound * MIB
        failed += over
        print(f"{name:<20} {m['peak'] / MIB:>9.0f} {bound:>7} {m['estimate'] / MIB:>13.1f} "
              f"{m['cycles']:>13,.0f} {time.perf_counter() - start:>7.1f}"
              + ("  OVER" if over else ""), flush=True)
    return 1 if args.check and failed else 0


if __name__ == "__main__":
    sys.exit(main())
