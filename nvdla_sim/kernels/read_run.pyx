# cython: language_level=3
"""The request loop of `MemoryInterface.read_run` in C doubles (issue 20).

Per CDMA request: sleep until the port is free (the `tokens.sleep_event` rule), take the CBUF
credits, book the read on the port, the read data bus and the shared DRAM cap, extend the busy
span.  The same IEEE double operations in the same order as the Python loop in
`engine/memif.py` (which stays the reference, and the path when transfers are recorded), so
the floats are bit for bit the same; about 40x faster per request.
"""


def run_reads(double now, double peek, Py_ssize_t count, double port_free, double free,
              double need, double port, double own_bus, double mem, bint shared,
              double head, double interval, double latency, double data_cycles,
              double mem_cycles, double port_cycles, double cur_end, bint merge):
    """Book up to `count` reads; stop before a request the loop would wait for, or after one
    whose busy span does not extend the open one (`merge`: a span is open and ends at
    `cur_end`), which the caller then opens.  Returns (booked, now, free, port, own_bus, mem,
    port_free, cur_end, new_span, span_start)."""
    cdef Py_ssize_t booked = 0
    cdef double t, wake, start, last_request, bus_free, data_start
    cdef double span_start = 0.0
    cdef bint new_span = False
    while booked < count:
        t = port_free                       # sleep_event(env, port_free)
        if t > now:
            wake = now + (t - now)
            if not wake < peek:
                break
        elif not peek > now:                # an event due this cycle: the grant would wait
            break
        else:
            wake = now
        if not need <= free + 1e-6:
            break
        now = wake
        free -= need
        start = port                        # reserve(client, "read", nbytes)
        if now > start:
            start = now
        last_request = start + head
        port = last_request + interval
        port_free = port
        bus_free = own_bus
        if shared and mem > bus_free:
            bus_free = mem
        data_start = start + latency
        if bus_free > data_start:
            data_start = bus_free
        own_bus = (own_bus if own_bus > data_start else data_start) + data_cycles
        if shared:
            mem = (mem if mem > data_start else data_start) + mem_cycles
        span_start = port_free - port_cycles   # tracker.busy(span_start, port_free)
        booked += 1
        if port_free > span_start:
            if merge and span_start <= cur_end + 1e-9:
                if port_free > cur_end:
                    cur_end = port_free
            else:
                new_span = True
                break
    return booked, now, free, port, own_bus, mem, port_free, cur_end, new_span, span_start
