"""VP traces (the NVDLA virtual platform's register captures, as gem5-NVDLA replays them).

The round trip needs nothing fetched: LeNet-5 compiled by this project for nv_full, written in
VP form, replays to the very interrupts (source, group, cycle) of its native program.  The
gem5-NVDLA captures are read from $GEM5_NVDLA (a checkout) or the local mirror when present.
"""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from nvdla_sim.cli import main
from nvdla_sim.config import load_hardware
from nvdla_sim.conformance import run_test, trace_format
from nvdla_sim.engine import Engine
from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.frontends.vp_trace import parse_vp
from nvdla_sim.frontends.vp_writer import write_vp_trace
from nvdla_sim.report.vp_layers import vp_layers

REPO = Path(__file__).resolve().parent.parent
TRACES = "bsc-util/nvdla_utilities/example_usage/traces"
MIRROR = Path("/work/.mirror/suchandler96+gem5-NVDLA/repo")
# gem5-NVDLA README: LeNet, NVDLA at 1 GHz, --use-fake-mem (ideal memory): 71137 cycles.
GEM5_LENET_IDEAL_CYCLES = 71137


@pytest.fixture(scope="module")
def nv_full():
    return load_hardware("nv_full")


def _native_lenet(precision: str):
    from nvdla_sim.compiler.lower import lower
    from nvdla_sim.scenario.runner import context, prepare
    from nvdla_sim.scenario.schema import load_scenario
    scn = load_scenario(REPO / "scenarios" / f"lenet5_nv_full_{precision}.yaml")
    scn.mode = "timing-only"
    prep = prepare(scn)
    ctx = context(prep)
    return lower(prep.plan, ctx, name="lenet5").program, ctx


@pytest.mark.parametrize("precision", ["fp16", "int16"])
def test_compiled_lenet_replays_identically_in_vp_form(tmp_path, precision):
    program, ctx = _native_lenet(precision)
    native = Engine(ctx.hw, ctx.dram, ctx.clock_mhz, compute_values=False)
    native_result = native.run(program)
    folder = write_vp_trace(program, ctx.hw, tmp_path / "lenet5")
    assert trace_format(folder) == "vp"
    vp_program = parse_vp(folder)
    replay = Engine(ctx.hw, ctx.dram, ctx.clock_mhz, compute_values=False)
    result = replay.run(vp_program)
    # Same interrupts at the same cycles, every one of them.
    assert len(native.glb.raised) >= 10
    assert replay.glb.raised == native.glb.raised
    assert replay.first_op_enable == native.first_op_enable
    assert result.cycles == native.glb.raised[-1][0] - native.first_write
    assert native_result.cycles == native.glb.raised[-1][0] - native.first_op_enable
    assert result.warnings == []
    # Same bytes per memory client.
    assert replay.mcif.bytes_by_client == native.mcif.bytes_by_client


def test_layer_report_tiles_the_run(tmp_path, nv_full):
    program, ctx = _native_lenet("fp16")
    folder = write_vp_trace(program, ctx.hw, tmp_path / "lenet5")
    result = Engine(nv_full, "ideal", compute_values=False).run(parse_vp(folder))
    layers = vp_layers(result)
    assert len(layers) == len(result.untils)
    assert sum(x.cycles for x in layers) == pytest.approx(result.cycles)
    moved = {c: v for c, v in result.engine.mcif.bytes_by_client.items()}
    for direction in ("read", "write"):
        assert sum(x.bytes.get(c, {}).get(direction, 0) for x in layers for c in moved) == \
            sum(v[direction] for v in moved.values())
    bounds = {x.bound for x in layers}
    assert "MAC" in bounds                        # conv1: one input channel, MAC-bound
    assert "memory" in bounds                     # ip1: 800x500 FP16 weights read once


def _write(tmp_path: Path, text: str, rd_only: bytes | None = b"") -> Path:
    folder = tmp_path / "capture"
    folder.mkdir(exist_ok=True)
    (folder / "input.txn").write_text(text)
    if rd_only is not None:
        (folder / "rd_only_var_log").write_bytes(rd_only)
    return folder


