"""Per-layer report of a scenario run: console table, JSON and CSV.

One row per network layer as the DLA runs it (a convolution with its fused bias, batch norm, ReLU,
element-wise and pooling is one row; its hardware layers are listed).  Columns: hardware layers,
the precision it ran in (INT8 / INT16 / FP16; FP32 for GPU fallback), cycles (first start to last
end of the row's hardware layers), MAC utilisation (useful MACs over cycles x the MACs the preset
has in that precision: half of its INT8 MACs for INT16/FP16), DRAM bytes read + written, the
bound, and in values mode the SQNR and max abs error of the row's output (dequantised INT8/INT16,
or FP16 as it is) against the float32 reference.

Bound (per row): what lowering reports for its longest hardware layer (compiler/lower.py: MAC, memory,
CBUF, or the SDP / PDP / CDP core, whichever needs the most cycles), else MAC when the row's ideal
MAC cycles (MACs / MAC array size) are at least its DRAM cycles (bytes at the scenario's GB/s),
memory otherwise -- CBUF instead of memory when a hardware layer had to fetch data or weights again
because they did not fit the convolution buffer.
"""
from __future__ import annotations

import csv
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..compiler.hwlayers import HwPlan, LayerTiming, PlanResult
from ..scenario.reference import sqnr_db
from .numbers import BYTES, MACS, fixed_or_significant, scaled

# The NVDLA performance estimator's DRAM-only totals (2048 MACs, 1 GHz, 10 GB/s, no CVSRAM).
ESTIMATOR_MS = {"resnet50": 7.11, "googlenet": 1.222, "alexnet": 0.895}
ESTIMATOR_CONFIG = "NVDLA performance estimator, 2048 MACs, 1 GHz, 10 GB/s DRAM, no CVSRAM"


@dataclass
class LayerRow:
    layer: str
    ops: list[str]
    hw_layers: list[str]
    kinds: str                         # hardware layers by kind, e.g. conv+pdp, 2conv+2pdp
    device: str                        # DLA / GPU
    macs: int
    precision: str = "INT8"            # INT8 / INT16 / FP16 on the DLA, FP32 on the GPU
    cycles: float | None = None
    mac_util: float | None = None
    dram_bytes: int | None = None
    bound: str | None = None
    sqnr_db: float | None = None
    max_abs_err: float | None = None
    note: str = ""
    energy_uj: float | None = None     # nvdla_sim/energy: this row's energy (docs/energy.md)
    energy: dict | None = None         # its split by component, event counts, pJ/MAC, share
    statistics: dict | None = None     # UNIT.REG -> counts summed over its hardware layers
                                       # (report/statistics.py); None: not counted (timing only)
    stats_flags: list[str] = field(default_factory=list)   # saturation / LUT range flags
    luts: list | None = None           # each LUT: measured error, hit counts
    sparse_cycles: float | None = None  # sparse_weights: the 2:4 model's cycles where a conv
                                       # benefits (compiler/sparsity.py; None: no benefit)


