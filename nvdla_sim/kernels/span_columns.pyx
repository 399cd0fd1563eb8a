# cython: language_level=3, boundscheck=False, wraparound=False
"""The activity log's spans as columns in one C pass (issue 20: `engine.activity.SpanBlock`).

A span is the tuple (unit, kind, start, end, label); a recorded step's spans (hundreds of
thousands on a small array) become columns when the step cache freezes them.  Units, kinds and
labels are numbered in order of first appearance; starts and ends are copied as float64."""
import numpy as np
cimport numpy as cnp

cnp.import_array()


def span_columns(list spans):
    """(units, unit_idx, kinds, kind_idx, labels, label_idx, starts, ends) of `spans`: each
    field's distinct values in order of first appearance and every span's index among them
    (intp), its start and end (float64)."""
    cdef Py_ssize_t n = len(spans), i
    cdef cnp.ndarray[cnp.intp_t] unit_idx = np.empty(n, np.intp)
    cdef cnp.ndarray[cnp.intp_t] kind_idx = np.empty(n, np.intp)
    cdef cnp.ndarray[cnp.intp_t] label_idx = np.empty(n, np.intp)
    cdef cnp.ndarray[cnp.float64_t] starts = np.empty(n, np.float64)
    cdef cnp.ndarray[cnp.float64_t] ends = np.empty(n, np.float64)
    cdef dict units = {}, kinds = {}, labels = {}
    cdef tuple span
    for i in range(n):
        span = <tuple>spans[i]
        unit_idx[i] = _code(units, span[0])
        kind_idx[i] = _code(kinds, span[1])
        starts[i] = span[2]
        ends[i] = span[3]
        label_idx[i] = _code(labels, span[4])
    return (list(units), unit_idx, list(kinds), kind_idx, list(labels), label_idx, starts,
            ends)


cdef inline Py_ssize_t _code(dict index, value) except -1:
    """`value`'s number in `index`, a new value the next one."""
    code = index.get(value)
    if code is None:
        code = index[value] = len(index)
    return <Py_ssize_t>code
