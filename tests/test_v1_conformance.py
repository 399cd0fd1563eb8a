"""Every official NVDLA v1 trace-player test (nv_full) replayed; the CLI on the v1 corpus."""
from __future__ import annotations

import json

import pytest

from nvdla_sim.cli import main
from nvdla_sim.conformance import V1_TESTS, find_tests, run_test, v1_corpus_root
from nvdla_sim.config import load_hardware

NV_FULL = load_hardware("nv_full")
ROOT = v1_corpus_root()
NO_CORPUS = ("official NVDLA v1 trace-player tests not found: set NVDLA_HW_V1 to an nvdla/hw "
             "nvdlav1 checkout or place it at ../shared/nvdla-hw-v1")
TESTS = find_tests(ROOT / V1_TESTS) if ROOT else []
BDMA_TESTS = {"sanity0", "sanity1", "sanity1_cvsram", "sanity2", "sanity2_cvsram"}


@pytest.mark.skipif(ROOT is None, reason=NO_CORPUS)
def test_corpus_is_complete():
    assert {t.name for t in TESTS} >= BDMA_TESTS | {"sanity3", "sdp_relu_int16",
                                                    "pdp_max_pooling_int16", "conv_8x8_fc_int16"}


@pytest.mark.parametrize("test", TESTS or [None], ids=[t.name for t in TESTS] or ["no-corpus"])
def test_v1_trace(test):
    if test is None:
        pytest.skip(NO_CORPUS)
    outcome = run_test(test, NV_FULL)
    if outcome.status == "unsupported":
        pytest.skip(f"{test.name}: {outcome.error}")
    assert outcome.status == "pass", outcome.error or "\n".join(
        c.describe() for c in outcome.checks if not c.passed)
    assert outcome.checks and all(c.passed for c in outcome.checks)
    if test.name in BDMA_TESTS - {"sanity0"}:
        assert outcome.result.engine.units["BDMA"].stats["layers"] == 1


@pytest.mark.skipif(ROOT is None, reason=NO_CORPUS)
def test_bdma_sanity_copies_the_image():
    """sanity1 only polls the interrupt; check the copy itself against the loaded image."""
    outcome = run_test(ROOT / V1_TESTS / "sanity1", NV_FULL)
    engine = outcome.result.engine
    src = engine.memory.primary.read(0x80000000, 0x800)
    assert src.any() and (engine.memory.primary.read(0x81000000, 0x800) == src).all()
    outcome = run_test(ROOT / V1_TESTS / "sanity1_cvsram", NV_FULL)
    engine = outcome.result.engine
    src = engine.memory.secondary.read(0x50000000, 0x800)
    assert src.any() and (engine.memory.secondary.read(0x51000000, 0x800) == src).all()
    assert not engine.mcif.bytes_by_client


@pytest.mark.skipif(ROOT is None, reason=NO_CORPUS)
def test_cli_replay_and_conformance(tmp_path, capsys):
    assert main(["replay", str(ROOT / V1_TESTS / "sanity1"), "--project", "nv_full"]) == 0
    out = capsys.readouterr().out
    assert "read_reg GLB.S_INTR_STATUS" in out and "PASS" in out and "BDMA" in out
    assert main(["replay", str(ROOT / V1_TESTS / "sdp_relu_int16"), "--project", "nv_full"]) == 0
    out = capsys.readouterr().out
    assert "dump_mem pri_mem 0x80800000" in out and "SDP.D_PERF_OUT_SATURATION" in out
    report = tmp_path / "v1.json"
    main(["conformance", "--nvdla-hw", str(ROOT), "--project", "nv_full", "--filter", "sanity*",
          "--json", str(report)])
    out = capsys.readouterr().out
    assert "sanity1_cvsram" in out and "pass" in out
    data = json.loads(report.read_text())
    by_name = {t["name"]: t for t in data["tests"]}
    assert by_name["sanity1"]["status"] == "pass"
    assert by_name["sanity1"]["checks"][-1]["kind"] == "read_reg"
    assert "statistics" in by_name["sanity1"]


def test_replay_format_errors(tmp_path, capsys):
    (tmp_path / "input.txn").write_text("bogus 1 2\n")
    assert main(["replay", str(tmp_path), "--project", "nv_full"]) == 1
    assert "input.txn:1: unknown command 'bogus'" in capsys.readouterr().err
    assert main(["replay", str(tmp_path), "--project", "nv_full", "--format", "cfg"]) == 1
    assert "expected one .cfg file" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["replay", str(empty), "--project", "nv_full"]) == 1
    assert "neither input.txn nor a .cfg" in capsys.readouterr().err


@pytest.mark.skipif(ROOT is None, reason=NO_CORPUS)
@pytest.mark.parametrize("name", ["sanity2_cvsram", "sdp_relu_int16", "pdp_max_pooling_int16"])
def test_timing_only_replay_has_the_same_cycles(name):
    """Timing-only runs skip memory images and dumps but poll, wait and time the same."""
    from nvdla_sim.engine import Engine
    from nvdla_sim.frontends.txn_trace import parse_txn
    program = parse_txn(ROOT / V1_TESTS / name)
    values = Engine(NV_FULL).run(program)
    timing = Engine(NV_FULL, compute_values=False).run(program)
    assert values.cycles == timing.cycles > 0
    assert [c.kind for c in timing.checks] == [c.kind for c in values.checks
                                                if c.kind != "dump_mem"]
