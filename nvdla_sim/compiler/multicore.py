"""`dla_cores: 2`: two NVDLA cores running at once, contending for the DRAM (TensorRT's second
DLA core; docs/dla-deployment.md "Two DLA cores").

Each core runs its own lowered network (the same plan on a second image, or `second_network:`)
on its own Engine; the engines share one SimPy environment and the memory behind their
interfaces (engine/multicore.py): the DRAM's bandwidth and contents always, the SRAM's bandwidth
where the DLA target shares the SRAM (Xavier; Orin's is per core; a non-DLA preset's CVSRAM is
per instance). Core k's DRAM tensors start where core k-1's end (`lower(dbb_base=)`), so the
images share one DRAM without colliding.

Each core's step loop is a SimPy process doing what `lower.run_lowered` does step by step (a
piece started on its engine, awaited, accounted with `lower.step_timings`), so a core alone has
exactly the single-core cycles. (The repeated-layer step cache of run_lowered is not used here: a
layer's cycles depend on what the other core does at the time.)

Reported per core: latency (its last interrupt; every core starts at cycle 0), its layers' start
and end, DRAM / CVSRAM bytes, and its latency alone (a single-core timing run of the same
program) with the slowdown; aggregate: makespan and images/s = images of all cores / makespan.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

import simpy

from ..engine import Engine, RunResult
from ..engine.multicore import SharedMemory
from ..errors import NvdlaSimError
from ..memory import MemoryAccessError
from ..progress_hook import follow as follow_progress
from .dla_rules import dla_target
from .hwlayers import LoweringContext, PlanResult
from .placement import DBB, align_up

CORE_ALIGN_BYTES = 1 << 20          # each core's DRAM region starts on a MiB boundary


# --------------------------------------------------------------------------------------------------
# Scenario fields

def parse_cores(d: dict, hw, pools: dict | None,
                parse_network: Callable[[Any], Any]) -> tuple[int, Any]:
    """`dla_cores` (1..the DLA target's cores; 2 on other presets: two instances of the
    configuration) and `second_network` (a `network:` value; only with 2 cores)."""
    from ..scenario.schema import FieldError, _number
    target = dla_target(hw)
    limit = target.cores if target else 2
    why = f"{target.name} has {limit} DLA cores" if target else \
        f"a non-DLA preset runs at most 2 instances of {hw.name}"
    n = _number(d, "dla_cores", "", 1, minimum=1, integer=True, maximum=limit, why=why)
    second = None
    if d.get("second_network") is not None:
        if n < 2:
            raise FieldError("second_network", f"needs dla_cores: 2 (got dla_cores: {n})")
        try:
            second = parse_network(d["second_network"])
        except FieldError as exc:
            path = "second_network" + exc.path[len("network"):] if exc.path.startswith("network") \
                else "second_network"
            msg = str(exc)[len(exc.path) + 2:] if str(exc).startswith(exc.path + ": ") else str(exc)
            raise FieldError(path, msg) from None
    if n > 1 and target is not None and target.sram_shared and pools:
        total = n * pools["managed_sram"]
        if total > target.sram_bytes:
            raise FieldError("memory_pools.managed_sram",
                             f"{n} cores' managed SRAM pools ({n} x {pools['managed_sram'] >> 10} "
                             f"KiB) exceed the {target.sram_bytes >> 20} MiB SRAM {target.name} "
                             "shares between its cores")
    return n, second


# --------------------------------------------------------------------------------------------------
# Running

@dataclass
class CoreRun:
    """One core's run: what `run_lowered` returns for a single core, plus where it ran."""
    core: int
    network: str
    images: int
    result: PlanResult
    dram_base: int
    dram_bytes: int                         # its DRAM footprint (tensors, weights, operands)
    alone_cycles: float | None = None       # its latency with the other cores idle


def dram_footprint(lowered) -> tuple[int, int]:
    """(lowest, end) DRAM address of a lowered network's placements (a batch's buffers hold
    its images one batch stride apart)."""
    images = max((max(step.images) + 1 for step in lowered.steps), default=1)
    spans = [(p.address, p.address + max(p.size_bytes, lowered.batch_strides.get(name, 0) * images))
             for name, p in lowered.buffers.items() if p.space == DBB]
    spans += [(p.address, p.address + p.size_bytes)
              for step in lowered.steps for p in step.allocated if p.space == DBB]
    if not spans:
        return 0, 0
    return min(s for s, _ in spans), max(e for _, e in spans)


def next_dram_base(lowered) -> int:
    """Where the next core's DRAM tensors may start."""
    return align_up(dram_footprint(lowered)[1], CORE_ALIGN_BYTES)


