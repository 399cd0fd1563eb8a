"""Run official NVDLA trace tests and collect pass/fail, cycles and wall time per test.

Two formats: nvdla/hw master `.cfg` tests (v2, `verif/tests/trace_tests/<project>/`) and v1
trace-player tests (`input.txn`, branch nvdlav1 `verif/traces/traceplayer/`)."""
from __future__ import annotations

import fnmatch
import os
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .config import HardwareConfig
from .engine import Engine, RunResult
from .engine.memif import MemoryProfile
from .errors import NvdlaSimError, UnsupportedError
from .frontends.cfg_trace import parse_cfg
from .frontends.txn_trace import parse_txn
from .frontends.vp_trace import is_vp_trace, parse_vp
from .program import RegisterProgram
from .report.statistics import read_statistics
from .report.timing_summary import timing_json

FORMATS = ("cfg", "txn", "vp")
V1_TESTS = Path("verif") / "traces" / "traceplayer"


def tests_folder(nvdla_hw: Path, project: str, nvdla_version: int) -> Path:
    """Where a checkout keeps a project's trace tests: v1 trace-player tests or v2 .cfg tests."""
    if nvdla_version == 1:
        return Path(nvdla_hw) / V1_TESTS
    return Path(nvdla_hw) / "verif" / "tests" / "trace_tests" / project


def v1_corpus_root() -> Path | None:
    """$NVDLA_HW_V1, else ../shared/nvdla-hw-v1 beside the checkout; None when neither has the
    v1 trace-player tests."""
    repo = Path(__file__).resolve().parent.parent
    candidates = [Path(os.environ["NVDLA_HW_V1"])] if os.environ.get("NVDLA_HW_V1") else []
    candidates.append(repo.parent / "shared" / "nvdla-hw-v1")
    for c in candidates:
        if (c / V1_TESTS).is_dir():
            return c
    return None


def trace_format(path: Path, forced: str | None = None) -> str:
    """"vp" for a virtual-platform capture (rd_only_var_log beside input.txn, or `until` and no
    memory images), "txn" for another folder with input.txn (or an .txn file), "cfg" for a .cfg
    test."""
    if forced is not None:
        if forced not in FORMATS:
            raise NvdlaSimError(f"unknown trace format '{forced}' (known: {', '.join(FORMATS)})")
        return forced
    if path.is_dir():
        if (path / "input.txn").is_file():
            return "vp" if is_vp_trace(path) else "txn"
        if any(path.glob("*.cfg")):
            return "cfg"
        raise NvdlaSimError(f"{path}: neither input.txn nor a .cfg file in the folder")
    if path.suffix == ".txn":
        return "vp" if is_vp_trace(path) else "txn"
    if path.suffix == ".cfg":
        return "cfg"
    raise NvdlaSimError(f"{path}: not a trace (.cfg, input.txn or a folder holding one)")


def load_program(path: Path, nvdla_version: int, fmt: str | None = None) -> RegisterProgram:
    """Parse a trace test of either format into a RegisterProgram."""
    path = Path(path)
    fmt = trace_format(path, fmt)
    if fmt == "vp":
        return parse_vp(path, nvdla_version)
    if fmt == "txn":
        return parse_txn(path, nvdla_version)
    return parse_cfg(path, nvdla_version)


@dataclass
class TestOutcome:
    name: str
    status: str                  # pass, fail, error, unsupported; "done" for a VP replay
    checks: list = field(default_factory=list)
    cycles: float | None = None
    wall_s: float = 0.0
    error: str | None = None
    result: RunResult | None = None
    statistics: dict = field(default_factory=dict)     # statistics registers after the run
    notes: list[str] = field(default_factory=list)     # what the frontend says about the run
    warnings: list[str] = field(default_factory=list)  # VP read_reg mismatches
    layer_names: list[str] = field(default_factory=list)  # each launch's name (its sync ids)

    def to_json(self) -> dict:
        return {"name": self.name, "status": self.status,
                "checks": [{"sync_id": c.sync_id, "kind": c.kind, "space": c.space,
                            "addr": c.addr, "size": c.nbytes, "expected": c.expected,
                            "actual": c.actual, "pass": c.passed, "name": c.name,
                            "first_diff": c.first_diff} for c in self.checks],
                "statistics": self.statistics,
                "cycles": self.cycles, "wall_s": round(self.wall_s, 4), "error": self.error,
                "notes": self.notes, "warnings": self.warnings,
                "timing": timing_json(self.result) if self.result is not None else None}


def find_tests(root: Path, pattern: str = "*") -> list[Path]:
    """Test folders (each holding one .cfg or an input.txn) under `root`, sorted by name."""
    if not root.is_dir():
        raise NvdlaSimError(f"{root}: no such trace-test folder")
    tests = [d for d in sorted(root.iterdir())
             if d.is_dir() and ((d / "input.txn").is_file() or any(d.glob("*.cfg")))
             and fnmatch.fnmatch(d.name, pattern)]
    return tests


