# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=False
"""The plain convolution stripe in C doubles (issue 20): CSC's stripe loop, CACC's delivery and
the SDP core with its write DMA (`sdp.FlyingWriter`), run by `timing.conv.csc` for as many whole
stripes as go through without CSC's process.

One iteration is one pass of `csc`'s stripe loop: CSC's packages, its CACC credits, then, when
CACC waits for the stripe and nothing else is due, `CaccDelivery.step`: the delivery booked and
the stripe handed to SDP's follower -- `FlyingWriter.take` inline (the core, the write booked
through `booking.book`), another follower (`sdp_operands.OperandWriter`, or FlyingWriter adopting
a sleeping write DMA) through its Python `take`, or the token put on the channel.  Every float is
computed by the operations of those Python methods, in their order, and every span is recorded
in their order, so clock, credits, buffer room, bookings, transfers, spans and event numbers are
bit for bit those of the Python path (tests/test_speed_stripe_run.py compares them with
NVDLA_SIM_STRIPE_RUN=0).

CSC's sleeps: its timeout goes on SimPy's queue under the number `Timeout` would take; while the
queue's head is a CDMA request loop's entry (kernels/cdma_run.pyx: callbacks that touch nothing
of CSC's, CACC's or SDP's) it is processed here as `Environment.step` would, and when CSC's own
timeout comes next the run goes on; anything else first, and CSC's process waits for the timeout.
A stripe goes back to the Python loop, at the phase it reached, only at a check made before any
side effect of that phase (the Python loop then makes the same check) or after a stripe handed
to the processes.
"""
from heapq import heappop, heappush

from simpy.events import NORMAL, Event

from .cdma_run import QueueEntry
from . cimport booking
from .tracker cimport Tracker

cdef double INF = float("inf")


