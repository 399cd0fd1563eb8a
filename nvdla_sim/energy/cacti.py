"""SRAM energy, leakage and area from CACTI 7, the build shipped by the `zigzag-dse` package.

`sram_cost(geometry, node_nm)` returns per-access read/write energy (pJ), standby leakage (mW)
and area (mm^2) of one SRAM macro: `depth` entries of `width_bytes`, one read-write port, one
access = one entry.  The CACTI input is zigzag's baseline configuration (its `CactiConfig`) with
this macro's size, block, bus width, node and cell type; CACTI runs in a temporary folder and
its CSV line is parsed.  Results are cached on disk by geometry (`cache_dir()`; a sweep pays
for each macro once) and in memory.  Nodes below CACTI's tables (16 nm) are run at 22 nm and
scaled (technology.py).  A geometry CACTI rejects is a one-line error naming the field.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from ..errors import NvdlaSimError
from .technology import area_scale, cacti_node, check_node, energy_scale, leakage_scale

CACHE_VERSION = 1                  # bump when the CACTI input or the parsing changes
CELL_TYPES = ("itrs-hp", "itrs-lstp", "itrs-lop")
_memo: dict[str, "SramCost"] = {}


class CactiUnavailable(NvdlaSimError):
    """zigzag-dse (and with it CACTI) is not installed or its binary cannot run here."""


@dataclass(frozen=True)
class SramGeometry:
    name: str                      # e.g. CBUF bank
    depth: int                     # entries
    width_bytes: int               # bytes per entry (one access)
    count: int = 1                 # identical macros
    field: str = ""                # configuration field(s) that set it, for errors
    banks: int = 1                 # CACTI UCA banks: one array of `depth` entries split in banks,
                                   # its per-access energy includes the routing to the bank

    @property
    def bytes(self) -> int:
        return self.depth * self.width_bytes


@dataclass(frozen=True)
class SramCost:
    read_pj: float                 # one entry read
    write_pj: float                # one entry write
    leakage_mw: float              # standby leakage of one macro (all its banks)
    area_mm2: float                # one macro
    source: str                    # e.g. "CACTI 7 at 28 nm, itrs-lstp"


def cache_dir() -> Path:
    """$NVDLA_SIM_CACHE/cacti, else $XDG_CACHE_HOME (or ~/.cache)/nvdla-sim/cacti."""
    root = os.environ.get("NVDLA_SIM_CACHE")
    if root:
        return Path(root) / "cacti"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "nvdla-sim" / "cacti"


def cacti_dir() -> Path | None:
    """The folder of zigzag-dse's CACTI (binary `cacti`, tables `tech_params/`), None without it."""
    try:
        import zigzag.cacti.cacti_master as pkg
    except ImportError:
        return None
    folder = Path(pkg.__path__[0])
    return folder if (folder / "cacti").is_file() else None


def cacti_available() -> bool:
    folder = cacti_dir()
    return folder is not None and os.access(folder / "cacti", os.X_OK)


def _key(geom: SramGeometry, node_nm: float, cell: str) -> str:
    text = json.dumps([CACHE_VERSION, geom.depth, geom.width_bytes, geom.banks, float(node_nm), cell])
    return hashlib.sha1(text.encode()).hexdigest()[:20]


def _check_geometry(geom: SramGeometry) -> None:
    where = geom.field or geom.name
    for name in ("depth", "width_bytes", "banks"):
        v = getattr(geom, name)
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise NvdlaSimError(f"{where}: {geom.name} {name} must be a positive integer, got {v!r}")
    # CACTI's own floor (its documentation and zigzag's wrapper): >= 64 bytes, >= 8-bit words.
    if geom.bytes < 64 * geom.banks or geom.depth < 2 * geom.banks:
        raise NvdlaSimError(f"{where}: CACTI cannot model a {geom.depth} x {geom.width_bytes}-byte "
                            f"{geom.name} (at least 64 bytes and 2 entries per bank)")
    if geom.bytes >= 1 << 32:       # its size wraps to 0 ("Cache size must >=64"); 2 GiB runs
        raise NvdlaSimError(f"{where}: CACTI cannot model a {geom.depth} x {geom.width_bytes}-byte "
                            f"{geom.name} (less than 4 GiB)")


