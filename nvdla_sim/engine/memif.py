"""Memory interfaces (MCIF for DBB, CVIF for CVSRAM): request rate, latency, beats, bandwidth.

A DMA hands the interface a *transfer token* — a DMA request of one or more AXI requests (a CDMA
request of up to 8 atoms, a run of line atoms, a burst of output) — not one event per beat: the
interface books its request port and data bus analytically and returns a `Transfer` with the times
the port is free again and the first and last data beats.  A client that waits until
`port_free` before booking its next token shares the port request by request with the other
clients, which is the MCIF's round robin with equal weights.  Outstanding-read limits (the
client's, the MCIF's and the memory's) cap the request rate at outstanding / round-trip.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

import simpy

from ..errors import NvdlaSimError
from ..kernels.booking import reserve
from ..kernels.read_run import read_run
from ..yaml_file import read_profile

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
    # The cap is shared by reads and writes (a DRAM has one data bus; the NVDLA performance
    # estimator's "10 GB/s" is read + write); False: each direction gets the whole cap.
    shared_bandwidth: bool = True
    # DRAM costs stated as parameters (0: none; read_latency_cycles is then a row hit):
    # a fraction of requests finds its row closed and pays row_miss_cycles more (tRP + tRCD), and
    # every refresh_interval_cycles (tREFI) the device is busy for refresh_cycles (tRFC).
    row_miss_fraction: float = 0.0
    row_miss_cycles: float = 0.0
    refresh_interval_cycles: float = 0.0
    refresh_cycles: float = 0.0
    host: str | None = None     # the host profile of the same platform (nvdla_sim/host/profiles)

    def effective_read_latency(self) -> float:
        """Mean read latency: the row-hit latency, the expected row-miss cost and the mean wait of
        a request that arrives during a refresh."""
        return (self.read_latency_cycles + self.row_miss_fraction * self.row_miss_cycles
                + self.refresh_busy_fraction() * self.refresh_cycles / 2)

    def refresh_busy_fraction(self) -> float:
        if not self.refresh_interval_cycles:
            return 0.0
        return min(1.0, self.refresh_cycles / self.refresh_interval_cycles)

    def bytes_per_cycle_cap(self, clock_mhz: float) -> float | None:
        """The GB/s cap in bytes per core cycle (None = uncapped)."""
        if not self.bandwidth_gbps:
            return None
        # refresh takes the device off the bus for tRFC of every tREFI
        return self.bandwidth_gbps * 1e9 / (clock_mhz * 1e6) * (1 - self.refresh_busy_fraction())


def profile_names() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))


def load_memory_profile(spec: str | Path | dict) -> MemoryProfile:
    """A profile name, a YAML path, or a mapping (optionally `profile: NAME` plus overrides)."""
    data, where = read_profile(spec, PROFILE_DIR, "memory profile")
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
    if not isinstance(data.get("shared_bandwidth", True), bool):
        raise NvdlaSimError(f"{where}shared_bandwidth: must be true or false, got "
                            f"{data['shared_bandwidth']!r}")
    for key in ("row_miss_cycles", "refresh_interval_cycles", "refresh_cycles"):
        v = data.get(key, 0.0)
        if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0:
            raise NvdlaSimError(f"{where}{key}: must be >= 0, got {v!r}")
    v = data.get("row_miss_fraction", 0.0)
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not 0 <= v <= 1:
        raise NvdlaSimError(f"{where}row_miss_fraction: must be between 0 and 1, got {v!r}")
    if data.get("refresh_cycles") and not data.get("refresh_interval_cycles"):
        raise NvdlaSimError(f"{where}refresh_cycles: needs refresh_interval_cycles (tREFI) too")
    if data.get("refresh_interval_cycles") and \
            data.get("refresh_cycles", 0) >= data["refresh_interval_cycles"]:
        raise NvdlaSimError(f"{where}refresh_cycles: must be shorter than refresh_interval_cycles")
    if data.get("host") is not None and not isinstance(data["host"], str):
        raise NvdlaSimError(f"{where}host: must be a host profile name, got {data['host']!r}")
    for key in ("max_outstanding_reads", "bandwidth_gbps"):
        v = data.get(key)
        if v is not None and (not isinstance(v, (int, float)) or isinstance(v, bool) or v <= 0):
            raise NvdlaSimError(f"{where}{key}: must be > 0 or null, got {v!r}")
    data.setdefault("name", "custom")
    return MemoryProfile(**data)


@dataclass(slots=True)
class Transfer:
    """The booking of one transfer token: all times are core cycles (not frozen: built once per
    DMA request, and a frozen dataclass costs twice as much to build)."""
    start: float            # first request accepted
    interval: float         # cycles between the requests of this token
    requests: int
    port_free: float        # the request port can accept the client's next request
    first: float            # first data beat (read: arrives at the DLA; write: leaves it)
    last: float             # last data beat
    done: float             # read: last beat arrived; write: last response received
    port_cycles: float = 0  # cycles the token held the request port (requests x interval)

    def beat(self, k: int) -> float:
        """Cycle the data of request `k` (0-based) arrives (read) or leaves (write)."""
        if self.requests <= 1:
            return self.first
        return min(self.last, self.first + k * (self.last - self.first) / (self.requests - 1))


class MemoryInterface:
    """One memory interface: a read path and a write path, each a request port plus a data bus."""

    def __init__(self, env: simpy.Environment, name: str, profile: MemoryProfile, width_bytes: int,
                 clock_mhz: float = 1000.0, max_burst_beats: int | None = None,
                 max_outstanding_reads: int | None = None, record_transfers: bool = True):
        """`record_transfers` False: `transfers` stays empty (only timelines read it; a
        timing-only ResNet-50 on nv_small books 800 k of them)."""
        self.env = env
        self.name = name
        self.profile = profile
        self.width_bytes = width_bytes
        # The DLA's own burst limit (nv_small: single-beat requests) and the memory's.
        self.burst_beats = min(b for b in (profile.max_burst_beats, max_burst_beats) if b)
        self._burst_bytes = width_bytes * self.burst_beats
        self.outstanding_limits = [o for o in (profile.max_outstanding_reads,
                                               max_outstanding_reads) if o]
        cap = profile.bytes_per_cycle_cap(clock_mhz)
        # Bytes per cycle the data bus can carry: one beat per cycle, or the bandwidth cap.
        self.bus_bytes_per_cycle = min(width_bytes, cap) if cap else width_bytes
        # A cap shared by both directions: the memory's own data bus, booked by reads and writes.
        self.shared_bytes_per_cycle = cap if cap and profile.shared_bandwidth else None
        self.read_latency = profile.effective_read_latency()
        self._memory_free = 0.0
        self._port_free = {"read": 0.0, "write": 0.0}
        self._bus_free = {"read": 0.0, "write": 0.0}
        self.bytes_by_client: dict[str, dict[str, int]] = {}
        self._read_limit: dict[int | None, int] = {}    # client limit -> min of all read limits
        self.transfers: list[tuple[float, float, str, str, int]] = []   # start, end, client, dir, bytes
        self.run_requests = 0           # reads booked by read_run (one call for a run of them)
        self._record = record_transfers

    def requests(self, nbytes: int) -> int:
        burst_bytes = self.width_bytes * self.burst_beats
        return max(1, -(-nbytes // burst_bytes))

    def reserve(self, client: str, direction: str, nbytes: int, requests: int | None = None,
                ready_first: float | None = None, ready_last: float | None = None,
                outstanding: int | None = None) -> Transfer:
        """Book `nbytes` in `requests` requests (default: as few bursts as the limits allow).

        For writes, the data may become ready over time: request i is issued no earlier than the
        linear ramp from `ready_first` to `ready_last`.  `outstanding` is the client's own limit on
        reads in flight.  (Called once per DMA request: in C, kernels/booking.pyx, every sum in
        the same order as the formulas of the module doc.)"""
        return reserve(self, client, direction, nbytes, requests, ready_first, ready_last,
                       outstanding)

    def read_run(self, client: str, nbytes: int, count: int, port_free: float, pool, need: float,
                 tracker, label: str) -> tuple[int, float]:
        """Up to `count` more reads of `nbytes` as a request loop books them when nothing else
        happens in between (issue 20: one call for a run of identical CDMA requests).

        The loop this stands for, per request: sleep until the previous request freed the port
        (`port_free`; the rule of `tokens.sleep_event`), take `need` credits of `pool` at once
        (`Pool.acquire` granting without an event), `reserve` the read, and record its port
        time as a busy span on `tracker`.  Every float is computed by the same operations in the
        same order as that loop, so the bookings, clock, credits and spans are identical; the run
        stops, before changing anything, at the first request the loop would wait for (an event
        due first, credits short).  No event is processed meanwhile, so the event queue, the
        pool's waiters and the other clients stand still.  Returns (requests booked, the last
        one's port_free); the caller notes CBUF occupancy once after (it only grows here).
        In C: kernels/read_run.pyx."""
        return read_run(self, client, nbytes, count, port_free, pool, need, tracker, label)

    def transfer(self, client: str, direction: str, nbytes: int, outstanding: int | None = None):
        """Generator: wait until a transfer of `nbytes` has completed."""
        done = self.reserve(client, direction, nbytes, outstanding=outstanding).done + 1
        if done > self.env.now:
            yield self.env.timeout(done - self.env.now)
