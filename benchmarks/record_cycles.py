"""Record (or check) the cycles the timing model gives, before and after a speed change.

    python benchmarks/record_cycles.py [--check] [--only official|scenarios|calibration]

Records, to tests/data/speed_baseline.json:
- every official trace test's cycles: v2 nv_small .cfg tests (../shared/nvdla-hw or $NVDLA_HW)
  and v1 nv_full trace-player tests (../shared/nvdla-hw-v1 or $NVDLA_HW_V1), values + timing;
- every shipped scenario (scenarios/*.yaml except sweeps) in timing-only mode: total cycles and
  each hardware layer's (start, end) cycles;
- the calibration networks (../shared/calibration/networks/*.yaml), timing-only, the same way.
Also the SimPy events each run scheduled (what speed changes reduce; not held by the test).
`--check` compares a fresh run with the file instead of writing it.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "tests" / "data" / "speed_baseline.json"
sys.path.insert(0, str(ROOT))


def v2_root() -> Path | None:
    for c in (os.environ.get("NVDLA_HW"), ROOT.parent / "shared" / "nvdla-hw"):
        if c and (Path(c) / "verif" / "tests" / "trace_tests" / "nv_small").is_dir():
            return Path(c)
    return None


def calibration_root() -> Path | None:
    c = ROOT.parent / "shared" / "calibration" / "networks"
    return c if c.is_dir() else None


def official() -> dict:
    from nvdla_sim.config import load_hardware
    from nvdla_sim.conformance import find_tests, run_test, tests_folder, v1_corpus_root
    out = {}
    for project, version, root in (("nv_small", 2, v2_root()), ("nv_full", 1, v1_corpus_root())):
        if root is None:
            continue
        hw = load_hardware(project)
        for test in find_tests(tests_folder(root, project, version)):
            o = run_test(test, hw)
            out[f"{project}/{test.name}"] = {
                "status": o.status, "cycles": o.cycles,
                "events": o.result.events if o.result is not None else None}
    return out


def scenario_cycles(path: Path) -> dict:
    """Timing-only run of one scenario file: total and per-layer (start, end) cycles, events."""
    from nvdla_sim.compiler.lower import lower_and_run
    from nvdla_sim.scenario.runner import context, prepare
    from nvdla_sim.scenario.schema import load_scenario
    scn = load_scenario(path)
    scn.mode = "timing"
    prep = prepare(scn)
    start = time.perf_counter()
    res = lower_and_run(prep.plan, context(prep))
    wall = time.perf_counter() - start
    engine = res.engine_result.engine
    return {"total": res.total_cycles,
            "layers": [[t.name, t.start_cycle, t.end_cycle] for t in res.layers],
            "events": next(engine.env._eid), "wall_s": round(wall, 3),
            "replayed": engine.step_cache.replayed if engine.step_cache else 0}


def scenario_files() -> list[Path]:
    from nvdla_sim.yaml_file import read_yaml
    return [p for p in sorted((ROOT / "scenarios").glob("*.yaml")) if "base" not in read_yaml(p)]


def record(only: str | None) -> dict:
    data: dict = {"official": {}, "scenarios": {}, "calibration": {}}
    if only in (None, "official"):
        data["official"] = official()
    if only in (None, "scenarios"):
        for p in scenario_files():
            data["scenarios"][p.stem] = scenario_cycles(p)
            print(f"  {p.stem}: {data['scenarios'][p.stem]['total']:.0f} cycles", file=sys.stderr)
    cal = calibration_root()
    if only in (None, "calibration") and cal is not None:
        for p in sorted(cal.glob("*.yaml")):
            data["calibration"][p.stem] = scenario_cycles(p)
    return data


# A run that replayed steps from the step cache (engine/step_cache.py) has its clock moved by
# shifted float durations: from the first replay on, times may differ by float rounding, each
# within REPLAY_REL of the larger of the time and the layer's length.
REPLAY_REL = 1e-9


def compare(old: dict, new: dict, rel: float = 0.0) -> list[str]:
    """Differences between two records (cycles only; events and wall time may change); `rel`
    applies to the networks whose run replayed steps (`replayed`), the others must be equal."""
    bad = []
    for section in ("official", "scenarios", "calibration"):
        for name, n in new.get(section, {}).items():
            o = old.get(section, {}).get(name)
            if o is None:
                continue
            if section == "official":
                if (o["status"], o["cycles"]) != (n["status"], n["cycles"]):
                    bad.append(f"{name}: {o['status']} {o['cycles']} -> {n['status']} {n['cycles']}")
                continue
            rel_n = rel if n.get("replayed") else 0.0
            if abs(n["total"] - o["total"]) > rel_n * o["total"]:
                bad.append(f"{section}/{name}: total {o['total']} -> {n['total']}")
            for lo, ln in zip(o["layers"], n["layers"]):
                if lo[0] != ln[0] or any(abs(a - b) > rel_n * max(1.0, lo[2] - lo[1], abs(a))
                                         for a, b in zip(lo[1:], ln[1:])):
                    bad.append(f"{section}/{name}/{lo[0]}: {lo[1:]} -> {ln[1:]}")
    return bad


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", action="store_true", help="compare with the recorded file")
    p.add_argument("--only", choices=("official", "scenarios", "calibration"))
    args = p.parse_args()
    new = record(args.only)
    if args.check:
        bad = compare(json.loads(BASELINE.read_text()), new, REPLAY_REL)
        print("\n".join(bad) or "cycles unchanged")
        return 1 if bad else 0
    if args.only and BASELINE.exists():
        merged = json.loads(BASELINE.read_text())
        merged[args.only] = new[args.only]
        new = merged
    BASELINE.write_text(json.dumps(new, indent=1) + "\n")
    print(f"wrote {BASELINE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
