"""Reading a user's YAML file (hardware configuration, memory profile, scenario, sweep): every way
it can fail is one line naming the file, and the line for a syntax error."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .errors import NvdlaSimError


MAX_DEPTH = 100                        # nesting levels of a user's YAML (scenarios use < 10)


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a key given twice in one mapping is an error naming the
    key and its second line (PyYAML keeps the last value silently), and nesting deeper than
    MAX_DEPTH is an error at its line (before the parser's recursion runs out, and fast)."""

    _depth = 0

    def compose_node(self, parent, index):
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"nested deeper than {MAX_DEPTH} levels", self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:          # an unhashable key: PyYAML's own error follows
                    continue
                if first is not None:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key '{key}' (first on line {first + 1})",
                        key_node.start_mark)
                seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def parse_yaml(text: str) -> Any:
    """YAML text -> data, refusing duplicate keys (raises yaml.YAMLError or RecursionError)."""
    return yaml.load(text, Loader=_UniqueKeyLoader)


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
        return parse_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark else ""
        raise NvdlaSimError(f"{path}{where}: malformed YAML ({getattr(exc, 'problem', exc)})") from None
    except RecursionError:
        raise NvdlaSimError(f"{path}: YAML nested too deeply") from None


def read_profile(spec: "str | Path | dict", folder: Path, kind: str) -> tuple[dict, str]:
    """The fields of a profile given by name (a YAML file in `folder`), by path or as a mapping,
    and the 'file: ' prefix its validation errors start with (empty for a mapping).  `kind`
    ('memory profile', 'host profile') names it in the errors."""
    if isinstance(spec, dict):
        return dict(spec), ""
    names = sorted(p.stem for p in folder.glob("*.yaml"))
    if str(spec).endswith((".yaml", ".yml")):
        path = Path(spec)
    elif str(spec) in names:
        path = folder / f"{spec}.yaml"
    else:
        raise NvdlaSimError(f"unknown {kind} '{spec}' (known: {', '.join(names)})")
    data = read_yaml(path, kind)
    if not isinstance(data, dict):
        raise NvdlaSimError(f"{path}: expected a mapping of {kind} fields")
    return data, f"{path}: "
