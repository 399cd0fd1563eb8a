# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=False
"""`OperandWriter.take` in C doubles (issue 20): a fused element-wise layer's stripe taken by
the SDP core, its operand reader and its write DMA without events (timing/sdp_operands.py says
what and why).

The checks and the commit are those of the Python method (`OperandWriter._take`), step by step
in its order, and the two bookings are `MemoryInterface.reserve`'s (kernels/booking.pyx `book`),
so every float, booking, transfer record and span is bit for bit the Python method's (tests/test_speed_operands.py compares the two with
NVDLA_SIM_OPERAND_C=0).  Rare turns stay in Python: a declined stripe (`_hand_back`), the
reader's wake-up put on the queue, a layer whose SDP_RDMA reads several per-element operands.
About twice as fast per stripe as the Python method (0.135 -> 0.076 CPU s for ResNet-50's
12,160 fused stripes on a 64-MAC nv_large).
"""
from .booking cimport Booking, book
from .tracker cimport Tracker

cdef object SEG = None          # timing.tokens.Seg (set by `init`: no import cycle)


def init(seg_type) -> None:
    global SEG
    SEG = seg_type


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
    cdef double at = got if not pending or release_first else wdma_free
    if not at < limit - 1e-6 or not head > at:
        return f._hand_back(now)
    if again and at > got:
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
    cdef Booking b
    rd_eid = None
    if grant_at >= 0:
        # SDP_RDMA's grant first: its read (OperandReader.book), then its sleep
        rt = reader.tracker
        rt.add(1, reader.wait_from, got, reader.full)
        chunk = chunks[ri]
        client, _, per_atom = reader.per_element[0]
        book(reader.memifs[0], client, True, round(per_atom * chunk.atoms), got, &b)
        first, last, port_free, port_cycles = b.first, b.last, b.port_free, b.port_cycles
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
    writer.add(1, wdma.wait_from, at, "no output")
    cdef long long nbytes = <long long>(n_out * f.atom)
    cdef double pipeline = f.pipeline
    if n_out > 0:
        book(f.memif, "SDP_WDMA", False, nbytes, at, &b, 0, None, True, first + pipeline, True,
             last + pipeline)
        port_free, port_cycles, done = b.port_free, b.port_cycles, b.done
        writer.add(0, port_free - port_cycles, port_free, "write")
        if done > wdma.done:
            wdma.done = done
        wdma_free = at + (port_free - at) if port_free > at else at
    else:
        wdma_free = at
    f.wdma_free = wdma_free
    wdma.wait_from = wdma_free
    f.wdma_hold = hold
    f.core_eid, f.wdma_eid = next(eid), next(eid)
    f.reserved += 2 + (rd_eid is not None)
    return True
