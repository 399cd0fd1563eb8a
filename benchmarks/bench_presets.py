"""Every preset and array variant against nv_large (issue 20): timing-only ResNet-50, whole command.

    python benchmarks/bench_presets.py [--repeat N] [--only NAME,...] [--timeout S]

For every preset in nvdla_sim/config/presets/ and the 128..1024-MAC variants of nv_small and the
64..1024-MAC variants of nv_large (benchmarks/array_variants.py; nv_small itself is the 64-MAC
one) runs the whole `nvdla-sim run` command on timing-only ResNet-50 INT8 at 10 GB/s, 100 ns,
no CVSRAM, plots off (scenarios/resnet50_nv_large.yaml with the hardware swapped:
bench_speed.scenario_file) in a child process, and prints per configuration, medians of N runs:
- wall s, CPU s (the child's user + system, from wait4: it compares across a busy machine,
  wall seconds do not) and peak MiB (the child's max RSS);
- SimPy events: the network's JSON report has no event count, so the child runs the CLI behind
  a shim that notes every simpy.Environment's event counter (`_eid`, which numbers each
  scheduled event) and writes their sum at exit, less the numbers kept for wake-ups that never
  became events (`timing.sdp.kept_event_numbers`, as the engine counts them);
- simulated cycles (the JSON report's total_cycles);
- CPU s over nv_large's, marked `> 2x` above 2.0 (the issue's bound).
The N runs go round-robin (each round runs every configuration once), so a change of the
machine's load falls on all configurations alike; the table prints after the last round.
A configuration that fails (refused, crashes, deadlocks, or exceeds --timeout) is reported with
the last line of its error and the benchmark goes on.  Progress goes to stderr.  The last line
names the worst ratio.  Nothing is asserted (no timed tests); docs/performance.md records the
figures.  NVDLA_SIM_* switches in the environment reach the child and are printed.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))   # benchmarks/
from array_variants import VARIANTS                        # noqa: E402
from bench_speed import ROOT, scenario_file                # noqa: E402

LIMIT_RATIO = 2.0      # the bound: at most twice the nv_large time

# The child: the CLI as `nvdla-sim run` runs it, plus a note of each SimPy environment's event
# counter (itertools.count: next() gives the numbers taken so far), summed at exit less the
# numbers timing/sdp.py's FlyingWriter took for wake-ups that never became events (as the
# engine's own count; the environment is read through a weak reference: nothing kept alive).
CHILD = """
import atexit, os, sys, weakref, simpy
_runs = []
_init = simpy.Environment.__init__
def _noting_init(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    _runs.append((weakref.ref(self), self._eid))
simpy.Environment.__init__ = _noting_init
@atexit.register
def _write_events():
    try:
        from nvdla_sim.timing.sdp import kept_event_numbers
    except ImportError:
        kept_event_numbers = lambda env: 0
    total = 0
    for ref, counter in _runs:
        env = ref()
        total += next(counter) - (kept_event_numbers(env) if env is not None else 0)
    with open(os.environ["BENCH_PRESETS_EVENTS"], "w") as f:
        f.write(str(total))
from nvdla_sim.cli import main
sys.exit(main(sys.argv[1:]))
"""


def configurations() -> dict[str, str | dict]:
    """name -> hardware: the presets (nv_large first: the reference), then the variants."""
    from nvdla_sim.config import preset_names
    names = sorted(preset_names(), key=lambda n: n != "nv_large")
    return {**{n: n for n in names}, **VARIANTS}


def macs_of(hardware: str | dict) -> int:
    from nvdla_sim.config import load_hardware
    return load_hardware(hardware).macs


def run_once(path: Path, report: Path, timeout_s: float) -> dict:
    """One `nvdla-sim run PATH` in a child: wall s, CPU s and peak MiB (the child's own rusage:
    wait4), events, cycles; or `error` (the last line of its stderr, or the timeout)."""
    with tempfile.NamedTemporaryFile("r", suffix=".events") as ev, \
            tempfile.TemporaryFile("w+") as err:
        env = {**os.environ, "BENCH_PRESETS_EVENTS": ev.name}
        start = time.perf_counter()
        child = subprocess.Popen([sys.executable, "-c", CHILD, "run", str(path)], cwd=ROOT,
                                 env=env, stdout=subprocess.DEVNULL, stderr=err)
        killer = threading.Timer(timeout_s, child.kill)    # a deadlock that never ends
        killer.start()
        try:
            _, status, usage = os.wait4(child.pid, 0)
        finally:
            killer.cancel()
        wall = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode:
            if wall >= timeout_s:
                return {"error": f"no end after {timeout_s:.0f} s (killed)"}
            err.seek(0)
            lines = [ln for ln in err.read().splitlines() if ln.strip()]
            return {"error": f"exit {child.returncode}: {lines[-1] if lines else '(no message)'}"}
        events_text = Path(ev.name).read_text().strip()
    data = json.loads(report.read_text())
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
            "peak_mib": usage.ru_maxrss / 1024,
            "events": int(events_text) if events_text else None,
            "cycles": data["total_cycles"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=1, help="runs per configuration (median)")
    ap.add_argument("--only", default="", help="comma-separated names (nv_large is always run: "
                                               "the reference)")
    ap.add_argument("--timeout", type=float, default=600.0,
                    help="seconds before a run counts as hung (default 600)")
    args = ap.parse_args()
    configs = configurations()
    if args.only:
        wanted = ["nv_large"] + [n for n in args.only.split(",") if n and n != "nv_large"]
        unknown = [n for n in wanted if n not in configs]
        if unknown:
            ap.error(f"unknown configuration(s) {', '.join(unknown)} (known: {', '.join(configs)})")
        configs = {n: configs[n] for n in wanted}
    switches = " ".join(f"{k}={v}" for k, v in sorted(os.environ.items())
                        if k.startswith("NVDLA_SIM_"))
    print(f"ResNet-50 INT8 timing-only, whole `nvdla-sim run` (plots off), 10 GB/s, 100 ns; "
          f"median of {args.repeat}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} "
          f"cores at the start" + (f"; {switches}" if switches else ""))
    print(f"{'configuration':<20}{'MACs':>6}{'wall s':>8}{'CPU s':>7}{'peak MiB':>9}"
          f"{'events':>11}{'cycles':>13}{'x nv_large':>11}")
    ref_cpu = None
    worst = None
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        paths = {name: scenario_file(folder, hw, "timing-only", plots=False, name=name)
                 for name, hw in configs.items()}
        runs: dict[str, list[dict]] = {name: [] for name in configs}
        # round-robin: each round runs every configuration once, so a change of the machine's
        # load during the benchmark falls on all of them alike (nv_large included)
        for i in range(args.repeat):
            for name in configs:
                if runs[name] and "error" in runs[name][-1]:
                    continue
                print(f"[round {i + 1}/{args.repeat}] {name} ...", file=sys.stderr, flush=True)
                report = folder / f"{name}_timing-only_noplots" / "report.json"
                runs[name].append(run_once(paths[name], report, args.timeout))
        for name, hardware in configs.items():
            done = runs[name]
            macs = macs_of(hardware)
            if "error" in done[-1]:
                print(f"{name:<20}{macs:>6}  FAILED {done[-1]['error']}", flush=True)
                continue
            med = {k: statistics.median(r[k] for r in done) for k in ("wall", "cpu", "peak_mib")}
            first = done[0]
            moved = "" if all(r["cycles"] == first["cycles"] for r in done) else "  cycles vary!"
            if ref_cpu is None:
                ref_cpu = med["cpu"]          # nv_large comes first
            ratio = med["cpu"] / ref_cpu
            if name != "nv_large" and (worst is None or ratio > worst[0]):
                worst = (ratio, name)
            events = f"{first['events']:,}" if first["events"] is not None else "?"
            mark = f"  > {LIMIT_RATIO:g}x" if ratio > LIMIT_RATIO else ""
            print(f"{name:<20}{macs:>6}{med['wall']:>8.2f}{med['cpu']:>7.2f}{med['peak_mib']:>9.0f}"
                  f"{events:>11}{first['cycles']:>13,.0f}{ratio:>11.2f}{mark}{moved}", flush=True)
    if worst is not None:
        print(f"worst: {worst[1]} at {worst[0]:.2f}x nv_large's CPU s "
              f"({'above' if worst[0] > LIMIT_RATIO else 'within'} the {LIMIT_RATIO:g}x bound)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
