"""The v1 trace-player frontend: input.txn grammar, .dat images, read_reg polling, wait, dump_mem."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nvdla_sim.config import load_hardware
from nvdla_sim.conformance import run_test, trace_format
from nvdla_sim.engine import Engine
from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.frontends.txn_trace import csb_byte_address, parse_txn
from nvdla_sim.program import DumpMem, MemLoad, ReadReg, RegWrite, WaitInterrupt
from nvdla_sim.regs import register_map

NV_FULL = load_hardware("nv_full")
REGMAP = register_map(1)


def csb(unit: str, reg: str) -> str:
    """The trace's CSB word address of UNIT.REG (0xffff prefix, byte address / 4)."""
    u, r = REGMAP.resolve(unit, reg)
    return f"0xffff{(REGMAP.base(u.name) + r.offset) // 4:04x}"


def dat_text(data: np.ndarray, header: str = "Data_size = 0x40\nW = 1\n") -> str:
    lines = [" ".join(f"0x{b:02x}" for b in data[i:i + 32]) for i in range(0, data.size, 32)]
    return header + "\n".join(lines) + "\n"


def make_test(tmp_path: Path, txn: str, files: dict[str, str] | None = None,
              plusargs: str | None = None) -> Path:
    folder = tmp_path / "t"
    folder.mkdir(exist_ok=True)
    (folder / "input.txn").write_text(txn)
    for name, text in (files or {}).items():
        (folder / name).write_text(text)
    if plusargs is not None:
        (folder / "plusargs.txt").write_text(plusargs)
    return folder


def test_csb_word_address_to_byte_address():
    assert csb_byte_address(0xffff100b) == 0x402c    # BDMA.CFG_DST_SURF on v1
    u, r = REGMAP.decode_address(csb_byte_address(0xffff100b))
    assert (u.name, r.name) == ("BDMA", "CFG_DST_SURF")


def test_parse_commands(tmp_path):
    image = np.arange(64, dtype=np.uint8)
    folder = make_test(tmp_path, f"""# comment line
load_mem 0x80000000 0x40 in.dat # trailing comment
write_reg {csb('BDMA', 'CFG_LINE')} 0x7 #NVDLA_BDMA.CFG_LINE_0
read_reg {csb('BDMA', 'CFG_LINE')} 0x1fff 0x7
wait
dump_mem 80000000 40 in.dat
""", {"in.dat": dat_text(image)}, "+read_reg_poll_retries=7 +continue_on_fail\n")
    program = parse_txn(folder)
    kinds = [type(c) for c in program.commands]
    assert kinds == [MemLoad, RegWrite, ReadReg, WaitInterrupt, DumpMem]
    load, write, read, _, dump = program.commands
    assert load.addr == 0x80000000 and np.array_equal(load.data, image)
    assert write.name == "BDMA.CFG_LINE" and write.value == 7
    assert read.attempts == 7 and read.mask == 0x1fff and read.expected == 7
    assert dump.nbytes == 0x40 and np.array_equal(dump.golden, image)
    assert str(write.where).endswith("input.txn:3")
    assert trace_format(folder) == "txn"


def test_default_attempts_without_plusargs(tmp_path):
    folder = make_test(tmp_path, f"read_reg {csb('GLB', 'S_INTR_STATUS')} 0x40 0x40\n")
    assert parse_txn(folder).commands[0].attempts == 10


@pytest.mark.parametrize("line, message", [
    ("frobnicate 0x1", "unknown command 'frobnicate'"),
    ("write_reg 0xffff100b", "write_reg takes 2 arguments"),
    ("read_reg 0xffff100b 0xff", "read_reg takes 3 arguments"),
    ("write_reg 0xffff100b 0xzz", "value '0xzz' is not a hex number"),
    ("write_reg 0xffff100b 0x123456789", "does not fit 32 bits"),
    ("write_reg 0xffff3fff 0x1", "is no NVDLA v1 register"),
    ("write_reg 0xffff1fff 0x1", "is no NVDLA v1 register"),
    ("load_mem 0x80000000 0x40 missing.dat", "memory image 'missing.dat' not found"),
    ("load_mem 0x80000000 0x60 in.dat", "holds 64 bytes, the command needs 96"),
    ("load_mem 0x80000000 0x30 in.dat", "not a whole number of 32-byte lines"),
    ("wait now", "wait takes 0 arguments"),
])
def test_malformed_lines_are_one_line_errors(tmp_path, line, message):
    folder = make_test(tmp_path, f"# header\n{line}\n", {"in.dat": dat_text(np.zeros(64, np.uint8))})
    with pytest.raises(NvdlaSimError) as exc:
        parse_txn(folder)
    text = str(exc.value)
    assert message in text and "\n" not in text
    assert "input.txn:2" in text