@dataclass
class Report:
    scenario: str
    network: str
    hardware: str
    macs_per_cycle: int
    clock_mhz: float
    dram_gbps: float
    cvsram_bytes: int
    mode: str
    rows: list[LayerRow] = field(default_factory=list)
    total_cycles: float | None = None
    estimator_ms: float | None = None
    precision: str = "INT8"            # the scenario's precision (the DLA layers')
    energy_mj: float | None = None     # one inference (nvdla_sim/energy/report.py)
    avg_power_mw: float | None = None
    peak_power_mw: float | None = None # highest power over any 1 us window
    area_mm2: float | None = None      # SRAM + datapath estimate (docs/energy.md)
    tops_per_w: float | None = None
    energy: dict | None = None         # per-event table, SRAM macros, split, area breakdown
    output_sqnr_db: float | None = None   # the network output(s) against float32 (values mode)
    quantization: dict | None = None   # the sub-8-bit what-if's bits and rounding (quantization.py)
    batch: int = 1                     # images of the run: cycles, bytes, MACs and energy are
                                       # the whole batch's (its latency); fps is images/s
    deployment: dict | None = None     # DLA presets: subnetworks, pools, precisions
                                       # (compiler/subnetworks.py, docs/dla-deployment.md)
    sparse_total_cycles: float | None = None   # sparse_weights: the 2:4 model's latency
    cores: dict | None = None          # dla_cores 2: per-core latency, images/s (compiler/multicore.py)
    step_cache: dict | None = None     # timing-only: steps replayed (engine/step_cache.py)

    @property
    def total_macs(self) -> int:
        return sum(r.macs for r in self.rows if r.device == "DLA")

    @property
    def total_dram_bytes(self) -> int | None:
        vals = [r.dram_bytes for r in self.rows if r.dram_bytes is not None]
        return sum(vals) if vals else None

    @property
    def ms(self) -> float | None:
        return None if self.total_cycles is None else self.total_cycles / (self.clock_mhz * 1e3)

    @property
    def fps(self) -> float | None:
        """Images per second: the batch over its latency."""
        return None if not self.ms else 1000.0 * self.batch / self.ms

    @property
    def lowest_sqnr(self) -> tuple[str, float] | None:
        vals = [(r.layer, r.sqnr_db) for r in self.rows if r.sqnr_db is not None]
        return min(vals, key=lambda v: v[1]) if vals else None

    def to_json(self) -> dict:
        out = {k: v for k, v in asdict(self).items() if k != "rows"}
        out.update(total_macs=self.total_macs, total_dram_bytes=self.total_dram_bytes, ms=self.ms,
                   fps=self.fps, lowest_sqnr=self.lowest_sqnr)
        out["rows"] = [_clean(asdict(r)) for r in self.rows]
        return _clean(out)


def _clean(d):
    """JSON has no inf/nan: write them as strings."""
    if isinstance(d, dict):
        return {k: _clean(v) for k, v in d.items()}
    if isinstance(d, (list, tuple)):
        return [_clean(v) for v in d]
    if isinstance(d, float) and not math.isfinite(d):
        return str(d)
    return d


def classify_bound(timing: LayerTiming, macs: int, macs_per_cycle: int, bytes_per_cycle: float) -> str:
    if timing.bound:
        return timing.bound
    mac_cycles = macs / macs_per_cycle
    dram = timing.dram_read_bytes + timing.dram_write_bytes
    mem_cycles = dram / bytes_per_cycle if bytes_per_cycle else 0.0
    if mem_cycles > mac_cycles:
        return "CBUF" if timing.cbuf_refetch else "memory"
    return "MAC"


def precision_macs(int8_macs: int, element_bytes: int) -> int:
    """MACs per cycle in a precision: a MAC cell does half as many 16-bit products."""
    return int8_macs // element_bytes


