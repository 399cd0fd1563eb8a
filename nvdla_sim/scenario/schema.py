"""Scenario YAML: loading and validation.  Every error is one line naming the file and the field path
(`memory.dram_gbps: must be > 0, got -10`).  The schema is documented in docs/scenarios.md.

Paths inside a scenario (ONNX model, .npy input, .npz weights) are relative to the scenario file;
`outputs.directory` is relative to the current directory.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ..compiler.network import Network, Shape
from ..compiler.io_formats import CHOICES as IO_FORMATS
from ..compiler.sparsity import SPARSE_PRESETS
from ..compiler.zoo import BUILTIN
from ..config import HardwareConfig, load_hardware
from ..datatype import BY_NAME, DataType
from ..engine.memif import MemoryProfile, load_memory_profile
from ..errors import NvdlaSimError
from ..host.profile import HostProfile, load_host_profile
from ..yaml_file import read_yaml

TOP_FIELDS = ("name", "hardware", "clock_mhz", "memory", "network", "precision", "input", "weights",
              "quantization", "mode", "gpu_fallback", "outputs", "host", "batch",
              "winograd", "weight_compression", "input_format", "output_format", "memory_pools",
              "sparse_weights",
              "post_extension", "dla_cores", "second_network")
MODES = ("values+timing", "timing", "timing-only")     # timing-only: an alias of timing
REPORT_FORMATS = ("console", "json", "csv")

# Bounds of the user's numbers: beyond them a run is nonsense or cannot fit any machine.
MAX_DIM = 8192                  # NVDLA's largest cube dimension (13-bit width/height/channel fields)
MAX_CLOCK_MHZ = 10_000.0
MAX_GBPS = 100_000.0            # 100 TB/s: above any DRAM or SRAM interface
MAX_LATENCY_NS = 1e6            # 1 ms per request
MAX_CVSRAM_BYTES = 1 << 32      # CVSRAM is an on-chip SRAM; 4 GiB is far above any built
DIM_WHY = f"NVDLA's largest cube dimension is {MAX_DIM}"
LRN_MAX = 1e4                   # LRN alpha and k
# clip bounds and ReLU slopes: values every precision holds (FP16's largest finite value)
FP16_RANGE = {"minimum": -65504.0, "maximum": 65504.0, "why": "the largest FP16 value"}


class FieldError(NvdlaSimError):
    """A scenario field is wrong; `path` is the dotted field path."""

    def __init__(self, path: str, message: str):
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path


@dataclass
class MemorySpec:
    dram: MemoryProfile                # the DRAM interface profile (MCIF)
    cvsram: MemoryProfile | None       # the CVSRAM interface profile (CVIF), None without CVSRAM
    cvsram_bytes: int
    dram_gbps: float
    dram_latency_ns: float
    cvsram_gbps: float | None
    cvsram_latency_ns: float | None


@dataclass
class NetworkSpec:
    source: str                        # builtin / onnx / layers
    name: str
    builtin: str | None = None
    path: Path | None = None
    network: Network | None = None     # layers: already built (shapes checked)


@dataclass
class InputSpec:
    source: str                        # random / npy
    seed: int = 0
    distribution: str = "normal"       # normal (mean 0, std 1) / uniform [-1, 1)
    path: Path | None = None


@dataclass
class WeightsSpec:
    source: str                        # random / npz / model (from the ONNX file)
    seed: int = 0
    path: Path | None = None
    sparsity: float = 0.0              # share of conv/fc weights pruned to zero (weights.prune)
    pattern: str = "random"            # random (each weight, seeded) / 2:4 (2 of every 4 channels)


@dataclass
class QuantizationSpec:
    calibration: str = "max"           # max / percentile
    percentile: float = 99.99
    weights: str = "per_kernel"        # per_kernel / per_tensor
    weight_bits: int = 8               # sub-8-bit what-if (nvdla_sim/lowbit.py, docs/precision.md)
    activation_bits: int = 8
    rounding: str = "nearest"          # nearest / probabilistic / addmod97 (gemmlowp's modes)
    seed: int = 0                      # probabilistic rounding's generator; add-mod start


@dataclass
class OutputsSpec:
    directory: Path
    formats: tuple[str, ...] = ("console", "json", "csv")
    plots: bool | None = None          # None (not said): drawn in values mode only (draw_plots)
    timeline: bool = False

    def draw_plots(self, values: bool) -> bool:
        """Whether the report draws its plots: as the scenario says, else in values mode (a
        timing-only run sizing a chip wants the table and the JSON; the plots cost ~0.7 s)."""
        return values if self.plots is None else self.plots


@dataclass
class Scenario:
    path: Path | None
    name: str
    hardware: HardwareConfig
    clock_mhz: float
    memory: MemorySpec
    network: NetworkSpec
    precision: str                     # int8 / int16 / fp16 (the default of every layer)
    input: InputSpec
    weights: WeightsSpec
    quantization: QuantizationSpec
    mode: str
    gpu_fallback: bool
    outputs: OutputsSpec
    raw: dict = field(default_factory=dict, repr=False)
    layer_precision: dict[str, str] = field(default_factory=dict)   # layer -> int8 / int16
    host: HostProfile | None = None    # end-to-end time's host (None: report's default)
    batch: int = 1                     # images per inference, one register program (_batch)
    winograd: str = "off"              # auto / on / off (compiler/winograd.py); auto default where
    weight_compression: str = "off"    # the preset has the feature (_feature_mode)
    post_extension: str = "off"        # auto / on / off: image first layer (_post_extension)
    precision_flags: tuple[str, ...] = ()   # `precision: [int8, fp16]` (compiler/dla_rules.py)
    memory_pools: dict[str, int] | None = None   # DLA presets: pool -> bytes (_memory_pools)
    input_format: str = "auto"         # auto / dla_linear / dla_hwc4 / chw16 / chw32: TensorRT's
    output_format: str = "auto"        # DLA I/O formats (compiler/io_formats.py)
    sparse_weights: bool = False       # TensorRT's kSPARSE_WEIGHTS: 2:4 marks (compiler/sparsity.py)
    dla_cores: int = 1                 # DLA cores sharing the DRAM interface (compiler/multicore.py)
    second_network: NetworkSpec | None = None   # what core 2 runs (None: the same network)

    @property
    def values(self) -> bool:
        return self.mode == "values+timing"

    @property
    def dtype(self) -> DataType:
        """The element type every DLA layer runs in."""
        return BY_NAME[self.precision]

    @property
    def layer_dtypes(self) -> dict[str, DataType]:
        """Layers given another precision than the default."""
        return {name: BY_NAME[p] for name, p in self.layer_precision.items()}


# --------------------------------------------------------------------------------------------------
# Field helpers

def _mapping(value: Any, path: str, known: tuple[str, ...]) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise FieldError(path, f"expected a mapping, got {type(value).__name__} {value!r}")
    for key in value:
        if key not in known:
            raise FieldError(f"{path}.{key}" if path else str(key),
                             f"unknown field (known: {', '.join(known)})")
    return value


def check_number(v: Any, where: str, *, minimum: float | None = None, exclusive: bool = False,
                 maximum: float | None = None, integer: bool = False, why: str = ""):
    """A user's number: int or float (never a bool or a string), finite, within the bounds
    (`why` says where the maximum comes from).  Every numeric field goes through here."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (integer and not isinstance(v, int)):
        hint = ""
        if isinstance(v, str) and re.fullmatch(r"\s*[-+]?\d+[eE][-+]?\d+\s*", v):
            # YAML 1.1 reads an exponent without a dot (1e30) as text
            hint = f" (a string: write {v.strip().lower().replace('e', '.0e', 1)} for a number)"
        raise FieldError(where, f"must be {'an integer' if integer else 'a number'}, got {v!r}{hint}")
    if isinstance(v, float) and not math.isfinite(v):
        raise FieldError(where, f"must be a finite number, got {v!r}")
    if minimum is not None:
        if exclusive and not v > minimum:
            raise FieldError(where, f"must be > {minimum:g}, got {v!r}")
        if not exclusive and not v >= minimum:
            raise FieldError(where, f"must be >= {minimum:g}, got {v!r}")
    if maximum is not None and not v <= maximum:
        limit = int(maximum) if float(maximum).is_integer() else maximum
        raise FieldError(where, f"must be <= {limit}{f' ({why})' if why else ''}, got {v!r}")
    return v


