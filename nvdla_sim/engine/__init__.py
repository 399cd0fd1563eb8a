"""The SimPy engine that executes register programs on the NVDLA units."""
from .engine import Engine, RunResult, CheckResult

__all__ = ["Engine", "RunResult", "CheckResult"]
