"""Cython kernels: the bit-exact arithmetic of NVDLA, whole hardware layers at a time.

`fixedpoint.pxd` holds the fixed-point primitives (round half away from zero, saturation, shifts) that
every kernel uses; `fixed.pyx` exposes them to Python for tests and tools.
"""
