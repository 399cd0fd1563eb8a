"""SWEEP.yaml: a base scenario plus axes, expanded into points.  Every error is one line naming the
file and the field path (`grid.dram_gbps[2]: must be > 0, got -5`).  See docs/sweeps.md.

    name: cbuf_sweep_resnet50          # default: the file name
    base: resnet50_nv_large.yaml       # a scenario file (relative to this file) or an inline mapping
    fixed: {mode: timing}              # set at every point (axis names or scenario field paths)
    grid:                              # every combination, the first axis varying slowest ...
      cbuf_banks: [8, 16, 32]
      dram_gbps: [5, 10, 20]
    points:                            # ... or an explicit list (give exactly one of grid, points)
      - {cbuf_banks: 8, dram_gbps: 10}
    area: {bytes_per_mac: 256}         # the area proxy's exchange rate (results.py)
    outputs: {directory: out/NAME, plots: true}

An axis is one of `AXES` (a short name for a scenario field) or any scenario field path
(`memory.dram_latency_ns`, `hardware.sdp.bs_throughput`).  Values are checked for type here;
whether the hardware can take them is decided per point (feasibility.py), so a sweep may cross
the edge of what is buildable and record the points beyond it as infeasible.  A grid is checked
value by value (each axis value once, with progress), not point by point, and its points are
made as they stream to the workers (`GridPoints`): a grid of up to MAX_POINTS starts at once.
"""
from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from ..config import preset_names
from ..errors import NvdlaSimError
from ..scenario.schema import TOP_FIELDS, FieldError, check_name, parse_scenario, safe_name
from ..yaml_file import read_yaml

# Short axis name -> scenario field path.
AXES = {
    "preset": "hardware.preset",
    "cbuf_banks": "hardware.cbuf.banks",
    "cbuf_bank_depth": "hardware.cbuf.bank_depth",
    "cbuf_bank_width": "hardware.cbuf.bank_width_bytes",
    "atomic_c": "hardware.atomic_c",
    "atomic_k": "hardware.atomic_k",
    "cvsram_bytes": "memory.cvsram_bytes",
    "dram_gbps": "memory.dram_gbps",
    "clock_mhz": "clock_mhz",
    "network": "network",
    "weight_bits": "quantization.weight_bits",          # sub-8-bit what-if (docs/precision.md)
    "activation_bits": "quantization.activation_bits",
    "rounding": "quantization.rounding",
    "winograd": "winograd",                              # auto/on/off (compiler/winograd.py)
    "weight_compression": "weight_compression",          # auto / off
    "sparsity": "weights.sparsity",                      # share of pruned weights, 0 <= s < 1
    "batch": "batch",                                    # images per program (scenario batch)
}
POSITIVE_INT_AXES = ("cbuf_banks", "cbuf_bank_depth", "cbuf_bank_width", "atomic_c", "atomic_k")
TOP_KEYS = ("name", "base", "fixed", "grid", "points", "area", "outputs")
DEFAULT_BYTES_PER_MAC = 256
MAX_POINTS = 1_000_000              # a larger grid is refused (points are made as they run)
# Scenario fields naming files: resolved against the file that names them.
FILE_FIELDS = (("network", "onnx"), ("input", "npy"), ("weights", "npz"))


@dataclass(frozen=True)
class Point:
    """One scenario of the sweep.  `params`: the axis values that make it (axis name -> value);
    `scenario`: the whole scenario mapping (files relative to `base_dir`); `key`: a stable hash
    of that mapping, the identity of the point in the results (resume)."""
    index: int
    params: dict
    scenario: dict
    base_dir: str
    key: str

    def label(self) -> str:
        return ", ".join(f"{k}={_short(v)}" for k, v in self.params.items())


@dataclass
class SweepSpec:
    path: Path | None
    name: str
    base: dict                                   # the base scenario mapping (files relative to base_dir)
    base_dir: Path
    fixed: dict                                  # axis -> value
    axes: list[str]                              # axis names in order (grid) or as first seen (points)
    points: list[Point] | GridPoints             # a grid's points are made when asked for
    bytes_per_mac: float = DEFAULT_BYTES_PER_MAC
    out_dir: Path = Path("out")
    plots: bool = True
    custom_paths: list[str] = field(default_factory=list)   # axes given as scenario field paths (columns)


