"""Sized tokens, bounded channels and credit pools: what the timing processes pass and wait on.

A token (`Seg`) stands for `n` units of work (atoms, entries, beats) and carries the cycles its
first and last unit become available.  A stage that serves `c` cycles per unit handles a whole
token with one timeout (`serve`): it starts when it is free and the first unit is there, and it
cannot finish before the last unit has arrived.  With constant rates inside a token this is exact,
so the token size sets the event count, not the timing.

Buffers are `Pool`s of credits (CBUF entries, latency-FIFO atoms, CACC credits): a producer
acquires room before it fetches, the consumer releases it when the data has left.  A `Channel` is
a FIFO of tokens whose room is such a pool, so back-pressure travels upstream as waits.
"""
from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass
from typing import Any, Generator

import simpy

from ..errors import NvdlaSimError
from ..kernels.tracker import Tracker as _Tracker


def token_runs() -> bool:
    """Whether the timing processes may book runs of identical tokens in one step (issue 20;
    each run is exact).  NVDLA_SIM_TOKEN_RUNS=0 turns them off: every token on its own, the
    reference the tests compare the runs against."""
    return os.environ.get("NVDLA_SIM_TOKEN_RUNS", "1") != "0"


def flying_writer() -> bool:
    """Whether a convolution's SDP and its write DMA may take CACC's stripes without events
    (sdp.FlyingWriter; issue 20; exact).  NVDLA_SIM_FLYING_WRITER=0 turns it off: the reference
    tests/test_speed_follower.py compares it against (token runs on)."""
    return os.environ.get("NVDLA_SIM_FLYING_WRITER", "1") != "0" and token_runs()


def stripe_runs() -> bool:
    """Whether CSC runs its stripes in C while each goes through without an event
    (kernels/stripe_run.pyx; issue 20; exact).  NVDLA_SIM_STRIPE_RUN=0 turns it off: the
    reference tests/test_speed_stripe_run.py compares it against (FlyingWriter on)."""
    return os.environ.get("NVDLA_SIM_STRIPE_RUN", "1") != "0" and flying_writer()


def cdma_runs() -> bool:
    """Whether CDMA's request loops run as callbacks in C (kernels/cdma_run.pyx; issue 20;
    exact: the same bookings and events).  NVDLA_SIM_CDMA_RUN=0 turns them off: the reference
    tests/test_speed_cdma_run.py compares them against."""
    return os.environ.get("NVDLA_SIM_CDMA_RUN", "1") != "0"


def coarse_stripes() -> int:
    """Most CSC stripes of one kernel group moved to SDP as one token (issue 20, helper
    "stripes"; compiled networks only; not exact, docs/performance.md).
    NVDLA_SIM_COARSE_STRIPES=0 (or 1) turns it off (the exact token path); another number sets
    the most (16 measured; timing/conv.py also keeps a token within one nv_large stripe's MACs
    and leaves layers with per-element SDP operands on the exact path).  Off by default: within
    0.5 % per layer on every preset and array variant at 10 GB/s, but 0.76 % on nv_small 64x8
    at 25.6 GB/s (docs/performance.md)."""
    v = os.environ.get("NVDLA_SIM_COARSE_STRIPES", "0")
    try:
        return max(0, int(v))
    except ValueError:
        raise NvdlaSimError(f"NVDLA_SIM_COARSE_STRIPES={v!r}: expected a whole number") from None


def held(channel: "Channel", n: float) -> float:
    """The room a token of `n` units holds in `channel`: at most all of it (a coarse CSC token,
    NVDLA_SIM_COARSE_STRIPES, may be wider than a core's output buffer; its producer acquired
    the whole buffer).  `n` itself on every other path."""
    room = channel.room
    return n if room is None or n <= room.capacity else room.capacity


class Granted:
    """What `Pool.acquire` returns when the credits are granted without an event."""
    __slots__ = ()


GRANTED = Granted()


