"""Official NVDLA trace tests (nvdla/hw master `verif/tests/trace_tests/<project>/<test>/<test>.cfg`).

Grammar (one command per line, `;`-terminated, `//` comments):
    reg_write(NVDLA_<UNIT>.<REG>_0, value);
    mem_init(pri_mem|sec_mem, base, size, ALL_ZERO);
    mem_load(pri_mem|sec_mem, base, "file.dat");
    poll_reg_equal(NVDLA_<UNIT>.<REG>_0, value);
    intr_notify(<UNIT>_<group>, sync_id);
    check_crc(sync_id, memtype, base, size, crc);
    check_nothing(sync_id);
    sync_wait(NVDLA_<UNIT>, sync_id);      (waits for an interrupt an earlier intr_notify armed)
    sync_notify(...); other sync_wait(...); (thread ordering in the UVM player: file order suffices)
Numbers are hex (0x..) or decimal.
"""
from __future__ import annotations

import re
from pathlib import Path

from ..errors import NvdlaSimError
from ..program import (CheckCrc, CheckNothing, IntrNotify, MemFill, MemLoad, PollRegEqual,
                       RegisterProgram, RegWrite, SyncWait, Where)
from ..regs import register_map
from .dat_image import load_dat_segments
from .files import ADDRESS_MAP_BYTES, read_text

_CMD = re.compile(r"^\s*([a-z_]+)\s*\((.*)\)\s*;?\s*$")
_INTR_SOURCES = {"SDP", "CDP", "PDP", "CACC", "CDMA_DAT", "CDMA_WT", "BDMA", "RUBIK"}
_FILL_PATTERNS = {"ALL_ZERO": 0, "ZEROS": 0, "ONES": 0xFF, "AFIVE": 0xA5, "FIVEA": 0x5A}


def _number(text: str, where: Where, what: str) -> int:
    try:
        return int(text.strip(), 0)
    except ValueError:
        raise NvdlaSimError(f"{where}: {what} '{text.strip()}' is not a number") from None


def _address(text: str, where: Where, what: str, size: int = 0) -> int:
    """A memory address (with the `size` bytes from it) inside the 4 GiB address map."""
    value = _number(text, where, what)
    if value < 0 or value + size > ADDRESS_MAP_BYTES:
        raise NvdlaSimError(f"{where}: {what} {text.strip()}" + (f" + {size} bytes" if size else "")
                            + " lies outside the 4 GiB address map")
    return value


def _size(text: str, where: Where) -> int:
    value = _number(text, where, "size")
    if not 0 < value <= ADDRESS_MAP_BYTES:
        raise NvdlaSimError(f"{where}: size {text.strip()} ({value} bytes) is not between 1 byte "
                            "and the 4 GiB address map")
    return value


_MEMORIES = ("pri_mem", "sec_mem")
_CRC_MEMORIES = _MEMORIES + ("0", "1", "2")      # check_crc: a name or a memory-type number


def _memory(text: str, where: Where, cmd: str, allowed=_MEMORIES) -> str:
    if text not in allowed:
        raise NvdlaSimError(f"{where}: {cmd} memory '{text}' is not one of {', '.join(allowed)}")
    return text


def _args(body: str, n: int, where: Where, cmd: str) -> list[str]:
    args = [a.strip() for a in body.split(",")]
    if len(args) != n or any(a == "" for a in args):
        raise NvdlaSimError(f"{where}: {cmd} takes {n} arguments, got '{body.strip()}'")
    return args


def _register(name: str, where: Where, version: int) -> tuple[int, str]:
    if "." not in name:
        raise NvdlaSimError(f"{where}: register '{name}' is not of the form NVDLA_<UNIT>.<REG>_0")
    unit, reg = name.split(".", 1)
    regmap = register_map(version)
    try:
        u, r = regmap.resolve(unit, reg)
    except KeyError as exc:
        raise NvdlaSimError(f"{where}: {exc.args[0]}") from None
    return regmap.base(u.name) + r.offset, f"{u.name}.{r.name}"


def _sync_wait_on_interrupt(body: str, commands: list) -> bool:
    """True when a sync_wait names the sync id of an interrupt armed earlier in the file (the UVM
    player's interrupt handler triggers that event); other sync ids only order player threads."""
    sync_id = body.split(",")[-1].strip()
    return any(isinstance(c, IntrNotify) and c.sync_id == sync_id for c in commands)


