# cython: language_level=3, boundscheck=False, wraparound=False
"""`Tracker` in C (issue 20): the busy and stall spans of one timing process, merged while
contiguous, into the ActivityLog.  Every token of every process records one or more spans, so
this is the hottest bookkeeping of a run; `kernels/stripe_run.pyx` calls `add` without Python.

Rule: a span of a kind (busy, stall) with the same label as the open span of that kind, starting
no later than the open one ends (1e-9 cycles of slack), extends it; any other span logs the open
one and opens itself.  `flush` logs the open spans in the order their kinds were first opened
since the last flush.  Only spans with end > start are ever opened, so every logged span is one
`ActivityLog.add` keeps."""

cdef str BUSY = "busy"
cdef str STALL = "stall"
cdef tuple KINDS = (BUSY, STALL)


cdef inline int _kind(str kind) except -1:
    if kind is BUSY or kind == BUSY:
        return 0
    if kind is STALL or kind == STALL:
        return 1
    raise ValueError(f"Tracker: unknown span kind {kind!r} (busy or stall)")


cdef class Tracker:
    """Busy and stall spans of one timing process (see the module doc)."""

    def __init__(self, log, str unit):
        self.log = log
        self.unit = unit
        self._is_open[0] = self._is_open[1] = False
        self._first = -1
        self._label = [None, None]

    cdef void add(self, int k, double start, double end, object label) except *:
        if end <= start:
            return
        if self._is_open[k]:
            if start <= self._end[k] + 1e-9 and (label is self._label[k]
                                                  or label == self._label[k]):
                if end > self._end[k]:
                    self._end[k] = end
                return
            self.log._tail.append((self.unit, KINDS[k], self._start[k], self._end[k],
                                   self._label[k]))       # ActivityLog.add (end > start)
        else:
            self._is_open[k] = True
            if self._first < 0:
                self._first = k
        self._start[k] = start
        self._end[k] = end
        self._label[k] = label

    def span(self, str kind, double start, double end, label="") -> None:
        """Extend the open span of `kind` when this one continues it with the same label, else
        log that one and open this."""
        self.add(_kind(kind), start, end, label)

    def busy(self, double start, double end, label="busy") -> None:
        self.add(0, start, end, label)

    def stall(self, double start, double end, label) -> None:
        self.add(1, start, end, label)

    def open_end(self, str kind, label):
        """The end of the open span of `kind` when its label is `label`, else None."""
        cdef int k = _kind(kind)
        if self._is_open[k] and (label is self._label[k] or label == self._label[k]):
            return self._end[k]
        return None

    def extend_open(self, str kind, double end) -> None:
        """Move the open span of `kind` to end at `end` (a caller that merged spans itself)."""
        cdef int k = _kind(kind)
        if not self._is_open[k]:
            raise ValueError(f"Tracker {self.unit}: no open {kind} span to extend")
        self._end[k] = end

    def flush(self) -> None:
        cdef int k, i
        if self._first < 0:
            return
        for i in range(2):
            k = self._first if i == 0 else 1 - self._first
            if self._is_open[k]:
                self.log.add(self.unit, KINDS[k], self._start[k], self._end[k], self._label[k])
                self._is_open[k] = False
                self._label[k] = None
        self._first = -1
