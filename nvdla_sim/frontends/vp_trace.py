"""Register traces captured from the NVDLA virtual platform (the form gem5-NVDLA replays).

A capture folder holds `input.txn` and, beside it, `rd_only_var_log` (little-endian u32 address,
u32 size of each read-only tensor), `VP_mem_rd` / `VP_mem_wr` (64-byte lines the VP touched) and
the compiler's and QEMU's logs.  `input.txn` has one command per line, `#` starts a comment,
numbers are hex:
    write_reg CSB_ADDR VALUE       CSB word address 0xffffNNNN: byte address = NNNN * 4
    read_reg CSB_ADDR MASK VALUE   the value the VP's firmware read; MASK 0 compares nothing
    until CSB_ADDR BITS            hold until every bit of BITS is set (GLB S_INTR_STATUS),
                                   normally followed by the write that clears them
    wait                           (trace-player form) hold until the interrupt line is high
There is no memory image: the VP cannot capture data.  A replay is timing-only; memory reads as
zero.  The capture rewrote every written value at or above 0xc0000000 (the VP's DRAM) to
0x80000000 + offset; a register that is no address yet holds a value in [0x80000000, 0xc0000000)
may have been hit by that rewrite, and the parser says so.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import NvdlaSimError
from ..engine.glb import INTR_BIT, Glb
from ..program import ReadReg, RegisterProgram, RegWrite, UntilBits, WaitInterrupt, Where
from ..regs import register_map
from .files import txn_file, read_bytes, read_text
from .txn_trace import _hex, _register, command_lines

VP_READ_ATTEMPTS = 10            # gem5-NVDLA's CSB master tries a read_reg 10 times
RD_ONLY_LOG = "rd_only_var_log"
REMAP_LOW, REMAP_HIGH = 0x8000_0000, 0xC000_0000
_ARGS = {"write_reg": 2, "read_reg": 3, "until": 2, "wait": 0}
_DATA_COMMANDS = ("load_mem", "dump_mem")


@dataclass
class VpCapture:
    """What a capture says about memory: read-only tensors and the addresses registers name."""
    read_only: list[tuple[int, int]] = field(default_factory=list)    # (address, bytes)
    addresses: dict[int, str] = field(default_factory=dict)           # base -> first UNIT.REG
    remap_suspects: list[str] = field(default_factory=list)           # file:line UNIT.REG = value

    def notes(self) -> list[str]:
        out = ["memory: the VP captures no data; every byte reads as zero and the replay is "
               "timing-only"]
        if self.read_only:
            lo = min(a for a, _ in self.read_only)
            hi = max(a + n for a, n in self.read_only)
            total = sum(n for _, n in self.read_only)
            out.append(f"memory: {len(self.read_only)} read-only tensors from {RD_ONLY_LOG} "
                       f"({total:,} bytes in [0x{lo:x}, 0x{hi:x}))")
        if self.addresses:
            lo, hi = min(self.addresses), max(self.addresses)
            out.append(f"memory: {len(self.addresses)} distinct base addresses written to the "
                       f"trace's address registers, 0x{lo:x} .. 0x{hi:x}")
        for suspect in self.remap_suspects[:5]:
            out.append(f"warning: {suspect}: a value in [0x80000000, 0xc0000000) in a register "
                       "that is no address; the capture's 0xc0000000 -> 0x80000000 rewrite may "
                       "have changed it")
        if len(self.remap_suspects) > 5:
            out.append(f"warning: {len(self.remap_suspects) - 5} more such values")
        return out


def is_vp_trace(path: Path) -> bool:
    """A folder (or input.txn) captured from the VP: `rd_only_var_log` beside it, or `until`
    commands and no memory images in the trace."""
    folder = path if path.is_dir() else path.parent
    txn = folder / "input.txn" if path.is_dir() else path
    if (folder / RD_ONLY_LOG).is_file():
        return True
    try:
        text = txn.read_text()
    except (OSError, UnicodeDecodeError):
        return False
    commands = {line.split("#", 1)[0].split()[0] for line in text.splitlines()
                if line.split("#", 1)[0].split()}
    return "until" in commands and not commands & set(_DATA_COMMANDS)


def read_rd_only_log(path: Path) -> list[tuple[int, int]]:
    """(address, size) pairs of a `rd_only_var_log` (u32 little endian each)."""
    data = read_bytes(path, "read-only variable log")
    if len(data) % 8:
        raise NvdlaSimError(f"{path}: {len(data)} bytes is not a whole number of (address, size) "
                            "pairs of 4-byte words")
    return [struct.unpack_from("<II", data, i) for i in range(0, len(data), 8)]


def _is_address_register(name: str) -> bool:
    reg = name.split(".", 1)[1]
    return "ADDR" in reg and "HIGH" not in reg


def _refuse_data(where: Where, cmd: str) -> None:
    if cmd in _DATA_COMMANDS:
        raise NvdlaSimError(f"{where}: {cmd} in a VP trace (VP captures hold no data; "
                            "replay a trace-player test with --format txn)")


def parse_vp(path: Path | str, nvdla_version: int = 1) -> RegisterProgram:
    """Parse a VP capture folder (or its input.txn) into a RegisterProgram (see the module doc)."""
    txn, folder, name = txn_file(path)
    lines = read_text(txn, "trace file").splitlines()
    regmap = register_map(nvdla_version)
    status_addr = regmap.base("GLB") + regmap.units["GLB"].regs["S_INTR_STATUS"].offset
    raisable = sum(1 << bit for bit in INTR_BIT.values())     # bits some unit can set
    capture = VpCapture()
    if (folder / RD_ONLY_LOG).is_file():
        capture.read_only = read_rd_only_log(folder / RD_ONLY_LOG)
    program = RegisterProgram(name=name, source=txn)
    commands = program.commands
    for where, cmd, args in command_lines(lines, txn, _ARGS, _refuse_data):
        if cmd == "wait":
            commands.append(WaitInterrupt(where))
            continue
        addr, reg = _register(regmap, _hex(args[0], where, "register address"), where, args[0])
        if cmd == "write_reg":
            value = _hex(args[1], where, "value")
            commands.append(RegWrite(addr, value, reg, where))
            if _is_address_register(reg):
                if value:
                    capture.addresses.setdefault(value, reg)
            elif REMAP_LOW <= value < REMAP_HIGH:
                capture.remap_suspects.append(f"{where} {reg} = 0x{value:08x}")
        elif cmd == "read_reg":
            commands.append(ReadReg(addr, _hex(args[1], where, "mask"),
                                    _hex(args[2], where, "expected value"), VP_READ_ATTEMPTS,
                                    reg, where, warn_only=True))
        else:
            bits = _hex(args[1], where, "bits")
            if addr != status_addr:
                raise NvdlaSimError(f"{where}: until on {reg}: only GLB.S_INTR_STATUS (0xffff0003) "
                                    "can be waited on")
            if bits & ~raisable:
                raise NvdlaSimError(f"{where}: until 0x{bits:08x} can never be satisfied: no unit "
                                    f"raises {Glb.describe_bits(bits & ~raisable)}")
            commands.append(UntilBits(addr, bits, reg, where))
    if not any(isinstance(c, RegWrite) for c in commands):
        raise NvdlaSimError(f"{txn}: no write_reg in the trace")
    program.notes = capture.notes()
    return program