def _number(d: dict, key: str, path: str, default=None, *, minimum: float | None = None,
            exclusive: bool = False, integer: bool = False, maximum: float | None = None,
            why: str = ""):
    where = f"{path}.{key}" if path else key
    if key not in d or d[key] is None:
        if default is None:
            raise FieldError(where, "missing")
        return default
    return check_number(d[key], where, minimum=minimum, exclusive=exclusive, maximum=maximum,
                        integer=integer, why=why)


def check_name(v: Any, where: str) -> str:
    """A name that becomes a file or folder name (scenario, sweep): printable, no path separator,
    not '.'/'..', not hidden, at most 128 characters."""
    if not isinstance(v, str) or not v:
        raise FieldError(where, f"must be a non-empty string, got {v!r}")
    if len(v) > 128 or not _NAME.fullmatch(v) or v.startswith(".") or v.startswith("-"):
        raise FieldError(where, f"{v[:40]!r}{'...' if len(v) > 40 else ''} is not a safe file "
                                "name (letters, digits, and _ . - + = , only; it names the output "
                                "files and folder)")
    return v


_NAME = re.compile(r"[A-Za-z0-9_.+=,-]+")


def safe_name(stem: str) -> str:
    """A default name from a file name, made safe: other characters become '_'."""
    name = re.sub(r"[^A-Za-z0-9_.+=,-]", "_", stem)[:128].lstrip(".-")
    return name or "scenario"


def _choice(d: dict, key: str, path: str, choices: tuple, default: str) -> str:
    where = f"{path}.{key}" if path else key
    v = d.get(key, default)
    if v not in choices:
        raise FieldError(where, f"must be one of {', '.join(map(str, choices))}, got {v!r}")
    return v


def _bool(d: dict, key: str, path: str, default: bool) -> bool:
    v = d.get(key, default)
    if not isinstance(v, bool):
        raise FieldError(f"{path}.{key}" if path else key, f"must be true or false, got {v!r}")
    return v


def _file(base: Path, value: Any, path: str, suffixes: tuple[str, ...]) -> Path:
    if not isinstance(value, str) or not value:
        raise FieldError(path, f"must be a file path, got {value!r}")
    p = Path(value).expanduser()
    if not p.is_absolute():
        p = base / p
    if not p.is_file():
        raise FieldError(path, f"file not found: {p}")
    if suffixes and p.suffix.lower() not in suffixes:
        raise FieldError(path, f"expected a {' or '.join(suffixes)} file, got {p.name}")
    return p


# --------------------------------------------------------------------------------------------------
# Sections

def _hardware(value: Any) -> HardwareConfig:
    if value is None:
        raise FieldError("hardware", "missing (a preset name, or {preset: NAME, ...overrides})")
    if isinstance(value, str):
        value = {"preset": value}
    if not isinstance(value, dict):
        raise FieldError("hardware", f"expected a preset name or a mapping, got {value!r}")
    _mapping(value, "hardware", ("preset",) + tuple(f.name for f in fields(HardwareConfig)))
    try:
        return load_hardware(dict(value))
    except NvdlaSimError as exc:
        msg = str(exc)
        msg = msg[1:].lstrip() if msg.startswith(":") else msg
        raise FieldError("", f"hardware.{msg}" if not msg.startswith("unknown hardware preset")
                         else f"hardware.preset: {msg}") from None