class Progress:
    """Prints the simulated cycle to stderr while a run goes on (after `delay_s`, every
    `interval_s`): on a terminal one line rewritten in place, else a line each time."""

    def __init__(self, label: str = "", stream=None, interval_s: float = 1.0,
                 delay_s: float = 1.0):
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.interval_s, self.delay_s = interval_s, delay_s
        self.lines = 0
        self._engine = None

    @contextmanager
    def watch(self, engine, label: str | None = None):
        """Report `engine`'s cycle while the block runs."""
        self._engine = engine
        with self._report(label):
            yield

    @contextmanager
    def running(self, label: str | None = None):
        """Report the cycle of each engine the block creates through compiler.lower (`nvdla-sim
        run`: they are handed over by progress_hook.follow) while the block runs."""
        from . import progress_hook
        self._engine = None
        progress_hook.ACTIVE.append(self)
        try:
            with self._report(label):
                yield
        finally:
            progress_hook.ACTIVE.remove(self)

    def follow(self, engine) -> None:
        self._engine = engine

    @contextmanager
    def _report(self, label: str | None):
        stop = threading.Event()
        tty = getattr(self.stream, "isatty", lambda: False)()
        label = label or self.label
        start = time.perf_counter()
        width = [0]

        def report() -> None:
            if stop.wait(self.delay_s):
                return
            while True:
                elapsed = time.perf_counter() - start
                engine = self._engine
                if engine is None:              # compiling: no engine yet
                    if stop.wait(self.interval_s):
                        return
                    continue
                now = engine.env.now
                text = (f"{label}: cycle {now:,.0f} after {elapsed:.0f} s "
                        f"({now / elapsed / 1e6:.2f} M cycles/s)")
                try:
                    if tty:
                        self.stream.write("\r" + text.ljust(width[0]))
                        width[0] = max(width[0], len(text))
                    else:
                        self.stream.write(text + "\n")
                    self.stream.flush()
                except (OSError, ValueError):
                    return
                self.lines += 1
                if stop.wait(self.interval_s):
                    return

        thread = threading.Thread(target=report, daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            if tty and width[0]:
                try:
                    self.stream.write("\r" + " " * width[0] + "\r")
                    self.stream.flush()
                except (OSError, ValueError):
                    pass


def run_test(path: Path, hw: HardwareConfig, memory: str | MemoryProfile = "rtl_testbench",
             timeline_dir: Path | None = None, fmt: str | None = None,
             compute_values: bool | None = None, progress: Progress | None = None,
             timeline_detail: str = "auto", host="auto") -> TestOutcome:
    """Run one trace test (`fmt` "cfg"/"txn"/"vp", default by what the folder holds); with
    `timeline_dir`, also write its trace events and utilization plot.  `compute_values` None:
    values and timing, except a VP capture (no data: timing only).  A VP replay that reaches
    its end is "done": it has nothing to check.  `host`: the host profile timing the layer
    changeovers (name, path or profile; "auto": the one the memory profile names)."""
    name = path.name if path.is_dir() else path.stem
    start = time.perf_counter()
    try:
        fmt = trace_format(Path(path), fmt)
        program = load_program(path, hw.nvdla_version, fmt)
        values = fmt != "vp" if compute_values is None else compute_values
        engine = Engine(hw, memory, compute_values=values, host=host)
        if progress is None:
            result = engine.run(program)
        else:
            with progress.watch(engine, name):
                result = engine.run(program)
    except UnsupportedError as exc:
        return TestOutcome(name, "unsupported", wall_s=time.perf_counter() - start, error=str(exc))
    except NvdlaSimError as exc:
        return TestOutcome(name, "error", wall_s=time.perf_counter() - start, error=str(exc))
    from .report.changeover import launch_names
    status = "done" if fmt == "vp" else "pass" if result.passed else "fail"
    wall_s = time.perf_counter() - start
    if timeline_dir is not None:
        write_timeline(result, Path(timeline_dir), name, timeline_detail)
    return TestOutcome(name, status, result.checks, result.cycles, wall_s, result=result,
                       statistics=read_statistics(result.engine), notes=program.notes,
                       warnings=result.warnings, layer_names=launch_names(program))


def write_timeline(result: RunResult, folder: Path, name: str, detail: str = "auto",
                   layers=None) -> tuple[Path, Path]:
    """<name>.trace.json (Chrome/Perfetto) and <name>.png (units, layers, memory) in `folder`;
    `layers`: (name, start, end) of the network's layers when known (docs/timeline.md)."""
    from .report.timeline import memory_tracks, plot_utilization, write_trace_events
    engine = result.engine
    folder.mkdir(parents=True, exist_ok=True)
    tracks = memory_tracks(engine)
    json_path, png_path = folder / f"{name}.trace.json", folder / f"{name}.png"
    end = max([s[3] for s in engine.activity.spans] + [result.cycles], default=result.cycles)
    write_trace_events(engine.activity, tracks, json_path, engine.clock_mhz, name, layers, detail,
                       end)
    plot_utilization(engine.activity, tracks, png_path, end, title=name, layers=layers)
    return json_path, png_path
