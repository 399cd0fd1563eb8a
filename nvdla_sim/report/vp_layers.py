"""Per hardware layer of a VP trace replay: cycles, bytes per memory client, what bounds it.

A VP trace says when its firmware waited (`until` on GLB interrupt bits), not which registers
make a layer, so a *layer* of this report is the stretch of the replay that ends where one
`until` is satisfied and begins where the previous one was (the first register write for the
first): the work whose interrupts the firmware waited for there, plus whatever else ran
meanwhile.  The stretches tile the run: their cycles and bytes add up to the totals.  Interrupts
raised after the last `until` make a last stretch.

What bounds a stretch: the resource that needs the most cycles in it -- the MAC array (CMAC_A
busy cycles), the memory (bytes moved at the interfaces' rates), the SDP / PDP / CDP / BDMA
(busy cycles) -- or "CSB" when no unit works for most of it (register programming and waits).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..engine.activity import ActivityLog

if TYPE_CHECKING:
    from ..engine import Engine, RunResult

CORES = {"CMAC_A": "MAC", "SDP": "SDP", "PDP": "PDP", "CDP": "CDP", "BDMA": "BDMA"}
# Units whose layer spans name what a stretch did (the DMAs run inside them).
LAYER_UNITS = ("BDMA", "CDMA", "CACC", "SDP", "PDP", "CDP")


@dataclass
class VpLayer:
    index: int
    until: str                  # input.txn:LINE of the `until`, or "end"
    interrupts: str             # what it waited for (SDP0 CDMA_DAT0 ...)
    start: float
    end: float
    units: list[str] = field(default_factory=list)    # units that finished a layer in it
    bytes: dict[str, dict[str, int]] = field(default_factory=dict)  # client -> read/write
    bound: str = ""

    @property
    def cycles(self) -> float:
        return self.end - self.start

    @property
    def read_bytes(self) -> int:
        return sum(v["read"] for v in self.bytes.values())

    @property
    def write_bytes(self) -> int:
        return sum(v["write"] for v in self.bytes.values())


def _merged(intervals: list[tuple[float, float]]) -> float:
    """Cycles the intervals cover, overlaps counted once (the activity log's own rule)."""
    log = ActivityLog()
    for s, e in intervals:
        log.add("", "", s, e)
    return log.totals().get("", {}).get("", 0.0)


def _clipped(spans, start: float, end: float, kind: str, units) -> dict[str, float]:
    """Per unit (of `units`, or every one), merged cycles of `kind` spans inside [start, end)."""
    log = ActivityLog()
    for unit, k, s, e, _ in spans:
        if k == kind and (units is None or unit in units):
            log.add(unit, k, max(s, start), min(e, end))
    return {u: kinds[kind] for u, kinds in log.totals().items()}


def _interface_cycles(memif, read: int, write: int) -> float:
    """Cycles the interface's data path needs for the bytes (a shared cap: read + write)."""
    if memif is None or not (read or write):
        return 0.0
    if memif.shared_bytes_per_cycle:
        return max((read + write) / memif.shared_bytes_per_cycle,
                   max(read, write) / memif.bus_bytes_per_cycle)
    return max(read, write) / memif.bus_bytes_per_cycle


def vp_layers(result: "RunResult") -> list[VpLayer]:
    """The stretches of a VP replay (see the module doc)."""
    engine: Engine = result.engine
    spans = engine.activity.spans
    start = result.first_write or 0.0
    last_intr = engine.glb.raised[-1][0] if engine.glb.raised else start
    bounds = [(f"{Path(u.where.file).name}:{u.where.line}" if u.where else "until",
               engine.glb.describe_bits(u.bits), u.satisfied) for u in result.untils]
    if not bounds or last_intr > bounds[-1][2]:
        bounds.append(("end", "-", last_intr))
    memifs = [m for m in (engine.mcif, engine.cvif) if m]
    layers = []
    for index, (where, interrupts, end) in enumerate(bounds):
        end = max(end, start)
        layer = VpLayer(index, where, interrupts, start, end)
        for unit, kind, s, e, _ in spans:
            if kind == "layer" and unit in LAYER_UNITS and start < e <= end \
                    and unit not in layer.units:
                layer.units.append(unit)
        cand = {}
        for memif in memifs:
            read = write = 0
            for t0, _, client, direction, nbytes in memif.transfers:
                if start <= t0 < end or (index == len(bounds) - 1 and t0 >= end):
                    key = client if memif is engine.mcif else f"{client}@{memif.name}"
                    per = layer.bytes.setdefault(key, {"read": 0, "write": 0})
                    per[direction] += nbytes
                    read += nbytes if direction == "read" else 0
                    write += nbytes if direction == "write" else 0
            cand["memory"] = max(cand.get("memory", 0.0), _interface_cycles(memif, read, write))
        for unit, busy in _clipped(spans, start, end, "busy", CORES).items():
            cand[CORES[unit]] = busy
        working = _merged([(max(s, start), min(e, end)) for _, k, s, e, _ in spans
                           if k == "layer" and min(e, end) > max(s, start)])
        best = max(cand, key=cand.get) if cand else None
        if best is None or working < 0.5 * layer.cycles:
            layer.bound = "CSB"
        else:
            layer.bound = best
        layers.append(layer)
        start = end
    return layers


def _kib(n: int) -> str:
    return f"{n / 1024:.1f}K" if n else "-"


def format_vp_layers(layers: list[VpLayer], clock_mhz: float, host_reads: int = 0) -> str:
    """One row per stretch plus the total (cycles and microseconds at the clock) and the host
    CSB traffic it leaves out (`host_reads` firmware reads, one acknowledge per `until`)."""
    rows = [f"{'#':>3} {'until':<16} {'interrupts':<28} {'units':<22} {'cycles':>10} "
            f"{'read':>9} {'write':>9} {'bound':<6} clients (KiB read/write)"]
    for layer in layers:
        clients = ", ".join(
            f"{c} {_kib(v['read'])}/{_kib(v['write'])}" for c, v in sorted(layer.bytes.items()))
        rows.append(f"{layer.index:>3} {layer.until:<16} {layer.interrupts[:28]:<28} "
                    f"{' '.join(layer.units)[:22]:<22} {layer.cycles:>10.0f} "
                    f"{_kib(layer.read_bytes):>9} {_kib(layer.write_bytes):>9} "
                    f"{layer.bound:<6} {clients}")
    total = sum(layer.cycles for layer in layers)
    rows.append(f"total: {total:.0f} cycles from the first register write to the last interrupt "
                f"= {total / clock_mhz:.1f} us at {clock_mhz:g} MHz; "
                f"{sum(x.read_bytes for x in layers):,} bytes read, "
                f"{sum(x.write_bytes for x in layers):,} written")
    untils = sum(x.until != "end" for x in layers)
    rows.append(f"host time not in the total: {host_reads} firmware register reads, {untils} "
                f"interrupt waits and their acknowledges (register writes are in it)")
    return "\n".join(rows)


def vp_layers_json(layers: list[VpLayer]) -> list[dict]:
    return [{"index": x.index, "until": x.until, "interrupts": x.interrupts, "units": x.units,
             "start": x.start, "end": x.end, "cycles": x.cycles, "bytes": x.bytes,
             "bound": x.bound} for x in layers]