def test_malformed_dat_line_names_the_image_line(tmp_path):
    folder = make_test(tmp_path, "load_mem 0x80000000 0x40 bad.dat\n",
                       {"bad.dat": "W = 1\n0x01 0x02\n"})
    with pytest.raises(NvdlaSimError, match=r"bad.dat:2: expected 32 bytes"):
        parse_txn(folder)


def test_bad_plusargs(tmp_path):
    folder = make_test(tmp_path, "wait\n", plusargs="+read_reg_poll_retries=lots")
    with pytest.raises(NvdlaSimError, match="read_reg_poll_retries must be a positive number"):
        parse_txn(folder)


def test_missing_trace_file(tmp_path):
    with pytest.raises(NvdlaSimError, match="trace file not found"):
        parse_txn(tmp_path / "nothing")


def test_read_reg_mismatch_fails_after_its_attempts(tmp_path):
    folder = make_test(tmp_path, f"write_reg {csb('BDMA', 'CFG_LINE')} 0x5\n"
                                 f"read_reg {csb('BDMA', 'CFG_LINE')} 0x1fff 0x7\n",
                       plusargs="+read_reg_poll_retries=3")
    result = Engine(NV_FULL).run(parse_txn(folder))
    (check,) = result.checks
    assert not check.passed and check.attempts == 3
    assert check.expected == 7 and check.actual == 5
    assert "FAIL" in check.describe() and "BDMA.CFG_LINE" in check.describe()
    assert not result.passed


def test_read_reg_polls_until_the_interrupt(tmp_path):
    """Software sets a GLB status bit through S_INTR_SET; a polled read sees it at once, and the
    mask applies to both sides of the compare."""
    folder = make_test(tmp_path, f"write_reg {csb('GLB', 'S_INTR_SET')} 0x40\n"
                                 f"read_reg {csb('GLB', 'S_INTR_STATUS')} 0x40 0xffffffff\n")
    (check,) = Engine(NV_FULL).run(parse_txn(folder)).checks
    assert check.passed and check.attempts == 1 and check.actual == 0x40


def test_wait_returns_on_the_unmasked_interrupt_line(tmp_path):
    folder = make_test(tmp_path, f"write_reg {csb('GLB', 'S_INTR_MASK')} 0x40\n"
                                 f"write_reg {csb('GLB', 'S_INTR_SET')} 0x40\n"
                                 "wait\n")
    with pytest.raises(NvdlaSimError, match=r"input.txn:3: deadlock"):
        Engine(NV_FULL).run(parse_txn(folder))     # the only set bit is masked
    folder = make_test(tmp_path, f"write_reg {csb('GLB', 'S_INTR_SET')} 0x40\nwait\n"
                                 f"read_reg {csb('GLB', 'S_INTR_STATUS')} 0x40 0x40\n")
    (check,) = Engine(NV_FULL).run(parse_txn(folder)).checks
    assert check.passed                           # wait clears nothing


def test_dump_mem_names_the_first_differing_address(tmp_path):
    image = np.arange(64, dtype=np.uint8)
    golden = image.copy()
    golden[[37, 50]] ^= 0xFF
    folder = make_test(tmp_path, "load_mem 0x80000000 0x40 in.dat\n"
                                 "dump_mem 0x80000000 0x40 golden.dat\n",
                       {"in.dat": dat_text(image), "golden.dat": dat_text(golden)})
    outcome = run_test(folder, NV_FULL)
    (check,) = outcome.checks
    assert outcome.status == "fail" and check.first_diff == 0x80000000 + 37
    assert check.diff_bytes == 2 and check.expected == 37 ^ 0xFF and check.actual == 37
    assert "first at 0x80000025" in check.describe()
    folder = make_test(tmp_path, "load_mem 0x80000000 0x40 in.dat\n"
                                 "dump_mem 0x80000000 0x40 in.dat\n")
    assert run_test(folder, NV_FULL).status == "pass"


def test_memory_commands_route_by_address(tmp_path):
    image = np.arange(32, dtype=np.uint8)
    folder = make_test(tmp_path, "load_mem 0x50000000 0x20 in.dat\n",
                       {"in.dat": dat_text(image)})
    engine = Engine(NV_FULL)
    engine.run(parse_txn(folder))
    assert np.array_equal(engine.memory.secondary.read(0x50000000, 32), image)
    assert not engine.memory.primary.read(0x80000000, 32).any()


