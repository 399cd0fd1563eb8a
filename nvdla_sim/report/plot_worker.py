"""The report's plots drawn beside the run (issue 20).

A values+timing command spent ~0.3 s importing matplotlib and ~0.2 s per figure after the
simulation, one figure after the other (--timeline: its PNG after its trace JSON).
`start_plotter` forks a child when the run starts: it imports matplotlib on the other core
while the engine simulates, then waits.  `write_reports` hands it the figures (a pickled Report
or the timeline's binned shares, and output paths: tens of KB) and writes the JSON, CSV and
trace meanwhile; the child draws the last figure itself and each other one in a process forked
from it (matplotlib already loaded), so the figures are drawn side by side.  The command still
waits for every file, and what a figure raises is raised again in the parent, with the child's
traceback chained to it.

Without `fork` (Windows; macOS spawns), or beside other Python threads, the figures are drawn
inline, as they are when no plotter was started.
"""
from __future__ import annotations

import os
import pickle
import signal
import sys
import traceback
import weakref
from typing import Any, Callable

Job = tuple[Callable[..., Any], tuple]
# None: drawn; else the error and the traceback text of the process that drew it
Outcome = tuple[BaseException, str] | None


class ChildTraceback(Exception):
    """Where a figure failed in the plot process (chained as the cause of its error)."""

    def __str__(self) -> str:
        return "\n" + self.args[0]


def _preload() -> None:
    """Import what the figures use and save one small PNG the way they are saved (the style
    module, PIL's PNG writer, the font file): a figure then costs only its own drawing."""
    import io
    import matplotlib.collections  # noqa: F401
    import matplotlib.patches  # noqa: F401
    import matplotlib.ticker  # noqa: F401
    from . import plots, timeline  # noqa: F401
    from ..energy import plots as _energy_plots  # noqa: F401
    with plots.default_style():
        fig, (ax,) = plots.layer_bar_figure(["conv1"], width_in=3.0)
        plots.hbars(ax, [0], [1], "#1f77b4")
        plots.legend_beside(ax, {"MAC bound": "#1f77b4"})
        ax.set_xlabel("cycles")
        plots.save(fig, io.BytesIO())


def _outcome(job: Job) -> Outcome:
    func, args = job
    try:
        func(*args)
        return None
    except BaseException as exc:            # handed to the parent, which raises it
        text = traceback.format_exc()
        try:
            pickle.dumps(exc)
        except Exception:
            exc = RuntimeError(f"{type(exc).__name__}: {exc}")
        return exc, text


def _draw_all(jobs: list[Job]) -> list[Outcome]:
    """Every job but the last in a process forked from this one, the last here; outcomes in
    job order."""
    from multiprocessing import Pipe
    children = []
    for job in jobs[:-1]:
        read_end, write_end = Pipe(duplex=False)
        pid = os.fork()
        if pid == 0:
            read_end.close()
            try:
                write_end.send(_outcome(job))
            finally:
                os._exit(0)
        write_end.close()
        children.append((pid, read_end))
    last = [_outcome(jobs[-1])] if jobs else []
    outcomes: list[Outcome] = []
    for pid, read_end in children:
        try:
            outcomes.append(read_end.recv())
        except EOFError:                    # killed: no answer
            outcomes.append((RuntimeError("a plot process ended without drawing its figure"), ""))
        os.waitpid(pid, 0)
    return outcomes + last


def _serve(conn) -> None:
    """The child: preload, then draw the jobs the parent sends (EOF: the parent is gone or
    drew nothing)."""
    try:
        _preload()
    except Exception:                       # matplotlib missing or broken: each figure says so
        pass
    try:
        jobs = pickle.loads(conn.recv_bytes())
    except EOFError:
        return
    conn.send(_draw_all(jobs))


def _abandon(conn, pid: int) -> None:
    """The run failed before its figures were drawn (or the plotter was dropped): end the
    child now rather than after its import."""
    conn.close()
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


class Plotter:
    """The figures of one report: `submit` them, `wait` for their files."""

    def __init__(self) -> None:
        self._jobs: list[Job] = []

    def submit(self, jobs: list[Job]) -> None:
        self._jobs = list(jobs)

    def wait(self) -> None:
        jobs, self._jobs = self._jobs, []
        for func, args in jobs:
            func(*args)


class ForkedPlotter(Plotter):
    """A child forked now that imports matplotlib while the parent runs; `submit` sends it the
    figures, `wait` returns when it has drawn them (raising the first error one raised)."""

    def __init__(self) -> None:
        super().__init__()
        from multiprocessing import Pipe
        sys.stdout.flush()                  # the child must not write the parent's buffers again
        sys.stderr.flush()
        self._conn, child_end = Pipe()
        try:
            pid = os.fork()
        except OSError:
            self._conn.close()
            child_end.close()
            raise
        if pid == 0:
            self._conn.close()
            try:
                _serve(child_end)
            finally:
                os._exit(0)
        child_end.close()
        self.pid = pid
        self._sent = False
        self._abandon = weakref.finalize(self, _abandon, self._conn, pid)

    def submit(self, jobs: list[Job]) -> None:
        if self._sent or not self._abandon.alive:
            raise RuntimeError("a plot process draws one report's figures")
        try:
            payload = pickle.dumps(list(jobs))
        except Exception:                   # a report field pickle cannot take: drawn here
            self.close()
            self._jobs = list(jobs)
            return
        self._conn.send_bytes(payload)
        self._sent = True

    def wait(self) -> None:
        if not self._sent:                  # nothing sent: drawn here, if anything
            self.close()
            super().wait()
            return
        self._sent = False
        self._abandon.detach()
        try:
            outcomes = self._conn.recv()
        except EOFError:
            raise RuntimeError("the plot process ended without drawing the figures") from None
        finally:
            self._conn.close()
            os.waitpid(self.pid, 0)
        for outcome in outcomes:
            if outcome is not None:
                exc, text = outcome
                raise exc from ChildTraceback(text) if text else None

    def close(self) -> None:
        """End the child if it has not drawn (a no-op once it has)."""
        self._abandon()


def draws_figures(scenario) -> bool:
    """Whether the scenario's report draws a PNG: its plots or its timeline."""
    return scenario.outputs.draw_plots(scenario.values) or bool(scenario.outputs.timeline)


def start_plotter(draws: bool) -> Plotter:
    """The plotter for a report about to be run: forked now when it `draws` plots, the platform
    forks and this process runs no other Python thread (a thread's lock taken at the fork would
    stay taken in the child: a notebook's kernel, a caller's pool), else inline."""
    import threading
    if (draws and hasattr(os, "fork") and sys.platform.startswith("linux")
            and threading.active_count() == 1):
        try:
            return ForkedPlotter()
        except OSError:                     # no process to be had (EAGAIN, ENOMEM): inline
            pass
    return Plotter()