def _memory(value: Any, hw: HardwareConfig, clock_mhz: float) -> MemorySpec:
    known = ("profile", "dram_gbps", "dram_latency_ns", "cvsram_bytes", "cvsram_gbps",
             "cvsram_latency_ns")
    d = _mapping(value, "memory", known)
    profile_name = d.get("profile", "dram")
    try:
        base = load_memory_profile(profile_name)
    except NvdlaSimError as exc:
        raise FieldError("memory.profile", str(exc)) from None
    dram_gbps = _number(d, "dram_gbps", "memory", 10.0, minimum=0, exclusive=True,
                        maximum=MAX_GBPS)
    default_latency_ns = float(base.read_latency_cycles)   # profile cycles are at 1 GHz
    dram_latency_ns = _number(d, "dram_latency_ns", "memory", default_latency_ns, minimum=0,
                              maximum=MAX_LATENCY_NS)
    from ..compiler.dla_rules import dla_target       # a DLA preset: its SRAM by default
    target = dla_target(hw)
    cvsram_bytes = _number(d, "cvsram_bytes", "memory", target.sram_bytes if target else 0,
                           minimum=0, integer=True,
                           maximum=MAX_CVSRAM_BYTES, why="CVSRAM is an on-chip SRAM")
    cycles_per_ns = clock_mhz / 1000.0
    dram = replace(base, name=f"{base.name} {dram_gbps:g} GB/s", bandwidth_gbps=float(dram_gbps),
                   read_latency_cycles=dram_latency_ns * cycles_per_ns)
    cvsram = None
    cvsram_gbps = cvsram_latency = None
    if cvsram_bytes:
        if hw.secondary_memif is None:
            raise FieldError("memory.cvsram_bytes",
                             f"{hw.name} has no secondary memory interface (CVSRAM); use 0")
        cvsram_gbps = _number(d, "cvsram_gbps", "memory", 25.0, minimum=0, exclusive=True,
                              maximum=MAX_GBPS)
        cvsram_latency = _number(d, "cvsram_latency_ns", "memory", 32.0, minimum=0,
                                 maximum=MAX_LATENCY_NS)
        cvsram = replace(base, name=f"cvsram {cvsram_gbps:g} GB/s", bandwidth_gbps=float(cvsram_gbps),
                         read_latency_cycles=cvsram_latency * cycles_per_ns)
    else:
        for key in ("cvsram_gbps", "cvsram_latency_ns"):
            if key in d:
                _number(d, key, "memory", minimum=0, exclusive=key == "cvsram_gbps",
                        maximum=MAX_GBPS if key == "cvsram_gbps" else MAX_LATENCY_NS)
    return MemorySpec(dram, cvsram, int(cvsram_bytes), float(dram_gbps), float(dram_latency_ns),
                      cvsram_gbps, cvsram_latency)


def _network(value: Any, base: Path) -> NetworkSpec:
    if value is None:
        raise FieldError("network", f"missing (a built-in name: {', '.join(BUILTIN)}; "
                                    "{onnx: FILE}; or {layers: [...]})")
    if isinstance(value, str):
        value = {"builtin": value}
    d = _mapping(value, "network", ("builtin", "onnx", "onnx_zoo", "layers", "input", "name"))
    given = [k for k in ("builtin", "onnx", "onnx_zoo", "layers") if k in d]
    if len(given) != 1:
        raise FieldError("network", "give exactly one of builtin, onnx, layers, onnx_zoo"
                         + (f" (got {', '.join(given)})" if given else ""))
    if "builtin" in d:
        name = d["builtin"]
        if not isinstance(name, str) or name not in BUILTIN:
            raise FieldError("network.builtin", f"unknown network {name!r} (built-in: {', '.join(BUILTIN)})")
        return NetworkSpec("builtin", d.get("name", name), builtin=name)
    if "onnx" in d:
        p = _file(base, d["onnx"], "network.onnx", (".onnx",))
        return NetworkSpec("onnx", d.get("name", p.stem), path=p)
    if "onnx_zoo" in d:
        p = onnx_zoo_model(d["onnx_zoo"])
        return NetworkSpec("onnx", d.get("name", str(d["onnx_zoo"])), path=p)
    net = parse_layers(d, "network")
    return NetworkSpec("layers", net.name, network=net)


def onnx_zoo_model(name: Any) -> Path:
    """`network.onnx_zoo: NAME`: the model-zoo light model light_NAME.onnx the installed onnx
    package ships (onnx/backend/test/data/light/), so a scenario names it without a path."""
    try:
        import onnx
    except ImportError:
        raise FieldError("network.onnx_zoo", "needs the onnx package (pip install "
                                             "'nvdla-sim[onnx]')") from None
    folder = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    known = sorted(f.stem.removeprefix("light_") for f in folder.glob("light_*.onnx"))
    if not isinstance(name, str) or name not in known:
        raise FieldError("network.onnx_zoo", f"unknown model {name!r} (this onnx package ships: "
                                             f"{', '.join(known) or 'none'})")
    return folder / f"light_{name}.onnx"


def _is_int(x: Any, minimum: int) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and minimum <= x <= MAX_DIM


def _int_or_pair(v: Any, where: str, minimum: int = 1) -> tuple[int, int]:
    if _is_int(v, minimum):
        return (v, v)
    if isinstance(v, list) and len(v) == 2 and all(_is_int(x, minimum) for x in v):
        return (v[0], v[1])
    raise FieldError(where, f"must be an integer in {minimum}..{MAX_DIM} or a [height, width] "
                            f"pair of them, got {v!r}")


