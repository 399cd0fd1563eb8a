# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=False
"""`OperandWriter.take` in C doubles (issue 20): a fused element-wise layer's stripe taken by
the SDP core, its operand reader and its write DMA without events (timing/sdp_operands.py says
what and why).

The checks and the commit are those of the Python method (`OperandWriter._take`), step by step
in its order, and the two bookings are `MemoryInterface.reserve`'s read and write branches with
the same operations in the same order, so every float, booking, transfer record and span is bit
for bit the Python method's (tests/test_speed_operands.py compares the two with
NVDLA_SIM_OPERAND_C=0).  Rare turns stay in Python: a declined stripe (`_hand_back`), the
reader's wake-up put on the queue, a layer whose SDP_RDMA reads several per-element operands.
About twice as fast per stripe as the Python method (0.135 -> 0.076 CPU s for ResNet-50's
12,160 fused stripes on a 64-MAC nv_large).
"""
from .tracker cimport Tracker

cdef object SEG = None          # timing.tokens.Seg (set by `init`: no import cycle)


def init(seg_type) -> None:
    global SEG
    SEG = seg_type


cdef inline double _interval_read(memif, double req_cycles, double *latency):
    """The read branch's request interval (outstanding reads capping the rate) and latency."""
    p = memif.profile
    cdef double interval = p.read_request_interval_cycles
    latency[0] = memif.read_latency
    limits = memif._read_limit
    limit = limits.get(None)
    if limit is None:
        ol = memif.outstanding_limits
        limit = limits[None] = min(ol) if ol else 0
    cdef double slot
    if limit:
        slot = (latency[0] + req_cycles) / limit
        if slot > interval:
            interval = slot
    return interval


cdef tuple _reserve(memif, str client, bint read, long long nbytes, double now,
                    bint ready, double ready_first, double ready_last):
    """MemoryInterface.reserve(client, direction, nbytes[, ready_first, ready_last]) at cycle
    `now`: (first, last, port_free, port_cycles, done)."""
    cdef long long burst = memif._burst_bytes
    cdef long long n_req = (nbytes + burst - 1) // burst
    if n_req < 1:
        n_req = 1
    cdef double data_cycles = nbytes / <double>memif.bus_bytes_per_cycle
    cdef double req_cycles = data_cycles / n_req
    cdef double interval, latency = 0.0
    direction = "read" if read else "write"
    if read:
        interval = _interval_read(memif, req_cycles, &latency)
    else:
        p = memif.profile
        interval = p.write_request_interval_cycles
        latency = p.write_latency_cycles
    ports = memif._port_free
    cdef double start = ports[direction]
    if now > start:
        start = now
    if ready and ready_first > start:
        start = ready_first
    cdef double last_request = start + (n_req - 1) * interval
    if ready and ready_last > last_request:
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
    cdef double data_start, first, last, tail, done
    if read:
        data_start = start + latency
        if bus_free > data_start:
            data_start = bus_free
        first = data_start
        last = last_request + latency + req_cycles - 1
        tail = data_start + data_cycles - 1
        if tail > last:
            last = tail
        done = last
    else:
        data_start = start if start > bus_free else bus_free
        first = data_start
        last = last_request + req_cycles - 1
        tail = data_start + data_cycles - 1
        if tail > last:
            last = tail
        done = last + latency
    buses[direction] = (own_bus if own_bus > data_start else data_start) + data_cycles
    if shared:
        memif._memory_free = (mem if mem > data_start else data_start) + nbytes / <double>shared_obj
    per = memif.bytes_by_client.get(client)
    if per is None:
        per = memif.bytes_by_client[client] = {"read": 0, "write": 0}
    per[direction] += nbytes
    if memif._record:
        memif.transfers.append((start, done + 1, client, direction, nbytes))
    return first, last, last_request + interval, n_req * interval, done


