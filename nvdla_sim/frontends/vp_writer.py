"""Write a RegisterProgram in the form the NVDLA virtual platform's captures take (vp_trace).

    write_vp_trace(program, hw, folder) -> folder/input.txn (+ rd_only_var_log)

How the program's commands become VP commands:
    RegWrite                write_reg 0xffffNNNN VALUE  #UNIT.REG
    PollRegEqual            read_reg 0xffffNNNN 0xffffffff VALUE (the firmware's read)
    ReadReg                 read_reg as it is
    IntrNotify + SyncWait   at the first sync_wait on it: until 0xffff0003 BIT, then
                            write_reg 0xffff0003 BIT (the acknowledge); interrupts never
                            sync-waited are awaited the same way at the end
    WaitInterrupt           wait
    MemLoad / MemFill       no command (a capture holds no data); each region is listed in
                            rd_only_var_log (u32 address, u32 size, little endian)
    CheckCrc / CheckNothing / DumpMem   nothing (no data to check)
"""
from __future__ import annotations

import struct
from pathlib import Path

from ..config import HardwareConfig
from ..errors import NvdlaSimError
from ..program import (CheckCrc, CheckNothing, DumpMem, IntrNotify, MemFill, MemLoad,
                       PollRegEqual, ReadReg, RegisterProgram, RegWrite, SyncWait, WaitInterrupt)
from ..regs import register_map
from .interrupts import SyncIds, csb_word
from .vp_trace import RD_ONLY_LOG


def vp_lines(program: RegisterProgram, hw: HardwareConfig) -> tuple[list[str], list[tuple[int, int]]]:
    """The input.txn lines and the (address, size) regions the program's images fill."""
    regmap = register_map(hw.nvdla_version)
    status = regmap.base("GLB") + regmap.units["GLB"].regs["S_INTR_STATUS"].offset
    lines: list[str] = []
    regions: list[tuple[int, int]] = []

    def await_interrupt(sync_id: str, bit: int) -> None:
        lines.append(f"until {csb_word(status)} 0x{1 << bit:08x}")
        lines.append(f"write_reg {csb_word(status)} 0x{1 << bit:08x}\t#GLB.S_INTR_STATUS")

    syncs = SyncIds(await_interrupt)

    for cmd in program.commands:
        where = cmd.where or program.name
        if isinstance(cmd, RegWrite):
            lines.append(f"write_reg {csb_word(cmd.addr)} 0x{cmd.value:08x}\t#{cmd.name}")
        elif isinstance(cmd, PollRegEqual):
            lines.append(f"read_reg {csb_word(cmd.addr)} 0xffffffff 0x{cmd.value:08x}\t#{cmd.name}")
        elif isinstance(cmd, ReadReg):
            lines.append(f"read_reg {csb_word(cmd.addr)} 0x{cmd.mask:08x} 0x{cmd.expected:08x}"
                         f"\t#{cmd.name}")
        elif isinstance(cmd, IntrNotify):
            syncs.notify(cmd, where)
        elif isinstance(cmd, SyncWait):
            syncs.wait(cmd, where)
        elif isinstance(cmd, WaitInterrupt):
            lines.append("wait")
        elif isinstance(cmd, MemFill):
            regions.append((cmd.addr, cmd.nbytes))
        elif isinstance(cmd, MemLoad):
            regions.append((cmd.addr, cmd.data.size))
        elif not isinstance(cmd, (CheckCrc, CheckNothing, DumpMem)):
            raise NvdlaSimError(f"{where}: cannot write command {cmd!r} to a VP trace")
    syncs.await_rest()
    regions = list(dict.fromkeys(regions))          # a fill and a load of one buffer: once
    for addr, size in regions:
        if addr >= 1 << 32 or size >= 1 << 32:
            raise NvdlaSimError(f"{program.name}: region 0x{addr:x} +0x{size:x} does not fit the "
                                f"u32 fields of {RD_ONLY_LOG}")
    return lines, regions


def write_vp_trace(program: RegisterProgram, hw: HardwareConfig, folder: Path | str,
                   name: str | None = None) -> Path:
    """Write `program` as a VP capture in `folder` (created): input.txn and rd_only_var_log."""
    folder = Path(folder)
    lines, regions = vp_lines(program, hw)
    folder.mkdir(parents=True, exist_ok=True)
    header = [f"# {name or program.name}: written by nvdla-sim in the NVDLA virtual platform's "
              "capture form", "# (write_reg CSB_ADDR VALUE, read_reg CSB_ADDR MASK VALUE, "
              "until 0xffff0003 BITS; no memory images)"]
    (folder / "input.txn").write_text("\n".join(header + lines) + "\n")
    (folder / RD_ONLY_LOG).write_bytes(b"".join(struct.pack("<II", a, n) for a, n in regions))
    return folder
