"""Speed of the simulator (issue 20): ResNet-50 per preset, whole command and inside the run.

    python benchmarks/bench_speed.py [--quick] [--repeat N]

For ResNet-50 (INT8) on nv_large, nv_small_256 and nv_small prints, each a median of N runs:
- `whole`: wall and CPU (user + system) seconds of the whole `nvdla-sim run` command in
  timing-only mode with the layer plots (a fresh process: imports, compile, run, reports and
  plots: `outputs.plots: true`), the same without plots (`plots: false`: since issue 20 the
  timing-only default when the scenario does not say), and its peak memory (the child's max
  RSS from wait4);
- `sim`: seconds inside the simulation (lower_and_run: the engine's events, in-process), its CPU
  seconds, SimPy events per run, simulated cycles and cycles per wall second;
- on nv_large also values+timing (whole command).
NVDLA_SIM_ROOT=DIR times the checkout in DIR instead (e.g. an older commit's copy).
`--quick`: one run each and no values+timing run.  No targets are asserted here (no timed unit
tests); docs/performance.md records the figures.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(os.environ.get("NVDLA_SIM_ROOT", Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(ROOT))     # NVDLA_SIM_ROOT: time another checkout (a "before" copy)
PRESETS = ("nv_large", "nv_small_256", "nv_small")


def scenario_file(folder: Path, hardware: str | dict, mode: str, plots: bool = True,
                  name: str | None = None) -> Path:
    """scenarios/resnet50_nv_large.yaml with another preset, mode, plots (said explicitly:
    the default differs between checkouts) and output folder.  `hardware` may also be a
    mapping (a preset with overrides); `name` then names the files."""
    import yaml
    doc = yaml.safe_load((ROOT / "scenarios" / "resnet50_nv_large.yaml").read_text())
    tag = f"{name or hardware}_{mode}" + ("" if plots else "_noplots")
    doc.update(hardware=hardware, mode=mode)
    doc["outputs"] = {**doc["outputs"], "directory": str(folder / tag), "plots": plots}
    text = yaml.safe_dump(doc, sort_keys=False)
    path = folder / f"resnet50_{tag}.yaml"
    path.write_text(text)
    return path


def whole_command(path: Path) -> tuple[float, float, float]:
    """(wall s, CPU s, peak MiB) of `nvdla-sim run PATH` in a child process (its own rusage:
    wait4).  CPU seconds compare across a busy machine; wall seconds do not."""
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "nvdla_sim.cli", "run", str(path)],
                             stdout=subprocess.DEVNULL, cwd=ROOT)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise SystemExit(f"nvdla-sim run {path} failed ({child.returncode})")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def simulate(scn) -> dict:
    """Compile the scenario, then time the simulation alone: its result, wall and CPU seconds,
    and the SimPy events it scheduled (less the numbers FlyingWriter kept for wake-ups that
    never became events; getattr: an older checkout under NVDLA_SIM_ROOT keeps none)."""
    from nvdla_sim.compiler.lower import lower_and_run
    from nvdla_sim.scenario.runner import context, prepare
    prep = prepare(scn)
    ctx = context(prep)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    res = lower_and_run(prep.plan, ctx)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    env = res.engine_result.engine.env
    events = next(env._eid) - getattr(env, "kept_event_numbers", 0)
    return {"result": res, "wall": wall, "cpu": cpu, "events": events}


def inside(path: Path) -> dict:
    """The simulation alone (compile excluded): wall, CPU, events, cycles."""
    from nvdla_sim.scenario.schema import load_scenario
    out = simulate(load_scenario(path))
    return {**out, "cycles": out["result"].total_cycles}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="one run each, no values+timing run")
    p.add_argument("--repeat", type=int, default=3, help="runs per figure (median; default 3)")
    p.add_argument("--presets", default=",".join(PRESETS), help="comma-separated presets")
    p.add_argument("--values", action="store_true", help="with --quick: the values+timing run too")
    args = p.parse_args()
    n = 1 if args.quick else args.repeat
    print(f"ResNet-50 INT8, median of {n}; load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} cores (figures on a busy machine are slower)")
    print(f"{'preset':<14}{'whole s':>9}{'cpu s':>7}{'no-plots s':>11}{'cpu s':>7}{'peak MiB':>10}"
          f"{'sim s':>8}{'sim cpu s':>10}{'events':>11}{'cycles':>12}{'Mcycles/s':>10}")

    def med(runs, i):
        return statistics.median(r[i] for r in runs)

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for hw in args.presets.split(","):
            path = scenario_file(folder, hw, "timing-only")
            whole = [whole_command(path) for _ in range(n)]
            bare = [whole_command(scenario_file(folder, hw, "timing-only", plots=False))
                    for _ in range(n)]
            sims = [inside(path) for _ in range(n)]
            wall = statistics.median(s["wall"] for s in sims)
            print(f"{hw:<14}{med(whole, 0):>9.2f}{med(whole, 1):>7.2f}{med(bare, 0):>11.2f}"
                  f"{med(bare, 1):>7.2f}{max(r[2] for r in whole + bare):>10.0f}{wall:>8.2f}"
                  f"{statistics.median(s['cpu'] for s in sims):>10.2f}{sims[0]['events']:>11,}"
                  f"{sims[0]['cycles']:>12,.0f}{sims[0]['cycles'] / wall / 1e6:>10.2f}")
        if not args.quick or args.values:
            path = scenario_file(folder, "nv_large", "values+timing")
            whole = [whole_command(path) for _ in range(n)]
            print(f"nv_large values+timing: whole command {med(whole, 0):.2f} s "
                  f"({med(whole, 1):.2f} CPU s), peak {max(r[2] for r in whole):.0f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
