# cython: language_level=3, boundscheck=False, wraparound=False
"""Merged span totals in one C pass over the activity log's segments (issue 20:
`engine.activity.ActivityLog.merged`).

Per (unit, kind) the union's length of its spans: sorted by start, a group goes on while the
next start is at most the group's reach (its largest end so far), the groups' lengths
(reach - first start) added from the left, the straightforward loop's float operations.  A
unit's spans are made in time order almost always, so the log's own order is already sorted by
start: one pass keeps, per key, the open group and the running total, with no sort and no
copy.  Which of several equal starts comes first does not change the groups (every span ends at
or after its start: the first of them opens a group or joins exactly as any other would, the
rest join), so the log's order among ties is as good as the loop's.  A key whose starts go
back somewhere is gathered in a second pass and sorted (numpy's stable argsort) before the same
merge."""
import numpy as np
cimport numpy as cnp
from libc.stdlib cimport malloc, realloc, free

cnp.import_array()


cdef struct KeyState:
    double cur_start        # the open group's first start
    double reach            # the open group's largest end
    double total            # closed groups' lengths, added from the left
    double last_start       # the last start seen (sortedness)
    Py_ssize_t count        # spans counted
    bint sorted_            # starts never went back
    double *gather_starts   # the second pass's copies (a key whose starts went back)
    double *gather_ends
    Py_ssize_t gathered


cdef class _Merge:
    """The state of one merge: global keys (unit, kind), which are wanted, their groups."""
    cdef KeyState *state
    cdef Py_ssize_t n_keys, capacity
    cdef list keys              # (unit, kind) per global key
    cdef list wanted            # bool per global key
    cdef list first_order       # global keys in the order of their first counted span
    cdef dict by_unit           # unit -> {kind: global key}
    cdef list buffers           # the arrays the gather pointers point into
    cdef object kind, units
    cdef bint clipped
    cdef double lo, hi

    def __cinit__(self):
        self.state = NULL
        self.n_keys = self.capacity = 0

    def __dealloc__(self):
        free(self.state)

    cdef Py_ssize_t key(self, unit, kind) except -2:
        """The global key of (unit, kind), -1 when the merge does not want it."""
        kinds = self.by_unit.get(unit)
        if kinds is None:
            kinds = self.by_unit[unit] = {}
        code = (<dict>kinds).get(kind)
        if code is not None:
            return <Py_ssize_t>code
        cdef Py_ssize_t g
        cdef KeyState *grown
        if not ((self.kind is None or kind == self.kind)
                and (self.units is None or unit in self.units)):
            kinds[kind] = -1
            return -1
        g = self.n_keys
        if g == self.capacity:
            self.capacity = 2 * self.capacity + 16
            grown = <KeyState *>realloc(self.state, self.capacity * sizeof(KeyState))
            if grown == NULL:
                raise MemoryError()
            self.state = grown
        self.state[g].count = 0
        self.state[g].total = 0.0
        self.state[g].sorted_ = True
        self.state[g].gather_starts = self.state[g].gather_ends = NULL
        self.n_keys += 1
        self.keys.append((unit, kind))
        kinds[kind] = g
        return g

    cdef inline int take(self, Py_ssize_t g, double s, double e) except -1:
        """One span of key `g` in log order (already clipped and kept)."""
        cdef KeyState *k = &self.state[g]
        if k.count == 0:
            self.first_order.append(g)
            k.cur_start, k.reach, k.last_start = s, e, s
        else:
            if s < k.last_start:
                k.sorted_ = False
            k.last_start = s
            if s > k.reach:
                k.total += k.reach - k.cur_start
                k.cur_start, k.reach = s, e
            elif e > k.reach:
                k.reach = e
        k.count += 1
        return 0


def merge_spans(list segments, kind=None, units=None, clip=None) -> dict:
    """Per unit and kind, the merged length of the spans in `segments` (see the module doc),
    units and kinds in the order their first counted span was made.

    `segments` in log order, each (first, spans) for a list of (unit, kind, start, end, label)
    tuples or (first, keys, key_idx, starts, ends, shift) for columns (`shift`: None, or added
    to every start and end): its spans from position `first` on.  `kind` and `units` (a set)
    keep only those spans when given; `clip` = (lo, hi) cuts each span to it and leaves out
    the empty cuts."""
    cdef _Merge m = _Merge()
    m.keys, m.first_order, m.by_unit = [], [], {}
    m.kind, m.units = kind, units
    m.clipped = clip is not None
    if m.clipped:
        m.lo, m.hi = clip[0], clip[1]
    m.buffers = []
    cdef Py_ssize_t g
    cdef cnp.ndarray starts, ends
    if _scan(m, segments, False):
        for g in range(m.n_keys):
            if not m.state[g].sorted_:
                starts, ends = np.empty(m.state[g].count), np.empty(m.state[g].count)
                m.buffers.append((g, starts, ends))
                m.state[g].gather_starts = <double *>starts.data
                m.state[g].gather_ends = <double *>ends.data
                m.state[g].gathered = 0
        _scan(m, segments, True)
        for g, starts, ends in m.buffers:
            _merge_sorted(&m.state[g], starts, ends)
    cdef dict out = {}
    cdef KeyState *k
    for g in m.first_order:
        k = &m.state[g]
        unit, k_name = m.keys[g]
        out.setdefault(unit, {})[k_name] = k.total + (k.reach - k.cur_start)
    return out


