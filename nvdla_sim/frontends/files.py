"""Reading a user's trace files: every operating-system problem becomes one line naming the file."""
from __future__ import annotations

import os
from pathlib import Path

from ..errors import NvdlaSimError

# No official trace file comes near this; a bigger one is refused before it is read.
MAX_TRACE_FILE_BYTES = int(os.environ.get("NVDLA_SIM_MAX_TRACE_FILE_MB", "1024")) << 20
ADDRESS_MAP_BYTES = 1 << 32          # DBB and CVSRAM both sit below 4 GiB


def _checked(path: Path, what: str) -> int:
    """The file's size, after the checks that would otherwise end in a traceback."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise NvdlaSimError(f"{path}: {what} not found") from None
    except OSError as exc:
        raise NvdlaSimError(f"{path}: cannot read the {what}: {exc.strerror or exc}") from None
    if path.is_dir():
        raise NvdlaSimError(f"{path}: is a folder, expected the {what} file")
    if st.st_size > MAX_TRACE_FILE_BYTES:
        raise NvdlaSimError(f"{path}: {what} of {st.st_size} bytes is larger than the "
                            f"{MAX_TRACE_FILE_BYTES >> 20} MiB this simulator reads "
                            "(NVDLA_SIM_MAX_TRACE_FILE_MB raises the limit)")
    return st.st_size


def read_bytes(path: Path, what: str) -> bytes:
    _checked(Path(path), what)
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise NvdlaSimError(f"{path}: cannot read the {what}: {exc.strerror or exc}") from None


def read_text(path: Path, what: str) -> str:
    data = read_bytes(path, what)
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise NvdlaSimError(f"{path}: the {what} is not text (UTF-8)") from None


def file_size(path: Path, what: str) -> int:
    return _checked(Path(path), what)


def txn_file(path: Path | str) -> tuple[Path, Path, str]:
    """A trace folder or its input.txn -> (input.txn path, folder, program name): the folder's
    name for an input.txn, else the file's stem."""
    path = Path(path)
    txn = path / "input.txn" if path.is_dir() else path
    folder = txn.parent
    return txn, folder, folder.name if txn.name == "input.txn" else txn.stem
