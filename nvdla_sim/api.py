"""The public Python API: run a model or a scenario, get a report object back.

    import nvdla_sim
    r = nvdla_sim.run("model.onnx", hardware="nv_large", precision="int8")
    r.total_cycles, r.ms, r.fps, r.lowest_sqnr
    nvdla_sim.run("model.onnx", hardware="nv_full", batch=16)   # 16 images, one program; fps = images/s
    r.to_pandas()                 # one row per network layer (needs pandas)
    r.outputs["prob_1"]           # {"reference": float32 array, "dla": dequantised DLA result}

Everything behind this module (scenario schema, compiler, runner, report tables) is free to change;
this signature and the `RunReport` fields are what notebooks and the `nvdla-sim run MODEL.onnx`
command rely on.  docs/api.md has a worked example.
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .errors import NvdlaSimError

PRECISIONS = ("int8", "int16", "fp16")


@dataclass
class RunReport:
    """What one run produced: totals, per-layer rows, the network outputs."""
    scenario: dict                            # the scenario that ran (what --save-scenario writes)
    report: Any                               # nvdla_sim.report.tables.Report (internal detail)
    outputs: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    hardware_layers: int = 0                  # DLA hardware layers (conv, SDP, PDP, CDP passes)
    gpu_layers: int = 0                       # layers run beside the DLA (GPU fallback)

    @property
    def output_sqnr(self) -> dict[str, float]:
        """SQNR (dB) of each network output's DLA result against the float32 reference."""
        from .scenario.reference import sqnr_db
        return {name: float(sqnr_db(a["reference"], a["dla"])) for name, a in self.outputs.items()
                if "reference" in a and "dla" in a}

    @property
    def total_cycles(self) -> float | None:
        return self.report.total_cycles

    @property
    def ms(self) -> float | None:
        return self.report.ms

    @property
    def fps(self) -> float | None:
        """Images per second (a batch: its images over its latency `ms`)."""
        return self.report.fps

    @property
    def batch(self) -> int:
        """Images the run took through one register program (outputs stacked (N, ...))."""
        return self.report.batch

    @property
    def total_macs(self) -> int:
        return self.report.total_macs

    @property
    def dram_bytes(self) -> int | None:
        return self.report.total_dram_bytes

    @property
    def lowest_sqnr(self) -> tuple[str, float] | None:
        return self.report.lowest_sqnr

    @property
    def layers(self) -> list[dict]:
        """One dict per network layer (device DLA/GPU, cycles, MACs, DRAM bytes, SQNR, note)."""
        rows = []
        for row in self.report.rows:
            d = asdict(row)
            d.pop("energy", None)
            rows.append(d)
        return rows

    @property
    def gpu_fallback(self) -> dict[str, str]:
        """Layer -> why it runs on the GPU."""
        return {r.layer: r.note.removeprefix("GPU fallback: ") for r in self.report.rows
                if r.device == "GPU"}

    def to_pandas(self):
        """The per-layer rows as a pandas DataFrame."""
        try:
            import pandas as pd
        except ImportError:
            raise NvdlaSimError("to_pandas() needs pandas (pip install pandas)") from None
        return pd.DataFrame(self.layers)

    def to_json(self) -> dict:
        return self.report.to_json()

    def save_outputs(self, directory: str | Path) -> list[Path]:
        """Each network output as `<name>.reference.npy` (float32) and `<name>.dla.npy`."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        written = []
        for name, arrays in self.outputs.items():
            stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
            for kind, value in arrays.items():
                written.append(directory / f"{stem}.{kind}.npy")
                np.save(written[-1], value)
        return written


def scenario_dict(model: str | Path, *, hardware: str = "nv_large", precision: str = "int8",
                  mode: str = "values+timing", gpu_fallback: bool = True,
                  input: str | Path | None = None, weights_seed: int | None = None,
                  input_seed: int = 1, batch: int = 1, clock_mhz: float | None = None,
                  name: str | None = None, out_dir: str | Path | None = None) -> dict:
    """The scenario fields a model run uses: one field per argument (what --save-scenario writes)."""
    model = Path(model)
    if precision not in PRECISIONS:
        raise NvdlaSimError(f"precision '{precision}' (choose one of {', '.join(PRECISIONS)})")
    name = name or model.stem
    d: dict[str, Any] = {"name": name, "hardware": hardware}
    if clock_mhz is not None:
        d["clock_mhz"] = clock_mhz
    d["network"] = {"onnx": str(model.resolve())}
    d["precision"] = precision
    if batch != 1:
        d["batch"] = batch                    # checked by the schema (hardware, 1..32)
    d["input"] = {"npy": str(Path(input).resolve())} if input is not None else {"seed": input_seed}
    if weights_seed is not None:
        d["weights"] = {"seed": int(weights_seed)}
    d["mode"] = mode
    d["gpu_fallback"] = bool(gpu_fallback)
    d["outputs"] = {"directory": str(out_dir or Path("out") / name), "formats": ["console", "json", "csv"],
                    "plots": False}
    return d


def _network_outputs(prep, values) -> dict[str, dict[str, np.ndarray]]:
    net = prep.network
    batch = prep.scenario.batch
    names = getattr(net, "onnx_outputs", None) or {t: t for t in net.outputs}
    dims = getattr(net, "onnx_output_dims", {})
    out: dict[str, dict[str, np.ndarray]] = {}
    for onnx_name, tensor in names.items():
        arrays = {}
        if prep.reference is not None:
            arrays["reference"] = prep.reference[tensor]
        if values is not None and tensor in values:
            arrays["dla"] = np.asarray(values[tensor], np.float32)
        shape = dims.get(onnx_name)         # the ONNX output's own shape (batch included)
        if shape is not None and batch > 1 and shape and shape[0] == 1:
            shape = (batch,) + tuple(shape[1:])     # N images of the model's one
        if shape is not None:
            arrays = {k: v.reshape(shape) if v.size == int(np.prod(shape)) else v
                      for k, v in arrays.items()}
        if arrays:
            out[onnx_name] = arrays
    return out


def run(model_or_scenario: str | Path | dict, *, hardware: str | None = None,
        precision: str | None = None, mode: str | None = None, gpu_fallback: bool | None = None,
        input: str | Path | None = None, weights_seed: int | None = None,
        batch: int | None = None, out_dir: str | Path | None = None,
        quiet: bool = True, plots: bool | None = None) -> RunReport:
    """Run an ONNX model, a scenario YAML file or a scenario dict; return a `RunReport`.

    For a model, arguments left None take their defaults (nv_large, int8, values+timing, GPU
    fallback on, the model's own weights, batch 1); for a scenario they override its fields.
    `batch` N runs N images through one register program (hardware with the batch feature:
    nv_full); `fps` is then images/s and each output is stacked (N, ...).
    `quiet` leaves the console table out (the CLI prints it); `plots` overrides
    `outputs.plots` (default: as the scenario says, else only in values mode).
    """
    import contextlib
    import io

    from .scenario.runner import batch_values, prepare
    from .scenario.schema import parse_scenario
    from .yaml_file import read_yaml

    src = model_or_scenario
    base = Path(".")
    model = not isinstance(src, dict) and str(src).lower().endswith(".onnx")
    if isinstance(src, dict):
        data = dict(src)
    elif model:
        data = scenario_dict(src, hardware=hardware or "nv_large", precision=precision or "int8",
                             mode=mode or "values+timing",
                             gpu_fallback=True if gpu_fallback is None else gpu_fallback,
                             input=input, weights_seed=weights_seed, batch=batch or 1,
                             out_dir=out_dir)
    else:
        path = Path(src)
        data = read_yaml(path, "scenario file")
        if not isinstance(data, dict):
            raise NvdlaSimError(f"{path}: a scenario file holds a mapping of fields")
        base = path.resolve().parent
        for key, value in (("hardware", hardware), ("precision", precision), ("mode", mode),
                           ("gpu_fallback", gpu_fallback)):
            if value is not None:
                data[key] = value
        if input is not None:
            data["input"] = {"npy": str(Path(input).resolve())}
        if weights_seed is not None:
            data["weights"] = {"seed": int(weights_seed)}
    if batch is not None and not model:
        data["batch"] = batch                 # overrides a scenario's field
    scn = parse_scenario(data, base, str(data.get("name", "scenario")))
    if out_dir is not None:
        scn.outputs.directory = Path(out_dir)
    if quiet:
        scn.outputs.formats = tuple(f for f in scn.outputs.formats if f != "console")
    if plots is not None:
        scn.outputs.plots = plots
    from .report.plot_worker import draws_figures, start_plotter
    plotter = start_plotter(draws_figures(scn))    # imports matplotlib while the run goes
    prep = prepare(scn)
    from .energy.report import check_energy
    check_energy(prep)                                # CACTI's refusals before the run
    from .compiler.multicore import run_prepared      # lower_and_run, or dla_cores: 2
    from .report.tables import build_report, write_reports
    from .scenario.runner import context
    with contextlib.redirect_stdout(io.StringIO()) if quiet else contextlib.nullcontext():
        result, cores = run_prepared(prep, context(prep))
    values = batch_values(prep.plan, result) if scn.values else None
    report = build_report(prep, result, values)
    report.cores = cores
    _plain_numbers(report)
    write_reports(report, prep, result, scn.outputs.directory, plotter)
    layers = prep.plan.layers
    return RunReport(data, report, _network_outputs(prep, values),
                     hardware_layers=sum(layer.kind != "gpu" for layer in layers),
                     gpu_layers=sum(layer.kind == "gpu" for layer in layers))


def _plain(value):
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    return value.item() if isinstance(value, np.generic) else value


def _plain_numbers(report) -> None:
    """numpy scalars in report rows (some energy counts) -> Python numbers, so report.json writes."""
    for row in report.rows:
        for key, value in vars(row).items():
            setattr(row, key, _plain(value))
    report.energy = _plain(report.energy)


def save_scenario(data: dict, path: str | Path) -> None:
    """Write a scenario dict as YAML, paths made relative to the file's folder where possible."""
    import yaml
    path = Path(path)
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in data.items()}
    for section, key in (("network", "onnx"), ("input", "npy")):
        if isinstance(out.get(section), dict) and key in out[section]:
            target = Path(out[section][key])
            try:
                out[section][key] = os.path.relpath(target, path.resolve().parent)
            except ValueError:                    # another drive (Windows): keep it absolute
                out[section][key] = str(target)
    path.write_text(yaml.safe_dump(out, sort_keys=False))
