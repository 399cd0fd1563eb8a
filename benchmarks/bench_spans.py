"""The activity log's cost (issue 20, engine/activity.py): ResNet-50 timing-only per preset.

    python benchmarks/bench_spans.py [--presets nv_large,nv_small,nv_large_8x8] [--vp]

Per preset (or array variant of benchmarks/array_variants.py) prints the spans of the run (all,
and how many sit in blocks: steps the step cache recorded or replayed), the CPU seconds of the
simulation (after a warm-up run), of every step's busy cycles in it (`lower._busy`, summed), of
the run's totals (`ActivityLog.totals`, what the unit summary reads), of the same totals by the
straightforward loop over tuples (what the log did before it kept columns) and of materialising
the tuple list (`ActivityLog.spans`: timelines).  `--vp` also times the VP layer report on
ResNet-50 FP16 on nv_full written in VP form.  No targets are asserted (no timed unit tests);
docs/performance.md records the figures.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))   # the straightforward merge: test_speed_spans


def cpu(fn):
    t = time.process_time()
    out = fn()
    return time.process_time() - t, out


def preset(hardware: str) -> None:
    from array_variants import VARIANTS
    from bench_speed import scenario_file
    from nvdla_sim.compiler import lower
    from nvdla_sim.scenario.runner import context, prepare
    from nvdla_sim.scenario.schema import load_scenario
    from test_speed_spans import loop_totals
    with tempfile.TemporaryDirectory() as tmp:
        scn = load_scenario(scenario_file(Path(tmp), VARIANTS.get(hardware, hardware), "timing",
                                          plots=False, name=hardware))
    prep = prepare(scn)
    ctx = context(prep)
    lower.lower_and_run(prep.plan, ctx)                 # warm-up
    busy_s, plain_busy = [0.0], lower._busy

    def timed_busy(*args):
        took, out = cpu(lambda: plain_busy(*args))
        busy_s[0] += took
        return out

    lower._busy = timed_busy
    try:
        sim_s, res = cpu(lambda: lower.lower_and_run(prep.plan, ctx))
    finally:
        lower._busy = plain_busy
    log = res.engine_result.engine.activity
    in_blocks = sum(len(seg) for seg in log._segments if type(seg) is not list)
    totals_s, totals = cpu(log.totals)
    tuples = list(log.iter_spans())
    loop_s, reference = cpu(lambda: loop_totals(tuples))
    # (values and the order of units and kinds: the reports print them in that order)
    same = "yes" if [(u, list(k.items())) for u, k in totals.items()] == \
        [(u, list(k.items())) for u, k in reference.items()] else "NO"
    spans_s, _ = cpu(lambda: log.spans)
    print(f"{hardware:<14}{len(tuples):>10,}{in_blocks:>11,}{sim_s:>9.2f}{busy_s[0]:>9.3f}"
          f"{totals_s:>10.3f}{loop_s:>9.3f}{same:>6}{spans_s:>12.3f}")


def vp_report() -> None:
    from nvdla_sim.compiler.lower import lower
    from nvdla_sim.engine import Engine
    from nvdla_sim.frontends.vp_trace import parse_vp
    from nvdla_sim.frontends.vp_writer import write_vp_trace
    from nvdla_sim.report.vp_layers import vp_layers
    from nvdla_sim.scenario.runner import context, prepare
    from nvdla_sim.scenario.schema import load_scenario
    scn = load_scenario(ROOT / "scenarios" / "resnet50_nv_full_fp16.yaml")
    scn.mode = "timing-only"
    prep = prepare(scn)
    ctx = context(prep)
    with tempfile.TemporaryDirectory() as tmp:
        folder = write_vp_trace(lower(prep.plan, ctx, name="resnet50").program, ctx.hw,
                                Path(tmp) / "resnet50")
        result = Engine(ctx.hw, ctx.dram, ctx.clock_mhz, compute_values=False).run(
            parse_vp(folder))
    report_s, layers = cpu(lambda: vp_layers(result))
    engine = result.engine
    print(f"VP report, ResNet-50 FP16 on nv_full: {len(layers)} stretches, "
          f"{len(list(engine.activity.iter_spans())):,} spans, "
          f"{len(engine.mcif.transfers):,} transfers: {report_s:.2f} CPU s")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--presets", default="nv_large,nv_small_256,nv_small,nv_large_8x8")
    p.add_argument("--vp", action="store_true", help="also the VP layer report")
    args = p.parse_args()
    print(f"ResNet-50 INT8 timing-only, CPU seconds; load average {os.getloadavg()[0]:.1f}")
    print(f"{'preset':<14}{'spans':>10}{'in blocks':>11}{'sim s':>9}{'busy s':>9}{'totals s':>10}"
          f"{'loop s':>9}{'same':>6}{'as tuples s':>12}")
    for hw in args.presets.split(","):
        preset(hw)
    if args.vp:
        vp_report()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