# -- the writer ----------------------------------------------------------------------------------
def bdma_copy_program(expected_crc: int, image: np.ndarray) -> "RegisterProgram":
    """A cfg-style program: fill + load, one BDMA copy of 8 lines, intr_notify, check_crc."""
    from nvdla_sim.program import CheckCrc, IntrNotify, MemFill, RegisterProgram, SyncWait

    def w(reg, value):
        u, r = REGMAP.resolve("BDMA", reg)
        return RegWrite(REGMAP.base("BDMA") + r.offset, value, f"BDMA.{reg}")
    regs = [w("CFG_SRC_ADDR_LOW", 0x80000000), w("CFG_DST_ADDR_LOW", 0x80100000),
            w("CFG_LINE", 1), w("CFG_LINE_REPEAT", 7), w("CFG_SRC_LINE", 0x80),
            w("CFG_DST_LINE", 0x40), w("CFG_SURF_REPEAT", 0), w("CFG_CMD", 3), w("CFG_OP", 1),
            w("CFG_LAUNCH0", 1)]
    return RegisterProgram("bdma_copy", [MemFill("pri_mem", 0x80000000, 0x3f0, 0),
                                         MemLoad("pri_mem", 0x80000000, image)]
                           + regs + [IntrNotify("BDMA", 0, "copy"),
                                     CheckCrc("copy", "pri_mem", 0x80100000, 0x200, expected_crc),
                                     SyncWait("GLB", "copy")])


def test_written_trace_replays_and_passes(tmp_path):
    import zlib
    from nvdla_sim.frontends.txn_writer import emit_txn_trace
    rng = np.random.default_rng(3)
    image = rng.integers(0, 256, 0x3e5, dtype=np.uint8)          # not a whole number of lines
    src = np.zeros(0x400, np.uint8)
    src[:image.size] = image
    copied = np.concatenate([src[l * 0x80:l * 0x80 + 0x40] for l in range(8)])   # numpy reference
    crc = zlib.crc32(copied.tobytes())
    folder, result = emit_txn_trace(bdma_copy_program(crc, image), NV_FULL, tmp_path / "w")
    assert result.passed
    text = (folder / "input.txn").read_text()
    assert "load_mem 0x80000000 0x400 bdma_copy_0.dat" in text      # fill + load widened to lines
    assert "read_reg 0xffff0003 0x00000040 0x00000040" in text      # BDMA0 status polled
    assert "dump_mem 0x80100000 0x200 bdma_copy_golden_0.dat" in text
    assert (folder / "plusargs.txt").read_text().startswith("+read_reg_poll_retries=")
    program = parse_txn(folder)
    golden = [c for c in program.commands if isinstance(c, DumpMem)][0].golden
    assert np.array_equal(golden, copied)
    outcome = run_test(folder, NV_FULL)
    assert outcome.status == "pass" and [c.kind for c in outcome.checks] == ["read_reg", "dump_mem"]


def test_writer_refuses_a_wrong_crc(tmp_path):
    from nvdla_sim.frontends.txn_writer import write_txn_trace
    program = bdma_copy_program(0x12345678, np.ones(0x40, np.uint8))
    with pytest.raises(NvdlaSimError, match=r"check_crc\(copy\) expects 0x12345678"):
        write_txn_trace(program, NV_FULL, tmp_path / "bad")
    assert write_txn_trace(program, NV_FULL, tmp_path / "ok", check_crcs=False).is_dir()


def test_official_v1_trace_rewritten_replays(tmp_path):
    from nvdla_sim.conformance import V1_TESTS, v1_corpus_root
    from nvdla_sim.frontends.txn_writer import write_txn_trace
    root = v1_corpus_root()
    if root is None:
        pytest.skip("official NVDLA v1 trace-player tests not found (../shared/nvdla-hw-v1)")
    for name in ("sanity1_cvsram", "sdp_relu_int16"):
        folder = write_txn_trace(parse_txn(root / V1_TESTS / name), NV_FULL, tmp_path / name)
        assert run_test(folder, NV_FULL).status == "pass"


def test_official_cfg_test_as_txn(tmp_path, corpus_root):
    """A v2 .cfg test (intr_notify, check_crc) written as a trace-player test still passes on
    nv_small, its check_crc values agreeing with the dumps."""
    from nvdla_sim.frontends.cfg_trace import parse_cfg
    from nvdla_sim.frontends.txn_writer import write_txn_trace
    nv_small = load_hardware("nv_small")
    test = corpus_root / "verif" / "tests" / "trace_tests" / "nv_small" / "pdp_8x8x64_2x2_int8"
    folder = write_txn_trace(parse_cfg(test, 2), nv_small, tmp_path / "pdp")
    outcome = run_test(folder, nv_small)
    assert outcome.status == "pass" and any(c.kind == "dump_mem" for c in outcome.checks)


def test_a_refused_register_write_names_the_trace_line(tmp_path):
    lines = [f"write_reg {csb('BDMA', 'CFG_LINE')} 0x7", f"write_reg {csb('BDMA', 'CFG_LAUNCH0')} 0x1",
             f"write_reg {csb('BDMA', 'CFG_LAUNCH0')} 0x1"]
    folder = make_test(tmp_path, "\n".join(lines) + "\n")
    with pytest.raises(NvdlaSimError, match=r"input.txn:3: BDMA.CFG_LAUNCH0: group 0 launched again"):
        Engine(NV_FULL).run(parse_txn(folder))