class GridPoints(Sequence):
    """The points of a grid, first axis slowest (itertools.product order), each made when it is
    asked for: a large grid holds its axes, not a scenario per point (1,000,000 points stream
    to the workers; spec checks ran on each axis value, `evaluate_point` checks each point)."""

    def __init__(self, base: dict, fixed: dict, axes: list[str], lists: list[list],
                 sweep_dir: Path):
        self.base, self.fixed, self.axes, self.lists = base, fixed, axes, lists
        self.sweep_dir = sweep_dir
        self.n = math.prod(len(v) for v in lists)
        self._keys: list[str] | None = None

    def __len__(self) -> int:
        return self.n

    def values(self, i: int) -> dict:
        """The axis values of point i (mixed radix, the last axis fastest)."""
        out = {}
        for axis, vals in zip(reversed(self.axes), reversed(self.lists)):
            i, j = divmod(i, len(vals))
            out[axis] = vals[j]
        return {a: out[a] for a in self.axes}

    def index(self, positions: dict[str, int]) -> int:
        """The point whose axis `a` takes value number positions[a] (0 where not given)."""
        i = 0
        for axis, vals in zip(self.axes, self.lists):
            i = i * len(vals) + positions.get(axis, 0)
        return i

    def point(self, i: int, values: dict | None = None) -> Point:
        values = self.values(i) if values is None else values
        scenario = point_scenario(self.base, {**self.fixed, **values})
        return Point(i, values, scenario, str(self.sweep_dir), point_key(scenario))

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.n))]
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError(f"point {i} of {self.n}")
        return self.point(i)

    def __iter__(self) -> Iterator[Point]:
        for i, combo in enumerate(itertools.product(*self.lists)):
            yield self.point(i, dict(zip(self.axes, combo)))

    def keys(self) -> list[str]:
        """Every point's key in order (made once: the results file's row order)."""
        if self._keys is None:
            self._keys = [p.key for p in self]
        return self._keys


def point_keys(points) -> list[str]:
    return points.keys() if isinstance(points, GridPoints) else [p.key for p in points]


def _short(v: Any) -> str:
    if isinstance(v, dict):
        return str(v.get("name") or v.get("builtin") or Path(str(v.get("onnx", "network"))).stem)
    return f"{v:g}" if isinstance(v, float) else str(v)


def axis_path(name: str) -> str:
    return AXES.get(name, name)


def canonical(mapping: Any) -> str:
    return json.dumps(mapping, sort_keys=True, separators=(",", ":"), default=str)


def point_key(scenario: dict) -> str:
    """Stable identity of a point: a hash of its whole scenario (the name and outputs excluded)."""
    return hashlib.sha256(canonical(scenario).encode()).hexdigest()[:16]


# --------------------------------------------------------------------------------------------------
# Values

def _check_value(axis: str, value: Any, where: str, sweep_dir: Path) -> Any:
    """Type-check one axis value (hardware limits are feasibility's); returns it normalised."""
    def is_int(v):
        return isinstance(v, int) and not isinstance(v, bool)

    def is_num(v):
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    if axis in POSITIVE_INT_AXES:
        if not is_int(value) or value <= 0:
            raise FieldError(where, f"must be a positive integer, got {value!r}")
    elif axis == "cvsram_bytes":
        if not is_int(value) or value < 0:
            raise FieldError(where, f"must be an integer >= 0, got {value!r}")
    elif axis in ("dram_gbps", "clock_mhz"):
        if not is_num(value) or not value > 0:
            raise FieldError(where, f"must be > 0, got {value!r}")
    elif axis in ("weight_bits", "activation_bits"):
        if not is_int(value) or not 1 <= value <= 8:
            raise FieldError(where, f"must be a bit width in 1..8, got {value!r}")
    elif axis == "rounding":
        from ..lowbit import ROUNDING_MODES
        if value not in ROUNDING_MODES:
            raise FieldError(where, f"unknown rounding mode {value!r} (known: "
                                    f"{', '.join(ROUNDING_MODES)})")
    elif axis in ("winograd", "weight_compression"):
        if isinstance(value, bool):               # YAML 1.1 reads bare `on` / `off` as booleans
            value = "on" if value else "off"
        if value not in ("auto", "on", "off"):
            raise FieldError(where, f"must be auto, on or off, got {value!r}")
    elif axis == "batch":
        if not is_int(value) or not 1 <= value <= 32:
            raise FieldError(where, f"must be an image count in 1..32, got {value!r}")
    elif axis == "sparsity":
        if not is_num(value) or not 0 <= value < 1:
            raise FieldError(where, f"must be a share of the weights in [0, 1), got {value!r}")
    elif axis == "preset":
        if value not in preset_names():
            raise FieldError(where, f"unknown hardware preset {value!r} (known: {', '.join(preset_names())})")
    elif axis == "network":
        value = _relocate_files({"network": copy.deepcopy(value)}, sweep_dir, sweep_dir)["network"]
        try:
            parse_scenario({"hardware": "nv_small", "network": value}, sweep_dir)
        except FieldError as exc:
            msg = str(exc)
            raise FieldError(where, msg[len("network"):].lstrip(".: ") if msg.startswith("network")
                             else msg) from None
    elif not (isinstance(value, (str, int, float, bool, dict, list)) or value is None):
        raise FieldError(where, f"unsupported value {value!r}")
    return value


