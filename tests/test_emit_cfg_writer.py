"""cfg_writer: RegisterPrograms written as nvdla/hw trace tests (.cfg + .dat) parse back to the
same commands and replay with their CRC checks passing."""
from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest

from emit_helpers import random_cube
from nvdla_sim.compiler.emit import ProgramBuilder, simulate_crcs
from nvdla_sim.compiler.emit_cdp import lrn_layer, emit_cdp
from nvdla_sim.compiler.emit_pdp import PdpLayer, emit_pdp
from nvdla_sim.compiler.emit_sdp import SdpLayer, XStage, emit_sdp
from nvdla_sim.compiler.placement import Allocator
from nvdla_sim.config import load_hardware
from nvdla_sim.conformance import run_test
from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.frontends.cfg_trace import parse_cfg
from nvdla_sim.frontends.cfg_writer import write_cfg, write_dat
from nvdla_sim.frontends.dat_image import load_dat
from nvdla_sim.program import MemFill, RegisterProgram, SyncWait

SMALL = load_hardware("nv_small")


def same_commands(a: RegisterProgram, b: RegisterProgram) -> bool:
    """Equal command by command, ignoring source positions and image names."""
    if len(a.commands) != len(b.commands):
        return False
    for x, y in zip(a.commands, b.commands):
        if type(x) is not type(y):
            return False
        for f in fields(x):
            if f.name in ("where", "source"):
                continue
            u, v = getattr(x, f.name), getattr(y, f.name)
            if isinstance(u, np.ndarray):
                if not np.array_equal(u, v):
                    return False
            elif u != v:
                return False
    return True


def three_layer_program() -> RegisterProgram:
    """PDP -> SDP -> CDP on nv_small, every check's CRC filled in by a run."""
    alloc = Allocator(SMALL)
    b = ProgramBuilder(SMALL, "three")
    x = alloc.feature("x", 12, 6, 6)
    p = alloc.feature("p", 12, 3, 3)
    s = alloc.feature("s", 12, 3, 3)
    c = alloc.feature("c", 12, 3, 3)
    b.load_cube(x, random_cube(np.random.default_rng(0), (12, 6, 6)))
    for t in (p, s, c):
        b.mem_fill(t.address, t.size_bytes)
    b.check_output(emit_pdp(b, PdpLayer("avg", (2, 2), (2, 2)), x, p), p)
    bias = np.arange(-6, 6)
    b.check_output(emit_sdp(b, alloc, SdpLayer(x1=XStage(alu="sum", alu_operand=bias, relu=True)),
                            p, s), s)
    b.check_output(emit_cdp(b, lrn_layer(3, 1e-3, 0.75, 1.0, 0.5, 0.4), s, c), c)
    b.poll("CDMA", "S_CBUF_FLUSH_STATUS", 1)
    program, _ = simulate_crcs(b.build(), SMALL)
    return program


def test_round_trip_gives_the_same_commands(tmp_path: Path):
    program = three_layer_program()
    path = write_cfg(program, tmp_path / "three")
    assert path.name == "three.cfg" and sorted(p.name for p in path.parent.glob("*.dat")) == \
        ["three_0.dat", "three_1.dat"]                 # input cube, SDP bias operand
    back = parse_cfg(path)
    assert same_commands(program, back)
    assert sum(isinstance(c, SyncWait) for c in back.commands) == 2 + 2   # 2 units x 2 layers


def test_written_trace_replays_and_passes(tmp_path: Path):
    folder = tmp_path / "three"
    write_cfg(three_layer_program(), folder)
    outcome = run_test(folder, SMALL)
    assert outcome.status == "pass" and len(outcome.checks) == 3
    assert all(c.passed for c in outcome.checks)


def test_cfg_text(tmp_path: Path):
    text = write_cfg(three_layer_program(), tmp_path / "t").read_text().splitlines()
    # SDP0, CDP0 and PDP0 (bits 0, 2, 4) unmasked
    assert text[1] == "reg_write(NVDLA_GLB.S_INTR_MASK_0, 0x3f03ea);"
    assert "sync_wait(NVDLA_SDP_RDMA, pdp_PDP_0);" in text
    assert "intr_notify(CDP_0, lrn_CDP_0);" in text
    assert "poll_reg_equal(NVDLA_CDMA.S_CBUF_FLUSH_STATUS_0, 0x1);" in text
    assert any(line.startswith("check_crc(pdp_PDP_0, 1, 0x80000240, 0x90, 0x") for line in text)


