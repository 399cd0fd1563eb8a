"""NVDLA v1 trace-player tests (nvdla/hw `nvdlav1` `verif/traces/traceplayer/<test>/`).

A test folder holds `input.txn`, optional `plusargs.txt` and `.dat` images.  `input.txn` has one
command per line, `#` starts a comment, numbers are hex (`0x` optional, as Perl's hex()):
    load_mem ADDR SIZE FILE        place SIZE bytes of FILE at ADDR
    write_reg CSB_ADDR VALUE       CSB word address: byte address = (CSB_ADDR & 0xffff) * 4
    read_reg CSB_ADDR MASK VALUE   read until (reg & MASK) == (VALUE & MASK), at most N reads
    wait                           hold until the interrupt line is high
    dump_mem ADDR SIZE FILE        compare SIZE bytes at ADDR with FILE (the golden image)
N is `+read_reg_poll_retries=N` of plusargs.txt (the UVM player's knob), else 10 (the Verilator
driver's fixed number of tries).  Memory commands choose DBB or CVSRAM by address.

A `.dat` image is text: header lines (`Data_size = ..`, `W=0x8`, `dumped memory,...`) and lines
of exactly 32 bytes `0xAB 0xCD ...`; only lines starting with `0x` (or ` 0x`) carry bytes, read
in order until SIZE bytes are in (verif/verilator/input_txn_to_verilator.pl).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from ..errors import NvdlaSimError
from ..program import (DumpMem, MemLoad, ReadReg, RegisterProgram, RegWrite, WaitInterrupt,
                       Where)
from ..regs import register_map
from .files import txn_file, file_size, read_text

DEFAULT_READ_ATTEMPTS = 10
LINE_BYTES = 32
_BYTE = re.compile(r"0x([0-9a-fA-F]{2})")
_DATA_LINE = re.compile(r"^ ?0x")
_ARGS = {"write_reg": 2, "read_reg": 3, "load_mem": 3, "dump_mem": 3, "wait": 0}


def csb_byte_address(csb_addr: int) -> int:
    """The CSB word address of a trace (top 16 bits are misc bits) as a register byte address."""
    return (csb_addr & 0xFFFF) * 4


def _hex(text: str, where: Where, what: str, bits: int = 32) -> int:
    try:
        value = int(text, 16)
    except ValueError:
        raise NvdlaSimError(f"{where}: {what} '{text}' is not a hex number") from None
    if not 0 <= value < 1 << bits:
        raise NvdlaSimError(f"{where}: {what} {text} does not fit {bits} bits")
    return value


def _register(regmap, csb_addr: int, where: Where, text: str) -> tuple[int, str]:
    addr = csb_byte_address(csb_addr)
    try:
        unit, reg = regmap.decode_address(addr)
    except KeyError:
        unit, reg = None, None
    if reg is None:
        raise NvdlaSimError(f"{where}: {text} (byte address 0x{addr:x}) is no NVDLA v"
                            f"{regmap.version} register")
    return addr, f"{unit.name}.{reg.name}"


def read_plusargs(folder: Path) -> dict[str, str]:
    """`+name=value` / `+flag` options of plusargs.txt ({} when the file is absent)."""
    path = folder / "plusargs.txt"
    if not path.is_file():
        return {}
    out = {}
    for token in read_text(path, "plusargs file").split():
        if not token.startswith("+"):
            raise NvdlaSimError(f"{path}: option '{token}' does not start with '+'")
        name, _, value = token[1:].partition("=")
        out[name] = value
    return out


def load_txn_dat(path: Path, nbytes: int, where: Where) -> np.ndarray:
    """The first `nbytes` bytes of a text .dat image (lines of 32 bytes after the headers)."""
    if nbytes % LINE_BYTES:
        raise NvdlaSimError(f"{where}: size 0x{nbytes:x} is not a whole number of "
                            f"{LINE_BYTES}-byte lines (the trace player reads whole lines)")
    if not path.exists():
        raise NvdlaSimError(f"{where}: memory image '{path.name}' not found")
    # A data line is 32 tokens '0xHH' (5 characters each with the separator): the file cannot
    # hold more than this, so a huge SIZE allocates no more than the file could fill.
    most = (file_size(path, f"memory image of {where}") + 1) // (5 * LINE_BYTES) * LINE_BYTES
    lines = read_text(path, f"memory image of {where}").splitlines()
    out = np.zeros(min(nbytes, most), np.uint8)
    nbytes_wanted = nbytes
    pos = 0
    for number, line in enumerate(lines, 1):
        if pos >= nbytes_wanted:
            break
        if not _DATA_LINE.match(line):
            continue
        tokens = line.split()
        values = [_BYTE.fullmatch(t) for t in tokens]
        if len(tokens) != LINE_BYTES or not all(values):
            raise NvdlaSimError(f"{path}:{number}: expected {LINE_BYTES} bytes '0xHH', got "
                                f"'{line.strip()[:60]}'")
        out[pos:pos + LINE_BYTES] = [int(v.group(1), 16) for v in values]
        pos += LINE_BYTES
    if pos < nbytes_wanted:
        raise NvdlaSimError(f"{where}: '{path.name}' holds {pos} bytes, the command needs "
                            f"{nbytes_wanted}")
    return out


def parse_txn(path: Path | str, nvdla_version: int = 1) -> RegisterProgram:
    """Parse a trace-player test folder (or its input.txn) into a RegisterProgram."""
    txn, folder, name = txn_file(path)
    lines = read_text(txn, "trace file").splitlines()
    plusargs = read_plusargs(folder)
    attempts = DEFAULT_READ_ATTEMPTS
    if "read_reg_poll_retries" in plusargs:
        text = plusargs["read_reg_poll_retries"]
        if not text.isdigit() or int(text) < 1:
            raise NvdlaSimError(f"{folder / 'plusargs.txt'}: read_reg_poll_retries must be a "
                                f"positive number, got '{text}'")
        attempts = int(text)
    regmap = register_map(nvdla_version)
    program = RegisterProgram(name=name, source=txn)
    commands = program.commands
    for where, cmd, args in command_lines(lines, txn, _ARGS):
        if cmd == "wait":
            commands.append(WaitInterrupt(where))
        elif cmd == "write_reg":
            addr, reg = _register(regmap, _hex(args[0], where, "register address"), where, args[0])
            commands.append(RegWrite(addr, _hex(args[1], where, "value"), reg, where))
        elif cmd == "read_reg":
            addr, reg = _register(regmap, _hex(args[0], where, "register address"), where, args[0])
            commands.append(ReadReg(addr, _hex(args[1], where, "mask"),
                                    _hex(args[2], where, "expected value"), attempts, reg, where))
        else:
            addr = _hex(args[0], where, "memory address")
            size = _hex(args[1], where, "size")
            if size == 0:
                raise NvdlaSimError(f"{where}: {cmd} of 0 bytes")
            image = load_txn_dat(folder / args[2], size, where)
            if cmd == "load_mem":
                commands.append(MemLoad(_mem(addr), addr, image, args[2], where))
            else:
                commands.append(DumpMem(_mem(addr), addr, size, image, args[2], where))
    return program


def command_lines(lines: list[str], path: Path, arg_counts: dict[str, int],
                  refuse: Callable[[Where, str], None] | None = None
                  ) -> Iterator[tuple[Where, str, list[str]]]:
    """(where, command, arguments) of each line of a trace-player style file ('cmd arg ...
    # comment'; empty lines skipped), the command known and its argument count checked;
    `refuse(where, cmd)` may reject a command first."""
    for number, raw in enumerate(lines, 1):
        text = raw.split("#", 1)[0]
        tokens = text.split()
        if not tokens:
            continue
        where = Where(str(path), number)
        cmd, args = tokens[0], tokens[1:]
        if refuse is not None:
            refuse(where, cmd)
        if cmd not in arg_counts:
            raise NvdlaSimError(f"{where}: unknown command '{cmd}' (known: "
                                f"{', '.join(arg_counts)})")
        if len(args) != arg_counts[cmd]:
            raise NvdlaSimError(f"{where}: {cmd} takes {arg_counts[cmd]} arguments, got "
                                f"{len(args)}: '{text.strip()}'")
        yield where, cmd, args


def _mem(addr: int) -> str:
    """Memory commands pick the space by address (bit 31 set: DBB; CVSRAM windows below)."""
    return "pri_mem" if addr & (1 << 31) else "sec_mem"
