"""Repeated-layer timing reuse (engine/step_cache.py, issue 20).

A step replayed from the cache must give what the token model gives: every layer's cycles
(within float rounding of the shifted absolute times), bytes, bound and each unit's busy and
stall cycles, compared with the same network run with the cache off.  Verify mode re-simulates
every hit and compares it with the recording, which checks that the key holds everything the
outcome depends on.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from nvdla_sim.compiler.lower import lower_and_run
from nvdla_sim.engine import step_cache
from nvdla_sim.scenario.runner import context, prepare
from nvdla_sim.scenario.schema import load_scenario

ROOT = Path(__file__).resolve().parent.parent
REL = 1e-9          # replayed times are shifted floats: a few ulps


def _run(name: str, hardware: str | None, cache: bool, monkeypatch, verify: bool = False):
    monkeypatch.delenv(step_cache.ENV_OFF, raising=False)
    monkeypatch.delenv(step_cache.ENV_VERIFY, raising=False)
    if not cache:
        monkeypatch.setenv(step_cache.ENV_OFF, "1")
    if verify:
        monkeypatch.setenv(step_cache.ENV_VERIFY, "1")
    scn = load_scenario(ROOT / "scenarios" / f"{name}.yaml")
    if hardware:
        from nvdla_sim.config import load_hardware
        scn.hardware = load_hardware(hardware)
    scn.mode = "timing"
    prep = prepare(scn)
    return lower_and_run(prep.plan, context(prep))


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= REL * max(1.0, abs(a), abs(b))


@pytest.mark.parametrize("name, hardware, least", [
    ("resnet50_nv_large", None, 25),        # 30 of 54 steps replayed
    ("resnet50_nv_large", "nv_small", 25),
    ("googlenet_nv_large", None, 0),
])
def test_every_layer_as_without_the_cache(name, hardware, least, monkeypatch):
    on = _run(name, hardware, True, monkeypatch)
    off = _run(name, hardware, False, monkeypatch)
    cache = on.engine_result.engine.step_cache
    assert off.engine_result.engine.step_cache is None
    assert cache.replayed >= least
    assert _close(on.total_cycles, off.total_cycles)
    assert [t.name for t in on.layers] == [t.name for t in off.layers]
    for a, b in zip(on.layers, off.layers):
        assert _close(a.start_cycle, b.start_cycle) and _close(a.end_cycle, b.end_cycle), a.name
        assert (a.dram_read_bytes, a.dram_write_bytes, a.cvsram_read_bytes, a.cvsram_write_bytes,
                a.bound, a.register_writes) == \
               (b.dram_read_bytes, b.dram_write_bytes, b.cvsram_read_bytes, b.cvsram_write_bytes,
                b.bound, b.register_writes), a.name
    units_on, units_off = on.engine_result.unit_stats, off.engine_result.unit_stats
    assert units_on.keys() == units_off.keys()
    for unit, stats in units_off.items():
        assert units_on[unit]["layers"] == stats["layers"], unit
        for key in ("busy_cycles", "stall_cycles", "active_cycles"):
            assert _close(units_on[unit][key], stats[key]), (unit, key)
    assert on.engine_result.memory_bytes == off.engine_result.memory_bytes
    assert on.engine_result.cbuf == pytest.approx(off.engine_result.cbuf, rel=REL)
    # each unit's activity spans, as many and as long (the timeline draws them)
    assert len(on.engine_result.engine.activity.spans) == \
        len(off.engine_result.engine.activity.spans)
    # the report's line
    info = step_cache.summary(on)
    assert info == {"replayed_steps": cache.replayed, "steps": cache.replayed + cache.simulated}
    assert step_cache.summary(off) is None
    assert f"{cache.replayed} of {info['steps']} steps replayed" in \
        step_cache.console_lines(info)[0]
    # the host's launches (end-to-end time)
    la, lb = on.engine_result.engine.launches, off.engine_result.engine.launches
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        assert _close(x.start, y.start) and x.writes == y.writes and \
            x.ahead_writes == y.ahead_writes


def test_verify_mode_resimulates_every_hit(monkeypatch):
    """The key is sufficient: each hit run again on the token model ends as recorded."""
    res = _run("resnet50_nv_large", None, True, monkeypatch, verify=True)
    cache = res.engine_result.engine.step_cache
    assert cache.replayed == 0 and len(cache.entries) > 0


def test_verify_mode_catches_a_wrong_recording(monkeypatch):
    """The check itself: a recording altered by one cycle is reported on its next hit."""
    original = step_cache.StepCache._record

    def tampered(self, piece):
        first = self.key(piece) not in self.entries      # the recording the cache keeps
        result, entry = original(self, piece)
        if entry is not None and first:
            entry.duration += 1.0
        return result, entry

    monkeypatch.setattr(step_cache.StepCache, "_record", tampered)
    with pytest.raises(AssertionError, match="duration"):
        _run("resnet50_nv_large", None, True, monkeypatch, verify=True)


def test_off_switch_and_values_runs(monkeypatch):
    from nvdla_sim.config import load_hardware
    from nvdla_sim.engine import Engine
    hw = load_hardware("nv_small")
    monkeypatch.delenv(step_cache.ENV_OFF, raising=False)
    assert Engine(hw, compute_values=False).step_cache is not None
    assert Engine(hw, compute_values=False, step_cache=False).step_cache is None
    assert Engine(hw, compute_values=True).step_cache is None      # values runs move data
    monkeypatch.setenv(step_cache.ENV_OFF, "1")
    assert Engine(hw, compute_values=False).step_cache is None


def test_mirror_relabels_groups_both_ways():
    m = step_cache.StepCache._mirror
    assert m("SDP", "S_STATUS", 0x0001_0000, 1) == 0x0000_0001
    assert m("GLB", "S_INTR_STATUS", 1 << 16, 1) == 1 << 17        # CDMA_DAT0 -> CDMA_DAT1
    for v in (0, 0x12345678, 0xFFFFFFFF):
        assert m("GLB", "S_INTR_MASK", m("GLB", "S_INTR_MASK", v, 1), 1) == v
        assert m("CDMA", "S_STATUS", m("CDMA", "S_STATUS", v, 1), 1) == v
    assert m("CDMA", "D_BANK", 0x12, 1) == 0x12
