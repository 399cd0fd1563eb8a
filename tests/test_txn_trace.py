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
