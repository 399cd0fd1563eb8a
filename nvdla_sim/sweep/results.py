"""Sweep results: one row per point, kept in `results.json` and `results.csv` of the output folder.

Resumable: the rows are rewritten (atomically) after every finished point, keyed by the point's
stable hash (`spec.point_key`); a re-run skips points whose row is `ok` or `infeasible` and runs
again those that are missing or ended in `error`.  Rows of points that are no longer in the sweep
stay in the files (results are never thrown away) after the sweep's own rows.

Columns (empty when they do not apply):
  key, index, status (ok / infeasible / error), reason, params (the point's axis values, JSON)
  network, preset, atomic_c, atomic_k, cbuf_banks, cbuf_bank_depth, cbuf_bank_width,
  cvsram_bytes, dram_gbps, clock_mhz, mode,    -- the point's configuration, whatever set it
  weight_bits, activation_bits, rounding       -- (the last three: the sub-8-bit what-if)
  batch                                        -- images per program (cycles: the batch's)
  <scenario field path>                        -- axes given as field paths
  cycles, ms, fps                              -- DLA time of one inference (a batch) at clock_mhz;
                                                  fps: images per second
  dram_bytes, cvsram_traffic_bytes             -- bytes moved over each interface
  cbuf_kib, macs, sram_bytes, area_proxy       -- the configuration's size (below)
  network_macs, mac_util, min_cbuf_banks, lowest_sqnr_db, gpu_layers
  output_sqnr_db                               -- end-to-end SQNR of the network output(s)
  energy_mj, avg_power_mw, peak_power_mw       -- one inference (nvdla_sim/energy, docs/energy.md)
  area_mm2, edp (energy_mj x ms), tops_per_w   -- area estimate; energy-delay product
  energy_<component>_mj                        -- DRAM, CVSRAM, CBUF, MAC, CACC, SDP, PDP, CDP, leakage
  wall_s

Area proxy, in MAC-equivalents: `macs + sram_bytes / bytes_per_mac`, where macs = atomic_c x
atomic_k (INT8 multiply-accumulate cells) and sram_bytes = CBUF bytes + CVSRAM bytes.  The default
exchange rate, 256 bytes of SRAM per MAC cell, is an order of magnitude for a 16 nm-class
process (an INT8 MAC with its share of adder tree and accumulator ~ 300-500 um^2; dense SRAM with
periphery ~ 1-2 um^2 per byte); set `area: {bytes_per_mac: N}` in the sweep for another process.
It ranks configurations; it is not an area estimate (no SDP/PDP/CDP, DMA, wiring).  `area_mm2`
(CACTI SRAM + datapath operators, docs/energy.md) is the estimate; the proxy stays for comparison.
"""
from __future__ import annotations

import csv
import json
import math
import os
import time
from pathlib import Path

from .spec import AXES, Point, SweepSpec, axis_path, canonical, point_keys

CONFIG_COLUMNS = ("network", "preset", "atomic_c", "atomic_k", "cbuf_banks", "cbuf_bank_depth",
                  "cbuf_bank_width", "cvsram_bytes", "dram_gbps", "clock_mhz", "mode",
                  "weight_bits", "activation_bits", "rounding", "batch")
ENERGY_COLUMNS = ("energy_mj", "avg_power_mw", "peak_power_mw", "area_mm2", "edp", "tops_per_w")
SPLIT_COLUMNS = tuple(f"energy_{c}_mj" for c in ("dram", "cvsram", "cbuf", "mac", "cacc", "sdp", "pdp",
                                                "cdp", "leakage"))
METRIC_COLUMNS = ("cycles", "ms", "fps", "dram_bytes", "cvsram_traffic_bytes", "cbuf_kib", "macs",
                  "sram_bytes", "area_proxy", "network_macs", "mac_util", "min_cbuf_banks",
                  "lowest_sqnr_db", "output_sqnr_db", "gpu_layers") + ENERGY_COLUMNS + SPLIT_COLUMNS + ("wall_s",)
HEAD_COLUMNS = ("key", "index", "status", "reason", "params")
FINISHED = ("ok", "infeasible")
SAVE_EVERY_ROW_POINTS = 10_000      # up to this many points the files are rewritten per row
SAVE_INTERVAL_S = 2.0               # beyond: at most this often (a save writes every row)
JSON_NAME, CSV_NAME = "results.json", "results.csv"


def network_name(value) -> str:
    if isinstance(value, dict):
        if value.get("name"):
            return str(value["name"])
        if "builtin" in value:
            return str(value["builtin"])
        if "onnx" in value:
            return Path(str(value["onnx"])).stem
        return "network"
    return str(value)


def _lookup(mapping: dict, path: str):
    node = mapping
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def base_row(point: Point) -> dict:
    """What a row says before the point runs: its identity, parameters, and the configuration
    values the scenario mapping states."""
    row = {c: None for c in HEAD_COLUMNS + CONFIG_COLUMNS + METRIC_COLUMNS}
    row.update(key=point.key, index=point.index, status=None, reason="",
               params=dict(point.params))
    for axis, value in point.params.items():       # axes given as field paths get a column too
        row[axis] = network_name(value) if axis == "network" else value
    hw = point.scenario.get("hardware")
    row["preset"] = hw if isinstance(hw, str) else _lookup(point.scenario, "hardware.preset")
    row["network"] = network_name(point.scenario.get("network"))
    for axis in AXES:
        if row.get(axis) is None and axis not in ("network", "preset"):
            row[axis] = _lookup(point.scenario, axis_path(axis))
    return row


def area_proxy(macs: int, sram_bytes: int, bytes_per_mac: float) -> float:
    return macs + sram_bytes / bytes_per_mac