def run_cores(cores: list[tuple[Any, LoweringContext]], share_cvsram: bool) -> list[CoreRun]:
    """Run each (lowered network, context) on its own core, all at once on one environment;
    every lowered network must have its own DRAM region (see `next_dram_base`)."""
    from ..report.statistics import StatisticsTap
    shared = SharedMemory(share_cvsram)
    runs: list[CoreRun] = []
    procs = []
    for k, (lowered, ctx) in enumerate(cores):
        engine = Engine(ctx.hw, ctx.dram, ctx.clock_mhz, cvsram_memory=ctx.cvsram,
                        compute_values=ctx.values, record_transfers=ctx.timeline,
                        shared=shared, core=k)
        if k == 0:
            follow_progress(engine)         # nvdla-sim run --progress
        tap = StatisticsTap(engine) if ctx.values else None
        low, high = dram_footprint(lowered)
        run = CoreRun(k, lowered.plan.network.name, ctx.batch, None, low, high - low)
        runs.append(run)
        procs.append(shared.env.process(_core_steps(run, engine, lowered, ctx, tap)))
    try:
        shared.env.run(until=simpy.AllOf(shared.env, procs))
    except MemoryAccessError as exc:
        raise NvdlaSimError(f"dla_cores: {exc}") from None
    except RuntimeError as exc:
        if "No scheduled events" not in str(exc):
            raise
        stuck = [f"core {e.core}: " + ("; ".join(u.describe_wait() for u in e.units.values()
                                                  if u.describe_wait()) or "no unit is running")
                 for e, p in zip(shared.engines, procs) if not p.triggered]
        raise NvdlaSimError(f"dla_cores: deadlock at cycle {shared.env.now:.0f} "
                            f"({' | '.join(stuck)})") from None
    return runs


def _core_steps(run: CoreRun, engine: Engine, lowered, ctx: LoweringContext, tap):
    """Process: one core's step loop (lower.step_loop, each piece awaited on the shared
    environment instead of run to its end)."""
    from .lower import step_loop
    loop = step_loop(engine, lowered, ctx, tap)
    try:
        piece = next(loop)
        while True:
            result = RunResult(piece.name)
            yield engine.start(piece, result)
            engine.finish(result, summarize=False)
            piece = loop.send(result)
    except StopIteration as done:
        timings, checks, per_image = done.value
    total = engine.env.now
    mine = [m for m in (engine.mcif, engine.cvif) if m]
    engine_result = RunResult(lowered.program.name, checks, total, engine.unit_summary(total),
                              {m.name: m.bytes_by_client for m in mine},
                              engine.timing.cbuf_summary(), engine=engine)
    run.result = PlanResult(timings, total, per_image[0] if ctx.values else {}, engine_result,
                            per_image if ctx.values and ctx.batch > 1 else [],
                            None if lowered.images else lowered)


def alone_cycles(lowered, ctx: LoweringContext) -> float:
    """A lowered network's latency with no other core running: what `dla_cores: 1` reports (a
    timing-only `run_lowered` of its program: cycles never depend on values)."""
    from .lower import run_lowered
    return run_lowered(lowered, replace(ctx, values=False, timeline=False)).total_cycles


# --------------------------------------------------------------------------------------------------
# Report

@dataclass
class CoresReport:
    """The `cores` section of report.json and the text report."""
    clock_mhz: float
    sram_shared: bool
    cores: list[dict] = field(default_factory=list)
    makespan_cycles: float = 0.0
    images: int = 0

    @property
    def makespan_ms(self) -> float:
        return self.makespan_cycles / (self.clock_mhz * 1e3)

    @property
    def images_per_s(self) -> float:
        return 1000.0 * self.images / self.makespan_ms if self.makespan_cycles else 0.0

    def to_json(self) -> dict:
        return {"dla_cores": len(self.cores), "sram_shared": self.sram_shared,
                "makespan_cycles": self.makespan_cycles, "makespan_ms": self.makespan_ms,
                "images": self.images, "images_per_s": self.images_per_s, "cores": self.cores}


def cores_report(runs: list[CoreRun], clock_mhz: float, sram_shared: bool,
                 sqnr_db: list[float | None] | None = None) -> CoresReport:
    rep = CoresReport(clock_mhz, sram_shared)
    for k, run in enumerate(runs):
        r = run.result
        cycles = r.total_cycles
        layers = [{"layer": t.name, "start_cycle": t.start_cycle, "end_cycle": t.end_cycle,
                   "dram_bytes": t.dram_read_bytes + t.dram_write_bytes} for t in r.layers]
        entry = {"core": run.core, "network": run.network, "images": run.images,
                 "latency_cycles": cycles, "latency_ms": cycles / (clock_mhz * 1e3),
                 "dram_read_bytes": sum(t.dram_read_bytes for t in r.layers),
                 "dram_write_bytes": sum(t.dram_write_bytes for t in r.layers),
                 "cvsram_bytes_moved": sum(t.cvsram_read_bytes + t.cvsram_write_bytes
                                           for t in r.layers),
                 "dram_base": run.dram_base, "dram_footprint_bytes": run.dram_bytes,
                 "alone_cycles": run.alone_cycles,
                 "slowdown": cycles / run.alone_cycles if run.alone_cycles else None,
                 "output_sqnr_db": sqnr_db[k] if sqnr_db else None,
                 "layers": layers}
        rep.cores.append(entry)
        rep.makespan_cycles = max(rep.makespan_cycles, cycles)
        rep.images += run.images
    return rep


