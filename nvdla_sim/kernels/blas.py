"""One BLAS thread around the simulator's own matrix products (the im2col convolutions of
`conv_gemm` and of the float reference).

Why: the products are small to medium (a ResNet-50 layer is 10-250 MMAC), and OpenBLAS's worker
threads busy-wait between calls; on a machine whose cores are already busy (a sweep with
`--jobs 2`, other processes) the second thread costs far more CPU than it saves wall time
(measured: the float reference of ResNet-50 took 1.46 CPU s with two threads under load, 0.20 s
with one; docs/performance.md).  The thread count is set through OpenBLAS's own entry points,
found in the library numpy loaded, and restored afterwards; with another BLAS, or none found,
`single_thread()` does nothing.
"""
from __future__ import annotations

import contextlib
import ctypes
from typing import Iterator

# (set, get) entry points: scipy-openblas (numpy wheels, 64-bit integers), plain OpenBLAS.
_ENTRY_POINTS = (("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
                 ("openblas_set_num_threads64_", "openblas_get_num_threads64_"),
                 ("openblas_set_num_threads", "openblas_get_num_threads"))
_found: tuple | None = None
_searched = False


def _openblas() -> tuple | None:
    """(set_num_threads, get_num_threads) of the OpenBLAS loaded in this process, or None."""
    global _found, _searched
    if _searched:
        return _found
    _searched = True
    import numpy  # noqa: F401  (loads the BLAS numpy links)
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps
                     if "openblas" in line.lower() and line.split()[-1].startswith("/")}
    except OSError:
        return None
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for set_name, get_name in _ENTRY_POINTS:
            if hasattr(lib, set_name) and hasattr(lib, get_name):
                setter, getter = getattr(lib, set_name), getattr(lib, get_name)
                setter.argtypes, setter.restype = [ctypes.c_int], None
                getter.argtypes, getter.restype = [], ctypes.c_int
                _found = (setter, getter)
                return _found
    return None


@contextlib.contextmanager
def single_thread() -> Iterator[None]:
    """Run the block's BLAS calls on one thread, then restore the previous count."""
    entry = _openblas()
    if entry is None:
        yield
        return
    setter, getter = entry
    before = getter()
    if before == 1:
        yield
        return
    setter(1)
    try:
        yield
    finally:
        setter(before)
