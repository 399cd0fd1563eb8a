"""`nvdla-sim replay --host` and the per-layer changeover table (console and --json), and
`nvdla-sim run --host` (issue 16)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from nvdla_sim.cli import main

REPO = Path(__file__).resolve().parent.parent
LENET = REPO / "traces" / "nv_small" / "lenet5_nv_small"


@pytest.mark.skipif(not LENET.is_dir(), reason="traces/nv_small/lenet5_nv_small not shipped")
@pytest.mark.parametrize("host", ["rtl_testbench", "embedded_linux"])
def test_replay_prints_compute_and_changeover_per_layer(tmp_path, capsys, host):
    out = tmp_path / "r.json"
    assert main(["replay", str(LENET), "--quiet", "--host", host, "--json", str(out)]) == 0
    text = capsys.readouterr().out
    doc = json.loads(out.read_text())
    table = doc["changeover"]
    assert table["host"] == host
    # one row per launch, named by the sync ids the launch arms (the compiled layers)
    assert [r["layer"] for r in table["layers"]] == ["conv1", "conv2", "ip1", "ip2"]
    assert table["layers"][-1]["changeover_cycles"] is None
    assert all(r["changeover_cycles"] > 0 for r in table["layers"][:-1])
    # compute + changeovers is the replay's own span: first OP_ENABLE to the last interrupt
    assert table["end_to_end_cycles"] == pytest.approx(doc["cycles"])
    assert table["compute_cycles"] == pytest.approx(
        sum(r["compute_cycles"] for r in table["layers"]))
    for row in table["layers"]:
        assert f"{row['layer']:<12}" in text
    assert f"on host '{host}'" in text


@pytest.mark.skipif(not LENET.is_dir(), reason="traces/nv_small/lenet5_nv_small not shipped")
def test_replay_host_changeovers_follow_the_profile(tmp_path):
    """A slower host (a profile file overriding the testbench's poll round) lengthens every
    changeover by what its poll adds and leaves the layers' compute cycles alone."""
    slow = tmp_path / "slow.yaml"
    slow.write_text("profile: rtl_testbench\nname: slow_poll\npoll_period_cycles: 1000\n")
    runs = {}
    for host in ("rtl_testbench", str(slow)):
        out = tmp_path / f"{Path(host).stem}.json"
        assert main(["replay", str(LENET), "--quiet", "--host", host, "--json", str(out)]) == 0
        runs[host] = json.loads(out.read_text())["changeover"]["layers"]
    fast, slow_rows = runs["rtl_testbench"], runs[str(slow)]
    assert [r["compute_cycles"] for r in fast] == [r["compute_cycles"] for r in slow_rows]
    for a, b in zip(fast[:-1], slow_rows[:-1]):
        # seen within a poll round of the profile per awaited interrupt (a fused conv + pool
        # layer awaits two: one sync point per round)
        assert 5 <= b["interrupt_seen_after_cycles"] <= 2 * 1000 + 5
        assert b["interrupt_seen_after_cycles"] > a["interrupt_seen_after_cycles"]
        assert b["changeover_cycles"] - b["interrupt_seen_after_cycles"] == pytest.approx(
            a["changeover_cycles"] - a["interrupt_seen_after_cycles"])


@pytest.mark.parametrize("spec, needle", [("nope", "unknown host profile 'nope'"),
                                          ("missing.yaml", "host profile not found")])
def test_bad_host_is_a_one_line_error(capsys, spec, needle):
    assert main(["replay", str(LENET), "--host", spec]) != 0
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--host" in err and needle in err


def test_bad_host_profile_value_is_a_one_line_error(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("profile: rtl_testbench\nregister_write_cycles: -3\n")
    assert main(["replay", str(LENET), "--host", str(bad)]) != 0
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "register_write_cycles: must be a number >= 0" in err


def test_run_host_sets_the_end_to_end_line(tmp_path, capsys):
    scn = tmp_path / "s.yaml"
    scn.write_text("name: s\nhardware: nv_small\nnetwork: lenet5\nmode: timing-only\n"
                   f"outputs: {{directory: {tmp_path / 'out'}}}\n")
    assert main(["run", str(scn), "--host", "rtl_testbench"]) == 0
    assert "on host 'rtl_testbench'" in capsys.readouterr().out
