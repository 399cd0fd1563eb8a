# cython: language_level=3
cdef class Tracker:
    cdef public object log
    cdef public str unit
    cdef bint _is_open[2]          # per kind (0 busy, 1 stall): a span is open
    cdef double _start[2]
    cdef double _end[2]
    cdef list _label               # per kind: the open span's label
    cdef int _first                # the kind opened first since the last flush (-1: none)
    cdef void add(self, int k, double start, double end, object label) except *