def _one_line_error(folder: Path, capsys) -> str:
    code = main(["replay", str(folder), "--project", "nv_full", "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code != 0
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    return err


@pytest.mark.parametrize("line, says", [
    ("write_reg 0xffff0001", "write_reg takes 2 arguments"),
    ("poke 0xffff0001 0x0", "unknown command 'poke'"),
    ("write_reg 0xffff0001 0xzz", "value '0xzz' is not a hex number"),
    ("write_reg 0xffff3fff 0x1", "is no NVDLA v1 register"),
    ("until 0xffff0003 0x00000400", "can never be satisfied"),
    ("until 0xffff0001 0x00000001", "only GLB.S_INTR_STATUS"),
    ("load_mem 0x80000000 0x20 a.dat", "VP captures hold no data"),
])
def test_bad_lines_name_the_line(tmp_path, capsys, line, says):
    folder = _write(tmp_path, f"write_reg 0xffff0001 0x0\n# comment\n{line}\n")
    err = _one_line_error(folder, capsys)
    assert "input.txn:3:" in err and says in err


def test_until_never_satisfied_is_a_deadlock_report(tmp_path, capsys):
    # PDP group 0 is waited for but never enabled: the replay ends, naming the line and bit.
    folder = _write(tmp_path, "write_reg 0xffff0001 0x0\nuntil 0xffff0003 0x00000010\n")
    start = time.perf_counter()
    err = _one_line_error(folder, capsys)
    assert time.perf_counter() - start < 30     # a deadlock report, not a hang
    assert "input.txn:2:" in err and "deadlock" in err and "PDP0" in err


def test_read_reg_mismatch_is_a_warning_with_the_register(tmp_path, capsys):
    folder = _write(tmp_path, "read_reg 0xffff0001 0xffffffff 0x00000005\n"     # S_INTR_MASK is 0
                              "read_reg 0xffff0001 0x0 0x12345678\n"             # mask 0: no compare
                              "read_reg 0xffff0003 0xffffffff 0x0\n"
                              "write_reg 0xffff0001 0x0\n")
    program = parse_vp(folder)
    result = Engine(load_hardware("nv_full"), compute_values=False).run(program)
    assert len(result.warnings) == 1
    assert "input.txn:1" in result.warnings[0] and "GLB.S_INTR_MASK" in result.warnings[0]
    assert result.checks == []
    code = main(["replay", str(folder), "--project", "nv_full", "--quiet"])
    out = capsys.readouterr().out
    assert code == 0 and "GLB.S_INTR_MASK x1" in out and "DONE" in out


def test_memory_regions_are_reported(tmp_path):
    import struct
    log = struct.pack("<IIII", 0x80010000, 0x100, 0x80020000, 0x40)
    folder = _write(tmp_path, "write_reg 0xffff2c12 0x80034000\n"      # SDP D_DST_BASE_ADDR_LOW
                              "write_reg 0xffff2c14 0x90000000\n", log)  # no address register
    notes = "\n".join(parse_vp(folder).notes)
    assert "timing-only" in notes
    assert "2 read-only tensors" in notes and "320 bytes" in notes
    assert "1 distinct base addresses" in notes and "0x80034000" in notes
    assert "capture.input.txn" not in notes and "input.txn:2" in notes and "rewrite" in notes
    (folder / "rd_only_var_log").write_bytes(b"\0" * 12)
    with pytest.raises(NvdlaSimError, match="rd_only_var_log: 12 bytes"):
        parse_vp(folder)


def _gem5_capture(name: str, tmp_path: Path) -> Path:
    """A gem5-NVDLA capture folder: $GEM5_NVDLA's, else extracted from the local mirror."""
    root = os.environ.get("GEM5_NVDLA")
    if root and (Path(root) / TRACES / name / "input.txn").is_file():
        return Path(root) / TRACES / name
    if not (MIRROR / "HEAD").is_file():
        pytest.skip("gem5-NVDLA traces absent: set $GEM5_NVDLA to a suchandler96/gem5-NVDLA "
                    "checkout")
    folder = tmp_path / name
    folder.mkdir()
    for f in ("input.txn", "rd_only_var_log", "VP_mem_rd", "VP_mem_wr"):
        data = subprocess.run(["git", "-C", str(MIRROR), "show", f"HEAD:{TRACES}/{name}/{f}"],
                              capture_output=True, check=False).stdout
        if not data and f in ("input.txn", "rd_only_var_log"):
            pytest.skip(f"gem5-NVDLA mirror has no {name}/{f}")
        if data:
            (folder / f).write_bytes(data)
    return folder


@pytest.mark.parametrize("name", ["lenet", "resnet18-cifar10", "resnet18"])
def test_gem5_nvdla_captures_replay(tmp_path, nv_full, name):
    folder = _gem5_capture(name, tmp_path)
    assert trace_format(folder) == "vp"
    outcome = run_test(folder, nv_full, "ideal")
    assert outcome.status == "done", outcome.error
    assert outcome.wall_s < 10
    result = outcome.result
    assert result.untils and not result.checks
    layers = vp_layers(result)
    assert sum(x.cycles for x in layers) == pytest.approx(result.cycles)
    if name == "lenet":
        # Against the RTL in gem5 with its ideal memory (gem5-NVDLA README), within 5 %.
        assert abs(result.cycles / GEM5_LENET_IDEAL_CYCLES - 1) < 0.05
    # The bytes each direction moves against the 64-byte lines the VP's C model touched.
    for direction, log in (("read", "VP_mem_rd"), ("write", "VP_mem_wr")):
        if (folder / log).is_file() and (folder / log).stat().st_size:
            vp_bytes = 64 * len((folder / log).read_text().split())
            ours = sum(v[direction] for v in result.memory_bytes["MCIF"].values())
            assert abs(ours / vp_bytes - 1) < 0.01, (direction, ours, vp_bytes)
