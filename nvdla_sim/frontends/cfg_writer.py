"""Write a RegisterProgram as an nvdla/hw trace test: one `.cfg` plus `.dat` memory images.

The output follows the grammar `cfg_trace.parse_cfg` reads (and the nvdla/hw trace players):
    mem_init(pri_mem, 0x80000000, 0x1000, ALL_ZERO);
    mem_load(pri_mem, 0x80000000, "name_0.dat");
    reg_write(NVDLA_SDP.D_OP_ENABLE_0, 0x1);
    poll_reg_equal(NVDLA_CDMA.S_CBUF_FLUSH_STATUS_0, 0x1);
    intr_notify(SDP_0, name_SDP_0);
    sync_wait(NVDLA_GLB, name_SDP_0);
    check_crc(name_SDP_0, 1, 0x80000000, 0x1000, 0x1234abcd);
    check_nothing(name_PDP_0);
A `.dat` image holds records `{offset:0x.., size:N, payload:0x.. ...},` of up to `record_bytes`
bytes; all-zero records are left out except the last (loaders fill gaps with zeros and size the
image by its last byte; the builder zero-fills every loaded region first, so a player that does
not zero gaps agrees).  Parsing the written test back gives the same commands.

Names follow nvdla/hw's own trace parser (verif/tools/nvdla_trace_parser.py): sync ids are word
characters only (a program holding another is refused, naming it), and `.dat` file names word
characters and dots (the test's name is spelled so in them).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import NvdlaSimError
from ..program import (CheckCrc, CheckNothing, IntrNotify, MemFill, MemLoad, PollRegEqual,
                       RegisterProgram, RegWrite, SyncWait)
from ..regs import register_map

FILL_PATTERNS = {0x00: "ALL_ZERO", 0xFF: "ONES", 0xA5: "AFIVE", 0x5A: "FIVEA"}
RECORD_BYTES = 32


def _word(text: str) -> bool:
    return bool(text) and all(c.isascii() and (c.isalnum() or c == "_") for c in text)


def _file_stem(name: str) -> str:
    """`name` as a mem_load file name may spell it (word characters and dots)."""
    return "".join(c if c.isascii() and (c.isalnum() or c in "_.") else "_" for c in name)


def _sync(sync_id: str, name: str) -> str:
    if not _word(sync_id):
        raise NvdlaSimError(f"{name}: sync id '{sync_id}' has characters nvdla/hw's trace parser "
                            "rejects (it takes letters, digits and '_')")
    return sync_id


def _register_name(regmap, addr: int) -> str:
    unit, reg = regmap.decode_address(addr)
    if reg is None:
        raise NvdlaSimError(f"CSB address 0x{addr:x} is no register of {unit.name}")
    trace_unit = "RUBIK" if unit.name == "RBK" else unit.name
    return f"NVDLA_{trace_unit}.{reg.name}_0"


_HEX = np.array([f"0x{v:02x} ".encode() for v in range(256)], dtype="S5")


def write_dat(path: Path, data: np.ndarray, record_bytes: int = RECORD_BYTES) -> None:
    """A master-style .dat image of `data` (uint8); an empty image is an empty file."""
    data = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
    if data.size == 0:
        path.write_bytes(b"")
        return
    text = _HEX[data].tobytes()              # "0xab " per byte, 5 characters each
    n_records = -(-data.size // record_bytes)
    nonzero = np.zeros(n_records * record_bytes, bool)
    nonzero[:data.size] = data != 0
    keep = nonzero.reshape(n_records, record_bytes).any(axis=1)
    keep[-1] = True                          # the last record fixes the image size
    with open(path, "wb") as f:
        f.write(b"{\n")
        for i in np.flatnonzero(keep):
            lo = int(i) * record_bytes
            size = min(record_bytes, data.size - lo)
            payload = text[5 * lo:5 * (lo + size) - 1]
            f.write(b"{offset:0x%x, size:%d, payload:%s},\n" % (lo, size, payload))
        f.write(b"}\n")


def write_cfg(program: RegisterProgram, folder: Path | str, name: str | None = None,
              nvdla_version: int = 2, record_bytes: int = RECORD_BYTES) -> Path:
    """Write `program` as `<folder>/<name>.cfg` and its memory images; returns the .cfg path."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    name = name or program.name
    regmap = register_map(nvdla_version)
    lines = [f"// {name}: written by nvdla-sim"]
    n_images = 0
    for cmd in program.commands:
        if isinstance(cmd, RegWrite):
            lines.append(f"reg_write({_register_name(regmap, cmd.addr)}, 0x{cmd.value:x});")
        elif isinstance(cmd, PollRegEqual):
            lines.append(f"poll_reg_equal({_register_name(regmap, cmd.addr)}, 0x{cmd.value:x});")
        elif isinstance(cmd, MemFill):
            pattern = FILL_PATTERNS.get(cmd.value)
            if pattern is None:
                raise NvdlaSimError(f"{name}: mem_init cannot fill with 0x{cmd.value:x} "
                                    f"(patterns: {', '.join(f'0x{v:02x}' for v in FILL_PATTERNS)})")
            lines.append(f"mem_init({_mem(cmd.addr)}, 0x{cmd.addr:x}, 0x{cmd.nbytes:x}, {pattern});")
        elif isinstance(cmd, MemLoad):
            file_name = f"{_file_stem(name)}_{n_images}.dat"
            n_images += 1
            write_dat(folder / file_name, cmd.data, record_bytes)
            if cmd.source:
                lines.append(f"// {file_name}: {cmd.source}")
            lines.append(f"mem_load({_mem(cmd.addr)}, 0x{cmd.addr:x}, \"{file_name}\");")
        elif isinstance(cmd, IntrNotify):
            lines.append(f"intr_notify({cmd.source}_{cmd.group}, {_sync(cmd.sync_id, name)});")
        elif isinstance(cmd, SyncWait):
            lines.append(f"sync_wait(NVDLA_{cmd.block}, {_sync(cmd.sync_id, name)});")
        elif isinstance(cmd, CheckCrc):
            lines.append(f"check_crc({_sync(cmd.sync_id, name)}, {cmd.mem}, 0x{cmd.addr:x}, 0x{cmd.nbytes:x}, "
                         f"0x{cmd.expected:08x});")
        elif isinstance(cmd, CheckNothing):
            lines.append(f"check_nothing({_sync(cmd.sync_id, name)});")
        else:
            raise NvdlaSimError(f"{name}: cannot write command {cmd!r} to a .cfg")
    path = folder / f"{name}.cfg"
    path.write_text("\n".join(lines) + "\n")
    return path


def _mem(addr: int) -> str:
    """Trace memories are chosen by address bit 31 (the testbench's rule)."""
    return "pri_mem" if addr & (1 << 31) else "sec_mem"
