"""Memory images of nvdla/hw master trace tests (`.dat`).

Format: `{` then records `{offset:0x.., size:N, payload:0xAA 0xBB ...},` then `}`.  Gaps between
records are zero (what the NVDLA Verilator flow writes).  The image is kept as segments (records
that touch or overlap, joined): an offset near the top of the address map costs no memory.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ..errors import NvdlaSimError
from .files import ADDRESS_MAP_BYTES, read_bytes

_RECORD = re.compile(rb"\{\s*'?offset'?\s*:\s*(0x[0-9a-fA-F]+|\d+)\s*,\s*'?size'?\s*:\s*(\d+)\s*,"
                     rb"\s*'?(?:payload|value)'?\s*:\s*([^}]*)\}")
_HEXBYTE = re.compile(rb"0[xX]([0-9a-fA-F]{1,2})")
MAX_CONTIGUOUS_IMAGE_BYTES = 1 << 31     # load_dat's one-array form


def _show(raw: bytes) -> str:
    """A snippet of the file for a message: printable, on one line."""
    return repr(raw)[2:-1]


def _line_of(text: bytes, pos: int) -> int:
    return text.count(b"\n", 0, pos) + 1


def _payload_bytes(path: Path, text: bytes, m: re.Match, offset: int, size: int) -> np.ndarray:
    """A record's payload: exactly `size` tokens `0xH` or `0xHH` (nothing else, e.g. `0x0x0d`)."""
    tokens = m.group(3).replace(b",", b" ").split()
    if len(tokens) == size and all(len(t) == 4 for t in tokens):
        joined = b"".join(tokens)
        if joined[::4].count(b"0") == size and set(joined[1::4]) <= {ord("x"), ord("X")}:
            digits = b"".join(t[2:] for t in tokens)
            try:
                return np.frombuffer(bytes.fromhex(digits.decode()), np.uint8)
            except ValueError:
                pass
    for t in tokens:
        if not _HEXBYTE.fullmatch(t):
            raise NvdlaSimError(f"{path}:{_line_of(text, m.start())}: record at offset 0x{offset:x}: "
                                f"'{_show(t[:20])}' is not a byte '0xHH'")
    if len(tokens) != size:
        raise NvdlaSimError(f"{path}:{_line_of(text, m.start())}: record at offset 0x{offset:x} "
                            f"declares size {size} but its payload is {len(tokens)} bytes")
    return np.array([int(_HEXBYTE.fullmatch(t).group(1), 16) for t in tokens], np.uint8)


def load_dat_segments(path: Path) -> list[tuple[int, np.ndarray]]:
    """(offset, bytes) per run of touching records, by offset; later records win where records
    overlap.  A malformed record, or one beyond the 4 GiB address map, is an error naming
    file:line."""
    path = Path(path)
    text = read_bytes(path, "memory image")
    records: list[tuple[int, np.ndarray]] = []
    end = 0
    for m in _RECORD.finditer(text):
        gap = text[end:m.start()].strip(b" \t\r\n,{")
        if gap:
            raise NvdlaSimError(f"{path}:{_line_of(text, end)}: malformed memory record "
                                f"'{_show(gap[:40])}'")
        offset, size = int(m.group(1), 0), int(m.group(2))
        if offset + size > ADDRESS_MAP_BYTES:
            raise NvdlaSimError(f"{path}:{_line_of(text, m.start())}: record at offset 0x{offset:x} "
                                f"of {size} bytes lies beyond the 4 GiB address map")
        records.append((offset, _payload_bytes(path, text, m, offset, size)))
        end = m.end()
    tail = text[end:].strip(b" \t\r\n,}")
    if tail:
        raise NvdlaSimError(f"{path}:{_line_of(text, end)}: malformed memory record "
                            f"'{_show(tail[:40])}'")
    order = sorted(range(len(records)), key=lambda i: records[i][0])
    clusters: list[list[int]] = []
    cluster_end = -1
    for i in order:
        off, data = records[i]
        if data.size == 0:
            continue
        if clusters and off <= cluster_end:
            clusters[-1].append(i)
            cluster_end = max(cluster_end, off + data.size)
        else:
            clusters.append([i])
            cluster_end = off + data.size
    segments = []
    for members in clusters:
        start = min(records[i][0] for i in members)
        stop = max(records[i][0] + records[i][1].size for i in members)
        out = np.zeros(stop - start, np.uint8)
        for i in sorted(members):                # file order: later records overwrite
            off, data = records[i]
            out[off - start:off - start + data.size] = data
        segments.append((start, out))
    return segments


def load_dat(path: Path) -> np.ndarray:
    """The image as one array from offset 0 to its last byte (gaps zero); refused past 2 GiB."""
    segments = load_dat_segments(path)
    if not segments:
        return np.zeros(0, np.uint8)
    size = segments[-1][0] + segments[-1][1].size
    if size > MAX_CONTIGUOUS_IMAGE_BYTES:
        raise NvdlaSimError(f"{path}: the image spans {size} bytes from offset 0; load it by "
                            "segments (load_dat_segments)")
    image = np.zeros(size, np.uint8)
    for off, data in segments:
        image[off:off + data.size] = data
    return image