def console_lines(cores: dict | None) -> list[str]:
    """The text report's cores section (from report.json's `cores`)."""
    if not cores:
        return []
    lines = [f"DLA cores: {cores['dla_cores']} sharing the DRAM"
             + (" and the SRAM" if cores["sram_shared"] else "")
             + " (the table above: core 0 under contention; docs/dla-deployment.md)"]
    for c in cores["cores"]:
        alone = f", alone {c['alone_cycles']:.0f} ({c['slowdown']:.2f}x)" \
            if c.get("alone_cycles") else ""
        sqnr = f", output SQNR {c['output_sqnr_db']:.1f} dB" \
            if c.get("output_sqnr_db") is not None else ""
        dram = (c["dram_read_bytes"] + c["dram_write_bytes"]) / 2**20
        lines.append(f"  core {c['core']}: {c['network']} x{c['images']}: {c['latency_cycles']:.0f} "
                     f"cycles = {c['latency_ms']:.3f} ms under contention{alone}, DRAM "
                     f"{dram:.1f} MiB at 0x{c['dram_base']:x}{sqnr}")
    lines.append(f"  aggregate: {cores['images']} images in {cores['makespan_cycles']:.0f} cycles "
                 f"= {cores['makespan_ms']:.3f} ms = {cores['images_per_s']:.1f} images/s")
    return lines


# --------------------------------------------------------------------------------------------------
# The scenario runner's hook

def run_scenario_cores(prep, lowered, ctx: LoweringContext) -> tuple[PlanResult, dict]:
    """`dla_cores: 2` of a scenario (scenario/runner.execute): core 0 runs the prepared network,
    core 1 the same network on a second image (the input seed + 1; a .npy input: the same image)
    or `second_network` (its weights the model's or seeded, a seeded input). Returns core 0's
    result (the per-layer report) and the report's `cores` section."""
    from ..scenario.runner import batch_values, context, output_sqnr_db
    from .lower import lower
    scn = prep.scenario
    spec = scn.input
    second_input = spec if spec.source == "npy" else replace(spec, seed=spec.seed + 1)
    if scn.second_network is None:
        prep1 = _second_image(prep, second_input)
    else:
        prep1 = prepare_second(prep)
    ctx1 = context(prep1)
    lowered1 = lower(prep1.plan, ctx1, dbb_base=next_dram_base(lowered))
    target = dla_target(scn.hardware)
    sram_shared = bool(target and target.sram_shared and ctx.cvsram_bytes)
    runs = run_cores([(lowered, ctx), (lowered1, ctx1)], sram_shared)
    runs[0].alone_cycles = alone_cycles(lowered, ctx)
    runs[1].alone_cycles = runs[0].alone_cycles if scn.second_network is None \
        else alone_cycles(lowered1, ctx1)
    sqnr = None
    if scn.values:
        sqnr = [output_sqnr_db(p, batch_values(p.plan, r.result))
                for p, r in zip((prep, prep1), runs)]
    report = cores_report(runs, scn.clock_mhz, sram_shared, sqnr)
    return runs[0].result, report.to_json()


def prepare_second(prep):
    """`second_network` prepared as core 1 runs it (its weights the model's or seeded, a seeded
    input); `compile` calls it too, so it refuses what `run` would.  Errors name the field."""
    from ..scenario.runner import prepare, scn_of
    from ..scenario.schema import InputSpec, WeightsSpec
    scn = prep.scenario
    spec = scn.input
    scn1 = replace(scn_of(prep), network=scn.second_network, path=None, layer_precision={},
                   weights=WeightsSpec("model", seed=scn.weights.seed),
                   input=InputSpec("random", seed=spec.seed + 1, distribution=spec.distribution),
                   dla_cores=1, second_network=None, input_format="auto", output_format="auto")
    try:
        return prepare(scn1)
    except NvdlaSimError as exc:
        msg = str(exc)                  # the network's own field path, as second_network's
        msg = msg[len("network"):] if msg.startswith("network.") else ": " + msg
        raise NvdlaSimError(f"second_network{msg}") from None


def _second_image(prep, input_spec):
    """The prepared network on core 1's image: same plan and parameters, its own input and
    (values mode) float reference."""
    from ..scenario.reference import run_reference
    from ..scenario.runner import batch_reference, make_input
    scn = prep.scenario
    if not scn.values and input_spec.source != "npy":
        return prep
    x = make_input(replace(scn, input=input_spec), prep.network)
    ref = None
    if scn.values:
        ref = batch_reference(prep.network, prep.weights, x) if scn.batch > 1 \
            else run_reference(prep.network, prep.weights, x)
    return replace(prep, input=x, reference=ref)


def run_prepared(prep, ctx: LoweringContext) -> tuple[PlanResult, dict | None]:
    """What `lower_and_run` is for a prepared scenario, with its `dla_cores`: one core, the
    plain run and no cores section; two, `run_scenario_cores` (core 0's result and the section).
    The API and the sweep points call this."""
    from .lower import lower, run_lowered
    lowered = lower(prep.plan, ctx)
    if getattr(prep.scenario, "dla_cores", 1) > 1:
        return run_scenario_cores(prep, lowered, ctx)
    return run_lowered(lowered, ctx), None
