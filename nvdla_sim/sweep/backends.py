"""Where the points run.  Every backend runs the same function, `point.evaluate_point`, on each
point and yields the rows as they finish (in any order), so local and Ray results are the same.

- `LocalBackend(jobs)`: a process pool of `jobs` workers (default: every core this process may
  use); `jobs=1` runs the points in this process, one after another.
- `RayBackend(jobs, address)`: one Ray task per point (1 CPU each) on the cluster at `address`
  (or $RAY_ADDRESS), or on a local Ray instance of `jobs` CPUs started for the sweep and stopped
  after it.  Ray is an optional extra: `pip install 'nvdla-sim[ray]'`.
"""
from __future__ import annotations

import os
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from itertools import chain, islice
from typing import Iterable, Iterator

from ..errors import NvdlaSimError
from .point import PointRunner, evaluate_point
from .spec import Point

BACKENDS = ("local", "ray")
WINDOW_PER_JOB = 4                  # points queued per worker: busy workers, bounded memory
RAY_WINDOW_PER_JOB = 16             # a cluster's workers start tasks later: a deeper queue


def default_jobs() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:          # not Linux
        return os.cpu_count() or 1


class LocalBackend:
    name = "local"

    def __init__(self, jobs: int | None = None):
        self.jobs = jobs or default_jobs()
        if self.jobs < 1:
            raise NvdlaSimError(f"--jobs: must be >= 1, got {self.jobs}")

    def run(self, points: Iterable[Point], runner: PointRunner, bytes_per_mac: float) -> Iterator[dict]:
        # Points are taken from `points` as workers free up (a grid's points are made when
        # asked for: a large sweep never holds them all; spec.GridPoints).
        points = iter(points)
        first = list(islice(points, 2))
        if self.jobs == 1 or len(first) <= 1:
            for p in chain(first, points):
                yield evaluate_point(p, runner, bytes_per_mac)
            return
        # A worker that dies (the kernel kills it for memory, a signal) breaks the pool and every
        # point in it: those run again, each alone in its own pool (a point that kills even that
        # one is an error row), then a new pool goes on with the rest; the sweep goes on.
        rest = chain(first, points)
        while True:
            lost = yield from self._pool(rest, runner, bytes_per_mac, self.jobs)
            if not lost:
                return
            for p in lost:
                if (yield from self._pool(iter([p]), runner, bytes_per_mac, 1)):
                    yield dead_worker_row(p)

    @staticmethod
    def _pool(points: Iterator[Point], runner: PointRunner, bytes_per_mac: float,
              jobs: int) -> Iterator[dict]:
        """Yield the rows of `points` run in one process pool, at most WINDOW_PER_JOB points per
        worker submitted at a time; when a worker dies, stop taking points and return the
        points it took down (the ones in flight)."""
        pool = ProcessPoolExecutor(max_workers=jobs)
        lost: list[Point] = []
        pending: dict = {}

        def fill() -> None:
            while len(pending) < jobs * WINDOW_PER_JOB:
                p = next(points, None)
                if p is None:
                    return
                pending[pool.submit(evaluate_point, p, runner, bytes_per_mac)] = p
        try:
            fill()
            while pending:
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for f in finished:
                    p = pending.pop(f)
                    try:
                        row = f.result()
                    except BrokenProcessPool:
                        lost.append(p)
                        continue
                    yield row
                if not lost:
                    fill()
        finally:
            # On an interrupt: drop what has not started; finished rows were already saved.
            pool.shutdown(wait=True, cancel_futures=True)
        return sorted(lost, key=lambda p: p.index)


class RayBackend:
    name = "ray"

    def __init__(self, jobs: int | None = None, address: str | None = None):
        self.jobs = jobs
        self.address = address or os.environ.get("RAY_ADDRESS") or None

    def _ray(self):
        try:
            import ray
        except ImportError:
            raise NvdlaSimError("--backend ray: the ray package is not installed "
                                "(pip install 'nvdla-sim[ray]')") from None
        return ray

    def run(self, points: Iterable[Point], runner: PointRunner, bytes_per_mac: float) -> Iterator[dict]:
        ray = self._ray()
        points = iter(points)
        first = next(points, None)
        if first is None:
            return
        points = chain([first], points)
        started = not ray.is_initialized()
        if started:
            kwargs = dict(include_dashboard=False, logging_level="ERROR", log_to_driver=False)
            if self.address:
                ray.init(address=self.address, **kwargs)
            else:
                ray.init(num_cpus=self.jobs or default_jobs(), **kwargs)
        try:
            task = ray.remote(num_cpus=1, max_retries=0)(evaluate_point)
            window = (self.jobs or default_jobs()) * RAY_WINDOW_PER_JOB
            pending = [task.remote(p, runner, bytes_per_mac) for p in islice(points, window)]
            try:
                while pending:
                    finished, pending = ray.wait(pending, num_returns=1)
                    for ref in finished:
                        yield ray.get(ref)
                    pending += [task.remote(p, runner, bytes_per_mac)
                                for p in islice(points, window - len(pending))]
            finally:
                for ref in pending:
                    ray.cancel(ref, force=True)
        finally:
            if started:
                ray.shutdown()


def dead_worker_row(point: Point) -> dict:
    """The `error` row of a point whose worker process died under it."""
    from .results import base_row
    row = base_row(point)
    row.update(status="error", wall_s=0.0, reason="the worker process died running this point "
               "(killed by a signal: out of memory?)")
    return row


def make_backend(name: str, jobs: int | None = None, address: str | None = None):
    if name == "local":
        return LocalBackend(jobs)
    if name == "ray":
        return RayBackend(jobs, address)
    raise NvdlaSimError(f"--backend: must be one of {', '.join(BACKENDS)}, got {name!r}")