def test_dat_records_skip_zero_runs_but_keep_the_size(tmp_path: Path):
    data = np.zeros(100, np.uint8)
    data[40:43] = [1, 0xAB, 255]
    path = tmp_path / "a.dat"
    write_dat(path, data, record_bytes=32)
    assert path.read_text().splitlines() == [
        "{",
        "{offset:0x20, size:32, payload:" + " ".join(
            ["0x00"] * 8 + ["0x01", "0xab", "0xff"] + ["0x00"] * 21) + "},",
        "{offset:0x60, size:4, payload:0x00 0x00 0x00 0x00},",
        "}"]
    assert np.array_equal(load_dat(path), data)
    write_dat(path, np.zeros(0, np.uint8))
    assert load_dat(path).size == 0


def test_fill_patterns(tmp_path: Path):
    program = RegisterProgram("f", [MemFill("pri_mem", 0x80000000, 64, 0xA5)])
    assert "AFIVE" in write_cfg(program, tmp_path).read_text()
    with pytest.raises(NvdlaSimError, match="cannot fill with 0x17"):
        write_cfg(RegisterProgram("g", [MemFill("pri_mem", 0x80000000, 64, 0x17)]), tmp_path)


def test_sync_wait_on_an_interrupt_waits_other_sync_waits_are_thread_order(tmp_path: Path):
    cfg = tmp_path / "s.cfg"
    cfg.write_text("intr_notify(PDP_0, done);\n"
                   "sync_wait(NVDLA_CDP, done);\n"
                   "sync_notify(NVDLA_CACC, enabled);\n"
                   "sync_wait(NVDLA_CSC, enabled);\n")
    commands = parse_cfg(cfg).commands
    assert [type(c).__name__ for c in commands] == ["IntrNotify", "SyncWait"]
    assert (commands[1].block, commands[1].sync_id) == ("CDP", "done")


def test_convolution_network_trace_replays(tmp_path: Path):
    """conv 3x3 + bias + ReLU + fused 2x2 max pool, then a fully connected layer as a conv whose
    kernel covers the whole input: weights and bias images written as .dat files."""
    from nvdla_sim.compiler.emit_conv import ConvLayer, emit_conv
    from nvdla_sim.compiler.emit import Converter
    rng = np.random.default_rng(12)
    alloc = Allocator(SMALL)
    b = ProgramBuilder(SMALL, "tiny_net")
    x = alloc.feature("x", 8, 16, 16)
    mid = alloc.feature("conv1", 16, 16, 16)      # streamed to PDP, never written
    pool = alloc.feature("pool1", 16, 8, 8)
    fc = alloc.feature("fc", 10, 1, 1)
    b.load_cube(x, random_cube(rng, (8, 16, 16)))
    for t in (pool, fc):
        b.mem_fill(t.address, t.size_bytes)
    conv1 = ConvLayer(rng.integers(-128, 128, (16, 8, 3, 3), dtype=np.int8), pad=(1, 1, 1, 1),
                      sdp=SdpLayer(x1=XStage(alu="sum", alu_operand=rng.integers(-999, 999, 16),
                                             mul_shift=8, relu=True)), name="conv1")
    done = emit_conv(b, alloc, conv1, x, mid, pdp=(PdpLayer("max", (2, 2), (2, 2)), pool))
    b.check_output(done[-1], pool)
    fc1 = ConvLayer(rng.integers(-128, 128, (10, 16, 8, 8), dtype=np.int8),
                    sdp=SdpLayer(out_cvt=Converter(0, 1, 10)), name="fc1")
    b.check_output(emit_conv(b, alloc, fc1, pool, fc)[-1], fc)
    program, result = simulate_crcs(b.build(), SMALL)
    assert len(result.checks) == 2
    folder = tmp_path / "tiny_net"
    write_cfg(program, folder)
    assert same_commands(program, parse_cfg(folder))
    outcome = run_test(folder, SMALL)
    assert outcome.status == "pass" and [c.passed for c in outcome.checks] == [True, True]
