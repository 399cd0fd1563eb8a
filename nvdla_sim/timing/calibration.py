"""Calibration against RTL cycle counts: run the listed trace tests, compare cycles.

The CSV (shared/calibration/rtl_cycles_nv_small.csv) gives, per official trace test, the cycles the
NVDLA RTL took from the first OP_ENABLE write to the interrupt, measured with the Verilator
testbench's AXI model — the `rtl_testbench` memory profile.
"""
from __future__ import annotations

import csv
import statistics
from dataclasses import dataclass
from pathlib import Path

from ..config import HardwareConfig
from ..engine import Engine
from ..frontends.cfg_trace import parse_cfg

CSV_NAME = "rtl_cycles_nv_small.csv"
CYCLES_COLUMN = "cycles_from_first_op_enable_to_done"


@dataclass
class CalibrationRow:
    test: str
    family: str
    rtl_cycles: int
    model_cycles: float
    passed: bool                 # the run's CRC checks passed too

    @property
    def error(self) -> float:
        """Signed relative error of the model, (model - RTL) / RTL."""
        return (self.model_cycles - self.rtl_cycles) / self.rtl_cycles


def load_rtl_cycles(path: Path) -> list[tuple[str, int]]:
    with open(path, newline="") as f:
        return [(r["test"], int(r[CYCLES_COLUMN])) for r in csv.DictReader(f)]


def model_cycles(test_dir: Path, hw: HardwareConfig, memory="rtl_testbench",
                 timing: dict | None = None) -> tuple[float, bool]:
    """Cycles of one trace test and whether its CRC checks passed."""
    program = parse_cfg(test_dir, hw.nvdla_version)
    result = Engine(hw, memory, timing=timing).run(program)
    return result.cycles, result.passed


def calibrate(csv_path: Path, tests_root: Path, hw: HardwareConfig, memory="rtl_testbench",
              timing: dict | None = None) -> list[CalibrationRow]:
    rows = []
    for test, rtl in load_rtl_cycles(csv_path):
        cycles, passed = model_cycles(tests_root / test, hw, memory, timing)
        rows.append(CalibrationRow(test, test.split("_")[0], rtl, cycles, passed))
    return rows


def summary(rows: list[CalibrationRow]) -> dict[str, float]:
    errors = [abs(r.error) for r in rows]
    worst = max(rows, key=lambda r: abs(r.error))
    return {"rows": len(rows), "median": statistics.median(errors),
            "mean": statistics.fmean(errors), "worst": abs(worst.error), "worst_test": worst.test}


def markdown_table(rows: list[CalibrationRow]) -> str:
    lines = ["| test | family | RTL cycles | model | error % |", "|---|---|---:|---:|---:|"]
    for r in sorted(rows, key=lambda r: r.test):
        mark = "" if r.passed else " (CRC FAIL)"
        lines.append(f"| {r.test}{mark} | {r.family} | {r.rtl_cycles:,} | {r.model_cycles:,.0f} | "
                     f"{100 * r.error:+.2f} |")
    s = summary(rows)
    lines.append("")
    lines.append(f"**Median |error| = {100 * s['median']:.3f} %, mean |error| = {100 * s['mean']:.3f} %, "
                 f"worst = {100 * s['worst']:.2f} % (`{s['worst_test']}`), {s['rows']} rows.**")
    fams = sorted({r.family for r in rows})
    lines += ["", "| family | rows | median | worst |", "|---|---:|---:|---:|"]
    for fam in fams:
        fr = [abs(r.error) for r in rows if r.family == fam]
        lines.append(f"| {fam} | {len(fr)} | {100 * statistics.median(fr):.3f} % | {100 * max(fr):.2f} % |")
    return "\n".join(lines)
