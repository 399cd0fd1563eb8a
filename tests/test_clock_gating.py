"""Clock gating (issue 16): hardware config `clock_gating`, and CDMA's weight-entry counter losing
the releases CSC sends while CDMA's gated clock is off (units/cdma_gating.py).

Against the RTL: ../shared/calibration/networks/totals.csv column `clock_gating_on` says where each
compiled network hung on the nv_small RTL with the testbench's clock gating on, or that it
completed (then in the same cycles as with gating off).
"""
from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest

from nvdla_sim.config import load_hardware
from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.units.cdma_gating import SLCG_DELAY_CYCLES, WeightClock

REPO = Path(__file__).resolve().parent.parent
CALIBRATION = Path(os.environ.get("NVDLA_CALIBRATION", REPO.parent / "shared" / "calibration"))
NETWORKS = CALIBRATION / "networks"


def test_clock_gating_defaults_off_and_is_validated():
    assert load_hardware("nv_small").clock_gating is False
    assert load_hardware({"preset": "nv_small", "clock_gating": True}).clock_gating is True
    assert load_hardware("nv_small", {"clock_gating": True}).clock_gating is True
    with pytest.raises(NvdlaSimError, match="clock_gating: must be true or false, got 'yes'"):
        load_hardware({"preset": "nv_small", "clock_gating": "yes"})


def test_scenario_field_clock_gating_bad_value_is_one_line(tmp_path):
    from nvdla_sim.scenario.schema import load_scenario
    path = tmp_path / "s.yaml"
    path.write_text("name: s\nhardware: {preset: nv_small, clock_gating: 3}\nnetwork: lenet5\n")
    with pytest.raises(NvdlaSimError) as exc:
        load_scenario(path)
    assert "clock_gating" in str(exc.value) and "\n" not in str(exc.value)


class _Pool:
    def __init__(self, capacity):
        self.capacity, self.free = capacity, capacity

    def release(self, n):
        self.free += n


def test_weight_clock_counts_releases_only_while_the_gated_clock_runs():
    pool = _Pool(100)
    pool.free = 40                                  # 60 entries written
    clock = WeightClock(enabled=True)
    clock.start(1000)
    clock.release(pool, 10, 1000 + SLCG_DELAY_CYCLES, layer=0)     # clock on: counted
    assert pool.free == 50 and not clock.lost
    clock.stop(2000)
    clock.release(pool, 10, 2000 + SLCG_DELAY_CYCLES - 1, layer=0)  # still ticking (3 flops)
    assert pool.free == 60
    clock.release(pool, 25, 2000 + SLCG_DELAY_CYCLES, layer=0)      # off: lost
    assert pool.free == 60 and clock.lost_entries == 25
    clock.start(5000)
    clock.release(pool, 5, 5001, layer=1)           # before the enable reaches the clock: lost
    assert clock.lost_entries == 30
    off = WeightClock(enabled=False)                # gating off: every release counts
    off.release(pool, 7, 99999, layer=3)
    assert pool.free == 67 and not off.lost


def test_hang_report_names_counter_group_and_missing_entries():
    pool = _Pool(2056)
    clock = WeightClock(enabled=True)
    clock.start(0)
    clock.begin_fetch(0, [500.0])
    pool.free -= 500
    clock.stop(100)
    clock.release(pool, 500, 5000, layer=0)          # lost
    clock.start(6000)
    clock.begin_fetch(1, [800.0, 800.0])
    pool.free -= 1556                                # 1556 of layer 1's entries fit
    text = clock.describe_hang(pool)
    # 500 lost + 1556 written = 2056: group 0 landed (800), group 1 needs 1600 - 1556 more
    assert "wt_wr_dmatx_cnt counts 2056" in text and "kernel group 1 (800 entries)" in text
    assert "44 entries missing" in text and "500 entries" in text
    assert WeightClock(enabled=False).describe_hang(pool) is None


def _totals() -> list[dict]:
    if not (NETWORKS / "totals.csv").is_file():
        return []
    with open(NETWORKS / "totals.csv") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    from nvdla_sim.compiler.lower import emit_trace
    from nvdla_sim.scenario.runner import context, prepare
    from nvdla_sim.scenario.schema import load_scenario
    out = {}
    folder = tmp_path_factory.mktemp("gating")
    for row in _totals():
        scn = load_scenario(NETWORKS / f"{row['network']}.yaml")
        scn.mode = "values+timing"
        prep = prepare(scn)
        path, _ = emit_trace(prep.plan, context(prep), folder, scn.name, scn.memory.dram)
        out[row["network"]] = path.parent
    return out


def _replay(path: Path, gating: bool):
    from nvdla_sim.conformance import run_test
    from nvdla_sim.engine.memif import load_memory_profile
    return run_test(path, load_hardware({"preset": "nv_small", "clock_gating": gating}),
                    load_memory_profile("rtl_testbench"))


