"""How the reports write a figure: enough digits for a small network (a LeNet's 0.0023 GMAC is
`2.294 MMAC`, not `0.002 GMAC`) and the same text as before for the large ones."""
from __future__ import annotations

MACS = (("GMAC", 1e9), ("MMAC", 1e6), ("kMAC", 1e3), ("MAC", 1.0))
BYTES = (("MiB", 2.0 ** 20), ("KiB", 1024.0), ("B", 1.0))


def scaled(value: float, units: tuple[tuple[str, float], ...], decimals: int = 3) -> str:
    """`value` in the largest of `units` (name, size; largest first) it reaches one of."""
    for name, size in units:
        if abs(value) >= size:
            break
    return f"{value / size:.{decimals}f} {name}"


def fixed_or_significant(value: float, decimals: int = 3, digits: int = 4) -> str:
    """`decimals` places from 1 up (5.779), `digits` significant ones below (0.001097)."""
    return f"{value:.{decimals}f}" if abs(value) >= 1 or value == 0 else f"{value:.{digits}g}"
