"""Write a RegisterProgram as an NVDLA v1 trace-player test: `input.txn`, `plusargs.txt`, `.dat`.

    write_txn_trace(program, hw, folder) -> folder

How the program's commands become trace-player commands (see txn_trace for the grammar):
    RegWrite                write_reg 0xffffNNNN VALUE  #UNIT.REG
    MemLoad / MemFill       load_mem ADDR SIZE <name>_<n>.dat   (a fill followed by a load of the
                            same base is one image; regions widen to whole 32-byte lines, the
                            extra bytes taken from what the trace itself placed there, else 0)
    PollRegEqual            read_reg ADDR 0xffffffff VALUE      (polled)
    IntrNotify + SyncWait   at the sync_wait: read_reg GLB.S_INTR_STATUS BIT BIT (polled until the
                            interrupt is raised), then write_reg GLB.S_INTR_STATUS BIT (clear it)
    CheckCrc                dump_mem ADDR SIZE <name>_golden_<n>.dat, right after its interrupt
                            has been awaited; interrupts never sync-waited are awaited at the end
    CheckNothing            (its interrupt is awaited like any other)
    ReadReg / WaitInterrupt / DumpMem   read_reg / wait / dump_mem as they are
Golden images are what the simulator holds at each dump_mem when it runs the written trace; with
`check_crcs`, each must have the CRC its CheckCrc expects (the program's own check).
`plusargs.txt` sets the poll count to at least twice the longest poll of that run.
"""
from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np

from ..config import HardwareConfig
from ..errors import NvdlaSimError
from ..memory import MemorySystem
from ..program import (CheckCrc, CheckNothing, DumpMem, IntrNotify, MemFill, MemLoad,
                       PollRegEqual, ReadReg, RegisterProgram, RegWrite, SyncWait, WaitInterrupt)
from ..regs import register_map
from .interrupts import SyncIds, csb_word
from .txn_trace import LINE_BYTES

MIN_POLL_ATTEMPTS = 100_000
_HEX = np.array([f"0x{v:02x}".encode() for v in range(256)], dtype="S4")


def write_txn_dat(path: Path, data: np.ndarray, header: str = "") -> None:
    """A trace-player .dat image: optional header lines, then 32 bytes `0xab` per line."""
    data = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
    if data.size % LINE_BYTES:
        raise NvdlaSimError(f"{path.name}: {data.size} bytes is not a whole number of "
                            f"{LINE_BYTES}-byte lines")
    rows = _HEX[data].reshape(-1, LINE_BYTES)
    body = b"\n".join(b" ".join(row) for row in rows)
    with open(path, "wb") as f:
        f.write(header.encode())
        f.write(body + b"\n")