@pytest.mark.skipif(not _totals(), reason=f"{NETWORKS}/totals.csv not found (set NVDLA_CALIBRATION)")
@pytest.mark.parametrize("row", _totals(), ids=lambda r: r["network"])
def test_network_hangs_where_the_rtl_hung(compiled, row):
    on = _replay(compiled[row["network"]], True)
    off = _replay(compiled[row["network"]], False)
    assert off.status == "pass", off.error
    verdict = row["clock_gating_on"]
    if verdict == "completes":
        assert on.status == "pass", on.error
        assert on.cycles == off.cycles
        return
    layer = verdict.removeprefix("hangs at ").strip()
    assert on.status != "pass"
    text = on.error
    assert "\n" not in text and "deadlock" in text
    # the awaited sync point names the layer (its intr_notify), and the CDMA's counter
    assert f" {layer}_" in text, text
    assert "wt_wr_dmatx_cnt" in text and "entries missing" in text


# -- the workaround: CDMA's next layer enabled ahead, parked in PEND (compiler/clock_gating.py) --
def _lenet_program(tmp_path, gating: bool):
    from nvdla_sim.compiler.lower import emit_trace
    from nvdla_sim.scenario.runner import context, prepare
    from nvdla_sim.scenario.schema import load_scenario
    path = tmp_path / "lenet.yaml"
    path.write_text("name: lenet_cg\nhardware: {preset: nv_small, clock_gating: %s}\n"
                    "network: lenet5\nprecision: int8\nmode: values+timing\n"
                    % ("true" if gating else "false"))
    scn = load_scenario(path)
    prep = prepare(scn)
    return emit_trace(prep.plan, context(prep), tmp_path / ("on" if gating else "off"),
                      scn.name, scn.memory.dram)


def test_cdma_ahead_moves_cdma_layers_before_the_wait_on_the_previous_layer(tmp_path):
    from nvdla_sim.compiler.clock_gating import cdma_ahead
    from nvdla_sim.conformance import load_program
    from nvdla_sim.program import RegWrite, SyncWait
    path, _ = _lenet_program(tmp_path, False)
    program = load_program(path.parent, 2, "cfg")
    ahead, moved, kept = cdma_ahead(program)
    assert (moved, kept) == (3, 0)                  # lenet5: 4 conv layers, 4 different splits
    assert sorted(map(repr, ahead.commands)) == sorted(map(repr, program.commands))
    cmds = ahead.commands
    enables = [i for i, c in enumerate(cmds) if isinstance(c, RegWrite)
               and c.name == "CDMA.D_OP_ENABLE"]
    for i in enables[1:]:
        # the next CDMA layer is enabled before the host waits for the running layer
        nxt = next(j for j in range(i, len(cmds)) if isinstance(cmds[j], SyncWait))
        prev_sdp = max(j for j in range(i) if isinstance(cmds[j], RegWrite)
                       and cmds[j].name == "SDP.D_OP_ENABLE")
        assert prev_sdp < i < nxt
        assert not any(isinstance(cmds[j], SyncWait) for j in range(prev_sdp, i))


def test_cdma_ahead_keeps_layers_with_the_same_bank_split():
    from nvdla_sim.compiler.clock_gating import cdma_ahead
    from nvdla_sim.program import RegisterProgram, RegWrite, SyncWait

    def layer(bank):
        return [RegWrite(0, 0, "CDMA.S_POINTER"), RegWrite(0, bank, "CDMA.D_BANK"),
                RegWrite(0, 1, "CDMA.D_OP_ENABLE"), SyncWait("CDMA", "x")]
    program = RegisterProgram("p", layer(0x10) + layer(0x10) + layer(0x20))
    out, moved, kept = cdma_ahead(program)
    assert (moved, kept) == (1, 1)
    banks = [c.value for c in out.commands if getattr(c, "name", "") == "CDMA.D_BANK"]
    assert banks == [0x10, 0x10, 0x20]
    # the third layer's writes now precede the wait that followed the second layer
    kinds = ["W" if isinstance(c, SyncWait) else "E" if c.name.endswith("ENABLE") else "."
             for c in out.commands]
    assert "".join(kinds) == "..EW..E..EWW"


