"""Memory interfaces (MCIF for DBB, CVIF for CVSRAM): request rate, latency, beats, bandwidth.

A DMA hands the interface a *transfer token* — a number of bytes it requests back to back (a line,
a stripe of atoms, a weight block) — not one event per beat: the interface reserves its request
port and data bus analytically and answers when the last beat has arrived.  Requests from several
clients are served in the order they arrive.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

import simpy
import yaml

from ..errors import NvdlaSimError

PROFILE_DIR = Path(__file__).resolve().parent.parent / "memory_profiles"


@dataclass(frozen=True)
class MemoryProfile:
    name: str
    read_request_interval_cycles: float
    write_request_interval_cycles: float
    read_latency_cycles: float
    write_latency_cycles: float
    max_burst_beats: int
    max_outstanding_reads: int | None = None
    bandwidth_gbps: float | None = None

    def bytes_per_cycle_cap(self, clock_mhz: float) -> float | None:
        """The GB/s cap in bytes per core cycle (None = uncapped)."""
        if not self.bandwidth_gbps:
            return None
        return self.bandwidth_gbps * 1e9 / (clock_mhz * 1e6)


def profile_names() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))


def load_memory_profile(spec: str | Path | dict) -> MemoryProfile:
    """A profile name, a YAML path, or a mapping (optionally `profile: NAME` plus overrides)."""
    where = ""
    if isinstance(spec, dict):
        data = dict(spec)
    else:
        path = Path(spec)
        if str(spec).endswith((".yaml", ".yml")):
            where = f"{path}: "
        elif str(spec) in profile_names():
            path = PROFILE_DIR / f"{spec}.yaml"
        else:
            raise NvdlaSimError(f"unknown memory profile '{spec}' (known: {', '.join(profile_names())})")
        try:
            data = yaml.safe_load(path.read_text())
        except FileNotFoundError:
            raise NvdlaSimError(f"{path}: file not found") from None
        except yaml.YAMLError as exc:
            raise NvdlaSimError(f"{path}: malformed YAML ({exc})") from None
        if not isinstance(data, dict):
            raise NvdlaSimError(f"{path}: expected a mapping of profile fields")
    if "profile" in data:
        base = load_memory_profile(data.pop("profile"))
        data = {**{f.name: getattr(base, f.name) for f in fields(base)}, **data}
    known = {f.name for f in fields(MemoryProfile)}
    for key in data:
        if key not in known:
            raise NvdlaSimError(f"{where}unknown memory profile field '{key}'")
    for key in ("read_request_interval_cycles", "write_request_interval_cycles", "max_burst_beats"):
        v = data.get(key)
        if not isinstance(v, (int, float)) or isinstance(v, bool) or v <= 0:
            raise NvdlaSimError(f"{where}{key}: must be > 0, got {v!r}")
    for key in ("read_latency_cycles", "write_latency_cycles"):
        v = data.get(key)
        if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0:
            raise NvdlaSimError(f"{where}{key}: must be >= 0, got {v!r}")
    for key in ("max_outstanding_reads", "bandwidth_gbps"):
        v = data.get(key)
        if v is not None and (not isinstance(v, (int, float)) or isinstance(v, bool) or v <= 0):
            raise NvdlaSimError(f"{where}{key}: must be > 0 or null, got {v!r}")
    data.setdefault("name", "custom")
    return MemoryProfile(**data)


class MemoryInterface:
    """One memory interface: a read path and a write path, each a request port plus a data bus."""

    def __init__(self, env: simpy.Environment, name: str, profile: MemoryProfile, width_bytes: int,
                 clock_mhz: float = 1000.0):
        self.env = env
        self.name = name
        self.profile = profile
        self.width_bytes = width_bytes
        cap = profile.bytes_per_cycle_cap(clock_mhz)
        # Bytes per cycle the data bus can carry: the wider of nothing and the cap.
        self.bus_bytes_per_cycle = min(width_bytes, cap) if cap else width_bytes
        self._port_free = {"read": 0.0, "write": 0.0}
        self._bus_free = {"read": 0.0, "write": 0.0}
        self.bytes_by_client: dict[str, dict[str, int]] = {}
        self.transfers: list[tuple[float, float, str, str, int]] = []   # start, end, client, dir, bytes

    def requests(self, nbytes: int) -> int:
        burst_bytes = self.width_bytes * self.profile.max_burst_beats
        return max(1, -(-nbytes // burst_bytes))

    def reserve(self, client: str, direction: str, nbytes: int, outstanding: int | None = None) -> float:
        """Book a transfer of `nbytes` starting now; return the cycle its last beat completes.

        `outstanding` is the client's own limit on reads in flight: with latency L it caps the
        request rate at outstanding / L requests per cycle."""
        p = self.profile
        now = self.env.now
        n_req = self.requests(nbytes)
        if direction == "read":
            interval, latency = p.read_request_interval_cycles, p.read_latency_cycles
            limits = [o for o in (outstanding, p.max_outstanding_reads) if o]
            if limits and latency > 0:
                interval = max(interval, latency / min(limits))
        else:
            interval, latency = p.write_request_interval_cycles, p.write_latency_cycles
        start = max(now, self._port_free[direction])
        last_request = start + (n_req - 1) * interval
        self._port_free[direction] = last_request + interval
        beats_cycles = nbytes / self.bus_bytes_per_cycle
        data_start = max(start + latency, self._bus_free[direction])
        done = max(last_request + latency + 1, data_start + beats_cycles)
        self._bus_free[direction] = data_start + beats_cycles
        per = self.bytes_by_client.setdefault(client, {"read": 0, "write": 0})
        per[direction] += nbytes
        self.transfers.append((start, done, client, direction, nbytes))
        return done

    def transfer(self, client: str, direction: str, nbytes: int, outstanding: int | None = None):
        """Generator: wait until a transfer of `nbytes` has completed."""
        done = self.reserve(client, direction, nbytes, outstanding)
        if done > self.env.now:
            yield self.env.timeout(done - self.env.now)