@dataclass(slots=True)          # built once per token: slots make that cheaper
class Seg:
    n: float                    # units in the token
    first: float                # cycle the first unit is available
    last: float                 # cycle the last unit is available
    tag: Any = None             # what the consumer needs to know (line ends, group, ...)
    end: bool = False           # the layer's last token

    @property
    def span(self) -> float:
        return self.last - self.first


def serve(now: float, seg: Seg, cycles_per_unit: float, extra_cycles: float = 0.0) -> tuple[float, float]:
    """Rate-latency service of a whole token: (start, end) in cycles."""
    start = max(now, seg.first)
    end = max(start + seg.n * cycles_per_unit, seg.last + cycles_per_unit) + extra_cycles
    return start, end


class Pool:
    """`capacity` credits (entries, atoms); acquire waits in FIFO order until enough are free."""

    def __init__(self, env: simpy.Environment, name: str, capacity: float):
        self.env = env
        self.name = name
        self.capacity = capacity
        self.free = capacity
        self.peak = 0.0
        self._waiters: deque[tuple[float, simpy.Event]] = deque()

    @property
    def used(self) -> float:
        return self.capacity - self.free

    def resize(self, capacity: float) -> None:
        """A new split (CBUF banks of the next layer); keeps what is in use."""
        self.free += capacity - self.capacity
        self.capacity = capacity
        self._wake()

    def acquire(self, n: float) -> simpy.Event | "Granted":
        """An event that fires when `n` credits are the caller's; `GRANTED` (no event) when they
        are free now, nobody waits before the caller and no other event is due this cycle: the
        event would be the next one processed, so the caller may go on at once (see `waited`)."""
        if n > self.capacity:
            raise NvdlaSimError(f"{self.name}: {n:g} units requested at once but only "
                                f"{self.capacity:g} exist (the hardware would never proceed)")
        if not self._waiters and n <= self.free + 1e-6:
            env = self.env
            queue = env._queue              # env.peek() > env.now, written out (hot path)
            if not queue or queue[0][0] > env._now:
                self.free -= n
                used = self.capacity - self.free
                if used > self.peak:
                    self.peak = used
                return GRANTED
        event = self.env.event()
        self._waiters.append((n, event))
        self._wake()
        return event

    def release(self, n: float) -> None:
        self.free += n
        self._wake()

    def _wake(self) -> None:
        # Fractional credits (entries per atom) accumulate rounding: compare with a tolerance.
        while self._waiters and self._waiters[0][0] <= self.free + 1e-6:
            n, event = self._waiters.popleft()
            self.free -= n
            self.peak = max(self.peak, self.capacity - self.free)
            event.succeed()


class Channel:
    """A FIFO of tokens between two processes with `capacity` units of room (None: unbounded).

    Hands tokens over exactly as an unbounded `simpy.Store` does: a put whose token a getter
    waits for reaches it through one event processed this cycle (the Store's put event, whose
    processing serves the getters), a put nobody waits for schedules nothing (the Store's put
    event would do nothing), and a get that finds a token when no other event is due this cycle
    returns it without an event (`Ready`, see `waited`)."""

    def __init__(self, env: simpy.Environment, name: str, capacity: float | None = None):
        self.env = env
        self.name = name
        self.room = Pool(env, f"{name} buffer", capacity) if capacity else None
        self._items: deque[Seg] = deque()
        self._getters: deque[simpy.Event] = deque()
        self._runs = token_runs()
        # A consumer that may take a token at once, without events, while it waits for one
        # (sdp.FlyingWriter; None: every token goes through the channel).
        self.follower = None

    def put(self, seg: Seg) -> None:
        self._items.append(seg)
        if self._getters:
            relay = self.env.event()
            relay.callbacks.append(self._relay if self._runs else self._serve)
            relay.succeed()

    def _serve(self, _event=None) -> None:
        while self._getters and self._items:
            self._getters.popleft().succeed(self._items.popleft())

    def _relay(self, _event) -> None:
        """The relay's processing: serve the getter (`serve_now`)."""
        self.serve_now()

    def serve_now(self) -> None:
        """Serve the waiting getters.  One getter served while no other event is due this
        cycle: its event would be the very next one processed, so its callbacks (the getter's
        process) run now instead of after a round through the queue (issue 20: the same order,
        one event fewer per token handed to a waiting process; `Channel.get`'s `Ready` rule)."""
        if len(self._getters) == 1 and len(self._items) == 1:
            queue = self.env._queue
            if not queue or queue[0][0] > self.env._now:
                event = self._getters.popleft()
                event._ok = True
                event._value = self._items.popleft()
                callbacks, event.callbacks = event.callbacks, None
                for callback in callbacks:
                    callback(event)
                return
        self._serve()

    def get(self) -> simpy.Event | "Ready":
        if self._items and not self._getters:
            seg = self._items.popleft()
            if self.env.peek() > self.env.now:
                return Ready(seg)
            event = self.env.event()
            event.succeed(seg)
            return event
        event = self.env.event()
        self._getters.append(event)
        self._serve()
        return event

    def release(self, n: float) -> None:
        if self.room is not None:
            self.room.release(n)


