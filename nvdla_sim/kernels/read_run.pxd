# cython: language_level=3
from .tracker cimport Tracker

cpdef tuple read_run(object memif, str client, long long nbytes, long long count,
                     double port_free, object pool, double need, Tracker tracker, str label)
