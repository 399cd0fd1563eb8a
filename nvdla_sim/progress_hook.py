"""The progress reporters following the engines a scenario run creates (`nvdla-sim run
--progress`): `conformance.Progress.running` registers one, `compiler.lower.run_lowered` hands it
each engine it makes.  No reporter registered: `follow` does nothing."""
from __future__ import annotations

ACTIVE: list = []                      # conformance.Progress objects, innermost last


def follow(engine) -> None:
    """Report this engine's simulated cycle from now on."""
    for reporter in ACTIVE:
        reporter.follow(engine)
