"""`nvdla-sim sweep`: expand the spec, skip finished points, run the rest on a backend, keep every
row as it arrives, draw the plots, summarise."""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from .point import PointRunner, run_scenario_point
from .progress import Progress, format_duration
from .results import ResultStore
from .spec import Point, SweepSpec

RUNNERS = {"scenario": "nvdla_sim.sweep.point:run_scenario_point",
           "conv-chain": "nvdla_sim.sweep.conv_chain:run_conv_chain"}


def runner_by_name(name: str) -> PointRunner:
    import importlib
    module, func = RUNNERS[name].split(":")
    return getattr(importlib.import_module(module), func)


@dataclass
class SweepSummary:
    out_dir: Path
    total: int
    skipped: int
    ran: int
    counts: dict[str, int]
    wall_s: float
    rows: list[dict] = field(default_factory=list)      # the sweep's rows in point order
    files: list[Path] = field(default_factory=list)

    @property
    def errors(self) -> int:
        return self.counts.get("error", 0)

    def text(self) -> str:
        lines = [f"{self.total} points: {self.skipped} already done, {self.ran} run in "
                 f"{format_duration(self.wall_s)} ({self.wall_s:.1f} s); "
                 + ", ".join(f"{k} {v}" for k, v in self.counts.items())]
        ok = [r for r in self.rows if r.get("status") == "ok"]
        if ok:
            best = min(ok, key=lambda r: r["ms"])
            lines.append(f"fastest: {best['ms']:.3f} ms ({best['fps']:.1f} fps) at "
                         f"{_params(best)}")
        errors = [r for r in self.rows if r.get("status") == "error"]
        if errors:
            lines.append(f"first error (point {errors[0]['index']}): {errors[0]['reason']}")
        lines += [f"wrote {f}" for f in self.files]
        return "\n".join(lines)


def _label(row: dict) -> str:
    """A row's point as Point.label() writes it (the row carries its parameters)."""
    return Point(row["index"], row.get("params") or {}, {}, "", "").label()


def _params(row: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in (row.get("params") or {}).items()) or "the base"


def run_sweep(spec: SweepSpec, backend, runner: PointRunner = run_scenario_point,
              out_dir: Path | None = None, stream: TextIO | None = None, plots: bool | None = None,
              tty: bool | None = None) -> SweepSummary:
    """Run every unfinished point of `spec`; rows land in `out_dir` as they finish."""
    stream = stream if stream is not None else sys.stderr
    out = Path(out_dir) if out_dir is not None else spec.out_dir
    store = ResultStore(out, spec)
    total = len(spec.points)
    # points stream to the backend (a grid's are made as they are taken: spec.GridPoints);
    # only a resume counts the finished ones first
    skipped = sum(store.finished(p) for p in spec.points) if store.rows else 0
    if skipped:
        stream.write(f"{spec.name}: {skipped} of {total} points already done in "
                     f"{store.json_path}, skipped\n")
    todo = (p for p in spec.points if not store.finished(p))
    start = time.perf_counter()
    bar = Progress(total - skipped, stream, tty=tty)
    try:
        if total > skipped:
            for row in backend.run(todo, runner, spec.bytes_per_mac):
                store.add(row)
                result = f"{row['ms']:.3f} ms" if row["status"] == "ok" else row["status"]
                bar.advance(row["status"], f"{_label(row)}: {result}")
    finally:
        bar.close()
        store.save()                # the rows a throttled save has not written yet (results.py)
    wall = time.perf_counter() - start
    rows = store.current()
    counts = {"ok": 0, "infeasible": 0, "error": 0}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    summary = SweepSummary(out, total, skipped, total - skipped, counts, wall, rows,
                           [store.json_path, store.csv_path])
    if (spec.plots if plots is None else plots) and counts["ok"]:
        from .plots import plot_all
        summary.files += plot_all(rows, out, spec.name)
    return summary
