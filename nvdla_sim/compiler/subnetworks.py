"""DLA subnetworks ("loadables") and their memory pools, as TensorRT's DLA deployment sees them.

GPU-fallback layers split the network: every run of DLA steps between two GPU layers is one
subnetwork (TensorRT compiles each into a loadable; here all of them stay in the one register
program, which holds the same layers in the same order).  At most 16 loadables fit one core.

Each subnetwork's bytes come from the compiler's own placement (compiler/placement.py's
allocator and lower.place_tensors), not from a second allocator:

- `global_dram` (weights and metadata): the byte buffers its steps placed (weights, SDP operand
  arrays);
- `local_dram` (intermediate tensors): DRAM feature cubes its steps write and only its steps read
  (not the network's outputs, not tensors a GPU layer or a later subnetwork reads: those are the
  loadable's inputs/outputs), plus the temporaries its steps placed (an unfused PDP's input);
- `managed_sram`: the CVSRAM the compiler placed its tensors in, from the CVSRAM base to the end of
  the highest one (the placement reuses CVSRAM by lifetime within the pool's size, so this never
  exceeds the pool: the scenario's CVSRAM capacity is capped at `memory_pools.managed_sram`).

A subnetwork above its local- or global-DRAM pool stops compilation naming the pool, or with
`gpu_fallback` on, its layers go to the GPU (scenario/runner.execute compiles again).  The report section (`Deployment.to_json`, console lines)
gives per subnetwork: its layers, each pool's use against its limit, its DLA cycles and the
GPU-fallback layers before it.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..errors import NvdlaSimError
from .dla_rules import DlaTarget
from .placement import CVSRAM, DBB, DEFAULT_BASE, Buffer, TensorPlacement

POOL_ORDER = ("managed_sram", "local_dram", "global_dram")


@dataclass
class Subnetwork:
    index: int
    layers: list[str]                           # hardware layers, in program order
    gpu_before: list[str]                       # GPU-fallback layers between it and the previous
    pools: dict[str, int] = field(default_factory=dict)      # bytes used per pool
    cycles: float | None = None                 # DLA cycles, first start to last end

    @property
    def name(self) -> str:
        return f"subnetwork {self.index} ({self.layers[0]}..{self.layers[-1]})"


@dataclass
class Deployment:
    target: str
    cores: int
    max_loadables: int
    pool_limits: dict[str, int]
    subnetworks: list[Subnetwork]
    gpu_after: list[str]                        # GPU-fallback layers after the last subnetwork
    precisions: dict[str, tuple[str, str]]      # report row -> (precision, why)

    def to_json(self) -> dict:
        return asdict(self)


def _refs(layer) -> list:
    refs = list(layer.inputs)
    if layer.sdp is not None:
        refs += [p.operand for p in layer.sdp.post_ops if p.operand is not None]
    return refs


def split(lowered) -> tuple[list[Subnetwork], list[list], list[str]]:
    """The subnetworks of a lowered network, the steps of each, and the trailing GPU layers."""
    subs: list[Subnetwork] = []
    steps_of: list[list] = []
    pending: list[str] = []
    current = None
    for step in lowered.steps:
        if step.gpu:
            pending += [layer.name for layer in step.layers if layer.name not in pending]
            current = None
            continue
        if current is None:
            current = Subnetwork(len(subs), [], pending)
            subs.append(current)
            steps_of.append([])
            pending = []
        steps_of[-1].append(step)
        current.layers += [layer.name for layer in step.layers if layer.name not in current.layers]
    return subs, steps_of, pending


def measure(lowered, subs: list[Subnetwork], steps_of: list[list]) -> None:
    """Each subnetwork's pool bytes (module doc)."""
    plan = lowered.plan
    outputs = {plan.root(name)[0] for name in plan.network.outputs}
    owner: dict[str, set[int]] = {}                 # root tensor -> subnetworks reading it
    written: dict[str, int] = {}
    gpu_read: set[str] = set()
    for step in lowered.steps:
        if step.gpu:
            for layer in step.layers:
                op = plan.network.op(layer.ops[0])
                gpu_read.update(plan.root(name)[0] for name in op.inputs)
    for i, steps in enumerate(steps_of):
        for step in steps:
            for layer in step.layers:
                for ref in _refs(layer):
                    owner.setdefault(ref.tensor, set()).add(i)
                if layer.output is not None:
                    written.setdefault(layer.output.tensor, i)
    base = DEFAULT_BASE[CVSRAM]
    for i, (sub, steps) in enumerate(zip(subs, steps_of)):
        placed = [p for step in steps for p in step.allocated]
        global_bytes = sum(p.size_bytes for p in placed if isinstance(p, Buffer))
        local = sum(p.size_bytes for p in placed if isinstance(p, TensorPlacement))
        sram_end = base
        for name, p in lowered.buffers.items():
            touched = written.get(name) == i or i in owner.get(name, ())
            if not touched:
                continue
            if p.space == CVSRAM:
                sram_end = max(sram_end, p.address + p.size_bytes)
            elif (p.space == DBB and written.get(name) == i and name not in outputs
                  and name not in gpu_read and owner.get(name, {i}) <= {i}):
                local += p.size_bytes
        sub.pools = {"managed_sram": sram_end - base, "local_dram": local,
                     "global_dram": global_bytes}