def _check_axis_name(name: Any, where: str) -> str:
    if not isinstance(name, str) or not name:
        raise FieldError(where, f"axis names are strings, got {name!r}")
    if name in AXES:
        return name
    if name.split(".")[0] not in TOP_FIELDS or name.split(".")[0] in ("name", "outputs"):
        raise FieldError(f"{where}.{name}" if where else name,
                         f"unknown axis (known: {', '.join(AXES)}; or a scenario field path "
                         "such as memory.dram_latency_ns)")
    if name in AXES.values():
        short = next(k for k, v in AXES.items() if v == name)
        raise FieldError(f"{where}.{name}" if where else name, f"use the axis name '{short}'")
    return name


# --------------------------------------------------------------------------------------------------
# Scenario mappings

def _relocate_files(scenario: dict, from_dir: Path, to_dir: Path) -> dict:
    """File fields written relative to `from_dir`, rewritten relative to `to_dir`."""
    for top, key in FILE_FIELDS:
        section = scenario.get(top)
        if isinstance(section, dict) and isinstance(section.get(key), str):
            p = Path(section[key]).expanduser()
            if not p.is_absolute():
                p = from_dir / p
            section[key] = os.path.relpath(os.path.normpath(p), to_dir)
    return scenario


def _set(scenario: dict, path: str, value: Any) -> None:
    parts = path.split(".")
    node = scenario
    for i, part in enumerate(parts[:-1]):
        child = node.get(part)
        if isinstance(child, str) and i == 0 and part in ("hardware", "network"):
            child = {"preset": child} if part == "hardware" else {"builtin": child}
        elif not isinstance(child, dict):
            child = {}
        node[part] = child
        node = child
    node[parts[-1]] = copy.deepcopy(value)


def point_scenario(base: dict, values: dict) -> dict:
    """The scenario of a point: the base with every axis value set.  One CBUF entry holds one
    atomic_c atom, so atomic_c and the bank width follow each other unless both are set."""
    scn = copy.deepcopy(base)
    scn.pop("name", None)
    scn.pop("outputs", None)
    for axis, value in values.items():
        _set(scn, axis_path(axis), value)
    if "atomic_c" in values and "cbuf_bank_width" not in values:
        _set(scn, AXES["cbuf_bank_width"], values["atomic_c"])
    if "cbuf_bank_width" in values and "atomic_c" not in values:
        _set(scn, AXES["atomic_c"], values["cbuf_bank_width"])
    return scn


def hardware_limited(exc: NvdlaSimError) -> bool:
    """A scenario error that says the hardware cannot take a value (an infeasible point), not
    that the sweep is written wrong."""
    msg = str(exc)
    path = getattr(exc, "path", "")
    return msg.startswith("hardware") or path.startswith("hardware") or path in (
        "memory.cvsram_bytes", "precision")


# --------------------------------------------------------------------------------------------------
# Loading