def take(f, seg, double limit):
    """`OperandWriter._take(seg, limit)` (timing/sdp_operands.py), the same steps in C doubles;
    True when the stripe was taken."""
    inp, out, room, ops = f.inp, f.out, f.buffer, f.ops
    env = f.env
    cdef double now = env._now
    core_eid, wdma_eid = f.core_eid, f.wdma_eid
    if seg.end or inp._items or out._items or room is None or room._waiters or ops._getters \
            or (core_eid is None and len(inp._getters) != 1) \
            or (wdma_eid is None and len(out._getters) != 1):
        return f._hand_back(now)
    reader = f.reader
    queue = env._queue
    cdef double head = queue[0][0] if queue else float("inf")
    cdef double core_free = f.core_free
    cdef double got = now if core_eid is None or now >= core_free else core_free
    cdef bint pending = wdma_eid is not None
    cdef double wdma_free = f.wdma_free
    cdef bint release_first = pending and wdma_free < got
    if pending and not release_first and not wdma_free > got:
        return f._hand_back(now)
    pool = ops.room
    cdef bint rd_waits = False
    cdef bint rd_held = f.rd_held
    cdef double need = 0.0
    waiters = pool._waiters
    if rd_held:
        if not reader.wait_from < got:
            return f._hand_back(now)
        rd_waits, need = True, f.rd_need
    elif waiters:
        if len(waiters) != 1 or reader.parked is None or waiters[0][1] is not reader.parked:
            return f._hand_back(now)
        rd_waits, need = True, waiters[0][0]
    # -- what the processes would do, before changing anything ----------------------------------
    st = f.state
    cdef double n = seg.n
    cdef double have = st.have, have_last = st.have_last
    items = ops._items
    cdef Py_ssize_t n_items = len(items), taken = 0, grant_at = -1
    cdef double free = pool.free
    cdef double op_n
    while have < n - 1e-9:
        if taken >= n_items:
            return f._hand_back(now)
        op = items[taken]
        op_n = op.n
        have, have_last = have + op_n, op.last
        free += op_n
        if rd_waits and grant_at < 0 and need <= free + 1e-6:
            grant_at = taken
            free -= need
        taken += 1
    chunks = reader.chunks
    cdef Py_ssize_t ri = reader.i, n_chunks = len(chunks)
    cdef bint again = False
    if grant_at >= 0:
        if ri >= n_chunks - 1:
            return f._hand_back(now)
        again = chunks[ri + 1].atoms <= free + 1e-6
    cdef double out_ratio = f.out_ratio
    cdef double n_out = n if out_ratio == 1 else n * out_ratio
    cdef double capacity = room.capacity
    cdef double hold = n_out if n_out <= capacity else capacity          # tokens.held
    cdef double wdma_hold = f.wdma_hold
    cdef double room_free = room.free + wdma_hold if release_first else room.free
    if not hold <= room_free + 1e-6:
        return f._hand_back(now)
    cdef double book = got if not pending or release_first else wdma_free
    if not book < limit - 1e-6 or not head > book:
        return f._hand_back(now)
    if again and book > got:
        return f._hand_back(now)
    # -- commit: the processes' calls in their order --------------------------------------------
    f.taken += 1
    eid = env._eid
    if release_first:
        room.free += wdma_hold
    cdef Tracker core = f.core_tracker
    cdef double wait_from = f.wait_from
    if got > wait_from:
        core.add(1, wait_from, got, f.empty)
    cdef Py_ssize_t k
    cdef double pool_free, used
    for k in range(taken):
        pool_free = pool.free
        pool_free += items.popleft().n
        if k == grant_at:
            if not rd_held:
                waiters.popleft()
                rd_held = True
                f.rd_held = True
            pool_free -= need
            pool.free = pool_free
            used = pool.capacity - pool_free
            if used > pool.peak:
                pool.peak = used
        else:
            pool.free = pool_free
    st.have, st.have_last = have - n, have_last
    cdef double seg_first = seg.first, seg_last = seg.last
    cdef double lo = have_last if have_last < seg_last else seg_last
    if seg_first > lo:
        lo = seg_first
    cdef double hi = seg_last if seg_last > have_last else have_last
    cdef double first, last, port_free, port_cycles, done, rsp, ready, wake
    cdef Tracker rt
    rd_eid = None
    if grant_at >= 0:
        # SDP_RDMA's grant first: its read (OperandReader.book), then its sleep
        rt = reader.tracker
        rt.add(1, reader.wait_from, got, reader.full)
        chunk = chunks[ri]
        client, _, per_atom = reader.per_element[0]
        first, last, port_free, port_cycles, done = _reserve(
            reader.memifs[0], client, True, round(per_atom * chunk.atoms), got, False, 0.0, 0.0)
        if first < 0.0:
            first = 0.0
        if last < 0.0:
            last = 0.0
        if port_free < 0.0:
            port_free = 0.0
        rsp, ready = reader.rsp, reader.ready
        ri += 1
        reader.i = ri
        ops.put(SEG(chunk.atoms, first + rsp if first + rsp > ready else ready,
                    last + rsp if last + rsp > ready else ready, None, ri == n_chunks))
        rt.add(0, port_free - (0.0 + port_cycles), port_free, "operands")
        f.rd_need = chunks[ri].atoms
        wake = got + (port_free - got)
        reader.wait_from = wake
        rd_eid = next(eid)
        if again:
            f._push_reader_wake(wake, rd_eid)
            rd_eid = None
        f.rd_eid = rd_eid
    # the core: its output room, then the stripe (tokens.serve)
    cdef double room_left = room.free - hold
    room.free = room_left
    used = capacity - room_left
    if used > room.peak:
        room.peak = used
    if pending and not release_first:
        room.free += wdma_hold
    cdef double c = f.c, depth = f.depth
    cdef double start = got if got > lo else lo
    cdef double end = start + n * c
    if hi + c > end:
        end = hi + c
    end = end + 0.0
    first, last = start + c + depth, end + depth
    core.add(1, got, start, "waiting for data")
    core.add(0, start, end, "busy")
    core_free = got + (end - got) if end > got else got
    f.core_free = core_free
    f.wait_from = core_free
    # the write DMA: takes the atoms, books, sleeps
    wdma = f.wdma
    cdef Tracker writer = f.wdma_tracker
    writer.add(1, wdma.wait_from, book, "no output")
    cdef long long nbytes = <long long>(n_out * f.atom)
    cdef double pipeline = f.pipeline
    if n_out > 0:
        _, _, port_free, port_cycles, done = _reserve(
            f.memif, "SDP_WDMA", False, nbytes, book, True, first + pipeline, last + pipeline)
        writer.add(0, port_free - port_cycles, port_free, "write")
        if done > wdma.done:
            wdma.done = done
        wdma_free = book + (port_free - book) if port_free > book else book
    else:
        wdma_free = book
    f.wdma_free = wdma_free
    wdma.wait_from = wdma_free
    f.wdma_hold = hold
    f.core_eid, f.wdma_eid = next(eid), next(eid)
    f.reserved += 2 + (rd_eid is not None)
    return True