def test_workaround_completes_with_gating_on_in_the_same_compute_cycles(tmp_path):
    """The emitted trace (compile --emit-cfg with clock_gating: true) holds the workaround: its
    CRCs were computed by running it with gating on (a hang would have raised), it replays with
    gating on, every check passes (CDMA fetched each input only after it was written), and each
    layer computes in the cycles of the plain trace without gating."""
    on_path, on_run = _lenet_program(tmp_path, True)
    off_path, _ = _lenet_program(tmp_path, False)
    assert "CDMA.D_OP_ENABLE" in on_path.read_text().replace("NVDLA_CDMA.D_OP_ENABLE_0",
                                                              "CDMA.D_OP_ENABLE")
    on = _replay(on_path.parent, True)
    off = _replay(off_path.parent, False)
    assert on.status == "pass" and off.status == "pass", (on.error, off.error)
    assert on.result.checks and all(c.passed for c in on.result.checks)
    assert [a.compute_cycles for a in on.result.launches] == \
        [b.compute_cycles for b in off.result.launches]
    lost = on.result.engine.units["CDMA"].weight_clock.lost
    assert {x.layer for x in lost} == {3}           # only the last layer's releases are lost
    # without the workaround the same network hangs at ip1 (see totals.csv)
    plain_on = _replay(off_path.parent, True)
    assert plain_on.status == "error" and " ip1_" in plain_on.error


@pytest.mark.parametrize("scenario, layer, sync", [
    ("alexnet_nv_small", "conv2.g0", "conv2_g0_SDP_1"),
    ("resnet50_nv_small", "res2a_branch1", "res2a_branch1_h0_SDP_0")])
def test_zoo_networks_hang_where_the_issue_saw_the_rtl_hang(tmp_path, scenario, layer, sync):
    """Issue 16: on the RTL with clock gating on, AlexNet's head hung at conv2 group 0 and
    ResNet-50's at res2a_branch1.  `nvdla-sim run` (layer by layer, no workaround) reports the
    deadlock there, one line, naming the step, its sync point and the counter."""
    from nvdla_sim.scenario.runner import execute, prepare
    from nvdla_sim.scenario.schema import load_scenario
    text = (REPO / "scenarios" / f"{scenario}.yaml").read_text()
    lines = [("hardware: {preset: nv_small, clock_gating: true}" if ln.startswith("hardware:")
              else "mode: timing-only" if ln.startswith("mode:")
              else f"outputs: {{directory: {tmp_path / 'out'}}}" if ln.startswith("outputs:")
              else ln) for ln in text.splitlines()]
    path = tmp_path / f"{scenario}.yaml"
    path.write_text("\n".join(lines) + "\n")
    scn = load_scenario(path)
    assert scn.hardware.clock_gating
    with pytest.raises(NvdlaSimError) as exc:
        execute(prepare(scn), tmp_path / "out")
    msg = str(exc.value)
    assert "\n" not in msg and f":{layer}: deadlock" in msg and f" {sync} never raised" in msg
    assert "wt_wr_dmatx_cnt" in msg and "entries missing" in msg


def test_cdma_ahead_gives_a_layer_sharing_the_previous_split_another_one():
    """A layer (with the layers reusing its data or weights) whose D_BANK split equals the
    previous layer's gets another split its input and weights still fit, on CDMA and CSC alike,
    so that it can be enabled ahead."""
    from nvdla_sim.compiler.clock_gating import cdma_ahead
    from nvdla_sim.program import RegisterProgram, RegWrite, SyncWait
    hw = load_hardware("nv_small")

    def layer(misc: int, data_banks: int = 4, weight_banks: int = 4):
        bank = (data_banks - 1) | ((weight_banks - 1) << 16)
        return [RegWrite(0, bank, "CSC.D_BANK"), RegWrite(0, 0, "CDMA.S_POINTER"),
                RegWrite(0, misc, "CDMA.D_MISC_CFG"), RegWrite(0, 9, "CDMA.D_ENTRY_PER_SLICE"),
                RegWrite(0, 9 << 16, "CDMA.D_DATAIN_SIZE_0"),       # 10 rows x 10 entries
                RegWrite(0, 99, "CDMA.D_WEIGHT_SIZE_0"), RegWrite(0, 7, "CDMA.D_WEIGHT_SIZE_1"),
                RegWrite(0, 800, "CDMA.D_WEIGHT_BYTES"), RegWrite(0, bank, "CDMA.D_BANK"),
                RegWrite(0, 1, "CDMA.D_OP_ENABLE"), SyncWait("CDMA", "x")]
    keep, reuse = 1 << 28, 1 << 20                  # SKIP_WEIGHT_RLS, WEIGHT_REUSE
    program = RegisterProgram("p", layer(0) + layer(keep) + layer(reuse) + layer(0))
    out, moved, kept = cdma_ahead(program, hw)
    cdma = [c.value for c in out.commands if getattr(c, "name", "") == "CDMA.D_BANK"]
    csc = [c.value for c in out.commands if getattr(c, "name", "") == "CSC.D_BANK"]
    split = [((v & 31) + 1, ((v >> 16) & 31) + 1) for v in cdma]
    assert split == [(4, 4), (4, 5), (4, 5), (4, 4)]   # one weight bank more: 9 of 32 used
    assert sorted(csc) == sorted(cdma)
    assert (moved, kept) == (2, 1)                  # the reusing layer keeps its pair's split
    # without the hardware nothing is re-split: both middle layers share the first's split
    assert cdma_ahead(program)[1:] == (0, 3)