def _base(value: Any, sweep_dir: Path) -> dict:
    if value is None:
        raise FieldError("base", "missing (a scenario file or an inline scenario mapping)")
    if isinstance(value, str):
        p = Path(value).expanduser()
        if not p.is_absolute():
            p = sweep_dir / p
        if not p.is_file():
            raise FieldError("base", f"scenario file not found: {p}")
        data = read_yaml(p)
        if not isinstance(data, dict):
            raise FieldError("base", f"{p}: expected a scenario mapping")
        try:
            parse_scenario(data, p.resolve().parent, p.stem)
        except NvdlaSimError as exc:
            raise FieldError("base", f"{p}: {exc}") from None
        return _relocate_files(copy.deepcopy(data), p.resolve().parent, sweep_dir)
    if isinstance(value, dict):
        try:
            parse_scenario(value, sweep_dir)
        except NvdlaSimError as exc:
            raise FieldError("base", str(exc)) from None
        return copy.deepcopy(value)
    raise FieldError("base", f"expected a scenario file name or mapping, got {value!r}")


def _values_of(d: dict, where: str, sweep_dir: Path) -> dict:
    out = {}
    for name, value in d.items():
        axis = _check_axis_name(name, where)
        out[axis] = _check_value(axis, value, f"{where}.{axis}" if where else axis, sweep_dir)
    return out


def _grid(value: Any, sweep_dir: Path) -> tuple[list[str], list[list]]:
    if not isinstance(value, dict) or not value:
        raise FieldError("grid", "must be a mapping of axis -> list of values")
    axes, lists = [], []
    for name, values in value.items():
        axis = _check_axis_name(name, "grid")
        where = f"grid.{axis}"
        if not isinstance(values, list):
            values = [values]
        if not values:
            raise FieldError(where, "must be a non-empty list of values")
        checked = [_check_value(axis, v, f"{where}[{i}]", sweep_dir) for i, v in enumerate(values)]
        seen: set[str] = set()             # one canonical form per value: linear in the list
        for i, v in enumerate(checked):
            form = canonical(v)
            if form in seen:
                raise FieldError(f"{where}[{i}]", f"{_short(v)} is listed twice")
            seen.add(form)
        axes.append(axis)
        lists.append(checked)
        total = 1
        for x in lists:
            total *= len(x)
        if total > MAX_POINTS:
            raise FieldError("grid", f"{total:,} points (the product of the axes' lengths) is above "
                                     f"{MAX_POINTS:,}: split the sweep or list its points")
    return axes, lists


def _points(value: Any, sweep_dir: Path) -> tuple[list[str], list[dict]]:
    if not isinstance(value, list) or not value:
        raise FieldError("points", "must be a non-empty list of mappings axis -> value")
    axes: list[str] = []
    out = []
    for i, p in enumerate(value):
        if not isinstance(p, dict) or not p:
            raise FieldError(f"points[{i}]", f"expected a mapping axis -> value, got {p!r}")
        values = _values_of(p, f"points[{i}]", sweep_dir)
        axes += [a for a in values if a not in axes]
        out.append(values)
    return axes, out


def _blame(exc: NvdlaSimError, where: str, index: int, values: dict, fixed: dict) -> str:
    """The sweep field that set the scenario field a point's error names."""
    path = getattr(exc, "path", "") or str(exc).split(":")[0]
    for axis in values:
        if path == axis_path(axis) or path.startswith(axis_path(axis) + "."):
            return f"grid.{axis}" if where == "grid" else f"points[{index}].{axis}"
    for axis in fixed:
        if path == axis_path(axis) or path.startswith(axis_path(axis) + "."):
            return f"fixed.{axis}"
    return "grid" if where == "grid" else f"points[{index}]"