def build_rows(plan: HwPlan, clock_mhz: float, dram_gbps: float, result: PlanResult | None = None,
               reference: dict | None = None, values: dict | None = None,
               batch: int = 1) -> list[LayerRow]:
    """One row per network layer; `batch` images: MACs of every image (the row's cycles and
    bytes are the batch's)."""
    hw = plan.hw
    timing = {t.name: t for t in result.layers} if result else {}
    bytes_per_cycle = dram_gbps * 1e9 / (clock_mhz * 1e6)
    rows = []
    for row in plan.rows:
        layers = plan.layers_of_row(row)
        counts: dict[str, int] = {}
        for layer in layers:
            counts[layer.kind] = counts.get(layer.kind, 0) + 1
        kinds = [f"{n}{k}" if n > 1 else k for k, n in counts.items()]
        ops = []
        for layer in layers:
            ops += [o for o in layer.ops if o not in ops]
        device = "GPU" if all(layer.kind == "gpu" for layer in layers) else "DLA"
        # a row's layers share its precision (INT8 <-> FP16 reformat passes aside: reformat.py)
        dtype = plan.layer_dtype(next((layer for layer in layers
                                       if not layer.reformat), layers[0]))
        macs_per_cycle = precision_macs(hw.macs, dtype.bytes)
        r = LayerRow(row, ops, [layer.name for layer in layers], "+".join(kinds), device,
                     sum(layer.macs for layer in layers) * batch,
                     "FP32" if device == "GPU" else dtype.name)
        notes = list(dict.fromkeys(n for layer in layers for n in layer.notes))
        if device == "GPU":
            notes.insert(0, "GPU fallback: " + "; ".join(layer.reason for layer in layers))
        r.note = "; ".join(notes)
        ts = [timing[layer.name] for layer in layers if layer.name in timing]
        if ts and device == "DLA":
            r.cycles = max(t.end_cycle for t in ts) - min(t.start_cycle for t in ts)
            r.dram_bytes = sum(t.dram_read_bytes + t.dram_write_bytes for t in ts)
            if r.cycles > 0:
                r.mac_util = r.macs / (r.cycles * macs_per_cycle)
            told = [t for t in ts if t.bound]
            whole = LayerTiming(row, 0, r.cycles, r.dram_bytes, 0,
                                bound=max(told, key=lambda t: t.cycles).bound if told else None,
                                cbuf_refetch=any(t.cbuf_refetch for t in ts))
            r.bound = classify_bound(whole, r.macs, macs_per_cycle, bytes_per_cycle)
        attach_statistics(r, plan, layers, timing, batch)
        out_tensor = ops[-1]
        if reference is not None and values is not None and out_tensor in values:
            ref = reference[out_tensor]
            got = values[out_tensor]
            r.sqnr_db = sqnr_db(ref, got)
            r.max_abs_err = float(abs(ref.astype("float64") - got).max())
        rows.append(r)
    return rows


def _plan_precision(plan: HwPlan) -> str:
    """The plan's precision; INT8+FP16 when `precision: [int8, fp16]` mixed them."""
    used = {plan.layer_dtype(layer).name for layer in plan.layers
            if layer.on_dla and not layer.reformat}
    return "INT8+FP16" if {"INT8", "FP16"} <= used else plan.dtype.name


def build_report(prep, result: PlanResult | None, values: dict | None = None) -> Report:
    """The report of a prepared scenario (`result` None: the compile-only view, no timing)."""
    scn = prep.scenario
    rep = Report(scn.name, prep.network.name, scn.hardware.name,
                 precision_macs(scn.hardware.macs, prep.plan.dtype.bytes), scn.clock_mhz,
                 scn.memory.dram_gbps, scn.memory.cvsram_bytes, scn.mode,
                 precision=_plan_precision(prep.plan), batch=getattr(scn, "batch", 1))
    rep.rows = build_rows(prep.plan, scn.clock_mhz, scn.memory.dram_gbps, result, prep.reference, values,
                          rep.batch)
    rep.total_cycles = result.total_cycles if result else None
    if getattr(prep, "precisions", None) and rep.precision == "INT8+FP16":
        for r in rep.rows:                  # [int8, fp16]: why a row left INT8 (reformat.py)
            p, why = prep.precisions.get(r.ops[-1] if r.ops else "", ("", ""))
            if p == "fp16":
                r.note = "; ".join(n for n in (f"FP16: {why}", r.note) if n)
    if getattr(scn, "sparse_weights", False) and result is not None:
        from ..compiler.sparsity import attach_sparse_cycles
        attach_sparse_cycles(rep, prep.plan, result)
    if scn.network.source == "builtin" and rep.macs_per_cycle == 2048:
        rep.estimator_ms = ESTIMATOR_MS.get(scn.network.builtin)   # its figures are for 2048 MACs
    from ..energy.report import attach_energy
    attach_energy(rep, prep, result)
    attach_host(rep, prep, result)          # hardware vs end-to-end time (nvdla_sim/host)
    attach_quantization(rep, prep, values)  # output SQNR, sub-8-bit settings (quantization.py)
    from ..engine.step_cache import summary as step_cache_summary
    rep.step_cache = step_cache_summary(result)
    return rep


