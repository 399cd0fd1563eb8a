"""Run official NVDLA trace tests and collect pass/fail, cycles and wall time per test."""
from __future__ import annotations

import fnmatch
import time
from dataclasses import dataclass, field
from pathlib import Path

from .config import HardwareConfig
from .engine import Engine, RunResult
from .engine.memif import MemoryProfile
from .errors import NvdlaSimError, UnsupportedError
from .frontends.cfg_trace import parse_cfg
from .report.timing_summary import timing_json


@dataclass
class TestOutcome:
    name: str
    status: str                  # pass, fail, error, unsupported
    checks: list = field(default_factory=list)
    cycles: float | None = None
    wall_s: float = 0.0
    error: str | None = None
    result: RunResult | None = None

    def to_json(self) -> dict:
        return {"name": self.name, "status": self.status,
                "checks": [{"sync_id": c.sync_id, "kind": c.kind, "space": c.space,
                            "addr": c.addr, "size": c.nbytes, "expected": c.expected,
                            "actual": c.actual, "pass": c.passed} for c in self.checks],
                "cycles": self.cycles, "wall_s": round(self.wall_s, 4), "error": self.error,
                "timing": timing_json(self.result) if self.result is not None else None}


def find_tests(root: Path, pattern: str = "*") -> list[Path]:
    """Test folders (each holding one .cfg) under `root`, sorted by name."""
    if not root.is_dir():
        raise NvdlaSimError(f"{root}: no such trace-test folder")
    tests = [d for d in sorted(root.iterdir())
             if d.is_dir() and any(d.glob("*.cfg")) and fnmatch.fnmatch(d.name, pattern)]
    return tests


def run_test(path: Path, hw: HardwareConfig, memory: str | MemoryProfile = "rtl_testbench",
             timeline_dir: Path | None = None) -> TestOutcome:
    """Run one trace test; with `timeline_dir`, also write its trace events and utilization plot."""
    name = path.name if path.is_dir() else path.stem
    start = time.perf_counter()
    try:
        program = parse_cfg(path, hw.nvdla_version)
        result = Engine(hw, memory).run(program)
    except UnsupportedError as exc:
        return TestOutcome(name, "unsupported", wall_s=time.perf_counter() - start, error=str(exc))
    except NvdlaSimError as exc:
        return TestOutcome(name, "error", wall_s=time.perf_counter() - start, error=str(exc))
    status = "pass" if result.passed else "fail"
    wall_s = time.perf_counter() - start
    if timeline_dir is not None:
        write_timeline(result, Path(timeline_dir), name)
    return TestOutcome(name, status, result.checks, result.cycles, wall_s, result=result)


def write_timeline(result: RunResult, folder: Path, name: str) -> tuple[Path, Path]:
    """<name>.trace.json (Chrome/Perfetto) and <name>.png (utilization and bandwidth) in `folder`."""
    from .report.timeline import plot_utilization, write_trace_events
    engine = result.engine
    folder.mkdir(parents=True, exist_ok=True)
    transfers = [t for m in (engine.mcif, engine.cvif) if m for t in m.transfers]
    json_path, png_path = folder / f"{name}.trace.json", folder / f"{name}.png"
    write_trace_events(engine.activity, transfers, json_path, engine.clock_mhz, name)
    end = max([s[3] for s in engine.activity.spans] + [result.cycles], default=result.cycles)
    plot_utilization(engine.activity, transfers, png_path, end, title=name)
    return json_path, png_path
