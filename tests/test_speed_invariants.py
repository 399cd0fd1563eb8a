"""The cycles do not move when the simulator gets faster (issue 20).

tests/data/speed_baseline.json was recorded by `python benchmarks/record_cycles.py` before any
speed change.  Every shortcut in the timing model (a process advancing time without an event
when no other event can come first, a buffer credit granted without an event) is exact, so the
comparison is exact: every official test's status and cycles, every scenario's and calibration
network's total and per-layer start/end cycles, timing-only.  The long scenarios (ResNet-50,
AlexNet, GoogLeNet on nv_small ...) run only with NVDLA_SIM_FULL_BASELINE=1 (about 40 s);
`python benchmarks/record_cycles.py --check` checks everything too.
"""
from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BASELINE = json.loads((ROOT / "tests" / "data" / "speed_baseline.json").read_text())
FULL = os.environ.get("NVDLA_SIM_FULL_BASELINE") == "1"
QUICK_WALL_S = 0.5

_spec = importlib.util.spec_from_file_location("record_cycles", ROOT / "benchmarks" / "record_cycles.py")
record_cycles = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(record_cycles)


def _selected(section: str) -> list[str]:
    return sorted(name for name, v in BASELINE[section].items() if FULL or v["wall_s"] <= QUICK_WALL_S)


def _official_root(name: str) -> Path | None:
    from nvdla_sim.conformance import tests_folder, v1_corpus_root
    project, test = name.split("/")
    root = record_cycles.v2_root() if project == "nv_small" else v1_corpus_root()
    if root is None:
        return None
    return tests_folder(root, project, 2 if project == "nv_small" else 1) / test


def test_baseline_covers_everything():
    assert len([k for k in BASELINE["official"] if k.startswith("nv_small/")]) == 84
    assert len([k for k in BASELINE["official"] if k.startswith("nv_full/")]) == 9
    shipped = {p.stem for p in record_cycles.scenario_files()}
    assert shipped <= set(BASELINE["scenarios"]), shipped - set(BASELINE["scenarios"])
    assert len(BASELINE["calibration"]) == 7


@pytest.mark.parametrize("name", sorted(BASELINE["official"]))
def test_official_cycles_unchanged(name):
    from nvdla_sim.config import load_hardware
    from nvdla_sim.conformance import run_test
    path = _official_root(name)
    if path is None or not path.is_dir():
        pytest.skip(f"{name}: the official corpus is not in ../shared (or $NVDLA_HW / $NVDLA_HW_V1)")
    old = BASELINE["official"][name]
    outcome = run_test(path, load_hardware(name.split("/")[0]))
    assert (outcome.status, outcome.cycles) == (old["status"], old["cycles"])


def _check_network(section: str, name: str, path: Path):
    old = BASELINE[section][name]
    new = record_cycles.scenario_cycles(path)
    if new["replayed"]:
        # Steps replayed from the step cache (engine/step_cache.py) move the clock by recorded
        # durations, shifted floats: from the first replay on, each layer's start and end may
        # differ by float rounding, within REPLAY_REL (1e-9) of the cycle or of the layer's
        # length (the bound is 0.5 % per layer); runs without a replay compare with ==.
        assert record_cycles.compare({section: {name: old}}, {section: {name: new}},
                                     record_cycles.REPLAY_REL) == []
        return
    assert new["total"] == old["total"]
    assert [tuple(x) for x in new["layers"]] == [tuple(x) for x in old["layers"]]


@pytest.mark.parametrize("name", _selected("scenarios"))
def test_scenario_cycles_unchanged(name):
    _check_network("scenarios", name, ROOT / "scenarios" / f"{name}.yaml")


@pytest.mark.parametrize("name", _selected("calibration"))
def test_calibration_network_cycles_unchanged(name):
    root = record_cycles.calibration_root()
    if root is None:
        pytest.skip("../shared/calibration/networks is absent")
    _check_network("calibration", name, root / f"{name}.yaml")


def test_compare_finds_a_moved_layer():
    """The checker itself: one cycle moved in one layer is reported."""
    old = {"scenarios": {"x": {"total": 10.0, "layers": [["a", 0.0, 10.0]]}}}
    new = {"scenarios": {"x": {"total": 10.0, "layers": [["a", 0.0, 11.0]]}}}
    assert record_cycles.compare(old, new) == ["scenarios/x/a: [0.0, 10.0] -> [0.0, 11.0]"]
    assert record_cycles.compare(old, old) == []