def _fmt(v, spec: str, none: str = "-") -> str:
    if v is None:
        return none
    if isinstance(v, float) and not math.isfinite(v):
        return "inf" if v > 0 else "-inf"
    return format(v, spec)


def format_console(rep: Report) -> str:
    head = (f"{rep.scenario}: {rep.network} on {rep.hardware} ({rep.macs_per_cycle} MACs"
            f"{'' if rep.precision == 'INT8' else ' ' + rep.precision}), "
            f"{rep.clock_mhz:g} MHz, DRAM {rep.dram_gbps:g} GB/s, "
            f"{'CVSRAM ' + str(rep.cvsram_bytes) + ' B' if rep.cvsram_bytes else 'no CVSRAM'}, {rep.mode}")
    width = max([len("layer")] + [len(r.layer) for r in rep.rows])
    cols = (f"{'layer':<{width}}  {'hw layers':<14} {'prec':<5} {'MMACs':>9} {'cycles':>10} {'MAC%':>6} "
            f"{'DRAM KB':>9} {'bound':<7} {'SQNR dB':>8} {'max err':>9} {'uJ':>8}")
    lines = [head, cols, "-" * len(cols)]
    for r in rep.rows:
        hwl = "GPU" if r.device == "GPU" else r.kinds
        lines.append(
            f"{r.layer:<{width}}  {hwl:<14} {r.precision:<5} {r.macs / 1e6:>9.2f} "
            f"{_fmt(r.cycles, '>10.0f'):>10} "
            f"{_fmt(None if r.mac_util is None else 100 * r.mac_util, '>6.1f'):>6} "
            f"{_fmt(None if r.dram_bytes is None else r.dram_bytes / 1024, '>9.1f'):>9} "
            f"{_fmt(r.bound, '<7'):<7} {_fmt(r.sqnr_db, '>8.1f'):>8} {_fmt(r.max_abs_err, '>9.4f'):>9} "
            f"{_fmt(r.energy_uj, '>8.1f'):>8}"
            + (f"  {r.note}" if r.note else ""))
    lines.append("-" * len(cols))
    gpu = sum(r.device == "GPU" for r in rep.rows)
    total = f"total: {scaled(rep.total_macs, MACS)} on the DLA"
    if rep.total_cycles == 0:
        total += ", no hardware layer ran on the DLA"
    elif rep.total_cycles is not None:
        total += (f", {rep.total_cycles:.0f} cycles = {fixed_or_significant(rep.ms)} ms at "
                  f"{rep.clock_mhz:g} MHz "
                  + (f"= {rep.fps:.1f} fps" if rep.batch == 1 else
                     f"for a batch of {rep.batch} = {rep.fps:.1f} images/s"))
        if rep.total_dram_bytes is not None:
            total += f", DRAM {scaled(rep.total_dram_bytes, BYTES, 1)}"
    if gpu:
        total += f" ({gpu} GPU-fallback layer{'s' if gpu > 1 else ''} not in DLA time)"
    lines.append(total)
    if rep.lowest_sqnr:
        lines.append(f"lowest layer SQNR: {rep.lowest_sqnr[1]:.1f} dB ({rep.lowest_sqnr[0]})")
    lines += quantization_lines(rep)
    if rep.estimator_ms is not None:
        per_image = rep.ms / rep.batch if rep.ms else None     # the estimator's ms are per image
        vs = (f" (this run {per_image / rep.estimator_ms:.2f}x"
              + (" per image" if rep.batch > 1 else "") + "; docs/network-timing.md)") if per_image else ""
        lines.append(f"{ESTIMATOR_CONFIG}: {rep.estimator_ms} ms" + vs)
    from ..energy.report import console_lines
    lines += console_lines(rep)
    lines += host_lines(rep)
    lines += statistics_lines(rep)
    from ..compiler.sparsity import console_line as sparse_line
    lines += sparse_line(rep)
    from ..compiler.subnetworks import console_lines as deployment_lines
    lines += deployment_lines(rep.deployment)
    from ..compiler.multicore import console_lines as cores_lines
    lines += cores_lines(rep.cores)
    from ..engine.step_cache import console_lines as step_cache_lines
    lines += step_cache_lines(rep.step_cache)
    return "\n".join(lines)