cdef int _scan(_Merge m, list segments, bint gather) except -1:
    """Every span of `segments` through `m.take`, or (`gather`) copied into the gather
    arrays of the keys that have them.  Returns whether some key's starts went back."""
    cdef Py_ssize_t i, n, first, g, n_local
    cdef double s, e, shift
    cdef bint shifted
    cdef tuple seg, span
    cdef list spans
    cdef cnp.intp_t[::1] key_idx
    cdef const double[::1] starts
    cdef const double[::1] ends
    cdef Py_ssize_t[::1] remap
    for seg in segments:
        first = seg[0]
        if len(seg) == 2:
            spans = <list>seg[1]
            for i in range(first, len(spans)):
                span = <tuple>spans[i]
                g = m.key(span[0], span[1])
                if g < 0:
                    continue
                s, e = span[2], span[3]
                if not _keep(m, &s, &e):
                    continue
                _put(m, gather, g, s, e)
            continue
        keys = seg[1]
        key_idx = np.ascontiguousarray(seg[2], np.intp)
        starts = np.ascontiguousarray(seg[3], np.float64)
        ends = np.ascontiguousarray(seg[4], np.float64)
        shifted = seg[5] is not None
        shift = seg[5] if shifted else 0.0
        n_local = len(keys)
        remap = np.empty(n_local, np.intp)
        for i in range(n_local):
            key = keys[i]
            remap[i] = m.key(key[0], key[1])
        n = key_idx.shape[0]
        for i in range(first, n):
            g = remap[key_idx[i]]
            if g < 0:
                continue
            if shifted:
                s, e = shift + starts[i], shift + ends[i]
            else:
                s, e = starts[i], ends[i]
            if not _keep(m, &s, &e):
                continue
            _put(m, gather, g, s, e)
    if gather:
        return False
    for g in range(m.n_keys):
        if not m.state[g].sorted_:
            return True
    return False


cdef inline bint _keep(_Merge m, double *s, double *e):
    """Cut the span to the clip; whether anything is left (always, without a clip)."""
    if not m.clipped:
        return True
    if s[0] < m.lo:
        s[0] = m.lo
    if e[0] > m.hi:
        e[0] = m.hi
    return e[0] > s[0]


cdef inline int _put(_Merge m, bint gather, Py_ssize_t g, double s, double e) except -1:
    cdef KeyState *k
    if not gather:
        return m.take(g, s, e)
    k = &m.state[g]
    if k.gather_starts != NULL:
        k.gather_starts[k.gathered] = s
        k.gather_ends[k.gathered] = e
        k.gathered += 1
    return 0


cdef void _merge_sorted(KeyState *k, cnp.ndarray starts, cnp.ndarray ends):
    """Restart key `k`'s groups from its spans, sorted by start first."""
    order = np.argsort(starts, kind="stable")
    cdef const double[::1] s = np.ascontiguousarray(starts[order])
    cdef const double[::1] e = np.ascontiguousarray(ends[order])
    cdef Py_ssize_t i, n = s.shape[0]
    k.total = 0.0
    k.cur_start, k.reach = s[0], e[0]
    for i in range(1, n):
        if s[i] > k.reach:
            k.total += k.reach - k.cur_start
            k.cur_start, k.reach = s[i], e[i]
        elif e[i] > k.reach:
            k.reach = e[i]


def merged_length(starts, ends) -> float:
    """Length of the union of the intervals [starts[i], ends[i]] (float64 arrays of one
    length), as `merge_spans` merges one key's spans; no intervals: 0.0."""
    cdef Py_ssize_t n = len(starts)
    if not n:
        return 0.0
    cdef _Merge m = _Merge()
    m.keys, m.first_order, m.by_unit = [], [], {}
    m.kind = m.units = None
    m.clipped = False
    m.buffers = []
    m.key("", "")
    cdef const double[::1] s = np.ascontiguousarray(starts, np.float64)
    cdef const double[::1] e = np.ascontiguousarray(ends, np.float64)
    cdef Py_ssize_t i
    for i in range(n):
        m.take(0, s[i], e[i])
    if not m.state[0].sorted_:
        _merge_sorted(&m.state[0], np.asarray(s), np.asarray(e))
    return m.state[0].total + (m.state[0].reach - m.state[0].cur_start)