def sram_cost(geom: SramGeometry, node_nm: float, cell: str = "itrs-lstp") -> SramCost:
    """Per-access energy, leakage and area of one macro of `geom` at `node_nm` (cached)."""
    check_node(node_nm)
    if cell not in CELL_TYPES:
        raise NvdlaSimError(f"energy table sram_cell: one of {', '.join(CELL_TYPES)}, got {cell!r}")
    _check_geometry(geom)
    key = _key(geom, node_nm, cell)
    if key in _memo:
        return _memo[key]
    path = cache_dir() / f"{key}.json"
    cost = None
    if path.is_file():
        try:
            cost = SramCost(**json.loads(path.read_text()))
        except (ValueError, TypeError):
            cost = None                      # a damaged entry is computed again
    if cost is None:
        run_at = cacti_node(node_nm)
        raw = run_cacti(geom, run_at, cell)
        e, a, lk = (energy_scale(node_nm, run_at), area_scale(node_nm, run_at),
                    leakage_scale(node_nm, run_at))
        src = f"CACTI 7 at {run_at:g} nm, {cell}" + \
              (f", scaled to {node_nm:g} nm" if run_at != node_nm else "")
        cost = SramCost(raw.read_pj * e, raw.write_pj * e, raw.leakage_mw * lk, raw.area_mm2 * a, src)
        _store(path, cost)
    _memo[key] = cost
    return cost


def _store(path: Path, cost: SramCost) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(asdict(cost)) + "\n")
        os.replace(tmp, path)                # parallel sweep workers: last writer wins, same data
    except OSError:
        pass                                 # an unwritable cache only costs time


def cacti_input(geom: SramGeometry, node_nm: float, cell: str) -> str:
    """CACTI's input file: zigzag's baseline configuration and this macro's parameters."""
    from zigzag.cacti.cacti_master.cacti_config_creator import CactiConfig
    cfg = CactiConfig()
    lines = []
    for line in cfg.baseline_config:
        if line.startswith(("-Data array cell type", "-Data array peripheral type")):
            line = line.split(" - ")[0] + f' - "{cell}"\n'
        lines.append(line)
    mine = {"cache_size": geom.bytes, "line_size": geom.width_bytes,
            "IO_bus_width": geom.width_bytes * 8, "technology": node_nm / 1000.0,
            "mem_type": '"ram"', "rd_wr_port": 1, "ex_rd_port": 0, "ex_wr_port": 0,
            "bank_count": geom.banks, "associativity": 1}
    for name, opt in cfg.config_options.items():
        lines.append(f"{opt['string']}{mine.get(name, opt['default'])}\n")
    return "".join(lines)


def run_cacti(geom: SramGeometry, node_nm: float, cell: str) -> SramCost:
    """One CACTI run (no cache)."""
    folder = cacti_dir()
    where = geom.field or geom.name
    if folder is None or not cacti_available():
        raise CactiUnavailable("energy: CACTI is not available (pip install zigzag-dse: it ships the "
                            "CACTI 7 binary the SRAM figures come from)")
    with tempfile.TemporaryDirectory(prefix="nvdla-cacti-") as tmp:
        cfg = Path(tmp) / "sram.cfg"
        cfg.write_text(cacti_input(geom, node_nm, cell))
        try:
            proc = subprocess.run([str(folder / "cacti"), "-infile", str(cfg)], cwd=folder,
                                  capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise NvdlaSimError(f"{where}: CACTI did not run ({exc})") from None
        out = Path(str(cfg) + ".out")
        if proc.returncode != 0 or not out.is_file():
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or ["no output"]
            raise NvdlaSimError(f"{where}: CACTI rejects a {geom.depth} x {geom.width_bytes}-byte "
                                f"{geom.name} at {node_nm:g} nm ({tail[0].strip()[:120]})")
        return parse_cacti_csv(out.read_text(), where)


def parse_cacti_csv(text: str, where: str = "CACTI") -> SramCost:
    """The last data line of CACTI's `<input>.out` CSV: read/write energy nJ -> pJ, leakage mW
    (per bank x banks), area mm^2."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) < 2:
        raise NvdlaSimError(f"{where}: CACTI wrote no result")
    head = [h.strip() for h in lines[0].split(",")]
    row = [v.strip() for v in lines[-1].split(",")]
    col = {h: row[i] for i, h in enumerate(head) if i < len(row)}
    try:
        read_nj = float(col["Dynamic read energy (nJ)"])
        write_nj = float(col["Dynamic write energy (nJ)"])
        leak = float(col["Standby leakage per bank(mW)"]) * float(col.get("Number of banks", 1))
        area = float(col["Area (mm2)"])
    except (KeyError, ValueError):
        raise NvdlaSimError(f"{where}: CACTI's result has no energy/leakage/area columns") from None
    vals = (read_nj, write_nj, leak, area)
    if not all(math.isfinite(v) and v >= 0 for v in vals):
        raise NvdlaSimError(f"{where}: CACTI returned {vals}")
    return SramCost(read_nj * 1e3, write_nj * 1e3, leak, area, "CACTI 7")