def _padding(v: Any, where: str) -> tuple[int, int, int, int]:
    if isinstance(v, list) and len(v) == 4 and all(_is_int(x, 0) for x in v):
        return tuple(v)
    h, w = _int_or_pair(v, where, 0)
    return (h, w, h, w)


def check_shapes(net: Network, where_of=lambda name: name) -> None:
    """Every tensor of `net` is non-empty and within NVDLA's cube limits in height and width (a
    flatten or concatenation may hold more than MAX_DIM channels: those run on the GPU)."""
    for name, s in net.shapes.items():
        if min(s.c, s.h, s.w) <= 0:
            raise FieldError(where_of(name), f"output '{name}' is empty ({s.c}x{s.h}x{s.w}): "
                                             "the window or kernel is larger than the padded input")
        if max(s.h, s.w) > MAX_DIM or s.c > MAX_DIM ** 2:
            raise FieldError(where_of(name), f"output '{name}' is {s.c}x{s.h}x{s.w}, above "
                                             f"{MAX_DIM} ({DIM_WHY})")


LAYER_FIELDS = {
    "conv": ("out_channels", "kernel", "stride", "pad", "dilation", "groups", "bias", "relu", "batchnorm"),
    "fc": ("out_features", "relu", "bias"),
    "pool": ("method", "kernel", "stride", "pad", "ceil_mode", "count_include_pad", "global"),
    "lrn": ("size", "alpha", "beta", "k"),
    "add": ("relu",), "mul": (), "max": (), "min": (), "concat": (),
    "relu": (), "sigmoid": (), "tanh": (), "softmax": (), "flatten": (), "batchnorm": (),
    "prelu": ("slope",), "leaky_relu": ("alpha",), "clip": ("min", "max"),
    # compiler/ext_ops.py (constant: the second operand as a uniform value)
    "scale": ("scale", "shift", "power"), "reduce": ("op", "axes"),
    **{k: ("constant", "constant_first") for k in ("sub", "div", "pow", "equal", "greater", "less")},
    **{k: () for k in ("abs", "sin", "cos", "atan")},
    "deconv": ("out_channels", "kernel", "stride", "pad", "bias"),     # compiler/deconv.py
    "resize": ("scale", "mode"), "slice": ("start", "channels", "rows", "cols"),
}
LAYER_FIELDS["softmax"] = ("axis",)


def parse_layers(d: dict, path: str) -> Network:
    """An explicit layer list -> Network (shapes inferred; errors name network.layers[i].field)."""
    shape = d.get("input")
    if not (isinstance(shape, list) and len(shape) == 3 and all(_is_int(x, 1) for x in shape)):
        raise FieldError(f"{path}.input", f"must be [channels, height, width] of integers in "
                                          f"1..{MAX_DIM} ({DIM_WHY}), got {shape!r}")
    layers = d.get("layers")
    if not isinstance(layers, list) or not layers:
        raise FieldError(f"{path}.layers", "must be a non-empty list of layers")
    net = Network(str(d.get("name", "network")), "data", Shape(*shape))
    prev = "data"
    for i, layer in enumerate(layers):
        where = f"{path}.layers[{i}]"
        if not isinstance(layer, dict):
            raise FieldError(where, f"expected a mapping, got {layer!r}")
        kind = layer.get("type")
        if not isinstance(kind, str) or kind not in LAYER_FIELDS:
            raise FieldError(f"{where}.type", f"must be one of {', '.join(LAYER_FIELDS)}, got {kind!r}")
        name = layer.get("name")
        if not isinstance(name, str) or not name:
            raise FieldError(f"{where}.name", "missing (each layer needs a unique name)")
        _mapping(layer, where, ("name", "type", "input") + LAYER_FIELDS[kind])
        inputs = layer.get("input", prev)
        inputs = [inputs] if isinstance(inputs, str) else inputs
        if not isinstance(inputs, list) or not all(isinstance(x, str) for x in inputs):
            raise FieldError(f"{where}.input", f"must be a layer name or a list of names, got {inputs!r}")
        for x in inputs:
            if x not in net.shapes:
                raise FieldError(f"{where}.input", f"unknown layer {x!r} (layers are listed in order; "
                                                   "the network input is 'data')")
        n_in = {"add": 2, "mul": 2, "max": 2, "min": 2}.get(kind, None if kind == "concat" else 1)
        if kind in ("sub", "div", "pow", "equal", "greater", "less"):
            n_in = 1 if "constant" in layer else 2
        if n_in is not None and len(inputs) != n_in:
            raise FieldError(f"{where}.input", f"{kind} takes {n_in} input(s), got {len(inputs)}")
        if not inputs:
            raise FieldError(f"{where}.input", f"{kind} needs at least one input, got none")
        try:
            _add_layer(net, kind, name, inputs, layer, where)
        except ValueError as exc:
            raise FieldError(where, str(exc)) from None
        check_shapes(net, lambda _: where)
        prev = name
    return net


