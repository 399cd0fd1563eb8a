"""Layer changeover: the host's work between one layer's interrupt and the next layer's first
OP_ENABLE, per layer beside its compute cycles; and the program-ahead schedule (ping-pong register
groups) a driver uses.

The engine records one `Launch` per layer launch when it runs with a host profile
(`Engine(..., host=...)`); `layer_rows` turns them into rows with the reason of each changeover.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..program import RegisterProgram, RegWrite, SyncWait


def program_ahead(program: RegisterProgram) -> RegisterProgram:
    """The program as a driver with ping-pong register groups runs it: each layer's programming
    writes (everything but D_OP_ENABLE) move before the sync_waits on the previous layer, so they
    go into the idle register group while that layer runs; only the OP_ENABLEs wait for the
    interrupt.  Safe because every unit alternates its two groups: the group being written was
    last used by a layer the host has already waited for."""
    out: list = []
    waits: list = []                # sync_waits held back while the next layer's writes move up
    for cmd in program.commands:
        if isinstance(cmd, SyncWait):
            waits.append(cmd)
        elif waits and isinstance(cmd, RegWrite) and not (cmd.name.endswith("D_OP_ENABLE")
                                                          and cmd.value & 1):
            out.append(cmd)
        elif waits and isinstance(cmd, RegWrite):
            out.extend(waits)
            waits = []
            out.append(cmd)
        else:
            out.append(cmd)
    out.extend(waits)
    return RegisterProgram(program.name, out, getattr(program, "source", None))


@dataclass
class LayerRow:
    index: int
    compute_cycles: float | None
    changeover_cycles: float | None
    detect_cycles: float | None     # interrupt -> the host saw it
    writes: int                     # host writes in the changeover (clears + registers)
    ahead_writes: int               # writes of this layer issued while the previous one ran
    why: str


def layer_rows(launches) -> list[LayerRow]:
    """One row per launch: compute cycles (first OP_ENABLE -> last awaited interrupt) and the
    changeover after it, with what it consists of."""
    rows = []
    for i, launch in enumerate(launches):
        detect = None if launch.detected is None or launch.interrupt is None \
            else launch.detected - launch.interrupt
        gap = launch.changeover_cycles
        nxt = launches[i + 1] if i + 1 < len(launches) else None
        if gap is None:
            why = "last layer"
        else:
            parts = [f"host saw the interrupt after {detect:.0f}" if detect is not None else
                     "interrupt wait",
                     f"{launch.interrupts} status clear{'s' if launch.interrupts != 1 else ''}",
                     f"{launch.writes - launch.interrupts} register writes"]
            if nxt is not None and nxt.ahead_writes:
                parts.append(f"{nxt.ahead_writes} written ahead in the idle group")
            why = ", ".join(parts)
        rows.append(LayerRow(i, launch.compute_cycles, gap, detect, launch.writes,
                             launch.ahead_writes, why))
    return rows


def format_layer_rows(rows: list[LayerRow], names: list[str] | None = None) -> str:
    lines = [f"{'layer':<12} {'compute':>10} {'changeover':>10}  why"]
    for row in rows:
        name = names[row.index] if names and row.index < len(names) else f"#{row.index}"
        comp = f"{row.compute_cycles:.0f}" if row.compute_cycles is not None else "-"
        gap = f"{row.changeover_cycles:.0f}" if row.changeover_cycles is not None else "-"
        lines.append(f"{name:<12} {comp:>10} {gap:>10}  {row.why}")
    return "\n".join(lines)
