"""The energy/area constants (constants.yaml, cited in docs/energy.md), a user YAML over them,
and the per-operation figures at the configured node derived from them.

Derivation rules (docs/energy.md):
  - an integer adder's energy/area is linear in its width between Horowitz's 8/16/32-bit points
    (beyond 32 bits, proportional to the width);
  - an integer multiplier's is proportional to the product of its operand widths (an array
    multiplier's partial-product bits), anchored at the 8x8-bit point: 32x32 then gives 16x the
    8-bit figure, as Horowitz's 3.1 / 0.2 = 15.5 does;
  - a MAC is a multiplier plus an adder of the product's width (the CMAC adder tree);
    INT16: 16x16 multiply + 32-bit add; FP16: FP16 multiply + FP32 add (products summed wider);
  - 45 nm figures move to the node by technology.energy_scale / area_scale.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from ..errors import NvdlaSimError
from ..yaml_file import read_yaml
from .technology import area_scale, energy_scale

DEFAULTS_PATH = Path(__file__).with_name("constants.yaml")
REF_NM = 45
_INT_POINTS = (8, 16, 32)


def _positive_numbers(d: dict, where: str) -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise NvdlaSimError(f"{where}.{k}: must be a finite number >= 0, got {v!r}")
        out[k] = float(v)
    return out


def _merge(base: dict, over: dict, where: str) -> dict:
    out = dict(base)
    for key, value in over.items():
        if key not in base:
            raise NvdlaSimError(f"{where}{key}: unknown energy table field (known: "
                                f"{', '.join(sorted(base))})")
        if isinstance(base[key], dict):
            if not isinstance(value, dict):
                raise NvdlaSimError(f"{where}{key}: expected a mapping")
            extra = set(value) - set(base[key])
            if extra and key not in ("dram_pj_per_bit", "dram_type_by_profile"):
                raise NvdlaSimError(f"{where}{key}.{sorted(extra)[0]}: unknown field")
            out[key] = {**base[key], **value}
        else:
            out[key] = value
    return out


@dataclass(frozen=True)
class EnergyTable:
    logic_pj_45nm: dict
    logic_um2_45nm: dict
    dram_pj_per_bit: dict
    dram_type: str | None
    dram_type_by_profile: dict
    sram_cell: str
    logic_leakage_mw_per_mm2: float | None
    source: str = "defaults"

    # -- operators at 45 nm -------------------------------------------------------------------
    def _int_add(self, table: dict, bits: int) -> float:
        pts = [(b, table[f"int_add_{b}"]) for b in _INT_POINTS]
        if bits <= pts[0][0]:
            return pts[0][1] * bits / pts[0][0]
        for (b0, v0), (b1, v1) in zip(pts, pts[1:]):
            if bits <= b1:
                return v0 + (v1 - v0) * (bits - b0) / (b1 - b0)
        return pts[-1][1] * bits / pts[-1][0]

    def _int_mult(self, table: dict, a_bits: int, b_bits: int) -> float:
        return table["int_mult_8"] * a_bits * b_bits / 64.0

    def _op(self, table: dict, op: str) -> float:
        kind, bits = op.rsplit("_", 1)
        if kind == "int_add":
            return self._int_add(table, int(bits))
        if kind == "int_mult":
            a, _, b = bits.partition("x")
            return self._int_mult(table, int(a), int(b or a))
        return table[op]

    def energy_pj(self, op: str, node_nm: float) -> float:
        """pJ of one operator (int_add_N, int_mult_AxB, fp_add_16/32, fp_mult_16/32) at the node."""
        return self._op(self.logic_pj_45nm, op) * energy_scale(node_nm, REF_NM)

    def area_um2(self, op: str, node_nm: float) -> float:
        return self._op(self.logic_um2_45nm, op) * area_scale(node_nm, REF_NM)

    # -- MACs ------------------------------------------------------------------------------
    @staticmethod
    def mac_ops(precision: str) -> tuple[str, str]:
        """(multiplier, adder) of one MAC in a precision: INT1..INT16 or FP16."""
        p = precision.upper()
        if p == "FP16":
            return "fp_mult_16", "fp_add_32"
        if p.startswith("INT") and p[3:].isdigit() and 1 <= int(p[3:]) <= 16:
            n = int(p[3:])
            return f"int_mult_{n}x{n}", f"int_add_{2 * n}"
        raise NvdlaSimError(f"precision '{precision}': no MAC energy (INT1..INT16 or FP16)")

    def mac_pj(self, precision: str, node_nm: float) -> float:
        m, a = self.mac_ops(precision)
        return self.energy_pj(m, node_nm) + self.energy_pj(a, node_nm)

    def mac_um2(self, precision: str, node_nm: float) -> float:
        m, a = self.mac_ops(precision)
        return self.area_um2(m, node_nm) + self.area_um2(a, node_nm)

    # -- DRAM ----------------------------------------------------------------------------------
    def dram_kind(self, profile_name: str) -> str:
        kind = self.dram_type or self.dram_type_by_profile.get(profile_name, "ddr4")
        if kind not in self.dram_pj_per_bit:
            raise NvdlaSimError(f"energy table dram_type: '{kind}' has no dram_pj_per_bit entry "
                                f"(known: {', '.join(sorted(self.dram_pj_per_bit))})")
        return kind

    def dram_pj_bit(self, profile_name: str) -> float:
        return self.dram_pj_per_bit[self.dram_kind(profile_name)]


def _build(data: dict, where: str, source: str) -> EnergyTable:
    for key in ("logic_pj_45nm", "logic_um2_45nm", "dram_pj_per_bit"):
        data[key] = _positive_numbers(data[key], f"{where}{key}")
    for key in ("logic_pj_45nm", "logic_um2_45nm"):
        for op in ("int_add_8", "int_add_16", "int_add_32", "int_mult_8", "fp_add_16", "fp_add_32",
                   "fp_mult_16", "fp_mult_32"):
            if op not in data[key]:
                raise NvdlaSimError(f"{where}{key}.{op}: missing")
    leak = data.get("logic_leakage_mw_per_mm2")
    if leak is not None:
        leak = _positive_numbers({"logic_leakage_mw_per_mm2": leak}, where.rstrip(": ") or "energy")[
            "logic_leakage_mw_per_mm2"]
    for k in ("dram_type",):
        if data.get(k) is not None and data[k] not in data["dram_pj_per_bit"]:
            raise NvdlaSimError(f"{where}dram_type: '{data[k]}' is not in dram_pj_per_bit "
                                f"({', '.join(sorted(data['dram_pj_per_bit']))})")
    if not isinstance(data.get("dram_type_by_profile"), dict):
        raise NvdlaSimError(f"{where}dram_type_by_profile: expected a mapping")
    return EnergyTable(data["logic_pj_45nm"], data["logic_um2_45nm"], data["dram_pj_per_bit"],
                       data.get("dram_type"), dict(data["dram_type_by_profile"]),
                       str(data.get("sram_cell")), leak, source)


_cache: dict[str, EnergyTable] = {}


def load_table(path: str | Path | None = None, overrides: dict | None = None) -> EnergyTable:
    """The default constants, then the YAML at `path`, then `overrides`; bad values are one-line
    errors naming the file and the field."""
    key = repr((str(path), overrides))
    if key in _cache:
        return _cache[key]
    data = read_yaml(DEFAULTS_PATH)
    source = "defaults"
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise NvdlaSimError(f"energy_table: {p}: no such file")
        user = read_yaml(p)
        if not isinstance(user, dict):
            raise NvdlaSimError(f"{p}: expected a mapping of energy table fields")
        data = _merge(data, user, f"{p}: ")
        source = str(p)
    if overrides:
        data = _merge(data, overrides, "energy: ")
    where = f"{path}: " if path is not None else ("energy: " if overrides else "")
    table = _build(data, where, source)
    _cache[key] = table
    return table
