"""Host profiles: what the processor driving the NVDLA spends around the accelerator's own time.

A profile is a YAML file (`nvdla_sim/host/profiles/<name>.yaml`, or any path) with these fields;
every time can be given in DLA core cycles (`<field>_cycles`) or nanoseconds (`<field>_ns`), not
both, and omitted times are 0:

    name:                  a label
    interrupt:             poll | irq -- how the host learns that a layer finished
    poll_period            poll: one round of the host's poll loop (mask read + status read)
    poll_response          poll: status sampled in the GLB -> the read data at the host
    interrupt_latency      irq: interrupt line -> the handler runs
    driver_per_layer       the kernel-mode driver's work per finished layer (ISR bottom half,
                           dependency bookkeeping, choosing the next operation)
    register_write         one register write issued by the CPU (the CSB's own rate, params.yaml
                           `csb.program_*`, is the floor)
    register_read          one register read by the CPU (status reads of an irq handler)
    program_ahead:         true: the driver programs the next layer into the idle register group
                           while the current layer runs (ping-pong), and only clears the status and
                           writes OP_ENABLEs after the interrupt; false: it writes the whole next
                           layer after the interrupt (the trace testbench)
    memory:                the memory profile of the platform (nvdla_sim/memory_profiles)
    sources:               mapping field -> where the number comes from (required for each time)

Bad values are one-line `NvdlaSimError`s naming the file and the field.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..errors import NvdlaSimError
from ..yaml_file import read_profile

PROFILE_DIR = Path(__file__).resolve().parent / "profiles"
TIMES = ("poll_period", "poll_response", "interrupt_latency", "driver_per_layer",
         "register_write", "register_read")
MODES = ("poll", "irq")
OTHER_FIELDS = ("name", "interrupt", "program_ahead", "memory", "sources", "description")


@dataclass(frozen=True)
class HostTime:
    """A time given in core cycles or in nanoseconds."""
    value: float = 0.0
    unit: str = "cycles"            # "cycles" or "ns"

    def cycles(self, clock_mhz: float) -> float:
        return self.value if self.unit == "cycles" else self.value * clock_mhz / 1000.0


@dataclass(frozen=True)
class HostProfile:
    name: str
    interrupt: str = "poll"
    times: dict[str, HostTime] = field(default_factory=dict)
    program_ahead: bool = False
    memory: str | None = None
    sources: dict[str, str] = field(default_factory=dict)
    description: str = ""

    def cycles(self, what: str, clock_mhz: float) -> float:
        """A time of the profile (one of TIMES) in core cycles at `clock_mhz`."""
        return self.times.get(what, HostTime()).cycles(clock_mhz)


def profile_names() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))


def load_host_profile(spec: "str | Path | dict | HostProfile") -> HostProfile:
    """A profile name, a YAML path or a mapping (optionally `profile: NAME` plus overrides)."""
    if isinstance(spec, HostProfile):
        return spec
    data, where = read_profile(spec, PROFILE_DIR, "host profile")
    if "profile" in data:
        base = _raw(load_host_profile(data.pop("profile")))
        for key in list(base):          # an override in one unit replaces the base's other unit
            stem = key.rsplit("_", 1)[0]
            if key != f"{stem}_cycles" and key != f"{stem}_ns":
                continue
            if any(k in data for k in (f"{stem}_cycles", f"{stem}_ns")):
                del base[key]
        data = {**base, **data}
    return _validate(data, where)


def _raw(p: HostProfile) -> dict:
    out = {"name": p.name, "interrupt": p.interrupt, "program_ahead": p.program_ahead,
           "memory": p.memory, "sources": dict(p.sources), "description": p.description}
    for key, t in p.times.items():
        out[f"{key}_{t.unit}"] = t.value
    return out


def _validate(data: dict, where: str) -> HostProfile:
    times: dict[str, HostTime] = {}
    for key, value in data.items():
        if key in OTHER_FIELDS:
            continue
        stem, _, unit = key.rpartition("_")
        if stem not in TIMES or unit not in ("cycles", "ns"):
            raise NvdlaSimError(f"{where}unknown host profile field '{key}' (times: "
                                f"{', '.join(t + '_cycles|_ns' for t in TIMES)}; also "
                                f"{', '.join(OTHER_FIELDS)})")
        if stem in times:
            raise NvdlaSimError(f"{where}{stem}: given both in cycles and in ns")
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
            raise NvdlaSimError(f"{where}{key}: must be a number >= 0, got {value!r}")
        times[stem] = HostTime(float(value), unit)
    mode = data.get("interrupt", "poll")
    if mode not in MODES:
        raise NvdlaSimError(f"{where}interrupt: must be one of {', '.join(MODES)}, got {mode!r}")
    if mode == "poll" and times.get("poll_period", HostTime()).value <= 0:
        raise NvdlaSimError(f"{where}poll_period: a polling host needs poll_period_cycles or "
                            "poll_period_ns > 0")
    ahead = data.get("program_ahead", False)
    if not isinstance(ahead, bool):
        raise NvdlaSimError(f"{where}program_ahead: must be true or false, got {ahead!r}")
    memory = data.get("memory")
    if memory is not None:
        from ..engine.memif import load_memory_profile
        try:
            load_memory_profile(memory)
        except NvdlaSimError as exc:
            raise NvdlaSimError(f"{where}memory: {exc}") from None
    sources = data.get("sources") or {}
    if not isinstance(sources, dict):
        raise NvdlaSimError(f"{where}sources: expected a mapping field -> source")
    for key, value in sources.items():
        if key not in TIMES and key not in ("interrupt", "program_ahead", "memory"):
            raise NvdlaSimError(f"{where}sources: '{key}' is not a profile field")
        if not isinstance(value, str) or not value.strip():
            raise NvdlaSimError(f"{where}sources.{key}: must be a non-empty text")
    name = data.get("name", "custom")
    if not isinstance(name, str):
        raise NvdlaSimError(f"{where}name: must be a text, got {name!r}")
    return HostProfile(name, mode, times, ahead, memory, dict(sources),
                       str(data.get("description", "")))