cdef class StripeRun:
    """One layer's CSC stripe loop state that the runs need (built once per `csc` call)."""
    cdef object env, credits, stripe_ch, weight_pool, stripes, seg_type, flying_type
    cdef Tracker csc
    cdef double min_stripe, cmac_cacc
    cdef long long packages, atoms_per_slot
    cdef object group_atoms

    def __init__(self, env, Tracker csc_tracker, credits, stripe_ch, weight_pool, geom,
                 double min_stripe, double cmac_cacc, seg_type, flying_type):
        self.env = env
        self.csc = csc_tracker
        self.credits = credits
        self.stripe_ch = stripe_ch
        self.weight_pool = weight_pool
        self.stripes = list(geom.stripes)
        self.packages = geom.packages
        self.atoms_per_slot = geom.atoms_per_slot
        self.group_atoms = geom.group_atoms
        self.min_stripe = min_stripe
        self.cmac_cacc = cmac_cacc
        self.seg_type = seg_type            # tokens.Seg
        self.flying_type = flying_type      # sdp.FlyingWriter

    def run(self, Py_ssize_t g, Py_ssize_t i, double t, double load, Py_ssize_t end_stripe,
            delivery, int phase=0):
        """Stripes i, i+1, ... of group g (before `end_stripe`: the layer's last stripe goes
        through the processes) while each goes through without CSC's process: its sleeps go on
        the queue as timeouts, and CDMA's entries before them are processed here.  `phase`: how
        far CSC has gone with stripe i (0: nothing; 1: slept until its packages end; 2: also
        recorded them and slept until its CACC credits are back).  Returns (the stripe CSC is
        at, its start cycle, None or a timeout CSC's process must wait on, the stripe's phase
        then); the process goes on from that phase."""
        env = self.env
        queue = env._queue
        cdef double peek = queue[0][0] if queue else INF
        cdef double now = env._now
        stripe_ch, credits = self.stripe_ch, self.credits
        if not delivery.active or credits._booked is not None \
                or len(stripe_ch._getters) != 1 or stripe_ch._items:
            return i, t, None, phase
        sdp_in = delivery.out
        # SDP: FlyingWriter's take inline when it would take the stripes, else (no follower,
        # another one, a full buffer, ...) the stripe goes as `CaccDelivery.step` hands it over
        f = sdp_in.follower
        cdef bint flying = type(f) is self.flying_type
        if flying:
            wdma_ch, room = f.out, f.room
            flying = not (sdp_in._items or wdma_ch._items or room is None or room._waiters)
        deliveries = credits._deliveries
        # -- constants --------------------------------------------------------------------------
        cdef Tracker csc = self.csc, cacc = delivery.tracker
        cdef long long packages = self.packages, capacity = credits.capacity
        cdef double return_cycles = credits.return_cycles
        cdef double c_cacc = delivery.c, read = delivery.read, to_sdp = delivery.to_sdp
        cdef bint tagged = bool(self.group_atoms)    # tokens count memory atoms, not slots
        cdef long long group_atoms = self.group_atoms[g] if tagged else 0
        stripes = self.stripes
        cdef Py_ssize_t n_stripes = len(stripes)
        waiters = self.weight_pool._waiters
        cdef Tracker core = None, writer = None
        cdef double c_sdp = 0, depth = 0, pipeline = 0, out_ratio = 1, atom = 0, room_capacity = 0
        cdef bint core_getter = False, wdma_getter = False
        cdef bint core_pending = False, wdma_pending = False
        cdef double core_free = 0, wdma_free = 0, wdma_hold = 0, wait_from = 0
        cdef double room_free = 0, room_peak = 0, wdma_done = 0, wdma_wait = 0
        cdef long long reserved = 0
        core_eid = wdma_eid = empty = full = memif = wdma = None
        eid = env._eid
        if flying:
            core_getter = len(sdp_in._getters) == 1
            wdma_getter = len(wdma_ch._getters) == 1
            memif, wdma = f.memif, f.wdma
            core, writer = f.core_tracker, f.wdma_tracker
            c_sdp, depth, pipeline = f.c, f.depth, f.pipeline
            out_ratio, atom = f.out_ratio, f.atom
            room_capacity = room.capacity
            empty, full = f.empty, f.full
            # FlyingWriter's state, in locals (written back at every exit)
            core_pending, wdma_pending = f.core_eid is not None, f.wdma_eid is not None
            core_free, wdma_free, wdma_hold = f.core_free, f.wdma_free, f.wdma_hold
            wait_from = f.wait_from
            room_free, room_peak = room.free, room.peak
            wdma_done, wdma_wait = wdma.done, wdma.wait_from
            core_eid, wdma_eid = f.core_eid, f.wdma_eid
        # CSC's and CACC's state, in locals (written back at every exit)
        cdef long long outstanding = credits.outstanding
        cdef double cacc_free = delivery.free, cacc_waiting = delivery.waiting
        # -- per stripe -------------------------------------------------------------------------
        cdef double s, pkg, last_pkg, wake, ready_at, d_start, d_c, first, last, limit, nxt_pkg
        cdef double start, end, got, acq, hold, n_out, book_at, s_start, s_end, tok_first, tok_last
        cdef booking.Booking wr
        cdef double used
        cdef long long atoms, take, need, k, n_tok
        cdef bint release_first, taken, adopt, done_any = False
        pending = None
        cdef double woken
        cdef Py_ssize_t j
        while i < end_stripe:
            s = stripes[i]
            pkg = s
            if self.min_stripe > pkg:
                pkg = self.min_stripe
            if load > pkg:
                pkg = load
            last_pkg = t + (packages - 1) * pkg
            wake = now                          # sleep_event(env, last_pkg)
            if phase == 0 and last_pkg > now:
                wake = now + (last_pkg - now)
                if not wake < peek:
                    # CSC's sleep: its timeout on the queue; what comes first runs here when it
                    # is CDMA's request loops, else CSC's process waits for the timeout
                    pending = self._sleep(env, queue, wake)
                    phase = 1
                    if pending is not None:
                        now = env._now
                        break
                    now = wake
                    peek = queue[0][0] if queue else INF
            phase = 1 if phase == 0 else phase  # the packages are done
            atoms = <long long>stripes[i] * self.atoms_per_slot
            take = atoms if atoms < capacity else capacity
            ready_at = woken = wake
            if phase == 1:
                # credits.ready(take, wake): drop deliveries whose credits are back (as it does)
                while deliveries:
                    d_start, d_c, k = deliveries[0]
                    if d_start + k * d_c + return_cycles > wake:
                        break
                    deliveries.popleft()
                    outstanding -= k
                need = take - (capacity - outstanding)
                if need > 0:
                    ready_at = -1.0
                    for d_start, d_c, k in deliveries:
                        if need <= k:
                            ready_at = d_start + need * d_c + return_cycles
                            if wake > ready_at:
                                ready_at = wake
                            need = 0
                            break
                        need -= k
                    if need > 0:
                        break                   # CSC waits for CACC's next booking
                if ready_at > wake:             # sleep_event(env, ready_at)
                    woken = wake + (ready_at - wake)
                    if not woken < peek:
                        # record the packages and the wait, then sleep as above
                        done_any = True
                        csc.add(0, t, last_pkg, "busy")
                        csc.add(1, wake, ready_at, "no CACC credits")
                        env._now = wake
                        pending = self._sleep(env, queue, woken)
                        phase = 2
                        if pending is not None:
                            now = env._now
                            break
                        peek = queue[0][0] if queue else INF
            if not peek > woken:                # CACC would get the stripe through the queue
                now = wake if phase == 1 else woken
                break
            # -- CSC: the packages, the credits ----------------------------------------------
            done_any = True
            now = wake
            if phase == 1:
                csc.add(0, t, last_pkg, "busy")
                if ready_at > now:
                    csc.add(1, now, ready_at, "no CACC credits")
                    now = woken
            else:
                now = woken
            phase = 0
            outstanding += take
            last_pkg = now
            first = last_pkg + self.cmac_cacc
            last = first + s - 1
            if waiters:
                limit = last_pkg + pkg
                for j in range(i + 1, min(i + 3, n_stripes)):
                    nxt_pkg = stripes[j]
                    if self.min_stripe > nxt_pkg:
                        nxt_pkg = self.min_stripe
                    if load > nxt_pkg:
                        nxt_pkg = load
                    limit += packages * nxt_pkg
            else:
                limit = INF
            # -- CACC: CaccDelivery.book(stripe, now) ------------------------------------------
            start = cacc_free
            if first > start:
                start = first
            if now > start:
                start = now
            end = start + atoms * c_cacc
            if last + c_cacc > end:
                end = last + c_cacc
            deliveries.append((end - atoms * c_cacc, c_cacc, atoms if atoms < capacity else capacity))
            n_tok = atoms * group_atoms if tagged else atoms
            tok_first = start + read + to_sdp
            tok_last = end - c_cacc + read + to_sdp
            s_start = cacc_free if cacc_free > cacc_waiting else cacc_waiting
            cacc.add(1, s_start, start, "no stripe")
            cacc.add(0, start, end, "delivery")
            cacc_free = end
            cacc_waiting = now
            # -- SDP: FlyingWriter.take(token, limit) -----------------------------------------
            taken = False
            # the write DMA sleeps on its port: FlyingWriter.take (Python) may adopt the sleep
            adopt = flying and not wdma_pending and not wdma_getter and wdma.sleeping is not None
            if flying and not adopt and (core_pending or core_getter) \
                    and (wdma_pending or wdma_getter):
                got = now if not core_pending or now >= core_free else core_free
                n_out = n_tok if out_ratio == 1 else n_tok * out_ratio
                hold = n_out if n_out <= room_capacity else room_capacity
                acq = got
                taken = True
                if not hold <= room_free + 1e-6:
                    if not wdma_pending or not hold <= room_free + wdma_hold + 1e-6:
                        taken = False
                    acq = wdma_free if wdma_free > got else got
                if taken:
                    s_start = acq if acq > tok_first else tok_first        # tokens.serve
                    s_end = s_start + n_tok * c_sdp
                    if tok_last + c_sdp > s_end:
                        s_end = tok_last + c_sdp
                    s_end = s_end + 0.0
                    book_at = acq if not wdma_pending or acq >= wdma_free else wdma_free
                    if not book_at < limit - 1e-6 or not peek > book_at:
                        taken = False
            if not taken:                       # as CaccDelivery.step hands it over
                env._now = now
                credits.outstanding = outstanding
                delivery.free, delivery.waiting = cacc_free, cacc_waiting
                if flying:
                    self._write_back(f, core_free, core_eid, wdma_free, wdma_eid, wdma_hold,
                                     wait_from, reserved, room, room_free, room_peak, wdma,
                                     wdma_done, wdma_wait)
                token = self.seg_type(n_tok, tok_first, tok_last)
                if f is not None and (adopt or not flying) and f.take(token, limit):
                    # the follower took it in Python (OperandWriter; FlyingWriter adopting
                    # its write DMA's sleep): on with the next stripe, the queue as it left it
                    csc.add(0, last_pkg, last_pkg + pkg, "busy")
                    t = last_pkg + pkg
                    i += 1
                    if type(f) is self.flying_type:     # its state changed: read it anew
                        return i, t, None, 0
                    peek = queue[0][0] if queue else INF
                    continue
                if flying and not adopt:
                    f._hand_back(now)           # FlyingWriter.take's refusal: processes on
                sdp_in.put(token)
                csc.add(0, last_pkg, last_pkg + pkg, "busy")
                return i + 1, last_pkg + pkg, None, 0
            if got > wait_from:
                core.add(1, wait_from, got, empty)
            release_first = wdma_pending and wdma_free <= acq
            if release_first:
                room_free += wdma_hold
            if acq > got:
                core.add(1, got, acq, full)
            room_free -= hold
            used = room_capacity - room_free
            if used > room_peak:
                room_peak = used
            if wdma_pending and not release_first:
                room_free += wdma_hold
            core.add(1, acq, s_start, "waiting for data")
            core.add(0, s_start, s_end, "busy")
            core_free = acq + (s_end - acq) if s_end > acq else acq
            wait_from = core_free
            writer.add(1, wdma_wait, book_at, "no output")
            if n_out > 0:
                # FlyingWriter's MemoryInterface.reserve("SDP_WDMA", "write", ...) at `book_at`
                booking.book(memif, "SDP_WDMA", False, <long long>(n_out * atom), book_at, &wr,
                             0, None, True, s_start + c_sdp + depth + pipeline, True,
                             s_end + depth + pipeline)
                writer.add(0, wr.port_free - wr.port_cycles, wr.port_free, "write")
                if wr.done > wdma_done:
                    wdma_done = wr.done
                wdma_free = book_at + (wr.port_free - book_at) if wr.port_free > book_at \
                    else book_at
            else:
                wdma_free = book_at
            wdma_wait = wdma_free
            wdma_hold = hold
            core_eid = next(eid)
            wdma_eid = next(eid)
            core_pending = wdma_pending = True
            reserved += 2
            # -- CSC: the stripe's last package --------------------------------------------
            csc.add(0, last_pkg, last_pkg + pkg, "busy")
            t = last_pkg + pkg
            i += 1
        env._now = now
        credits.outstanding = outstanding      # (`ready` drops returned credits as it looks)
        if done_any:
            delivery.free, delivery.waiting = cacc_free, cacc_waiting
            if flying:
                self._write_back(f, core_free, core_eid, wdma_free, wdma_eid, wdma_hold,
                                 wait_from, reserved, room, room_free, room_peak, wdma,
                                 wdma_done, wdma_wait)
        return i, t, pending, phase

    cdef object _sleep(self, env, list queue, double wake):
        """CSC sleeps until `wake`: its timeout goes on the queue (the event number SimPy's
        `Timeout` would take now), then the queue is processed here, as `Environment.step`
        does, while its head is a CDMA request loop's entry (kernels/cdma_run.pyx: callbacks
        that touch nothing of CSC's, CACC's or SDP's); None when CSC's own wake-up comes next
        (the clock at `wake`), else the timeout, for CSC's process to wait on."""
        timeout = Event(env)
        timeout._ok = True
        timeout._value = None
        heappush(queue, (wake, NORMAL, next(env._eid), timeout))
        while True:
            entry = queue[0][3]
            if entry is timeout:
                heappop(queue)
                env._now = wake
                return None
            if type(entry) is not QueueEntry:
                return timeout
            env._now = heappop(queue)[0]
            callbacks, entry.callbacks = entry.callbacks, None
            for callback in callbacks:
                callback(entry)

    cdef void _write_back(self, f, double core_free, core_eid, double wdma_free, wdma_eid,
                          double wdma_hold, double wait_from, long long reserved, room,
                          double room_free, double room_peak, wdma, double wdma_done,
                          double wdma_wait) except *:
        """FlyingWriter's state from the run's locals (the Python path reads them)."""
        f.core_free, f.core_eid = core_free, core_eid
        f.wdma_free, f.wdma_eid, f.wdma_hold = wdma_free, wdma_eid, wdma_hold
        f.wait_from = wait_from
        f.reserved += reserved
        room.free, room.peak = room_free, room_peak
        wdma.done, wdma.wait_from = wdma_done, wdma_wait
