"""Where a values+timing run spends its CPU (issue 20): ResNet-50 INT8 on nv_large, per phase.

    python benchmarks/bench_values.py [SCENARIO.yaml] [--repeat N] [--profile FILE]

Runs the scenario in-process (no plots) and prints CPU seconds (`time.process_time`, so the
figures compare across a busy machine) of each phase: network and weights, hardware plan, float
reference, quantisation, lowering, the engine run and inside it the value kernels (CDMA
converters, CMAC sums, CACC delivery, SDP, PDP, CDP), feature-cube reads and writes of the units
(formats), the statistics tap, and the report.  Nested phases are counted inside their parent
("engine run" includes the kernels).  Also prints the conv kernel's throughput on the run's own
layers (MACs / CMAC CPU seconds).  NVDLA_SIM_ROOT=DIR times the checkout in DIR instead (e.g. an
older commit's copy).  No targets are asserted (no timed unit tests); docs/performance.md records
the figures.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(os.environ.get("NVDLA_SIM_ROOT", Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(ROOT))

# (phase, module, attribute): the function whose CPU time counts for the phase.  A phase whose
# function is missing in the timed checkout is skipped.
PHASES = [
    ("network+weights", "nvdla_sim.scenario.runner", "build_network"),
    ("network+weights", "nvdla_sim.scenario.runner", "network_weights"),
    ("plan", "nvdla_sim.scenario.runner", "build_plan"),
    ("reference", "nvdla_sim.scenario.runner", "run_reference"),
    ("quantisation", "nvdla_sim.scenario.runner", "quantize_plan"),
    ("quantisation", "nvdla_sim.scenario.runner", "context"),
    ("lowering", "nvdla_sim.compiler.lower", "lower"),
    ("engine run", "nvdla_sim.compiler.lower", "run_lowered"),
    ("  CDMA converters", "nvdla_sim.units.cdma", "convert_feature"),
    ("  CDMA converters", "nvdla_sim.units.cdma", "convert_pixels"),
    ("  CMAC sums", "nvdla_sim.units.cmac", "mac_layer"),
    ("  CACC delivery", "nvdla_sim.units.cacc", "assemble"),
    ("  CACC delivery", "nvdla_sim.units.cacc", "deliver"),
    ("  SDP", "nvdla_sim.units.sdp", "sdp_compute"),
    ("  PDP", "nvdla_sim.units.pdp", "pool_cube"),
    ("  CDP", "nvdla_sim.units.cdp", "lrn_int"),
    ("  feature read/write", "nvdla_sim.units.sdp", "read_cube"),
    ("  feature read/write", "nvdla_sim.units.sdp", "write_cube"),
    ("  feature read/write", "nvdla_sim.units.cdma", "read_cube"),
    ("  feature read/write", "nvdla_sim.units.pdp", "write_cube"),
    ("  statistics tap", "nvdla_sim.report.statistics", "split_by_layer"),
    ("report", "nvdla_sim.report.tables", "build_report"),
]


def instrument(totals: dict[str, float], calls: dict[str, int]) -> None:
    """Wrap every PHASES function so its CPU seconds add to its phase (re-entrant calls count
    once)."""
    depth: dict[str, int] = defaultdict(int)
    for phase, module, attr in PHASES:
        try:
            mod = importlib.import_module(module)
        except ImportError:
            continue
        fn = getattr(mod, attr, None)
        if fn is None or getattr(fn, "_bench_values", False):
            continue

        def wrap(fn=fn, phase=phase):
            @functools.wraps(fn)
            def timed(*args, **kwargs):
                depth[phase] += 1
                t0 = time.process_time()
                try:
                    return fn(*args, **kwargs)
                finally:
                    depth[phase] -= 1
                    if depth[phase] == 0:
                        totals[phase] += time.process_time() - t0
                        calls[phase] += 1
            timed._bench_values = True
            return timed
        setattr(mod, attr, wrap())


_TOTALS: dict[str, float] = defaultdict(float)
_CALLS: dict[str, int] = defaultdict(int)


def run_once(scenario: Path, out: Path) -> tuple[dict[str, float], dict[str, int], float, float]:
    from nvdla_sim.scenario import runner
    from nvdla_sim.scenario.schema import load_scenario
    from dataclasses import replace
    instrument(_TOTALS, _CALLS)                # wraps once per process; the dicts are reused
    _TOTALS.clear()
    _CALLS.clear()
    scn = load_scenario(scenario)
    scn = replace(scn, outputs=replace(scn.outputs, plots=False, directory=out))
    t0 = time.process_time()
    with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):   # the console report
        prep = runner.prepare(scn)
        report = runner.execute(prep, out)
    whole = time.process_time() - t0
    return dict(_TOTALS), dict(_CALLS), whole, report.total_macs


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("scenario", nargs="?", default=str(ROOT / "scenarios" / "resnet50_nv_large.yaml"))
    p.add_argument("--repeat", type=int, default=3, help="runs (median per phase; default 3)")
    p.add_argument("--profile", help="also write a cProfile of the last run to FILE")
    args = p.parse_args()
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            if args.profile and i == args.repeat - 1:
                import cProfile
                prof = cProfile.Profile()
                prof.enable()
                runs.append(run_once(Path(args.scenario), Path(tmp)))
                prof.disable()
                prof.dump_stats(args.profile)
            else:
                runs.append(run_once(Path(args.scenario), Path(tmp)))
    phases = list(dict.fromkeys(ph for ph, _, _ in PHASES))
    print(f"{Path(args.scenario).name}: CPU seconds per phase, median of {len(runs)} in-process "
          f"runs (no plots; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    for ph in phases:
        vals = [r[0].get(ph, 0.0) for r in runs]
        if any(vals):
            print(f"  {ph:<24}{statistics.median(vals):>8.3f}   ({runs[-1][1].get(ph, 0)} calls)")
    print(f"  {'whole (prepare+execute)':<24}{statistics.median(r[2] for r in runs):>8.3f}")
    cmac = statistics.median(r[0].get("  CMAC sums", 0.0) for r in runs)
    macs = runs[-1][3]
    if macs and cmac:
        print(f"  conv MACs {macs / 1e9:.3f} G: {macs / cmac / 1e9:.1f} GMAC per CMAC CPU second")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