CSV_COLUMNS = ("layer", "device", "kinds", "hw_layers", "precision", "macs", "cycles", "mac_util",
               "dram_bytes", "bound", "sqnr_db", "max_abs_err", "note")
from ..host.end_to_end import attach_host, host_lines  # noqa: E402
from .quantization import attach_quantization, quantization_lines  # noqa: E402
from ..energy.report import CSV_COLUMNS as _ENERGY_COLUMNS, csv_values as _energy_values  # noqa: E402
CSV_COLUMNS += _ENERGY_COLUMNS
from .statistics import STATS_CSV_COLUMNS, attach_statistics, any_counter_nonzero, \
    statistics_lines, stats_csv_values  # noqa: E402
CSV_COLUMNS += STATS_CSV_COLUMNS


def write_csv(rep: Report, path: Path) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_COLUMNS)
        for r in rep.rows:
            d = asdict(r)
            d["hw_layers"] = " ".join(r.hw_layers)
            d.update(_energy_values(r))
            d.update(stats_csv_values(r))
            w.writerow(["" if d[c] is None else d[c] for c in CSV_COLUMNS])


def write_json(rep: Report, path: Path) -> None:
    path.write_text(json.dumps(rep.to_json(), indent=1) + "\n")


def write_reports(rep: Report, prep, result: PlanResult | None, out_dir: Path,
                  plotter=None) -> list[Path]:
    """Console table, JSON, CSV, timeline and plots as the scenario's `outputs` asks; returns
    files written.  `plotter` (report.plot_worker.start_plotter, started with the run) draws the
    figures while the tables and the trace are written; without one they are drawn here."""
    from .plot_worker import Plotter
    spec = prep.scenario.outputs
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    plotter = plotter or Plotter()
    figures = []                                # (function, (data, path)), drawn by `plotter`
    if spec.draw_plots(prep.scenario.values) and rep.total_cycles is not None:
        from .plots import plot_layer_cycles
        figures.append((plot_layer_cycles, (rep, out_dir / "layer_cycles.png")))
        if rep.energy_mj is not None:
            from ..energy.plots import plot_layer_energy
            figures.append((plot_layer_energy, (rep, out_dir / "layer_energy.png")))
        if any_counter_nonzero(rep):
            from .plots import plot_layer_statistics
            figures.append((plot_layer_statistics, (rep, out_dir / "layer_statistics.png")))
    timeline = spec.timeline and result is not None and result.engine_result is not None
    if timeline:
        from .timeline import draw_utilization, memory_tracks, network_layer_spans, utilization
        engine = result.engine_result.engine
        tracks, layers = memory_tracks(engine), network_layer_spans(rep.rows, result.layers)
        binned = utilization(engine.activity, tracks, result.total_cycles, rep.scenario,
                             layers=layers)
        figures.append((draw_utilization, (binned, out_dir / "timeline.png")))
    plotter.submit(figures)
    written = []
    if "console" in spec.formats:
        print(format_console(rep))
    if "json" in spec.formats:
        written.append(out_dir / "report.json")
        write_json(rep, written[-1])
    if "csv" in spec.formats:
        written.append(out_dir / "report.csv")
        write_csv(rep, written[-1])
    if timeline:
        from .timeline import write_trace_events
        written.append(out_dir / "timeline.trace.json")
        write_trace_events(engine.activity, tracks, written[-1], rep.clock_mhz, rep.scenario,
                           layers=layers, total_cycles=result.total_cycles)
    plotter.wait()
    return written + [args[1] for _, args in figures]