def deployment(lowered, target: DlaTarget, pools: dict[str, int],
               precisions: dict[str, tuple[str, str]], result=None) -> Deployment:
    """Subnetworks, their pools against `pools` and (with the run's `result`) their cycles; an
    error names the loadable count beyond 16 (pool overflows: `overflow`)."""
    subs, steps_of, trailing = split(lowered)
    if len(subs) > target.max_loadables:
        raise NvdlaSimError(
            f"{len(subs)} DLA subnetworks (loadables) on one core, at most "
            f"{target.max_loadables} [rule general.loadables]: the GPU-fallback layers split "
            f"the network {len(subs)} ways (subnetwork {target.max_loadables} starts after "
            f"'{subs[target.max_loadables].gpu_before[-1]}')")
    measure(lowered, subs, steps_of)
    dep = Deployment(target.name, target.cores, target.max_loadables, dict(pools), subs,
                     trailing, precisions)
    if result is not None:
        attach_cycles(dep, result)
    return dep


def overflow(dep: Deployment) -> tuple[Subnetwork, str, str] | None:
    """The first subnetwork above its local- or global-DRAM pool: (it, the pool, the message
    naming both), or None."""
    for sub in dep.subnetworks:
        for pool in ("local_dram", "global_dram"):
            if sub.pools[pool] > dep.pool_limits[pool]:
                return sub, pool, (f"{sub.name} needs {sub.pools[pool]} bytes of {pool}, "
                                   f"memory_pools.{pool} is {dep.pool_limits[pool]} "
                                   f"[rule pool.{pool}]")
    return None


def attach_cycles(dep: Deployment, result) -> None:
    timing = {t.name: t for t in result.layers}
    for sub in dep.subnetworks:
        ts = [timing[name] for name in sub.layers if name in timing]
        if ts:
            sub.cycles = max(t.end_cycle for t in ts) - min(t.start_cycle for t in ts)


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.4g} {unit}"
    return f"{n} B"


def _used(n: int, limit: int) -> str:
    return f"{_size(n)} ({100 * n / limit:.0f}%)"


def console_lines(dep: dict | None) -> list[str]:
    """The report's DLA deployment section (docs/dla-deployment.md explains every column)."""
    if not dep:
        return []
    limits = dep["pool_limits"]
    lines = [f"DLA deployment on {dep['target']}: {len(dep['subnetworks'])} subnetwork(s) "
             f"(at most {dep['max_loadables']} loadables per core); pools per subnetwork: "
             + ", ".join(f"{p} {_size(limits[p])}" for p in POOL_ORDER)]
    cols = f"{'subnet':<7} {'layers':>6} {'first..last':<40} " + " ".join(
        f"{p + ' used':>18}" for p in POOL_ORDER) + f" {'DLA cycles':>11}  GPU layers before"
    lines += [cols, "-" * len(cols)]
    for s in dep["subnetworks"]:
        span = f"{s['layers'][0]}..{s['layers'][-1]}"
        used = " ".join(f"{_used(s['pools'][p], limits[p]):>18}" for p in POOL_ORDER)
        cyc = "-" if s["cycles"] is None else f"{s['cycles']:.0f}"
        lines.append(f"{s['index']:<7} {len(s['layers']):>6} {span:<40} {used} {cyc:>11}  "
                     + (", ".join(s["gpu_before"]) or "-"))
    if dep["gpu_after"]:
        lines.append(f"GPU layers after the last subnetwork: {', '.join(dep['gpu_after'])}")
    groups: dict[tuple[str, str], list[str]] = {}
    for row, (p, why) in dep["precisions"].items():
        groups.setdefault((p, why), []).append(row)
    for (p, why), rows in groups.items():
        shown = ", ".join(rows[:8]) + (f" and {len(rows) - 8} more" if len(rows) > 8 else "")
        lines.append(f"precision {p}: {shown} ({why})")
    return lines
