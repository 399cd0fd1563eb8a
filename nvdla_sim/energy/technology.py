"""Process nodes: which ones CACTI models and how figures move from one node to another.

CACTI 7 (the build zigzag-dse ships) reads ITRS device tables for 22, 32, 45, 65, 90 and 180 nm
and interpolates linearly between neighbouring tables for any node in between (28 nm is its own
interpolation of 22 and 32 nm).  Below 22 nm it has no table; 16 nm is supported here by scaling
CACTI's 22 nm result (docs/energy.md):

    energy  x (L / L_ref) x (Vdd(L) / Vdd(L_ref))^2    (switched capacitance ~ L, C V^2)
    area    x (L / L_ref)^2                            (ideal layout shrink)

with Vdd the nominal supply of CACTI's itrs-hp tables (22 nm 0.8 V, 32 nm 0.9 V, 45 nm 1.0 V,
65 nm 1.1 V, 90 nm 1.2 V, 180 nm 1.5 V), linear between them and held at 0.8 V below 22 nm.  The
same rule moves the 45 nm logic figures of docs/energy.md to the configured node.
"""
from __future__ import annotations

import math

from ..errors import NvdlaSimError

CACTI_MIN_NM, CACTI_MAX_NM = 22, 180
SCALED_NODES_NM = (16,)                # below CACTI's tables: scaled from 22 nm
VDD_BY_NODE = ((22, 0.8), (32, 0.9), (45, 1.0), (65, 1.1), (90, 1.2), (180, 1.5))


def check_node(node_nm, field: str = "technology_nm") -> int:
    """The node if CACTI can model it (directly or by the 16 nm rule), else a one-line error."""
    ok = (isinstance(node_nm, (int, float)) and not isinstance(node_nm, bool)
          and math.isfinite(node_nm)
          and (CACTI_MIN_NM <= node_nm <= CACTI_MAX_NM or node_nm in SCALED_NODES_NM))
    if not ok:
        raise NvdlaSimError(f"{field}: CACTI models {CACTI_MIN_NM}-{CACTI_MAX_NM} nm (16 nm is "
                            f"scaled from 22 nm), got {node_nm!r}")
    return node_nm


def cacti_node(node_nm: float) -> float:
    """The node CACTI is run at for `node_nm`."""
    return CACTI_MIN_NM if node_nm < CACTI_MIN_NM else node_nm


def vdd(node_nm: float) -> float:
    """Nominal supply (V) of CACTI's itrs-hp device tables, linear between them."""
    if node_nm <= VDD_BY_NODE[0][0]:
        return VDD_BY_NODE[0][1]
    for (n0, v0), (n1, v1) in zip(VDD_BY_NODE, VDD_BY_NODE[1:]):
        if node_nm <= n1:
            return v0 + (v1 - v0) * (node_nm - n0) / (n1 - n0)
    return VDD_BY_NODE[-1][1]


def energy_scale(to_nm: float, from_nm: float) -> float:
    """Factor taking a dynamic energy at `from_nm` to `to_nm` (C ~ L, C V^2)."""
    return (to_nm / from_nm) * (vdd(to_nm) / vdd(from_nm)) ** 2


def area_scale(to_nm: float, from_nm: float) -> float:
    return (to_nm / from_nm) ** 2


def leakage_scale(to_nm: float, from_nm: float) -> float:
    """Leakage power moves with the area it leaks over and the supply (first order)."""
    return area_scale(to_nm, from_nm) * vdd(to_nm) / vdd(from_nm)
