# cython: language_level=3
"""`MemoryInterface.reserve` in C doubles (issue 20): one DMA token's requests booked on a
memory interface's request port, its data bus and the shared memory cap, with the formulas of
engine/memif.py's module doc.  `book` is the booking for C callers (CDMA's request loops, the
stripe and operand runs); `reserve` wraps it for Python (`MemoryInterface.reserve` calls it).
The read loop of `MemoryInterface.read_run` (kernels/read_run.pyx) is the same booking with its
constants hoisted out of the loop."""
cdef object _transfer = None     # engine.memif.Transfer (imported on first use: memif imports
                                 # this module)


cdef double read_interval(object memif, double req_cycles, object outstanding) except? -1.0:
    """Cycles between a client's read requests of `req_cycles` data cycles each: the profile's
    interval, or longer when the reads in flight are limited (the interface's limits and the
    client's own `outstanding`): a request holds its slot from acceptance to its last beat."""
    cdef double interval = memif.profile.read_request_interval_cycles, slot
    limits = memif._read_limit
    limit = limits.get(outstanding)
    if limit is None:
        ol = memif.outstanding_limits + ([outstanding] if outstanding else [])
        limit = limits[outstanding] = min(ol) if ol else 0
    if limit:
        slot = (memif.read_latency + req_cycles) / <double>limit
        if slot > interval:
            interval = slot
    return interval


cdef int book(object memif, str client, bint read, long long nbytes, double now, Booking* b,
              long long requests=0, object outstanding=None, bint has_first=False,
              double ready_first=0.0, bint has_last=False, double ready_last=0.0) except -1:
    """Book `nbytes` for `client` at cycle `now` in `requests` requests (0: as few bursts as
    fit); reads may name the client's own limit of reads in flight (`outstanding`); writes may
    not issue request i before the ramp from `ready_first` to `ready_last`."""
    cdef long long burst = memif._burst_bytes
    cdef long long n_req = requests if requests else (nbytes + burst - 1) // burst
    if n_req < 1:
        n_req = 1
    cdef double data_cycles = nbytes / <double>memif.bus_bytes_per_cycle
    cdef double req_cycles = data_cycles / n_req
    cdef double interval, latency
    p = memif.profile
    if read:
        direction = "read"
        latency = memif.read_latency
        interval = read_interval(memif, req_cycles, outstanding)
    else:
        direction = "write"
        interval, latency = p.write_request_interval_cycles, p.write_latency_cycles
    ports = memif._port_free
    cdef double start = ports[direction]
    if now > start:
        start = now
    if has_first and ready_first > start:
        start = ready_first
    cdef double last_request = start + (n_req - 1) * interval
    if has_last and ready_last > last_request:
        last_request = ready_last
    ports[direction] = last_request + interval
    buses = memif._bus_free
    cdef double own_bus = buses[direction]
    cdef double bus_free = own_bus
    shared_obj = memif.shared_bytes_per_cycle
    cdef bint shared = bool(shared_obj)
    cdef double mem = 0.0
    if shared:
        mem = memif._memory_free
        if mem > bus_free:
            bus_free = mem
    cdef double data_start, last, tail
    if read:
        data_start = start + latency
        if bus_free > data_start:
            data_start = bus_free
        last = last_request + latency + req_cycles - 1
        tail = data_start + data_cycles - 1
        if tail > last:
            last = tail
        b.done = last
    else:
        data_start = start if start > bus_free else bus_free
        last = last_request + req_cycles - 1
        tail = data_start + data_cycles - 1
        if tail > last:
            last = tail
        b.done = last + latency
    buses[direction] = (own_bus if own_bus > data_start else data_start) + data_cycles
    if shared:
        memif._memory_free = (mem if mem > data_start else data_start) + \
            nbytes / <double>shared_obj
    per = memif.bytes_by_client.get(client)
    if per is None:
        per = memif.bytes_by_client[client] = {"read": 0, "write": 0}
    per[direction] += nbytes
    if memif._record:
        memif.transfers.append((start, b.done + 1, client, direction, nbytes))
    b.start, b.last_request, b.interval = start, last_request, interval
    b.port_free, b.port_cycles = last_request + interval, n_req * interval
    b.first, b.last, b.requests = data_start, last, n_req
    return 0


def reserve(memif, str client, str direction, long long nbytes, requests=None,
            ready_first=None, ready_last=None, outstanding=None):
    """`MemoryInterface.reserve` (see there) at the interface's current cycle: a `Transfer`."""
    global _transfer
    if _transfer is None:
        from ..engine.memif import Transfer
        _transfer = Transfer
    cdef Booking b
    book(memif, client, direction == "read", nbytes, memif.env._now, &b,
         requests or 0, outstanding, ready_first is not None,
         ready_first if ready_first is not None else 0.0, ready_last is not None,
         ready_last if ready_last is not None else 0.0)
    spacing = (b.last_request - b.start) / (b.requests - 1) if b.requests > 1 else b.interval
    return _transfer(b.start, spacing, b.requests, b.port_free, b.first, b.last, b.done,
                     b.port_cycles)
