"""Memory images of nvdla/hw master trace tests (`.dat`).

Format: `{` then records `{offset:0x.., size:N, payload:0xAA 0xBB ...},` then `}`.  The image is one
contiguous byte array from offset 0 to its last byte; gaps between records are zero (what the NVDLA
Verilator flow writes).
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ..errors import NvdlaSimError

_RECORD = re.compile(rb"\{\s*'?offset'?\s*:\s*(0x[0-9a-fA-F]+|\d+)\s*,\s*'?size'?\s*:\s*(\d+)\s*,"
                     rb"\s*'?(?:payload|value)'?\s*:\s*([^}]*)\}")
_HEXBYTE = re.compile(rb"0x([0-9a-fA-F]{1,2})\b")


def _line_of(text: bytes, pos: int) -> int:
    return text.count(b"\n", 0, pos) + 1


def load_dat(path: Path) -> np.ndarray:
    """Parse a .dat image; a malformed record is an error naming file:line."""
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        raise NvdlaSimError(f"{path}: memory image not found") from None
    offsets, sizes, payloads = [], [], []
    end = 0
    for m in _RECORD.finditer(text):
        if m.start() != end and text[end:m.start()].strip(b" \t\r\n,{"):
            gap = text[end:m.start()].strip(b" \t\r\n,{")
            raise NvdlaSimError(f"{path}:{_line_of(text, end)}: malformed memory record "
                                f"'{gap[:40].decode(errors='replace')}'")
        offsets.append(int(m.group(1), 0))
        sizes.append(int(m.group(2)))
        payloads.append(m.group(3))
        end = m.end()
    tail = text[end:].strip(b" \t\r\n,}")
    if tail:
        raise NvdlaSimError(f"{path}:{_line_of(text, end)}: malformed memory record "
                            f"'{tail[:40].decode(errors='replace')}'")
    if not offsets:
        return np.zeros(0, np.uint8)
    hex_text = b" ".join(payloads).replace(b",", b" ").replace(b"0x", b"").replace(b"0X", b"")
    try:
        data = np.frombuffer(bytes.fromhex(hex_text.decode()), np.uint8)
    except ValueError:
        data = None
    sizes_arr = np.asarray(sizes, np.int64)
    if data is None or data.size != int(sizes_arr.sum()):
        # Find the first record whose payload does not match its size, to name it.
        for off, size, payload, m in zip(offsets, sizes, payloads, _RECORD.finditer(text)):
            tokens = payload.replace(b",", b" ").split()
            if len(tokens) != size or not all(_HEXBYTE.fullmatch(t) for t in tokens):
                raise NvdlaSimError(f"{path}:{_line_of(text, m.start())}: record at offset 0x{off:x} "
                                    f"declares size {size} but its payload is {len(tokens)} bytes "
                                    "or not hex")
        raise NvdlaSimError(f"{path}: payload bytes do not match the declared sizes")
    starts = np.repeat(np.asarray(offsets, np.int64), sizes_arr)
    within = np.arange(data.size, dtype=np.int64) - np.repeat(np.cumsum(sizes_arr) - sizes_arr, sizes_arr)
    positions = starts + within
    image = np.zeros(int(positions.max()) + 1, np.uint8)
    image[positions] = data
    return image