def parse_cfg(path: Path, nvdla_version: int = 2) -> RegisterProgram:
    """Parse a .cfg trace (and load the memory images it names) into a RegisterProgram."""
    path = Path(path)
    if path.is_dir():
        cfgs = sorted(path.glob("*.cfg"))
        if len(cfgs) != 1:
            raise NvdlaSimError(f"{path}: expected one .cfg file in the folder, found {len(cfgs)}")
        path = cfgs[0]
    lines = read_text(path, "trace file").splitlines()
    program = RegisterProgram(name=path.stem, source=path)
    commands = program.commands
    for number, raw in enumerate(lines, 1):
        line = raw.split("//", 1)[0].strip()
        if not line:
            continue
        where = Where(str(path), number)
        if not line.endswith(";"):
            raise NvdlaSimError(f"{where}: command does not end with ';': '{line}'")
        m = _CMD.match(line)
        if not m:
            raise NvdlaSimError(f"{where}: cannot parse '{line}'")
        cmd, body = m.group(1), m.group(2)
        if cmd == "reg_write":
            reg, value = _args(body, 2, where, cmd)
            addr, name = _register(reg, where, nvdla_version)
            v = _number(value, where, "value")
            if not 0 <= v <= 0xFFFFFFFF:
                raise NvdlaSimError(f"{where}: value {value} does not fit a 32-bit register")
            commands.append(RegWrite(addr, v, name, where))
        elif cmd == "poll_reg_equal":
            reg, value = _args(body, 2, where, cmd)
            addr, name = _register(reg, where, nvdla_version)
            commands.append(PollRegEqual(addr, _number(value, where, "value"), name, where))
        elif cmd == "mem_init":
            args = [a.strip() for a in body.split(",")]
            if len(args) != 4:
                raise NvdlaSimError(f"{where}: mem_init takes 4 arguments, got '{body.strip()}'")
            mem, base, size, pattern = args
            _memory(mem, where, cmd)
            if pattern not in _FILL_PATTERNS:
                raise NvdlaSimError(f"{where}: unsupported mem_init pattern '{pattern}' "
                                    f"(supported: {', '.join(_FILL_PATTERNS)})")
            nbytes = _size(size, where)
            commands.append(MemFill(mem, _address(base, where, "base", nbytes), nbytes,
                                    _FILL_PATTERNS[pattern], where))
        elif cmd == "mem_load":
            mem, base, file_arg = _args(body, 3, where, cmd)
            _memory(mem, where, cmd)
            file_name = file_arg.strip('"')
            if not file_name:
                raise NvdlaSimError(f"{where}: mem_load names no file")
            start = _address(base, where, "base")
            segments = load_dat_segments(path.parent / file_name)
            span = segments[-1][0] + segments[-1][1].size if segments else 0
            if start + span > ADDRESS_MAP_BYTES:
                raise NvdlaSimError(f"{where}: {span} bytes at 0x{start:x} lie outside the 4 GiB "
                                    f"address map ({file_name} spans {span} bytes)")
            if segments and (len(segments) > 1 or segments[0][0] > 0):
                # The image is zero from offset 0 between its records: a zero fill allocates
                # nothing, and one command per run of records keeps memory sparse.
                commands.append(MemFill(mem, start, span, 0, where))
            for offset, data in segments:
                commands.append(MemLoad(mem, start + offset, data, file_name, where))
        elif cmd == "intr_notify":
            target, sync_id = _args(body, 2, where, cmd)
            unit, _, group = target.upper().rpartition("_")
            if unit not in _INTR_SOURCES or group not in ("0", "1"):
                raise NvdlaSimError(f"{where}: intr_notify target '{target}' is not <UNIT>_<0|1> "
                                    f"with UNIT one of {', '.join(sorted(_INTR_SOURCES))}")
            commands.append(IntrNotify(unit, int(group), sync_id, where))
        elif cmd == "check_crc":
            sync_id, mem, base, size, crc = _args(body, 5, where, cmd)
            _memory(mem, where, cmd, _CRC_MEMORIES)
            nbytes = _size(size, where)
            crc_value = _number(crc, where, "crc")
            if not 0 <= crc_value <= 0xFFFFFFFF:
                raise NvdlaSimError(f"{where}: crc {crc.strip()} does not fit 32 bits")
            commands.append(CheckCrc(sync_id, mem, _address(base, where, "base", nbytes), nbytes,
                                     crc_value, where))
        elif cmd == "check_nothing":
            (sync_id,) = _args(body, 1, where, cmd)
            commands.append(CheckNothing(sync_id, where))
        elif cmd == "sync_wait" and _sync_wait_on_interrupt(body, commands):
            block, sync_id = _args(body, 2, where, cmd)
            commands.append(SyncWait(block.upper().removeprefix("NVDLA_"), sync_id, where))
        elif cmd in ("sync_notify", "sync_wait"):
            continue  # file order is already a valid serialisation of the player's threads
        else:
            raise NvdlaSimError(f"{where}: unknown command '{cmd}'")
    known = {c.sync_id for c in commands if isinstance(c, IntrNotify)}
    for c in program.checks:
        if c.sync_id not in known:
            raise NvdlaSimError(f"{c.where}: check on sync id '{c.sync_id}' that no intr_notify arms")
    return program
