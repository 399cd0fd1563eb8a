"""TimingModel: the engine's timing state — parameters, token channels, buffer pools, trackers.

Units call the per-unit timing modules (`timing/sdp.py`, `pdp.py`, `cdp.py`, `conv.py`) from their
`execute` after the values are computed; those spawn SimPy processes that meet here by channel and
pool name.  Channel names use the hardware's arrows ("pdp_rdma->pdp"); they are separate from the
engine's payload channels, which carry whole cubes.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import simpy

from .params import TimingParams
from .tokens import Channel, Pool, Seg, Tracker

if TYPE_CHECKING:
    from ..engine import Engine


class TimingModel:
    def __init__(self, engine: "Engine", overrides: dict | None = None):
        self.engine = engine
        self.env: simpy.Environment = engine.env
        self.params = TimingParams(engine.hw, overrides)
        self._channels: dict[str, Channel] = {}
        self._pools: dict[str, Pool] = {}
        self._cbuf_pools: list[Pool] = []
        self._trackers: dict[str, Tracker] = {}
        self._layers: dict[tuple[str, int], dict[str, Any]] = {}
        self.cbuf_peak_entries = 0.0
        self.retained = {"data": 0.0, "weight": 0.0}    # CBUF entries kept for the next layer
        self._announced: dict[str, int] = {}

    def channel(self, name: str, capacity: float | None = None) -> Channel:
        ch = self._channels.get(name)
        if ch is None:
            ch = self._channels[name] = Channel(self.env, name, capacity)
        return ch

    def announce(self, name: str) -> None:
        """A producer will stream one layer's tokens on channel `name` (call before handing the
        consumer its payload)."""
        self._announced[name] = self._announced.get(name, 0) + 1

    def stream(self, name: str, capacity: float | None, fallback: Callable[[], list[Seg]]) -> Channel:
        """The consumer's input channel for one layer.  When no timing producer announced it (a
        payload handed over from outside the timing model, as unit tests do), the tokens of
        `fallback()` stand in: everything available now."""
        if self._announced.get(name):
            self._announced[name] -= 1
            return self.channel(name, capacity)
        local = Channel(self.env, f"{name} (no producer)")
        for seg in fallback():
            local.put(seg)
        return local

    def claim(self, name: str) -> bool:
        """Whether a producer announced a layer's tokens on channel `name` (taking the
        announcement); for streams a consumer reads only when they exist."""
        if self._announced.get(name):
            self._announced[name] -= 1
            return True
        return False

    def pool(self, name: str, capacity: float) -> Pool:
        pool = self._pools.get(name)
        if pool is None:
            pool = self._pools[name] = Pool(self.env, name, capacity)
            self._cbuf_pools = [p for n, p in self._pools.items() if n.startswith("CBUF")]
        return pool

    def tracker(self, unit: str) -> Tracker:
        t = self._trackers.get(unit)
        if t is None:
            t = self._trackers[unit] = Tracker(self.engine.activity, unit)
        return t

    def layer(self, kind: str, index: int) -> dict[str, Any]:
        """State shared by the units of one hardware layer (events, geometry), by layer index."""
        key = (kind, index)
        state = self._layers.get(key)
        if state is None:
            state = self._layers[key] = {"done": self.env.event()}
        return state

    def note_cbuf(self) -> None:
        # the CBUF pools in creation order, kept by pool(), summed left to right from 0 as sum()
        # does (one call per CDMA request: no list, no max(); the same value)
        used = 0
        for p in self._cbuf_pools:
            used += p.capacity - p.free
        if used > self.cbuf_peak_entries:
            self.cbuf_peak_entries = used

    def finish(self) -> None:
        for t in self._trackers.values():
            t.flush()

    # -- reporting -----------------------------------------------------------------------------
    def cbuf_summary(self) -> dict[str, float]:
        r = self.params.rates
        total = r.cbuf_banks * r.cbuf_bank_entries
        peaks = {name: p.peak for name, p in self._pools.items() if name.startswith("CBUF")}
        return {"peak_entries": self.cbuf_peak_entries,
                "peak_bytes": self.cbuf_peak_entries * r.cbuf_entry_bytes,
                "capacity_entries": total,
                "peak_fraction": self.cbuf_peak_entries / total if total else 0.0,
                **{f"{k} peak": v for k, v in peaks.items()}}
