"""Shared fixtures: where the official NVDLA trace tests are."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def nvdla_hw_root() -> Path | None:
    """$NVDLA_HW, else ../shared/nvdla-hw beside the checkout; None when neither exists."""
    env = os.environ.get("NVDLA_HW")
    candidates = [Path(env)] if env else []
    candidates.append(REPO.parent / "shared" / "nvdla-hw")
    for c in candidates:
        if (c / "verif" / "tests" / "trace_tests").is_dir():
            return c
    return None


def trace_tests(project: str) -> list[Path]:
    root = nvdla_hw_root()
    if root is None:
        return []
    folder = root / "verif" / "tests" / "trace_tests" / project
    return sorted(d for d in folder.iterdir() if d.is_dir() and any(d.glob("*.cfg"))) \
        if folder.is_dir() else []


NO_CORPUS = ("official NVDLA trace tests not found: set NVDLA_HW to an nvdla/hw checkout "
             "or place it at ../shared/nvdla-hw")


@pytest.fixture
def corpus_root() -> Path:
    root = nvdla_hw_root()
    if root is None:
        pytest.skip(NO_CORPUS)
    return root