def hardware_columns(scn, bytes_per_mac: float) -> dict:
    """Configuration columns of a parsed scenario (`scenario.schema.Scenario`)."""
    hw = scn.hardware
    sram = hw.cbuf.total_bytes + scn.memory.cvsram_bytes
    return {"network": scn.network.name, "preset": hw.name, "atomic_c": hw.atomic_c,
            "atomic_k": hw.atomic_k, "cbuf_banks": hw.cbuf.banks,
            "cbuf_bank_depth": hw.cbuf.bank_depth, "cbuf_bank_width": hw.cbuf.bank_width_bytes,
            "cvsram_bytes": scn.memory.cvsram_bytes, "dram_gbps": scn.memory.dram_gbps,
            "clock_mhz": scn.clock_mhz, "mode": "values+timing" if scn.values else "timing",
            "weight_bits": scn.quantization.weight_bits,
            "activation_bits": scn.quantization.activation_bits,
            "rounding": scn.quantization.rounding, "batch": getattr(scn, "batch", 1),
            "cbuf_kib": hw.cbuf.total_bytes / 1024, "macs": hw.macs, "sram_bytes": sram,
            "area_proxy": round(area_proxy(hw.macs, sram, bytes_per_mac), 3)}


def metric_columns(metrics: dict, scn, row: dict) -> dict:
    cycles = float(metrics["cycles"])
    ms = cycles / (scn.clock_mhz * 1e3)
    images = getattr(scn, "batch", 1)          # a batch: fps is images per second
    out = {"cycles": cycles, "ms": ms, "fps": metrics.get("fps") or  # (dla_cores 2: aggregate)
           (1000.0 * images / ms if ms > 0 else None),
           "dram_bytes": int(metrics.get("dram_bytes") or 0)}
    for name in ("cvsram_traffic_bytes", "lowest_sqnr_db", "output_sqnr_db", "gpu_layers") + \
            ENERGY_COLUMNS + \
            SPLIT_COLUMNS:
        if metrics.get(name) is not None:
            out[name] = metrics[name]
    if metrics.get("energy_mj") is not None:
        out["edp"] = metrics["energy_mj"] * ms          # energy-delay product, mJ x ms
    if row.get("network_macs") and cycles > 0:
        out["mac_util"] = row["network_macs"] * images / (cycles * scn.hardware.macs)
    return out


def _clean(v):
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    return v


class ResultStore:
    """The rows of a sweep's output folder, by point key."""

    def __init__(self, out_dir: Path, spec: SweepSpec):
        self.out_dir = Path(out_dir)
        self.spec = spec
        self.rows: dict[str, dict] = {}
        self.extra_columns = [axis_path(a) for a in spec.custom_paths]
        self._saved = time.monotonic()
        self.load()

    @property
    def json_path(self) -> Path:
        return self.out_dir / JSON_NAME

    @property
    def csv_path(self) -> Path:
        return self.out_dir / CSV_NAME

    def load(self) -> None:
        if not self.json_path.is_file():
            return
        try:
            data = json.loads(self.json_path.read_text())
            rows = data["rows"]
        except (ValueError, KeyError, TypeError):
            # An unreadable file is set aside, never overwritten.
            self.json_path.rename(self.json_path.with_suffix(".json.unreadable"))
            return
        for row in rows:
            if isinstance(row, dict) and "key" in row:
                self.rows[row["key"]] = row

    def finished(self, point: Point) -> bool:
        row = self.rows.get(point.key)
        return row is not None and row.get("status") in FINISHED

    def add(self, row: dict) -> None:
        """Keep a finished row and rewrite the files: after every row, or on a sweep of more
        than SAVE_EVERY_ROW_POINTS points at most once per SAVE_INTERVAL_S (each save writes
        every row; the driver saves once more at the end or on an interrupt)."""
        self.rows[row["key"]] = row
        now = time.monotonic()
        if len(self.spec.points) <= SAVE_EVERY_ROW_POINTS or now - self._saved >= SAVE_INTERVAL_S:
            self.save()

    def ordered(self) -> list[dict]:
        """The sweep's rows in point order, then rows of points no longer in the sweep."""
        keys = point_keys(self.spec.points)
        mine = [self.rows[k] for k in keys if k in self.rows]
        wanted = set(keys)
        return mine + [r for k, r in self.rows.items() if k not in wanted]

    def current(self) -> list[dict]:
        return [self.rows[k] for k in point_keys(self.spec.points) if k in self.rows]

    def columns(self) -> list[str]:
        return list(HEAD_COLUMNS + CONFIG_COLUMNS) + self.extra_columns + list(METRIC_COLUMNS)

    def save(self) -> None:
        self._saved = time.monotonic()
        self.out_dir.mkdir(parents=True, exist_ok=True)
        rows = self.ordered()
        doc = {"sweep": self.spec.name, "spec": str(self.spec.path) if self.spec.path else None,
               "area_bytes_per_mac": self.spec.bytes_per_mac, "columns": self.columns(),
               "rows": [_clean(r) for r in rows]}
        _atomic_write(self.json_path, json.dumps(doc, indent=1, default=str) + "\n")
        tmp = self.csv_path.with_suffix(".csv.tmp")
        with open(tmp, "w", newline="") as f:
            w = csv.writer(f)
            cols = self.columns()
            w.writerow(cols)
            for r in rows:
                w.writerow([_csv_value(r.get(c)) for c in cols])
        os.replace(tmp, self.csv_path)


def _csv_value(v) -> str:
    if v is None:
        return ""
    if isinstance(v, (dict, list)):
        return canonical(v)
    return str(v)


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
