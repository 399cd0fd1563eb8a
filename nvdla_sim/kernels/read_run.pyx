# cython: language_level=3
"""`MemoryInterface.read_run` in C doubles (issue 20): a run of identical CDMA read requests
booked in one call while nothing else happens.

Per request: sleep until the port is free (the `tokens.sleep_event` rule), take the CBUF
credits, book the read on the port, the read data bus and the shared DRAM cap (the operations of
`MemoryInterface.reserve`, kernels/booking.pyx, in the same order: the floats are bit for bit
those of the request loop that calls `reserve` once a request, tests/test_speed_tokens.py),
extend the busy span and, when the interface records transfers, record the request.  About 40x
faster per request than the same loop in Python.
"""
from .booking cimport read_interval
from .tracker cimport Tracker

cdef double INF = float("inf")


cdef struct _Run:
    double now, free, port, own_bus, mem, port_free, cur_end, span_start
    bint new_span
    long long booked


cpdef tuple read_run(object memif, str client, long long nbytes, long long count,
                     double port_free, object pool, double need, Tracker tracker, str label):
    """See `MemoryInterface.read_run`: returns (requests booked, the last one's port_free)."""
    env = memif.env
    queue = env._queue
    cdef double peek = queue[0][0] if queue else INF
    if count <= 0 or pool._waiters:
        return 0, port_free
    cdef long long burst = memif._burst_bytes
    cdef long long n_req = (nbytes + burst - 1) // burst
    if n_req < 1:
        n_req = 1
    cdef double data_cycles = nbytes / <double>memif.bus_bytes_per_cycle
    cdef double req_cycles = data_cycles / n_req
    cdef double latency = memif.read_latency
    cdef double interval = read_interval(memif, req_cycles, None)
    cdef double head = (n_req - 1) * interval
    cdef double port_cycles = n_req * interval
    shared_obj = memif.shared_bytes_per_cycle
    cdef bint shared = bool(shared_obj)
    cdef double mem_cycles = nbytes / <double>shared_obj if shared else 0.0
    bus, ports = memif._bus_free, memif._port_free
    per = memif.bytes_by_client.get(client)
    if per is None:
        per = memif.bytes_by_client[client] = {"read": 0, "write": 0}
    record = memif.transfers.append if memif._record else None
    # The state the loop changes, in locals (nothing else runs inside it), written back after:
    # the same floats in the same order as the loop on the attributes.
    cdef _Run r
    r.booked = 0
    r.now = env._now
    r.free = pool.free
    r.port = ports["read"]
    r.own_bus = bus["read"]
    r.mem = memif._memory_free
    r.port_free = port_free
    # the open busy span, when it has this label, is extended in place
    cdef bint merge = tracker._is_open[0] and (label is tracker._label[0]
                                               or label == tracker._label[0])
    r.cur_end = tracker._end[0] if merge else 0.0
    while r.booked < count:
        _run_reads(&r, peek, count, need, shared, head, interval, latency, data_cycles,
                   mem_cycles, port_cycles, merge, record, client, nbytes, req_cycles)
        if merge:
            tracker._end[0] = r.cur_end
        if not r.new_span:
            break
        tracker.add(0, r.span_start, r.port_free, label)
        merge, r.cur_end = True, tracker._end[0]
    if r.booked:
        env._now = r.now
        pool.free = r.free
        ports["read"] = r.port
        bus["read"] = r.own_bus
        if shared:
            memif._memory_free = r.mem
        per["read"] += r.booked * nbytes
        used = pool.capacity - r.free
        if used > pool.peak:
            pool.peak = used
        memif.run_requests += r.booked
    return r.booked, r.port_free


cdef void _run_reads(_Run* r, double peek, long long count, double need, bint shared,
                     double head, double interval, double latency, double data_cycles,
                     double mem_cycles, double port_cycles, bint merge, object record,
                     object client, long long nbytes, double req_cycles) except *:
    """Book requests until `count` are booked, before one the loop would wait for, or after one
    whose busy span does not extend the open one (`merge`: a span is open, ending at
    `r.cur_end`): `r.new_span`, which the caller then opens."""
    cdef double t, wake, start, last_request, bus_free, data_start, last, tail
    r.new_span = False
    while r.booked < count:
        t = r.port_free                     # sleep_event(env, port_free)
        if t > r.now:
            wake = r.now + (t - r.now)
            if not wake < peek:
                break
        elif not peek > r.now:              # an event due this cycle: the grant would wait
            break
        else:
            wake = r.now
        if not need <= r.free + 1e-6:
            break
        r.now = wake
        r.free -= need
        start = r.port                      # reserve(client, "read", nbytes)
        if r.now > start:
            start = r.now
        last_request = start + head
        r.port = last_request + interval
        r.port_free = r.port
        bus_free = r.own_bus
        if shared and r.mem > bus_free:
            bus_free = r.mem
        data_start = start + latency
        if bus_free > data_start:
            data_start = bus_free
        r.own_bus = (r.own_bus if r.own_bus > data_start else data_start) + data_cycles
        if shared:
            r.mem = (r.mem if r.mem > data_start else data_start) + mem_cycles
        if record is not None:
            last = last_request + latency + req_cycles - 1
            tail = data_start + data_cycles - 1
            if tail > last:
                last = tail
            record((start, last + 1, client, "read", nbytes))
        r.span_start = r.port_free - port_cycles    # tracker.busy(span_start, port_free)
        r.booked += 1
        if r.port_free > r.span_start:
            if merge and r.span_start <= r.cur_end + 1e-9:
                if r.port_free > r.cur_end:
                    r.cur_end = r.port_free
            else:
                r.new_span = True
                break
