"""One sweep point: scenario mapping in, result row out.

`evaluate_point(point, runner)` is what every backend runs (in a worker process or a Ray task):

    parse the point's scenario  -- a hardware value the configuration cannot take: infeasible
    compile it to hardware layers and check the CBUF (feasibility.py)  -- too small: infeasible
    runner(scenario mapping, base_dir) -> metrics  -- an exception: status "error", sweep goes on
    row = parameters + hardware columns + metrics (results.py)

The runner is injected.  `run_scenario_point` (the default) runs the scenario the way
`nvdla-sim run` does, through `compiler.lower.lower_and_run`, and reads the
totals; `conv_chain.run_conv_chain` is a smaller real runner for networks of convolutions.  A runner
returns a mapping with at least `cycles` (DLA cycles, first enable to last interrupt) and
`dram_bytes` (DRAM bytes read + written); optional: `cvsram_traffic_bytes`, `lowest_sqnr_db`,
`output_sqnr_db` (end-to-end, the network output(s)),
`gpu_layers`, and the energy metrics (`energy_metrics`: energy_mj, avg/peak_power_mw, area_mm2,
tops_per_w, energy_<component>_mj).
"""
from __future__ import annotations

import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Callable

from ..errors import NvdlaSimError
from .feasibility import cbuf_infeasibility, largest_need
from .spec import Point, canonical, hardware_limited

PointRunner = Callable[[dict, str], dict]

_compiled: tuple[str, object] | None = None        # (canonical scenario, Prepared) of the last point
# Scenario fields the compiled plan does not read (`runner.prepare` builds the network, weights,
# input and plan from the network, hardware, precision and quantisation; the memory profiles and
# the clock reach the run through `runner.context`): points that differ only there share one
# compilation -- a sweep's DRAM-bandwidth axis compiles each configuration once.
RUN_ONLY_FIELDS = ("memory", "clock_mhz", "outputs", "name")


def compile_point(scenario: dict, base_dir: str):
    """The point's scenario parsed and compiled up to the lowering seam (`runner.Prepared`, with
    this point's own scenario).  Feasibility and the runner of one point, and the next points
    that differ only in RUN_ONLY_FIELDS, share the compilation: the last one is kept."""
    global _compiled
    from ..scenario.runner import prepare
    from ..scenario.schema import parse_scenario
    scn = parse_scenario(scenario, Path(base_dir))
    key = canonical([{k: v for k, v in scenario.items() if k not in RUN_ONLY_FIELDS}, base_dir])
    if _compiled is None or _compiled[0] != key:
        _compiled = None
        _compiled = (key, prepare(scn))
    return replace(_compiled[1], scenario=scn)


def run_scenario_point(scenario: dict, base_dir: str) -> dict:
    """The default runner: the scenario on the engine through `lower_and_run`, as `nvdla-sim run`
    runs it (no report files are written)."""
    from ..report.tables import build_report
    from ..compiler.lower import lower_and_run
    from ..scenario.runner import batch_values, context, output_sqnr_db
    prep = compile_point(scenario, base_dir)
    from ..energy.report import check_energy
    check_energy(prep)                  # a CBUF CACTI cannot price: refused before the run
    cores = None
    if prep.scenario.dla_cores > 1:     # core 0's latency under contention (compiler/multicore.py)
        from ..compiler.multicore import run_prepared
        result, cores = run_prepared(prep, replace(context(prep), timeline=False))
    else:
        result = lower_and_run(prep.plan, replace(context(prep), timeline=False))
    values = batch_values(prep.plan, result) if prep.scenario.values else None
    report = build_report(prep, result, values)
    lowest = report.lowest_sqnr
    return {"cycles": result.total_cycles,
            "dram_bytes": report.total_dram_bytes or 0,
            "cvsram_traffic_bytes": sum(t.cvsram_read_bytes + t.cvsram_write_bytes
                                        for t in result.layers),
            "lowest_sqnr_db": lowest[1] if lowest else None,
            "output_sqnr_db": output_sqnr_db(prep, values),
            "gpu_layers": sum(r.device == "GPU" for r in report.rows),
            **energy_metrics(report),
            **({"fps": cores["images_per_s"]} if cores else {})}   # both cores' images/s


def energy_metrics(report) -> dict:
    """The report's energy and area (nvdla_sim/energy) as sweep metrics; {} when absent."""
    if report.energy_mj is None:
        return {}
    split = report.energy["split_uj"]
    return {"energy_mj": report.energy_mj, "avg_power_mw": report.avg_power_mw,
            "peak_power_mw": report.peak_power_mw, "area_mm2": report.area_mm2,
            "tops_per_w": report.tops_per_w,
            **{f"energy_{k.lower()}_mj": v * 1e-3 for k, v in split.items()}}


def failure_reason(exc: BaseException) -> str:
    """One line for a point that raised something else than NvdlaSimError: the exception and
    the line it came from (a MemoryError says so: the point needs more than the machine has)."""
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" ({Path(tb[-1].filename).name}:{tb[-1].lineno})" if tb else ""
    if isinstance(exc, MemoryError):
        return f"out of memory (MemoryError{where}): the point needs more than this machine has"
    return " ".join(f"{type(exc).__name__}: {exc}{where}".split())


def evaluate_point(point: Point, runner: PointRunner, bytes_per_mac: float) -> dict:
    """The result row of one point; never raises for a point's own failure: anything it raises
    (MemoryError and RecursionError included) becomes its `error` row and the sweep goes on."""
    start = time.perf_counter()
    try:
        return _evaluate_point(point, runner, bytes_per_mac)
    except Exception as exc:
        from .results import base_row
        row = base_row(point)
        row.update(status="error", reason=failure_reason(exc),
                   wall_s=round(time.perf_counter() - start, 3))
        return row


def _evaluate_point(point: Point, runner: PointRunner, bytes_per_mac: float) -> dict:
    from ..scenario.schema import parse_scenario
    from .results import base_row, hardware_columns, metric_columns
    start = time.perf_counter()
    row = base_row(point)

    def done(status: str, reason: str = "") -> dict:
        row.update(status=status, reason=reason, wall_s=round(time.perf_counter() - start, 3))
        return row

    try:
        scn = parse_scenario(point.scenario, Path(point.base_dir))
    except NvdlaSimError as exc:
        # a grid is checked value by value (spec._check_grid): a combination of valid values
        # that the schema refuses is this point's error; a hardware limit is infeasible
        return done("infeasible" if hardware_limited(exc) else "error", str(exc))
    row.update(hardware_columns(scn, bytes_per_mac))
    try:
        prep = compile_point(point.scenario, point.base_dir)
    except NvdlaSimError as exc:
        return done("infeasible", str(exc))
    need = largest_need(scn.hardware, prep.plan)
    row["min_cbuf_banks"] = need.banks if need else None
    row["network_macs"] = sum(layer.macs for layer in prep.plan.layers if layer.on_dla)
    reason = cbuf_infeasibility(scn.hardware, prep.plan)
    if reason:
        return done("infeasible", reason)
    try:
        metrics = runner(point.scenario, point.base_dir)
    except NvdlaSimError as exc:
        return done("error", str(exc))
    except Exception as exc:       # a bug in one point must not stop the sweep
        return done("error", failure_reason(exc))
    row.update(metric_columns(metrics, scn, row))
    return done("ok")