def _add_layer(net: Network, kind: str, name: str, inputs: list[str], layer: dict, where: str) -> None:
    def get_bool(key, default=False):
        return _bool(layer, key, where, default)

    def get_num(key, default=None, **kw):
        return _number(layer, key, where, default, **kw)

    if kind == "conv":
        net.conv(name, inputs[0], get_num("out_channels", integer=True, minimum=1, maximum=MAX_DIM,
                                          why=DIM_WHY),
                 _int_or_pair(layer.get("kernel"), f"{where}.kernel"),
                 _int_or_pair(layer.get("stride", 1), f"{where}.stride"),
                 _padding(layer.get("pad", 0), f"{where}.pad"),
                 _int_or_pair(layer.get("dilation", 1), f"{where}.dilation"),
                 get_num("groups", 1, integer=True, minimum=1, maximum=MAX_DIM),
                 get_bool("bias", True),
                 get_bool("relu"), get_bool("batchnorm"))
    elif kind == "fc":
        net.fc(name, inputs[0], get_num("out_features", integer=True, minimum=1, maximum=MAX_DIM,
                                        why=DIM_WHY), get_bool("relu"),
               get_bool("bias", True))
    elif kind == "pool":
        method = _choice(layer, "method", where, ("max", "avg"), "max")
        if get_bool("global"):
            s = net.shapes[inputs[0]]
            net.pool(name, inputs[0], method, (s.h, s.w), (s.h, s.w))
            return
        kernel = _int_or_pair(layer.get("kernel"), f"{where}.kernel")
        net.add("pool", name, inputs, method=method, kernel=kernel,
                stride=_int_or_pair(layer.get("stride", list(kernel)), f"{where}.stride"),
                pad=_padding(layer.get("pad", 0), f"{where}.pad"), ceil_mode=get_bool("ceil_mode"),
                count_include_pad=get_bool("count_include_pad", True))
    elif kind == "lrn":
        net.add("lrn", name, inputs, size=get_num("size", 5, integer=True, minimum=1,
                                                   maximum=MAX_DIM),
                # (k + alpha/size * sum x^2)^-beta: k > 0 keeps the base positive; the bounds
                # keep the LUT's table finite (typical: alpha 1e-4, beta 0.75, k 1 or 2)
                alpha=float(get_num("alpha", 1e-4, minimum=0, maximum=LRN_MAX)),
                beta=float(get_num("beta", 0.75, minimum=0, maximum=16)),
                k=float(get_num("k", 1.0, minimum=0, exclusive=True, maximum=LRN_MAX)))
    elif kind == "add":
        net.add("add", name, inputs, relu=get_bool("relu"))
    elif kind == "prelu":
        attrs = {"slope": float(get_num("slope", **FP16_RANGE))} if "slope" in layer else {}
        net.add("prelu", name, inputs, **attrs)
    elif kind == "leaky_relu":
        net.add("prelu", name, inputs, slope=float(get_num("alpha", 0.01, **FP16_RANGE)))
    elif kind == "deconv":
        kernel = _int_or_pair(layer.get("kernel"), f"{where}.kernel")
        net.add("deconv", name, inputs, out_channels=get_num(
            "out_channels", integer=True, minimum=1, maximum=MAX_DIM, why=DIM_WHY), kernel=kernel,
            stride=_int_or_pair(layer.get("stride", list(kernel)), f"{where}.stride"),
            pad=_padding(layer.get("pad", 0), f"{where}.pad"), dilation=(1, 1), groups=1,
            bias=get_bool("bias", True))
    elif kind == "resize":
        net.add("resize", name, inputs, scale=_int_or_pair(layer.get("scale"), f"{where}.scale"),
                mode=_choice(layer, "mode", where, ("nearest", "bilinear"), "nearest"))
    elif kind == "slice":
        c = net.shapes[inputs[0]].c
        start = get_num("start", 0, integer=True, minimum=0, maximum=c - 1)
        s = net.shapes[inputs[0]]
        window = {k: _int_or_pair(layer[k], f"{where}.{k}", 0) for k in ("rows", "cols") if k in layer}
        for k, n in (("rows", s.h), ("cols", s.w)):      # [first, count] inside the input
            if k in window and (window[k][1] < 1 or sum(window[k]) > n):
                raise FieldError(f"{where}.{k}", f"[first, count] must lie in 0..{n}, got "
                                                 f"{list(window[k])}")
        net.add("slice", name, inputs, start=start,
                channels=get_num("channels", c - start, integer=True, minimum=1, maximum=c - start),
                **window)
    elif kind in ("scale", "sub", "div", "pow", "equal", "greater", "less", "reduce",
                  "softmax"):
        _add_ext_layer(net, kind, name, inputs, layer, where)
    elif kind == "clip":
        lo, hi = float(get_num("min", 0.0, **FP16_RANGE)), float(get_num("max", **FP16_RANGE))
        if lo > hi:
            raise FieldError(f"{where}.min", f"must not exceed max ({hi:g}), got {lo:g}")
        net.add("clip", name, inputs, min=lo, max=hi)
    else:
        net.add(kind, name, inputs)


def _ext_numbers(layer: dict, key: str, where: str, default: float, count: int):
    """A number, or a list of `count` numbers (one per channel), as a float array."""
    import numpy as np
    v = layer.get(key, default)
    values = v if isinstance(v, list) else [v]
    for i, x in enumerate(values):
        check_number(x, f"{where}.{key}" + (f"[{i}]" if isinstance(v, list) else ""),
                     minimum=-65504.0, maximum=65504.0)
    if isinstance(v, list) and len(v) not in (1, count):
        raise FieldError(f"{where}.{key}", f"must be a number or a list of {count} numbers (one "
                                           f"per channel), got {len(v)}")
    return np.asarray(values, np.float64)


