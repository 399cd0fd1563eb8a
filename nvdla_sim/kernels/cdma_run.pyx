# cython: language_level=3, boundscheck=False, wraparound=False
"""CDMA's request loops (data and weights) as callbacks in C (issue 20).

`timing.conv._cdma_data` / `_cdma_weight` loop once per CDMA request: take the CBUF credits
(waiting for a grant when they are short), book the read, hand CSC what the request completes
(the input; each kernel group whose last atom it holds), book the run of identical requests
that follows while nothing else happens (`MemoryInterface.read_run`), and sleep until the request
port is free.  On a small array the two loops take turns on the read port request by request,
so almost every request is a SimPy event that resumes a generator.

`RequestLoop` is that loop as a state machine: a sleep becomes an entry on SimPy's queue under
the very time and event number the loop's `Timeout` would get (the same `next(env._eid)` at the
same moment), whose processing calls the loop again; a grant's event calls it back when SimPy
processes it.  The loop's body runs in the same order on the same objects (the pool, the
memory interface -- booked through `booking.book` and `read_run.read_run`, the C code its Python
methods call --, the channel, the trackers), so every booking, span, token and event is the
loop's (tests/test_speed_cdma_run.py compares them with NVDLA_SIM_CDMA_RUN=0); what goes is the
generator's resume, the `Timeout` object and the event's callback list per request.  The process
itself stays: it starts the loop, waits on `done` (resumed from inside the loop's last call,
as SimPy would resume it after its last sleep), then ends as before.
"""
from heapq import heappush

from simpy.events import NORMAL

from . cimport booking
from .read_run cimport read_run
from .tracker cimport Tracker


cdef class QueueEntry:
    """What SimPy's `step` needs of a queue entry: callbacks (set to None when processed)."""
    cdef public object callbacks
    cdef public bint _ok
    cdef public object _value

    def __init__(self):
        self._ok = True
        self._value = None


cdef class RequestLoop:
    """One CDMA request loop (`data`: `_cdma_data`'s, else `_cdma_weight`'s main loop)."""
    cdef object env, tm, pool, memif, out, seg_type, granted_type, client, full_label
    cdef object bounds, group_atoms, keep, first, done_event, entry, wake_cb, grant_cb
    cdef object data_entries
    cdef Tracker tracker
    cdef public object ready, group
    cdef long long issued, total, per_request, atom, n, n_bounds
    cdef double entries_per_atom, wait_start
    cdef object cbuf_write
    cdef bint data, runs
    cdef public bint finished

    def __init__(self, env, tm, pool, memif, Tracker tracker, out, seg_type, granted_type,
                 bint data, long long total, long long per_request, long long atom,
                 double entries_per_atom, cbuf_write, keep, ready, bounds=(), group_atoms=(),
                 data_entries=0, bint runs=True):
        self.env, self.tm, self.pool, self.memif, self.out = env, tm, pool, memif, out
        self.tracker = tracker
        self.seg_type, self.granted_type = seg_type, granted_type
        self.data = data
        self.client = "CDMA_DAT" if data else "CDMA_WT"
        self.full_label = "CBUF data full" if data else "weight ring full"
        self.total, self.per_request, self.atom = total, per_request, atom
        self.entries_per_atom, self.cbuf_write, self.keep = entries_per_atom, cbuf_write, keep
        # the data loop hands over one token at its end: one "group" of all the atoms
        self.bounds = [total] if data else list(bounds)
        self.n_bounds = len(self.bounds)
        self.group_atoms = group_atoms
        self.data_entries = data_entries
        self.runs = runs
        self.issued = 0
        self.group = 0
        self.first = None
        self.ready = ready              # the loop's `ready` before its first request
        self.finished = False
        self.done_event = None
        self.entry = QueueEntry()
        self.wake_cb = self._woken
        self.grant_cb = self._granted

    def start(self, done) -> None:
        """Run within the process's current resume until the loop first sleeps or waits (or
        ends: `finished`); then the process waits on `done`, which the loop's end triggers and
        processes at once (the process goes on from there, as after its last sleep)."""
        self._run(False)
        self.done_event = done

    def _woken(self, _entry) -> None:
        self._run(False)

    def _granted(self, _event) -> None:
        self.tracker.add(1, self.wait_start, self.env._now, self.full_label)   # `waited`
        self._run(True)

    cdef void _run(self, bint granted) except *:
        env, pool, memif, tracker = self.env, self.pool, self.memif, self.tracker
        cdef long long n, k, booked
        cdef double now, wake, port_free
        cdef booking.Booking tr
        while True:
            if not granted:
                if self.issued >= self.total:
                    self._finish()
                    return
                n = self.total - self.issued
                if n > self.per_request:
                    n = self.per_request
                self.n = n
                grant = pool.acquire(n * self.entries_per_atom)
                if grant is not self.granted_type:
                    self.wait_start = env._now
                    grant.callbacks.append(self.grant_cb)
                    return
            granted = False
            n = self.n
            self.tm.note_cbuf()
            booking.book(memif, self.client, True, n * self.atom, env._now, &tr)  # reserve()
            if self.data and self.first is None:
                self.first = tr.first
            port_free = tr.port_free
            tracker.add(0, port_free - tr.port_cycles, port_free, "read")
            # what this request completes: kernel groups / the whole input
            while self.group < self.n_bounds and self.bounds[self.group] <= self.issued + n:
                if self.data:
                    self.ready = tr.last + self.cbuf_write
                    self.out.put(self.seg_type(self.data_entries, self.first + self.cbuf_write,
                                               self.ready, self.keep, True))
                else:
                    k = self.bounds[self.group] - self.issued - 1
                    self.ready = _beat(&tr, k) + self.cbuf_write
                    self.out.put(self.seg_type(self.group_atoms[self.group] * self.entries_per_atom,
                                               tr.first, self.ready, self.keep,
                                               self.group == self.n_bounds - 1))
                self.group += 1
            self.issued += n
            if self.runs and self._run_follows(n):
                booked, port_free = read_run(
                    memif, self.client, n * self.atom,
                    (self.bounds[self.group] - 1 - self.issued) // n, port_free, pool,
                    n * self.entries_per_atom, tracker, "read")
                if booked:
                    self.issued += booked * n
                    self.tm.note_cbuf()
            # sleep_event(env, port_free), its timeout put on the queue as SimPy would
            now = env._now
            if port_free > now:
                wake = now + (port_free - now)
                queue = env._queue
                if not queue or wake < queue[0][0]:
                    env._now = wake
                    continue
                entry = self.entry
                entry.callbacks = [self.wake_cb]
                heappush(queue, (wake, NORMAL, next(env._eid), entry))
                return

    cdef bint _run_follows(self, long long n):
        """Whether the loop books the run of full requests after this one (data: more than one
        full request left; weights: the next group is more than this request away)."""
        if self.data:
            return self.total - self.issued > self.per_request
        return self.group < self.n_bounds and n == self.per_request

    cdef void _finish(self) except *:
        """The loop's end: the process goes on from its wait on `done`, now."""
        self.finished = True
        done = self.done_event
        if done is None:             # ended within `start`: the process has not waited yet
            return
        done._ok = True
        done._value = None
        callbacks, done.callbacks = done.callbacks, None
        for callback in callbacks:
            callback(done)


cdef inline double _beat(booking.Booking* b, long long k):
    """`Transfer.beat(k)` (engine/memif.py) on a C booking: the cycle request k's data arrives,
    spread evenly over the requests (the same operations)."""
    if b.requests <= 1:
        return b.first
    cdef double t = b.first + k * (b.last - b.first) / (b.requests - 1)
    return b.last if b.last < t else t
