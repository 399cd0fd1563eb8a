"""The MAC-array variants of nv_small and nv_large that the speed benchmarks time (issue 20).

One definition, imported by `bench_tokens.py` and `bench_presets.py`.  Each is a preset with
another ATOMIC_C x ATOMIC_K array, a CBUF entry one ATOMIC_C atom wide (the bank width the
validator asks for), on the preset's CBUF banks, SDP/PDP/CDP and memory interfaces:
- nv_small's: its 8-byte memory atom (nv_small itself is the 64-MAC one, 8x8);
- nv_large's: a memory atom of ATOMIC_K bytes, as the array sweep builds them.
"""
from __future__ import annotations

SMALL_ARRAYS = ((16, 8), (32, 8), (64, 8), (64, 16))           # 128, 256, 512, 1024 MACs
LARGE_ARRAYS = ((8, 8), (16, 8), (16, 16), (32, 16), (64, 16))  # 64 .. 1024 MACs


def variant(preset: str, atomic_c: int, atomic_k: int) -> dict:
    """The hardware mapping of `preset` with an atomic_c x atomic_k MAC array."""
    hw = {"preset": preset, "atomic_c": atomic_c, "atomic_k": atomic_k,
          "cbuf": {"bank_width_bytes": atomic_c}}
    if preset == "nv_large":
        hw["memory_atomic_bytes"] = atomic_k
    return hw


# name (preset_CxK) -> hardware mapping
VARIANTS = {**{f"nv_small_{c}x{k}": variant("nv_small", c, k) for c, k in SMALL_ARRAYS},
            **{f"nv_large_{c}x{k}": variant("nv_large", c, k) for c, k in LARGE_ARRAYS}}