def _add_ext_layer(net: Network, kind: str, name: str, inputs: list[str], layer: dict,
                   where: str) -> None:
    """Scale, Sub/Div/Pow/comparisons, Reduce MAX, Softmax (compiler/ext_ops.py)."""
    c = net.shapes[inputs[0]].c
    if kind == "scale":
        net.add("scale", name, inputs, scale=_ext_numbers(layer, "scale", where, 1.0, c),
                shift=_ext_numbers(layer, "shift", where, 0.0, c),
                power=float(_number(layer, "power", where, 1.0)))
    elif kind == "reduce":
        axes = layer.get("axes", "chw")
        if isinstance(axes, list) and all(isinstance(a, str) for a in axes):
            axes = "".join(axes)       # (a list of anything else is refused below)
        if not isinstance(axes, str) or not axes or any(a not in "chw" for a in axes) \
                or len(set(axes)) != len(axes):
            raise FieldError(f"{where}.axes", f"must name axes among c, h, w (e.g. hw or [c]), "
                                              f"got {layer.get('axes')!r}")
        net.add("reduce", name, inputs, axes=tuple(axes),
                op=_choice(layer, "op", where, ("max", "min", "sum", "mean"), "max"))
    elif kind == "softmax":
        net.add("softmax", name, inputs, axis=_choice(layer, "axis", where, ("c", "h", "w"), "c"))
    else:
        attrs = {}
        if "constant" in layer:
            attrs["constant"] = float(_number(layer, "constant", where, **FP16_RANGE))
            attrs["constant_first"] = _bool(layer, "constant_first", where, False)
            if kind == "div" and attrs["constant"] == 0 and not attrs["constant_first"]:
                raise FieldError(f"{where}.constant", "a division by 0")
        net.add(kind, name, inputs, **attrs)


def _input(value: Any, base: Path) -> InputSpec:
    d = _mapping(value, "input", ("seed", "distribution", "npy"))
    if "npy" in d:
        if "seed" in d or "distribution" in d:
            raise FieldError("input", "give either npy or seed/distribution, not both")
        return InputSpec("npy", path=_file(base, d["npy"], "input.npy", (".npy",)))
    return InputSpec("random", seed=_number(d, "seed", "input", 0, minimum=0, integer=True),
                     distribution=_choice(d, "distribution", "input", ("normal", "uniform"), "normal"))


def _weights(value: Any, base: Path, network: NetworkSpec) -> WeightsSpec:
    d = _mapping(value, "weights", ("seed", "npz", "sparsity", "pattern"))
    pruning = _pruning(d)
    if "npz" in d:
        if "seed" in d:
            raise FieldError("weights", "give either npz or seed, not both")
        return WeightsSpec("npz", path=_file(base, d["npz"], "weights.npz", (".npz",)), **pruning)
    if network.source == "onnx" and "seed" not in d:
        return WeightsSpec("model", **pruning)
    return WeightsSpec("random", seed=_number(d, "seed", "weights", 0, minimum=0, integer=True),
                       **pruning)


def _pruning(d: dict) -> dict:
    """weights.sparsity (share of conv/fc weights set to zero, 0 <= s < 1) and weights.pattern
    (random, or 2:4: two of every four input channels, sparsity 0.5)."""
    pattern = _choice(d, "pattern", "weights", ("random", "2:4"), "random")
    sparsity = float(_number(d, "sparsity", "weights", 0.5 if pattern == "2:4" else 0.0,
                             minimum=0.0))
    if sparsity >= 1.0:
        raise FieldError("weights.sparsity", f"must be < 1 (a share of the weights), got {sparsity:g}")
    if pattern == "2:4" and sparsity != 0.5:
        raise FieldError("weights.sparsity", f"pattern 2:4 prunes exactly 0.5, got {sparsity:g}")
    return {"sparsity": sparsity, "pattern": pattern}


def _quantization(value: Any, precision: str = "int8") -> QuantizationSpec:
    from ..lowbit import ROUNDING_MODES
    d = _mapping(value, "quantization", ("calibration", "percentile", "weights", "weight_bits",
                                         "activation_bits", "rounding", "seed"))
    bits = {}
    for key in ("weight_bits", "activation_bits"):
        bits[key] = _number(d, key, "quantization", 8, minimum=1, integer=True)
        if bits[key] > 8:
            raise FieldError(f"quantization.{key}", f"must be <= 8 (the INT8 container holds at "
                                                    f"most 8 bits), got {bits[key]!r}")
        if bits[key] < 8 and precision != "int8":
            raise FieldError(f"quantization.{key}", f"{bits[key]} bits need precision int8 (the "
                             f"N-bit codes live in the INT8 container), not {precision}")
    q = QuantizationSpec(
        calibration=_choice(d, "calibration", "quantization", ("max", "percentile"), "max"),
        percentile=float(_number(d, "percentile", "quantization", 99.99, minimum=0, exclusive=True)),
        weights=_choice(d, "weights", "quantization", ("per_kernel", "per_tensor"), "per_kernel"),
        weight_bits=bits["weight_bits"], activation_bits=bits["activation_bits"],
        rounding=_choice(d, "rounding", "quantization", ROUNDING_MODES, "nearest"),
        seed=_number(d, "seed", "quantization", 0, minimum=0, integer=True))
    if q.percentile > 100:
        raise FieldError("quantization.percentile", f"must be <= 100, got {q.percentile}")
    return q


def _host(value: Any, base: Path) -> HostProfile | None:
    """`host`: a profile name (nvdla_sim/host/profiles), a YAML file (relative to the scenario) or
    a mapping of profile fields (`profile: NAME` plus overrides)."""
    if value is None:
        return None
    if isinstance(value, str) and value.endswith((".yaml", ".yml")):
        value = base / value
    elif not isinstance(value, (str, dict)):
        raise FieldError("host", f"must be a profile name, a YAML file or a mapping, got {value!r}")
    try:
        return load_host_profile(value)
    except NvdlaSimError as exc:
        raise FieldError("host", str(exc)) from None


