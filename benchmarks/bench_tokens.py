"""Token runs (issue 20): events and CPU seconds of timing-only ResNet-50 with and without them.

    python benchmarks/bench_tokens.py [--configs nv_large,nv_small,...] [--repeat N]
                                      [--step-cache]

For each configuration (the presets, and 128..1024-MAC variants of nv_small and 64..1024-MAC
variants of nv_large: ATOMIC_C x ATOMIC_K on the preset's CBUF banks and interfaces, nv_small's
8-byte memory atom, nv_large's variants with ATOMIC_K-byte atoms as the array sweep builds them) runs the simulation alone
(`lower_and_run`, in this process) with NVDLA_SIM_TOKEN_RUNS=0 (every token on its own) and with
the runs, and prints SimPy events, CPU seconds (time.process_time, the minimum of `--repeat`
runs: the machine is shared), simulated cycles (must be equal: the runs are exact) and the CPU
ratio to nv_large.  The step cache (helper "reuse") is off unless `--step-cache`.  `--coarse`
compares coarse stripes off and on instead (helper "stripes"; token runs on in both); without it
coarse stripes are off in both columns.  `--flying` compares SDP taking a convolution's stripes
without events (timing/sdp.py FlyingWriter) off and on, token runs on in both.  Nothing is
asserted here (no timed tests); docs/performance.md records the figures.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from array_variants import VARIANTS  # noqa: E402  (benchmarks/: the one definition)

# name -> hardware (a preset, or a preset with another MAC array: array_variants.py; the
# variants are named PRESET_CxK, so none shadows the preset nv_small_256)
CONFIGS = {"nv_large": "nv_large", "nv_small_256": "nv_small_256", "nv_small": "nv_small",
           "nv_full": "nv_full", **VARIANTS}


def run(hardware, runs: bool, coarse: int | None = None, flying: bool = True
        ) -> tuple[int, float, float]:
    """(events, CPU s, cycles) of timing-only ResNet-50 INT8 at 10 GB/s (`coarse`: the value of
    NVDLA_SIM_COARSE_STRIPES, None: its default)."""
    from bench_speed import simulate
    from nvdla_sim.scenario.schema import parse_scenario
    os.environ["NVDLA_SIM_TOKEN_RUNS"] = "1" if runs else "0"
    os.environ["NVDLA_SIM_FLYING_WRITER"] = "1" if flying else "0"
    if coarse is None:
        os.environ.pop("NVDLA_SIM_COARSE_STRIPES", None)
    else:
        os.environ["NVDLA_SIM_COARSE_STRIPES"] = str(coarse)
    scn = parse_scenario({"hardware": hardware, "network": "resnet50", "mode": "timing-only",
                          "precision": "int8", "clock_mhz": 1000,
                          "memory": {"dram_gbps": 10, "dram_latency_ns": 100, "cvsram_bytes": 0},
                          "outputs": {"plots": False}}, None)
    out = simulate(scn)
    return out["events"], out["cpu"], out["result"].total_cycles


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated names")
    ap.add_argument("--repeat", type=int, default=1, help="runs per figure (minimum CPU)")
    ap.add_argument("--step-cache", action="store_true", help="leave the step cache on")
    ap.add_argument("--coarse", action="store_true",
                    help="off / on: coarse stripes (NVDLA_SIM_COARSE_STRIPES) 0 / 16, token "
                         "runs on in both; the cycles column gives the total's relative change")
    ap.add_argument("--flying", action="store_true",
                    help="off / on: SDP taking stripes without events (NVDLA_SIM_FLYING_WRITER, "
                         "timing/sdp.py FlyingWriter), token runs on in both")
    args = ap.parse_args()
    if not args.step_cache:
        os.environ["NVDLA_SIM_NO_STEP_CACHE"] = "1"
    names = args.configs.split(",")
    if "nv_large" in names:                         # the reference first
        names.remove("nv_large")
        names.insert(0, "nv_large")
    print(f"{'config':<16}{'MACs':>6}{'events off':>12}{'events on':>11}{'CPU s off':>10}"
          f"{'CPU s on':>9}{'x nv_large':>11}  cycles")
    ref = None
    for name in names:
        hw = CONFIGS[name]
        figures = {}
        for runs in (False, True):
            best = None
            for _ in range(args.repeat):
                if args.coarse:
                    events, cpu, cycles = run(hw, True, 16 if runs else 0)
                elif args.flying:
                    events, cpu, cycles = run(hw, True, 0, flying=runs)
                else:               # token runs off / on (and with them the FlyingWriter)
                    events, cpu, cycles = run(hw, runs, 0)
                best = (events, cpu, cycles) if best is None or cpu < best[1] else best
            figures[runs] = best
        (ev0, cpu0, cyc0), (ev1, cpu1, cyc1) = figures[False], figures[True]
        if ref is None:
            ref = cpu1
        from nvdla_sim.config import load_hardware
        h = load_hardware(hw) if isinstance(hw, str) else None
        macs = h.atomic_c * h.atomic_k if h else hw["atomic_c"] * hw["atomic_k"]
        same = "same" if cyc0 == cyc1 else f"DIFFERENT {cyc0!r} vs {cyc1!r}"
        if args.coarse:
            same = f"{(cyc1 - cyc0) / cyc0:+.2e}"
        print(f"{name:<16}{macs:>6}{ev0:>12,}{ev1:>11,}{cpu0:>10.2f}{cpu1:>9.2f}"
              f"{cpu1 / ref:>11.1f}  {cyc1:,.0f} ({same})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
