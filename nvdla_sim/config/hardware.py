"""HardwareConfig: one NVDLA configuration (a preset plus user overrides), validated.

A user file either is a full configuration or names a preset and overrides fields:

    preset: nv_small
    cbuf: {banks: 16}
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ..errors import NvdlaSimError
from ..yaml_file import read_yaml

PRESET_DIR = Path(__file__).with_name("presets")


@dataclass(frozen=True)
class CbufConfig:
    banks: int
    bank_depth: int            # entries per bank
    bank_width_bytes: int      # bytes per entry

    @property
    def bank_bytes(self) -> int:
        return self.bank_depth * self.bank_width_bytes

    @property
    def total_bytes(self) -> int:
        return self.banks * self.bank_bytes


@dataclass(frozen=True)
class SdpConfig:
    bs_throughput: int         # elements per cycle
    bn_throughput: int
    ew_throughput: int
    lut: bool
    ew: bool


@dataclass(frozen=True)
class MemifConfig:
    width_bits: int
    latency_cycles: int
    max_burst: int             # beats per request

    @property
    def width_bytes(self) -> int:
        return self.width_bits // 8


@dataclass(frozen=True)
class FeatureFlags:
    winograd: bool = False
    batch: bool = False
    weight_compression: bool = False
    bdma: bool = False
    rubik: bool = False


@dataclass(frozen=True)
class HardwareConfig:
    name: str
    nvdla_version: int
    data_types: tuple
    atomic_c: int              # MAC_ATOMIC_C: input channels per atomic operation
    atomic_k: int              # MAC_ATOMIC_K: kernels per atomic operation
    memory_atomic_bytes: int   # bytes of one feature atom in memory
    cbuf: CbufConfig
    sdp: SdpConfig
    pdp_throughput: int
    cdp_throughput: int
    primary_memif: MemifConfig
    secondary_memif: MemifConfig | None
    address_width_bits: int
    features: FeatureFlags = field(default_factory=FeatureFlags)
    technology_nm: int = 28    # process node for energy and area (nvdla_sim/energy, docs/energy.md)
    energy_table: str | None = None   # a YAML of energy/area constants replacing the defaults
    # The testbench's default second-level clock gating of the units (RTL SLCG).  False is what
    # the calibration measured (NVDLA_DISABLE_CG); True also models what the gating loses: CSC's
    # weight releases that reach CDMA while its gated clock is off (units/cdma_gating.py).
    clock_gating: bool = False

    @property
    def macs(self) -> int:
        return self.atomic_c * self.atomic_k

    @property
    def widest_element_bytes(self) -> int:
        """2 when the configuration has INT16 or FP16 (nv_full), else 1."""
        return 2 if {"int16", "fp16"} & {str(t).lower() for t in self.data_types} else 1

    def summary(self) -> str:
        return (f"{self.name}: {self.atomic_c}x{self.atomic_k} MACs, atom {self.memory_atomic_bytes} B, "
                f"CBUF {self.cbuf.banks}x{self.cbuf.bank_bytes // 1024} KiB")


_NESTED = {"cbuf": CbufConfig, "sdp": SdpConfig, "primary_memif": MemifConfig,
           "secondary_memif": MemifConfig, "features": FeatureFlags}


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def _read_yaml(path: Path) -> dict:
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise NvdlaSimError(f"{path}: expected a mapping of configuration fields")
    return data


def _merge(base: dict, over: dict, where: str) -> dict:
    out = dict(base)
    for key, value in over.items():
        if key not in base:
            raise NvdlaSimError(f"{where}: unknown field '{key}' (known: {', '.join(sorted(base))})")
        if isinstance(base[key], dict) and isinstance(value, dict):
            out[key] = _merge(base[key], value, f"{where}.{key}" if where else key)
        else:
            out[key] = value
    return out


def _build(cls, data: dict, where: str):
    kwargs = {}
    names = {f.name: f for f in fields(cls)}
    for key in data:
        if key not in names:
            raise NvdlaSimError(f"{where}: unknown field '{key}'")
    for name, f in names.items():
        path = f"{where}.{name}" if where else name
        if name not in data:
            if f.default is not f.default_factory or name == "features":  # has a default
                continue
            raise NvdlaSimError(f"{path}: missing")
        value = data[name]
        sub = _NESTED.get(name)
        if sub is not None and value is not None:
            if not isinstance(value, dict):
                raise NvdlaSimError(f"{path}: expected a mapping")
            value = _build(sub, value, path)
        kwargs[name] = value
    return cls(**kwargs)


MAX_FIELD = 1 << 24                    # the largest value of a positive hardware field


def _check(cfg: HardwareConfig, where: str) -> None:
    def positive(path: str, v: Any) -> None:
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise NvdlaSimError(f"{where}{path}: must be a positive integer, got {v!r}")
        if v > MAX_FIELD:                  # sizes, widths, rates, latencies: far above any build
            raise NvdlaSimError(f"{where}{path}: must be <= {MAX_FIELD}, got {v!r}")

    def power_of_two(path: str, v: int) -> None:
        positive(path, v)
        if v & (v - 1):
            raise NvdlaSimError(f"{where}{path}: must be a power of two, got {v}")

    if cfg.nvdla_version not in (1, 2):
        raise NvdlaSimError(f"{where}nvdla_version: must be 1 or 2, got {cfg.nvdla_version!r}")
    for name in ("atomic_c", "atomic_k", "memory_atomic_bytes"):
        power_of_two(name, getattr(cfg, name))
    power_of_two("cbuf.banks", cfg.cbuf.banks)
    power_of_two("cbuf.bank_depth", cfg.cbuf.bank_depth)
    power_of_two("cbuf.bank_width_bytes", cfg.cbuf.bank_width_bytes)
    if cfg.cbuf.bank_width_bytes != cfg.atomic_c * cfg.widest_element_bytes:
        raise NvdlaSimError(f"{where}cbuf.bank_width_bytes: must be atomic_c ({cfg.atomic_c}) x "
                            f"{cfg.widest_element_bytes} bytes: one CBUF entry holds one "
                            "atomic_c-channel atom of the widest data type")
    if cfg.cbuf.banks > 32:
        raise NvdlaSimError(f"{where}cbuf.banks: at most 32 (the D_BANK fields are 5 bits)")
    if cfg.memory_atomic_bytes > cfg.atomic_c:
        raise NvdlaSimError(f"{where}memory_atomic_bytes: must not exceed atomic_c ({cfg.atomic_c})")
    if cfg.memory_atomic_bytes < cfg.widest_element_bytes:     # else 0 elements per atom
        raise NvdlaSimError(f"{where}memory_atomic_bytes: at least {cfg.widest_element_bytes} with "
                            f"data_types {list(cfg.data_types)}: an atom holds whole elements")
    if cfg.atomic_k > cfg.atomic_c * 2 and cfg.atomic_k > 64:
        raise NvdlaSimError(f"{where}atomic_k: {cfg.atomic_k} is not a valid MAC array width")
    if cfg.atomic_k < 2:        # else the run completes and only its energy report fails
        raise NvdlaSimError(f"{where}atomic_k: at least 2, got {cfg.atomic_k} (the CACC delivery "
                            "buffer and a 16-bit kernel group are atomic_k / 2 wide)")
    for name in ("bs_throughput", "bn_throughput"):
        positive(f"sdp.{name}", getattr(cfg.sdp, name))
    if not isinstance(cfg.sdp.ew_throughput, int) or cfg.sdp.ew_throughput < 0:
        raise NvdlaSimError(f"{where}sdp.ew_throughput: must be an integer >= 0")
    positive("pdp_throughput", cfg.pdp_throughput)
    positive("cdp_throughput", cfg.cdp_throughput)
    for name in ("primary_memif", "secondary_memif"):
        m = getattr(cfg, name)
        if m is None:
            if name == "primary_memif":
                raise NvdlaSimError(f"{where}primary_memif: required")
            continue
        power_of_two(f"{name}.width_bits", m.width_bits)
        if m.width_bits < 64:
            raise NvdlaSimError(f"{where}{name}.width_bits: at least 64")
        positive(f"{name}.latency_cycles", m.latency_cycles)
        positive(f"{name}.max_burst", m.max_burst)
    if cfg.address_width_bits not in (32, 64):
        raise NvdlaSimError(f"{where}address_width_bits: must be 32 or 64")
    from ..energy.technology import check_node      # the nodes CACTI models (docs/energy.md)
    check_node(cfg.technology_nm, f"{where}technology_nm")
    if cfg.energy_table is not None and not isinstance(cfg.energy_table, str):
        raise NvdlaSimError(f"{where}energy_table: expected a YAML file path, got {cfg.energy_table!r}")
    if not isinstance(cfg.clock_gating, bool):
        raise NvdlaSimError(f"{where}clock_gating: must be true or false, got {cfg.clock_gating!r}")
    unknown = set(cfg.data_types) - {"int8", "int16", "fp16"}
    if unknown or not cfg.data_types:
        raise NvdlaSimError(f"{where}data_types: must list int8, int16 or fp16, got {list(cfg.data_types)}")
    _check_energy_model(cfg, where)


def _check_energy_model(cfg: HardwareConfig, where: str) -> None:
    """What the energy report (computed after the run) needs of the configuration, checked
    before it: the energy table file loads and CACTI can size every SRAM macro (CBUF banks of at
    least 64 bytes and 2 entries...).  Each error names the field."""
    from ..energy.cacti import _check_geometry      # the rule the energy model applies
    from ..energy.model import sram_macros
    from ..energy.table import load_table
    try:
        load_table(cfg.energy_table)                # cached: the report reuses it
        for geom in sram_macros(cfg):               # CVSRAM is the scenario's (memory.cvsram_bytes)
            _check_geometry(geom)
    except NvdlaSimError as exc:
        raise NvdlaSimError(f"{where}{exc}") from None


def load_hardware(spec: str | Path | dict, overrides: dict | None = None) -> HardwareConfig:
    """A preset name, a YAML file path or a mapping (optionally `preset:` plus overrides)."""
    where = ""
    if isinstance(spec, dict):
        data = dict(spec)
    elif isinstance(spec, Path) or str(spec).endswith((".yaml", ".yml")):
        data = _read_yaml(Path(spec))
        where = f"{spec}: "
    else:
        name = str(spec)
        if name not in preset_names():
            raise NvdlaSimError(f"unknown hardware preset '{name}' (known: {', '.join(preset_names())})")
        data = {"preset": name}
    if "preset" in data:
        name = data.pop("preset")
        if name not in preset_names():
            raise NvdlaSimError(f"{where}preset: unknown hardware preset '{name}' "
                                f"(known: {', '.join(preset_names())})")
        base = _read_yaml(PRESET_DIR / f"{name}.yaml")
        base.setdefault("clock_gating", False)      # presets leave it at its default
        data = _merge(base, data, where.rstrip(": ") if where else "")
    if overrides:
        data.setdefault("clock_gating", False)
        data = _merge(data, overrides, "override")
    if "data_types" in data and isinstance(data["data_types"], list):
        data["data_types"] = tuple(data["data_types"])
    try:
        cfg = _build(HardwareConfig, data, "")
    except NvdlaSimError as exc:
        raise NvdlaSimError(f"{where}{exc}") from None
    except TypeError as exc:
        raise NvdlaSimError(f"{where}invalid configuration: {exc}") from None
    _check(cfg, where)
    return cfg


def replay_options(cfg: HardwareConfig, folder: Path) -> str:
    """The `nvdla-sim replay` option that names `cfg`: `--project NAME` when it is the preset
    itself, else `--hw-config FOLDER/hardware.yaml`, written here (overrides such as
    `clock_gating: true` or a smaller CBUF would be lost on the preset)."""
    if cfg.name in preset_names() and load_hardware(cfg.name) == cfg:
        return f"--project {cfg.name}"
    import yaml
    from dataclasses import asdict
    data = asdict(cfg)
    data["data_types"] = list(cfg.data_types)
    path = Path(folder) / "hardware.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return f"--hw-config {path}"