def _outputs(value: Any, name: str) -> OutputsSpec:
    d = _mapping(value, "outputs", ("directory", "formats", "plots", "timeline"))
    directory = d.get("directory", f"out/{name}")
    if not isinstance(directory, str) or not directory:
        raise FieldError("outputs.directory", f"must be a folder path, got {directory!r}")
    formats = d.get("formats", list(REPORT_FORMATS))
    if isinstance(formats, str):
        formats = [formats]
    if not isinstance(formats, list) or any(f not in REPORT_FORMATS for f in formats):
        raise FieldError("outputs.formats", f"must list some of {', '.join(REPORT_FORMATS)}, got {formats!r}")
    plots = None if d.get("plots") is None else _bool(d, "plots", "outputs", True)
    return OutputsSpec(Path(directory), tuple(formats), plots,
                       _bool(d, "timeline", "outputs", False))


def _precision(value: Any, hw: HardwareConfig) -> str:
    """int8 / int16 / fp16, and one the hardware builds (the v2 presets: int8 only)."""
    if not isinstance(value, str) or value.lower() not in BY_NAME:
        raise FieldError("precision", f"must be one of {', '.join(BY_NAME)}, got {value!r}")
    value = value.lower()
    built = [t.lower() for t in hw.data_types]
    if value not in built:
        raise FieldError("precision", f"{value} is not a data type of {hw.name} (it has "
                                      f"{', '.join(built)}; int16 and fp16 need nv_full)")
    return value


def _precision_flags(value: Any, hw: HardwareConfig, where: str) -> tuple[str, tuple[str, ...]]:
    """`[int8, fp16]` (TensorRT's --int8 --fp16: INT8 where possible, FP16 otherwise), or a
    list of one precision; the precision the plan starts from and the flags."""
    if not (isinstance(value, list) and value and all(isinstance(v, str) for v in value)):
        raise FieldError(where, f"must be a precision or a list of them, got {value!r}")
    flags = tuple(dict.fromkeys(_precision(v, hw) for v in value))
    if len(flags) == 1:
        return flags[0], ()
    if set(flags) != {"int8", "fp16"}:
        raise FieldError(where, f"a list of precisions must be [int8, fp16] (INT8 where "
                                f"possible, FP16 otherwise), got {value!r}")
    return "int8", ("int8", "fp16")


def _flags_of(value: Any, hw: HardwareConfig) -> tuple[str, ...]:
    """The precision flags of a valid `precision` field (() unless [int8, fp16])."""
    if isinstance(value, dict):
        value = value.get("default")
    return _precision_flags(value, hw, "precision")[1] if isinstance(value, list) else ()


def _precisions(value: Any, hw: HardwareConfig) -> tuple[str, dict[str, str]]:
    """`precision: P`, or `precision: {default: P, layers: {LAYER: P, ...}}`: layers in another
    integer precision (the SDP of the layer before converts INT8 to INT16; FP16 does not mix).
    `[int8, fp16]` (also as `default`): see _precision_flags; the scenario's precision_flags."""
    if isinstance(value, list):
        return _precision_flags(value, hw, "precision")[0], {}
    if not isinstance(value, dict):
        return _precision(value, hw), {}
    d = _mapping(value, "precision", ("default", "layers"))
    mixed = isinstance(d.get("default"), list)
    if mixed:
        default = _precision_flags(d["default"], hw, "precision.default")[0]
    else:
        try:
            default = _precision(d.get("default", "int8"), hw)
        except FieldError as exc:
            raise FieldError("precision.default", str(exc).split(": ", 1)[1]) from None
    layers = d.get("layers") or {}
    if not isinstance(layers, dict) or not all(isinstance(k, str) for k in layers):
        raise FieldError("precision.layers", f"expected a mapping of layer names to precisions, "
                                             f"got {layers!r}")
    out = {}
    for name, p in layers.items():
        try:
            out[name] = _precision(p, hw)
        except FieldError as exc:
            raise FieldError(f"precision.layers.{name}", str(exc).split(": ", 1)[1]) from None
        if not mixed and (out[name] == "fp16") != (default == "fp16"):
            raise FieldError(f"precision.layers.{name}", f"{out[name]} does not mix with "
                             f"{default} layers (only INT8 and INT16 layers mix: the SDP converts "
                             "INT8 to INT16)")
    return default, out


# NVDLA_MAX_BATCH_SIZE of the configurations built with BATCH_ENABLE (nvdlav1 spec/defs: nv_full).
MAX_BATCH = 32


def _feature_mode(d: dict, key: str, hw: HardwareConfig, flag: str) -> str:
    """`winograd` / `weight_compression`: auto (the default where the preset has the feature),
    off, or (winograd) on: every eligible layer, even one the estimate finds memory-bound;
    auto / on on a preset without the feature is an error."""
    has = bool(getattr(hw.features, flag))
    if isinstance(d.get(key), bool):           # YAML 1.1 reads bare `on` / `off` as booleans
        d = {**d, key: "on" if d[key] else "off"}
    modes = ("auto", "on", "off") if key == "winograd" else ("auto", "off")
    if d.get(key) == "on" and key != "winograd":
        d = {**d, key: "auto"}
    mode = _choice(d, key, "", modes, "auto" if has else "off")
    if mode != "off" and not has:
        raise FieldError(key, f"{hw.name} has no {key.replace('_', ' ')} (features.{flag}: "
                              "false; nv_full has it); use off")
    return mode


def _post_extension(d: dict, hw: HardwareConfig) -> str:
    """`post_extension`: channel post-extension of an image-input first layer (CSC
    D_POST_Y_EXTENSION): auto (the default on the presets with the full convolution core's
    features, as Winograd: nv_full, Xavier, Orin) uses it where the layer allows it, on also
    (an error naming the layer where it cannot), off never."""
    if isinstance(d.get("post_extension"), bool):     # YAML 1.1 reads bare on / off as booleans
        d = {**d, "post_extension": "on" if d["post_extension"] else "off"}
    return _choice(d, "post_extension", "", ("auto", "on", "off"),
                   "auto" if hw.features.winograd else "off")


