"""Per-layer changeover table of a replay: each layer launch's compute cycles, the changeover
after it (interrupt -> the next layer's first OP_ENABLE) and what it consists of, with hardware
and end-to-end time side by side (`nvdla-sim replay`, console and `--json`).

The rows come from the engine's launches under a host profile (`host/changeover.layer_rows`);
the names from the program: the sync ids a launch arms, less their `_<SOURCE>_<group>` tail.
"""
from __future__ import annotations

from ..host.changeover import LayerRow, format_layer_rows, layer_rows
from ..program import IntrNotify, RegisterProgram, RegWrite, SyncWait


def launch_names(program: RegisterProgram) -> list[str]:
    """One name per launch, found as the engine finds launches under a host: a launch starts at
    the first OP_ENABLE after the host serviced a sync point it had not serviced before."""
    names: list[list[str]] = []
    serviced: set[str] = set()
    new_launch = True
    for cmd in program.commands:
        if isinstance(cmd, SyncWait) and cmd.sync_id not in serviced:
            serviced.add(cmd.sync_id)
            new_launch = True
        elif isinstance(cmd, RegWrite) and cmd.name.endswith("D_OP_ENABLE") and cmd.value & 1:
            if new_launch:
                names.append([])
                new_launch = False
        elif isinstance(cmd, IntrNotify) and names:
            names[-1].append(cmd.sync_id)
    return [_layer_of(ids) for ids in names]


def _layer_of(sync_ids: list[str]) -> str:
    """`conv1_SDP_0`, `conv1_PDP_0` -> `conv1`; ids of other forms are kept whole."""
    stems = []
    for sid in sync_ids:
        parts = sid.rsplit("_", 2)
        stem = parts[0] if len(parts) == 3 and parts[2].isdigit() else sid
        if stem not in stems:
            stems.append(stem)
    return "+".join(stems)


def changeover_rows(result) -> list[LayerRow]:
    return layer_rows(result.launches) if result is not None and result.launches else []


def changeover_json(rows: list[LayerRow], names: list[str], host: str | None) -> dict:
    """The table for `--json`: per layer compute and changeover cycles and the reason."""
    out = []
    for row in rows:
        name = names[row.index] if row.index < len(names) and names[row.index] else f"#{row.index}"
        out.append({"layer": name, "compute_cycles": row.compute_cycles,
                    "changeover_cycles": row.changeover_cycles,
                    "interrupt_seen_after_cycles": row.detect_cycles, "host_writes": row.writes,
                    "written_ahead": row.ahead_writes, "why": row.why})
    compute = sum(r.compute_cycles or 0.0 for r in rows)
    changeover = sum(r.changeover_cycles or 0.0 for r in rows)
    return {"host": host, "layers": out, "compute_cycles": compute,
            "changeover_cycles": changeover, "end_to_end_cycles": compute + changeover}


def format_changeover(rows: list[LayerRow], names: list[str], host: str | None,
                      clock_mhz: float) -> str:
    """The table, then hardware (compute) time and end-to-end time under the host."""
    shown = [n or f"#{i}" for i, n in enumerate(names)]
    doc = changeover_json(rows, names, host)
    us = 1.0 / clock_mhz
    return (format_layer_rows(rows, shown) + "\n"
            f"hardware {doc['compute_cycles']:.0f} cycles ({doc['compute_cycles'] * us:.3f} us) | "
            f"changeovers {doc['changeover_cycles']:.0f} | end to end "
            f"{doc['end_to_end_cycles']:.0f} cycles ({doc['end_to_end_cycles'] * us:.3f} us) on "
            f"host '{host}'")
