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
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..engine.activity import merged_columns, merged_length

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
    start = result.first_write or 0.0
    last_intr = engine.glb.raised[-1][0] if engine.glb.raised else start
    bounds = [(f"{Path(u.where.file).name}:{u.where.line}" if u.where else "until",
               engine.glb.describe_bits(u.bits), u.satisfied) for u in result.untils]
    if not bounds or last_intr > bounds[-1][2]:
        bounds.append(("end", "-", last_intr))
    memifs = [_Transfers(m, m is engine.mcif) for m in (engine.mcif, engine.cvif) if m]
    # the spans as columns once; each stretch selects from them (a run makes 100 k+ spans)
    cols = engine.activity.columns()
    layer_spans = cols.of("layer")
    finishing = cols.of("layer", LAYER_UNITS)
    layers = []
    for index, (where, interrupts, end) in enumerate(bounds):
        end = max(end, start)
        last = index == len(bounds) - 1
        layer = VpLayer(index, where, interrupts, start, end)
        ends = cols.ends[finishing]
        done = finishing[(start < ends) & (ends <= end)]
        for code in dict.fromkeys(cols.key_idx[done].tolist()):
            unit = cols.keys[code][0]
            if unit not in layer.units:
                layer.units.append(unit)
        cand = {}
        for memif in memifs:
            read, write = memif.add_bytes(layer.bytes, start, end, last)
            cand["memory"] = max(cand.get("memory", 0.0),
                                 _interface_cycles(memif.memif, read, write))
        for unit, kinds in merged_columns(cols, "busy", CORES, (start, end)).items():
            cand[CORES[unit]] = kinds["busy"]
        s, e = np.maximum(cols.starts[layer_spans], start), np.minimum(cols.ends[layer_spans], end)
        working = merged_length(s[e > s], e[e > s])
        best = max(cand, key=cand.get) if cand else None
        if best is None or working < 0.5 * layer.cycles:
            layer.bound = "CSB"
        else:
            layer.bound = best
        layers.append(layer)
        start = end
    return layers


class _Transfers:
    """A memory interface's transfer records as columns: start cycle, client, direction, bytes."""

    def __init__(self, memif, main: bool):
        self.memif = memif
        records = memif.transfers
        n = len(records)
        self.starts = np.fromiter(map(itemgetter(0), records), np.float64, n)
        names = {}
        self.client = np.fromiter((names.setdefault(r[2], len(names)) for r in records),
                                  np.intp, n)
        self.names = [c if main else f"{c}@{memif.name}" for c in names]
        self.write = np.fromiter((r[3] == "write" for r in records), bool, n)
        self.nbytes = np.fromiter(map(itemgetter(4), records), np.int64, n)

    def add_bytes(self, per_client: dict, start: float, end: float, last: bool) -> tuple[int, int]:
        """Add the bytes of the transfers that start in [start, end) (the last stretch: from
        `start` on) to `per_client` (clients in the order of their first transfer); returns the
        bytes read and written."""
        inside = self.starts >= start
        if not last:
            inside &= self.starts < end
        sel = np.flatnonzero(inside)
        client, write, nbytes = self.client[sel], self.write[sel], self.nbytes[sel]
        read_total = write_total = 0
        for code in dict.fromkeys(client.tolist()):
            mine = client == code
            per = per_client.setdefault(self.names[code], {"read": 0, "write": 0})
            r, w = int(nbytes[mine & ~write].sum()), int(nbytes[mine & write].sum())
            per["read"] += r
            per["write"] += w
            read_total += r
            write_total += w
        return read_total, write_total


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