def _batch(d: dict, hw: HardwareConfig) -> int:
    """`batch`: images one register program runs (1..MAX_BATCH), on hardware with the batch
    feature (CDMA/CSC/CACC BATCH_NUMBER); 1 anywhere."""
    n = _number(d, "batch", "", 1, minimum=1, integer=True, maximum=MAX_BATCH,
                why="NVDLA_MAX_BATCH_SIZE")
    if n > 1 and not hw.features.batch:
        raise FieldError("batch", f"{hw.name} has no batch feature (features.batch: false); "
                                  f"use batch 1, got {n}")
    return n


POOLS = ("managed_sram", "local_dram", "global_dram")
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(B|KiB|MiB|GiB)?\s*")
_UNIT = {None: 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def _pool_size(v: Any, where: str) -> int:
    """Bytes, or a string like `512KiB` / `1 MiB`; a power of two of at least 4 KiB (TensorRT:
    'all DLA memory pools require sizes that are powers of 2, with a minimum of 4 KiB')."""
    m = _SIZE.fullmatch(v) if isinstance(v, str) else None
    if m is not None:
        n = float(m.group(1)) * _UNIT[m.group(2)]
        v = int(n) if n.is_integer() else n
    check_number(v, where, minimum=0, integer=True, maximum=1 << 40)
    if v < 4096 or v & (v - 1):
        raise FieldError(where, f"a DLA memory pool must be a power of two of at least 4 KiB, "
                                f"got {v!r}")
    return v


def _memory_pools(value: Any, hw: HardwareConfig) -> dict[str, int] | None:
    """`memory_pools: {managed_sram: 1MiB, local_dram: 1GiB, global_dram: 512MiB}` on a DLA
    preset, defaults from compiler/dla_rules.DLA_TARGETS; None on other presets."""
    from ..compiler.dla_rules import dla_target
    target = dla_target(hw)
    if target is None:
        if value is not None:
            raise FieldError("memory_pools", f"{hw.name} is not a DLA preset (xavier_dla, "
                                             "orin_dla); drop memory_pools")
        return None
    d = _mapping(value, "memory_pools", POOLS)
    pools = {"managed_sram": target.managed_sram_default,
             "local_dram": target.local_dram_default, "global_dram": target.global_dram_default}
    for key in d:
        pools[key] = _pool_size(d[key], f"memory_pools.{key}")
    return pools


def _sparse_weights(d: dict, hw: HardwareConfig) -> bool:
    """`sparse_weights: true`: structured sparsity, an Orin-class preset only."""
    on = _bool(d, "sparse_weights", "", False)
    if on and hw.name not in SPARSE_PRESETS:
        raise FieldError("sparse_weights", f"structured sparsity is an Orin DLA feature, the "
                         f"preset is {hw.name} (use orin_dla) [rule sparsity.orin_only]")
    return on


def parse_scenario(data: Any, base: Path, default_name: str = "scenario") -> Scenario:
    """Validate a scenario mapping; relative input files resolve against `base`."""
    if isinstance(data, dict) and "base" in data and ("grid" in data or "points" in data):
        raise FieldError("base", "this is a sweep file (base plus grid/points): run it with `nvdla-sim sweep`")
    d = _mapping(data, "", TOP_FIELDS)
    if not d:
        raise FieldError("", "empty scenario (needs at least hardware and network)")
    name = check_name(d["name"], "name") if "name" in d else safe_name(default_name)
    hw = _hardware(d.get("hardware"))
    clock = float(_number(d, "clock_mhz", "", 1000.0, minimum=0, exclusive=True,
                          maximum=MAX_CLOCK_MHZ))
    memory = _memory(d.get("memory"), hw, clock)
    network = _network(d.get("network"), base)
    precision, layer_precision = _precisions(d.get("precision", "int8"), hw)
    flags = _flags_of(d.get("precision"), hw)
    pools = _memory_pools(d.get("memory_pools"), hw)
    from ..compiler.multicore import parse_cores      # dla_cores, second_network
    cores, second = parse_cores(d, hw, pools, lambda v: _network(v, base))
    return Scenario(
        path=None, name=name, hardware=hw, clock_mhz=clock, memory=memory, network=network,
        precision=precision, input=_input(d.get("input"), base),
        weights=_weights(d.get("weights"), base, network), quantization=_quantization(d.get("quantization"), precision),
        mode=_choice(d, "mode", "", MODES, "values+timing"),
        gpu_fallback=_bool(d, "gpu_fallback", "", True), outputs=_outputs(d.get("outputs"), name), raw=d,
        layer_precision=layer_precision, host=_host(d.get("host"), base), batch=_batch(d, hw),
        winograd=_feature_mode(d, "winograd", hw, "winograd"),
        weight_compression=_feature_mode(d, "weight_compression", hw, "weight_compression"),
        post_extension=_post_extension(d, hw),
        precision_flags=flags, memory_pools=pools,
        input_format=_choice(d, "input_format", "", IO_FORMATS, "auto"),
        output_format=_choice(d, "output_format", "", IO_FORMATS, "auto"),
        sparse_weights=_sparse_weights(d, hw), dla_cores=cores, second_network=second)


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file; errors are `FILE: field.path: message`."""
    path = Path(path)
    data = read_yaml(path, "scenario file")
    try:
        scn = parse_scenario(data, path.resolve().parent, path.stem)
    except NvdlaSimError as exc:
        raise NvdlaSimError(f"{path}: {exc}") from None
    scn.path = path
    return scn
