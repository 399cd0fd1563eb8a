"""Hardware time and end-to-end time side by side.

`nvdla-sim run` measures the accelerator (first OP_ENABLE to the last interrupt, the next layer's
registers written as fast as the CSB takes them).  A deployment also waits for its host: the
interrupt reaching the driver, the driver's work per layer, the CPU's register writes.  `estimate`
adds them to the run's per-step cycles with the same rules the engine applies when it runs with a
host profile (`Engine(..., host=...)`, docs/network-timing.md): the interrupt is seen after the
profile's latency (a poll loop: on average half a round plus the response), each awaited interrupt
is cleared with one write, the driver's per-layer cost follows, and the next layer's programming
writes go at max(CSB request FIFO rate, CPU write cost) -- hidden behind the running layer when the
driver programs ahead into the idle register group.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import NvdlaSimError
from ..program import IntrNotify, RegWrite
from .profile import HostProfile, load_host_profile

DEFAULT_HOST = "embedded_linux"


@dataclass
class StepCost:
    """One DLA step of a compiled network: its cycles in the hardware run and its writes."""
    cycles: float                   # the step in the hardware run (its programming included)
    program_writes: int             # register writes before its first OP_ENABLE
    enable_writes: int              # writes from its first OP_ENABLE on
    interrupts: int                 # interrupts the host waits for
    program_cycles: float           # what the programming writes took in the hardware run

    @property
    def compute_cycles(self) -> float:
        return max(0.0, self.cycles - self.program_cycles)


@dataclass
class EndToEnd:
    host: str
    clock_mhz: float
    hardware_cycles: float
    end_to_end_cycles: float
    changeover_cycles: list[float] = field(default_factory=list)   # after each step but the last

    def line(self) -> str:
        hw_ms = self.hardware_cycles / (self.clock_mhz * 1e3)
        e2e_ms = self.end_to_end_cycles / (self.clock_mhz * 1e3)
        mean = sum(self.changeover_cycles) / len(self.changeover_cycles) if self.changeover_cycles else 0
        return (f"hardware {hw_ms:.3f} ms | end to end {e2e_ms:.3f} ms on host '{self.host}' "
                f"({self.end_to_end_cycles / max(self.hardware_cycles, 1):.2f}x; "
                f"{len(self.changeover_cycles)} changeovers, mean {mean:.0f} cycles; "
                "docs/network-timing.md)")


def step_costs(program, steps, cycles: list[float], params) -> list[StepCost]:
    """Writes, interrupts and calibrated programming time of each DLA step of a lowered program."""
    csb = params.csb
    out = []
    for step, c in zip(steps, cycles):
        prog = en = intr = 0
        prog_cycles = 0.0
        for cmd in program.commands[step.first_command:step.end_command]:
            if isinstance(cmd, IntrNotify):
                intr += 1
            elif isinstance(cmd, RegWrite):
                if en or (cmd.name.endswith("D_OP_ENABLE") and cmd.value & 1):
                    en += 1
                else:
                    prog += 1
                    block = cmd.name.split(".", 1)[0]
                    prog_cycles += (csb.slow_write_interval_cycles if block in csb.slow_blocks
                                    else csb.write_interval_cycles)
        out.append(StepCost(c, prog, en, max(1, intr), prog_cycles))
    return out


def estimate(costs: list[StepCost], host: HostProfile, params, clock_mhz: float,
             hardware_cycles: float) -> EndToEnd:
    csb = params.csb
    cpu = host.cycles("register_write", clock_mhz)
    write = max(csb.program_fifo_round_trip_cycles / csb.program_fifo_depth, cpu)
    enable = max(csb.write_interval_cycles, cpu)
    if host.interrupt == "poll":
        latency = host.cycles("poll_response", clock_mhz) + host.cycles("poll_period", clock_mhz) / 2
        reads = 0.0
    else:       # the handler reads S_INTR_MASK and S_INTR_STATUS
        latency = host.cycles("interrupt_latency", clock_mhz)
        reads = 2 * host.cycles("register_read", clock_mhz)
    driver = host.cycles("driver_per_layer", clock_mhz)
    total, changeovers = 0.0, []
    for i, step in enumerate(costs):
        programming = step.program_writes * write
        if i == 0:
            total += programming
        else:
            prev = costs[i - 1]
            if host.program_ahead:
                # written while the previous layer ran; a CPU still writing takes the interrupt late
                busy = max(0.0, programming - prev.compute_cycles)
                gap = max(latency, busy) + reads + prev.interrupts * write + driver
            else:
                gap = latency + reads + prev.interrupts * write + driver + programming
            changeovers.append(gap)
            total += gap
        total += step.enable_writes * enable + step.compute_cycles
    if costs:
        # the host learns that the network is done
        total += latency + reads + costs[-1].interrupts * write + driver
    return EndToEnd(host.name, clock_mhz, hardware_cycles, total, changeovers)


def attach_host(rep, prep, result, host: str | HostProfile | None = None) -> None:
    """Set `rep.end_to_end` (an EndToEnd) for a timed run; the host profile is the scenario's
    `host` if it has one, else `embedded_linux`."""
    rep.end_to_end = None
    if result is None or not getattr(result, "layers", None) or not rep.total_cycles:
        return
    from ..compiler.lower import lower
    from ..scenario.runner import context
    from ..timing.params import TimingParams
    try:
        profile = load_host_profile(host or getattr(prep.scenario, "host", None) or DEFAULT_HOST)
        ctx = context(prep)
        # the run keeps the program it executed (its memory loads are not counted below)
        lowered = getattr(result, "timing_program", None) or lower(prep.plan, ctx, images=False)
    except NvdlaSimError:
        raise
    steps = [s for s in lowered.steps if not s.gpu]
    spans, seen = [], set()
    for t in result.layers:
        key = (t.start_cycle, t.end_cycle)
        if t.register_writes and key not in seen:
            seen.add(key)
            spans.append(t.cycles)
    if len(spans) != len(steps):
        return                      # the run does not map onto the program's steps
    params = TimingParams(ctx.hw)
    rep.end_to_end = estimate(step_costs(lowered.program, steps, spans, params), profile, params,
                              rep.clock_mhz, rep.total_cycles)


def host_lines(rep) -> list[str]:
    e2e = getattr(rep, "end_to_end", None)
    return [e2e.line()] if e2e is not None else []