def parse_sweep(data: Any, sweep_dir: Path, default_name: str = "sweep",
                progress: Callable[[int, int], None] | None = None) -> SweepSpec:
    """Validate a sweep mapping and expand its points (files relative to `sweep_dir`);
    `progress(i, n)` is called before point i of n is checked (a large grid takes a while)."""
    if not isinstance(data, dict) or not data:
        raise FieldError("", "expected a mapping with base and grid (or points)")
    for key in data:
        if key not in TOP_KEYS:
            raise FieldError(str(key), f"unknown field (known: {', '.join(TOP_KEYS)})")
    name = check_name(data["name"], "name") if "name" in data else safe_name(default_name)
    base = _base(data.get("base"), sweep_dir)
    fixed = data.get("fixed") or {}
    if not isinstance(fixed, dict):
        raise FieldError("fixed", f"expected a mapping axis -> value, got {fixed!r}")
    fixed = _values_of(fixed, "fixed", sweep_dir)
    given = [k for k in ("grid", "points") if k in data]
    if len(given) != 1:
        raise FieldError("grid", "give exactly one of grid (every combination) and points "
                                 f"(an explicit list){' (got both)' if len(given) == 2 else ''}")
    if given[0] == "grid":
        grid = _grid(data["grid"], sweep_dir)
        axes = grid[0]
    else:
        axes, combos = _points(data["points"], sweep_dir)
    for axis in axes:
        if axis in fixed:
            raise FieldError(f"fixed.{axis}", f"is also an axis of {given[0]}")

    area = data.get("area") or {}
    if not isinstance(area, dict) or any(k != "bytes_per_mac" for k in area):
        raise FieldError("area", "expected {bytes_per_mac: N}")
    bpm = area.get("bytes_per_mac", DEFAULT_BYTES_PER_MAC)
    if isinstance(bpm, bool) or not isinstance(bpm, (int, float)) or not bpm > 0:
        raise FieldError("area.bytes_per_mac", f"must be > 0, got {bpm!r}")

    outputs = data.get("outputs") or {}
    if not isinstance(outputs, dict) or any(k not in ("directory", "plots") for k in outputs):
        raise FieldError("outputs", "expected {directory: DIR, plots: true|false}")
    directory = outputs.get("directory", f"out/{name}")
    if not isinstance(directory, str) or not directory:
        raise FieldError("outputs.directory", f"must be a folder path, got {directory!r}")
    plots = outputs.get("plots", True)
    if not isinstance(plots, bool):
        raise FieldError("outputs.plots", f"must be true or false, got {plots!r}")

    if given[0] == "grid":
        axes, lists = grid
        points = GridPoints(base, fixed, axes, lists, sweep_dir)
        _check_grid(points, progress)
    else:
        points = _checked_points(base, fixed, combos, sweep_dir, progress)
    return SweepSpec(None, name, base, sweep_dir, fixed, axes, points, float(bpm), Path(directory),
                     plots, [a for a in axes if a not in AXES])


def _check_point(values: dict, i: int, where: str, scenario: dict, sweep_dir: Path,
                 fixed: dict) -> None:
    """A point's scenario is valid, or only beyond what the hardware takes (infeasible: recorded
    when it runs); else the sweep is written wrong: the field that set the value is named."""
    try:
        parse_scenario(scenario, sweep_dir)
    except NvdlaSimError as exc:
        if not hardware_limited(exc):
            raise FieldError(_blame(exc, where, i, values, fixed),
                             f"point {i} ({Point(i, values, {}, '', '').label()}): {exc}") from None


def _check_grid(points: GridPoints, progress: Callable[[int, int], None] | None) -> None:
    """Each value of each axis once, the other axes at their first value: the sum of the axes'
    lengths, not their product (a 1,008-point grid: 31 checks).  A combination that only fails
    with another axis's value is an `error` row when it runs (point.evaluate_point)."""
    checks = [(points.axes[0], 0)] + [(a, j) for a, vals in zip(points.axes, points.lists)
                                      for j in range(1, len(vals))]
    for c, (axis, j) in enumerate(checks):
        if progress is not None:
            progress(c, len(checks))
        i = points.index({axis: j})
        p = points.point(i)
        _check_point(p.params, i, "grid", p.scenario, points.sweep_dir, points.fixed)


def _checked_points(base: dict, fixed: dict, combos: list[dict], sweep_dir: Path,
                    progress: Callable[[int, int], None] | None) -> list[Point]:
    """An explicit list: every point checked (each was written by hand), no two the same."""
    points, seen = [], {}
    for i, values in enumerate(combos):
        if progress is not None:
            progress(i, len(combos))
        scenario = point_scenario(base, {**fixed, **values})
        _check_point(values, i, "points", scenario, sweep_dir, fixed)
        key = point_key(scenario)
        if key in seen:
            raise FieldError(f"points[{i}]", f"the same scenario as points[{seen[key]}]")
        seen[key] = i
        points.append(Point(i, values, scenario, str(sweep_dir), key))
    return points


def load_sweep(path: str | Path, progress: Callable[[int, int], None] | None = None) -> SweepSpec:
    """Read, validate and expand a SWEEP.yaml; errors are `FILE: field.path: message`."""
    path = Path(path)
    data = read_yaml(path, "sweep file")
    try:
        spec = parse_sweep(data, path.resolve().parent, path.stem, progress)
    except NvdlaSimError as exc:
        raise NvdlaSimError(f"{path}: {exc}") from None
    spec.path = path
    return spec
