"""A console progress bar with ETA (no dependency).

On a terminal one line is redrawn in place; otherwise (a log file, CI) one line is printed per
finished point.  The ETA is the time so far per finished point times the points left, so it
already counts how many run at once.
"""
from __future__ import annotations

import shutil
import sys
import time
from typing import TextIO


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Progress:
    def __init__(self, total: int, stream: TextIO | None = None, width: int = 28,
                 clock=time.monotonic, tty: bool | None = None):
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.clock = clock
        self.start = clock()
        self.done = 0
        self.counts = {"ok": 0, "infeasible": 0, "error": 0}
        self.tty = self.stream.isatty() if tty is None else tty
        self._drawn = False
        self._last_len = 0
        self.columns = shutil.get_terminal_size((200, 24)).columns - 1

    def eta(self) -> float | None:
        if self.done == 0:
            return None
        return (self.clock() - self.start) / self.done * (self.total - self.done)

    def line(self, last: str = "") -> str:
        frac = self.done / self.total if self.total else 1.0
        filled = int(round(frac * self.width))
        bar = "#" * filled + "." * (self.width - filled)
        counts = " ".join(f"{k} {v}" for k, v in self.counts.items() if v or k == "ok")
        text = (f"[{bar}] {self.done}/{self.total} {100 * frac:3.0f}%  {counts}  "
                f"elapsed {format_duration(self.clock() - self.start)}  ETA {format_duration(self.eta())}")
        return f"{text}  {last}" if last else text

    def advance(self, status: str, last: str = "") -> None:
        self.done += 1
        self.counts[status] = self.counts.get(status, 0) + 1
        self.draw(last)

    def draw(self, last: str = "") -> None:
        if self.tty:
            text = self.line(last)[:self.columns]
            self.stream.write("\r" + text.ljust(self._last_len))   # blank what a longer line left
            self._last_len = len(text)
            self._drawn = True
        else:
            self.stream.write(self.line(last) + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