class Ready:
    """A token `Channel.get` hands over without an event."""
    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value


# Busy and stall spans of one timing process, merged while contiguous, into the ActivityLog
# (in C: called once per token of every process).
Tracker = _Tracker


class Wake:
    """A wake-up put on SimPy's queue under the event number of the sleep it stands for, by a
    consumer that took tokens without events (issue 20: `sdp.FlyingWriter`,
    `sdp_operands.OperandWriter`, `dma.StreamReader`): calls `action(arg)` when processed."""
    __slots__ = ("callbacks", "_ok", "_value", "_defused")

    def __init__(self, action, arg):
        self.callbacks = [lambda _e: action(arg)]
        self._ok = True
        self._value = None


def fire(event: simpy.Event) -> None:
    """Resume the processes waiting on `event` now, as its processing would."""
    event._ok = True
    event._value = None
    callbacks, event.callbacks = event.callbacks, None
    for callback in callbacks:
        callback(event)


def wait_until(env: simpy.Environment, t: float) -> Generator:
    """Sleep until cycle `t` (no event when it is now or past).

    When no other event is due before the wake-up (strictly: an event due at the same cycle
    was scheduled earlier and would run first), the timeout would be the very next event
    processed, so the caller goes on at once with the clock moved: the same cycles in the same
    order, without the event (issue 20).  The clock moves by the same float sum a timeout uses."""
    event = sleep_event(env, t)
    if event is not None:
        yield event


def sleep_event(env: simpy.Environment, t: float) -> simpy.Event | None:
    """The rule of `wait_until` without a generator, for hot loops that cannot afford one: moves
    the clock to `t` and returns None when no other event is due first, else the timeout the
    caller must yield (None as well when `t` is now or past)."""
    now = env._now
    if t > now:
        wake = now + (t - now)
        if wake < env.peek():
            env._now = wake
            return None
        return env.timeout(t - now)
    return None


def sleep_for(env: simpy.Environment, delay: float) -> simpy.Event | None:
    """`env.timeout(delay)` when another event is due first, else None with the clock moved as
    the timeout would move it (`now + delay`): the rule of `sleep_event` for a delay."""
    wake = env._now + delay
    if wake < env.peek():
        env._now = wake
        return None
    return env.timeout(delay)


def waited(env: simpy.Environment, event: simpy.Event, tracker: Tracker, label: str) -> Generator:
    """Wait for `event`, recording the wait as a stall; returns the event's value (a credit
    grant without an event, `GRANTED`, returns None at once, as its event would; a `Ready`
    token its value)."""
    if event is GRANTED:
        return None
    if type(event) is Ready:
        return event.value
    start = env.now
    value = yield event
    tracker.stall(start, env.now, label)
    return value
