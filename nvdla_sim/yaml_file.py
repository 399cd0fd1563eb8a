"""Reading a user's YAML file (hardware configuration, memory profile, scenario, sweep): every way
it can fail is one line naming the file, and the line for a syntax error."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .errors import NvdlaSimError


def read_yaml(path: Path, what: str = "file") -> Any:
    """The parsed content of `path`; `what` names the file in the not-found message."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise NvdlaSimError(f"{path}: {what} not found") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or "not a text file"
        raise NvdlaSimError(f"{path}: cannot read ({reason})") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark else ""
        raise NvdlaSimError(f"{path}{where}: malformed YAML ({getattr(exc, 'problem', exc)})") from None