def _aligned(addr: int, nbytes: int) -> tuple[int, int]:
    lo = addr - addr % LINE_BYTES
    hi = -(-(addr + nbytes) // LINE_BYTES) * LINE_BYTES
    return lo, hi - lo


def _translate(program: RegisterProgram, hw: HardwareConfig, name: str,
               poll_attempts: int) -> tuple[list, dict[str, np.ndarray], list]:
    """The txn command list (DumpMem without goldens yet), the load images by file name and,
    per DumpMem, the CheckCrc it stands for (None for a DumpMem of the program)."""
    regmap = register_map(hw.nvdla_version)
    status = regmap.units["GLB"].regs["S_INTR_STATUS"]
    status_addr = regmap.base("GLB") + status.offset
    shadow = MemorySystem(has_secondary=True)        # what the trace itself placed in memory
    out: list = []
    images: dict[str, np.ndarray] = {}
    deferred: dict[str, list[CheckCrc]] = {}
    dump_crcs: list[CheckCrc | None] = []

    def dump(check: CheckCrc | DumpMem, crc: CheckCrc | None) -> None:
        lo, size = _aligned(check.addr, check.nbytes)
        out.append(DumpMem(check.mem, lo, size, None, f"{name}_golden_{len(dump_crcs)}.dat",
                           check.where))
        dump_crcs.append(crc)

    def await_interrupt(sync_id: str, bit: int) -> None:
        out.append(ReadReg(status_addr, 1 << bit, 1 << bit, poll_attempts, "GLB.S_INTR_STATUS"))
        out.append(RegWrite(status_addr, 1 << bit, "GLB.S_INTR_STATUS"))
        for check in deferred.pop(sync_id, []):
            dump(check, check)

    syncs = SyncIds(await_interrupt)

    commands = program.commands
    i = 0
    while i < len(commands):
        cmd = commands[i]
        if isinstance(cmd, (MemFill, MemLoad)):
            lo, hi = cmd.addr, cmd.addr + (cmd.nbytes if isinstance(cmd, MemFill) else cmd.data.size)
            group = [cmd]
            nxt = commands[i + 1] if i + 1 < len(commands) else None
            if isinstance(cmd, MemFill) and isinstance(nxt, MemLoad) and nxt.addr == cmd.addr:
                group.append(nxt)                    # mem_init + mem_load of one buffer
                hi = max(hi, nxt.addr + nxt.data.size)
                i += 1
            for c in group:
                space = shadow.space_for_address(c.addr)
                if isinstance(c, MemFill):
                    space.fill(c.addr, c.nbytes, c.value)
                else:
                    space.write(c.addr, c.data)
            if hi > lo:
                start, size = _aligned(lo, hi - lo)
                file_name = f"{name}_{len(images)}.dat"
                images[file_name] = shadow.space_for_address(start).read(start, size)
                out.append(MemLoad(cmd.mem, start, images[file_name], file_name, cmd.where))
        elif isinstance(cmd, RegWrite):
            out.append(cmd)
        elif isinstance(cmd, PollRegEqual):
            out.append(ReadReg(cmd.addr, 0xFFFFFFFF, cmd.value, poll_attempts, cmd.name, cmd.where))
        elif isinstance(cmd, IntrNotify):
            syncs.notify(cmd, cmd.where or name)
        elif isinstance(cmd, SyncWait):
            syncs.wait(cmd, cmd.where or name)
        elif isinstance(cmd, CheckCrc):
            if cmd.sync_id in syncs.awaited:
                dump(cmd, cmd)
            elif cmd.sync_id in syncs.armed:
                deferred.setdefault(cmd.sync_id, []).append(cmd)
            else:
                raise NvdlaSimError(f"{cmd.where or name}: check on sync id '{cmd.sync_id}' that "
                                    "no intr_notify arms")
        elif isinstance(cmd, CheckNothing):
            pass                                     # its interrupt is awaited all the same
        elif isinstance(cmd, ReadReg):
            out.append(ReadReg(cmd.addr, cmd.mask, cmd.expected, poll_attempts, cmd.name,
                               cmd.where))
        elif isinstance(cmd, WaitInterrupt):
            out.append(cmd)
        elif isinstance(cmd, DumpMem):
            dump(cmd, None)
        else:
            raise NvdlaSimError(f"{name}: cannot write command {cmd!r} to an input.txn")
        i += 1
    syncs.await_rest()
    return out, images, dump_crcs


def _txn_line(cmd, regmap) -> str:
    if isinstance(cmd, RegWrite):
        return f"write_reg {csb_word(cmd.addr)} 0x{cmd.value:x} #{_reg_name(regmap, cmd.addr)}"
    if isinstance(cmd, ReadReg):
        return (f"read_reg {csb_word(cmd.addr)} 0x{cmd.mask:08x} 0x{cmd.expected:08x} "
                f"#{_reg_name(regmap, cmd.addr)}")
    if isinstance(cmd, WaitInterrupt):
        return "wait"
    if isinstance(cmd, MemLoad):
        return f"load_mem 0x{cmd.addr:x} 0x{cmd.data.size:x} {cmd.source}"
    if isinstance(cmd, DumpMem):
        return f"dump_mem 0x{cmd.addr:x} 0x{cmd.nbytes:x} {cmd.source}"
    raise AssertionError(cmd)


def _reg_name(regmap, addr: int) -> str:
    try:
        unit, reg = regmap.decode_address(addr)
    except KeyError:
        reg = None
    if reg is None:
        raise NvdlaSimError(f"CSB address 0x{addr:x} is no NVDLA v{regmap.version} register")
    return f"NVDLA_{unit.name}.{reg.name}_0"


def emit_txn_trace(program: RegisterProgram, hw: HardwareConfig, folder: Path | str,
                   name: str | None = None, memory="rtl_testbench", check_crcs: bool = True):
    """Write the trace (see the module doc); returns (folder, RunResult of the golden run)."""
    from ..engine import Engine
    folder = Path(folder)
    name = name or program.name
    regmap = register_map(hw.nvdla_version)
    probe_attempts = 1 << 40                     # long enough for any layer; narrowed below
    commands, images, dump_crcs = _translate(program, hw, name, probe_attempts)
    result = Engine(hw, memory).run(RegisterProgram(name, commands, program.source))
    reads = [c for c in result.checks if c.kind == "read_reg"]
    failed = [c for c in reads if not c.passed]
    if failed:
        raise NvdlaSimError(f"{name}: {failed[0].describe()}")
    attempts = max([MIN_POLL_ATTEMPTS] + [2 * c.attempts for c in reads])
    dumps = [c for c in result.checks if c.kind == "dump_mem"]
    dump_cmds = [c for c in commands if isinstance(c, DumpMem)]
    if len(dumps) != len(dump_cmds):
        raise NvdlaSimError(f"{name}: a timing-only run cannot compute golden images")
    goldens = {}
    for cmd, check, crc_check in zip(dump_cmds, dumps, dump_crcs):
        if check_crcs and crc_check is not None:
            off = crc_check.addr - cmd.addr
            crc = zlib.crc32(check.captured[off:off + crc_check.nbytes].tobytes()) & 0xFFFFFFFF
            if crc != crc_check.expected:
                raise NvdlaSimError(
                    f"{crc_check.where or name}: check_crc({crc_check.sync_id}) expects "
                    f"0x{crc_check.expected:08x} but the trace's memory at its dump has CRC "
                    f"0x{crc:08x}")
        goldens[cmd.source] = check.captured
    folder.mkdir(parents=True, exist_ok=True)
    lines = [f"# {name}: written by nvdla-sim (load_mem ADDR SIZE FILE, write_reg CSB_ADDR VALUE,",
             "# read_reg CSB_ADDR MASK VALUE, wait, dump_mem ADDR SIZE GOLDEN)"]
    lines += [_txn_line(c, regmap) for c in commands]
    (folder / "input.txn").write_text("\n".join(lines) + "\n")
    (folder / "plusargs.txt").write_text(f"+read_reg_poll_retries={attempts} +continue_on_fail\n")
    for file_name, data in images.items():
        write_txn_dat(folder / file_name, data, f"Data_size = 0x{data.size:x}\n")
    for file_name, data in goldens.items():
        write_txn_dat(folder / file_name, data, f"dumped memory, size=0x{data.size:x}\n")
    return folder, result


def write_txn_trace(program: RegisterProgram, hw: HardwareConfig, folder: Path | str,
                    name: str | None = None, memory="rtl_testbench",
                    check_crcs: bool = True) -> Path:
    """Write `program` as a v1 trace-player test in `folder` (created); returns `folder`."""
    return emit_txn_trace(program, hw, folder, name, memory, check_crcs)[0]
