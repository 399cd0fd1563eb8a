"""Energy of a run: events counted per hardware layer, priced by the model's per-event table.

Counts per hardware layer (from the plan's geometry and what the engine recorded for it):
  dram_bit          DRAM bytes read + written x 8 (LayerTiming, as the engine moved them)
  cvsram_read/write CVSRAM bytes / the secondary interface width (one macro access per beat)
  cbuf_write        CDMA's CBUF writes: input cube + weights (and, when the layer re-fetched
                    because they did not fit, every byte it read beyond them) / CBUF entry bytes
  cbuf_read         CSC's reads: one data entry per atomic operation, and per stripe and
                    package the kernel group's weights (kernels x atomic_c elements) -- the CSC
                    stripe geometry of the timing model (timing/conv.csc_geometry)
  mac               useful multiply-accumulates (the report's MACs)
  cacc_add          one accumulation per kernel per atomic operation
  cacc_abuf_*       assembly buffer read + write per atomic operation (INT8: two 34-bit halves)
  cacc_dbuf_*       delivery buffer write + read per output atom (INT8: two macro rows)
  sdp_add/mult      per element: the ALU / multiplier of each stage used, the output converter
                    (one multiply + add) and the LUT interpolation (one multiply + add)
  pdp_add/mult      kernel-window adds/compares per output element; average: one multiply;
                    line buffer one read + write per `pdp_throughput` input elements
  cdp_add/mult      LRN: a square and an add per window element, two multiplies (LUT
                    interpolation, result) and an add per element
  leak_cycle        the row's cycles (whole-accelerator leakage)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..compiler.hwlayers import HwLayer, HwPlan, LayerTiming
from ..timing.conv import csc_geometry
from .model import COMPONENTS, EnergyModel, component_of, event_key


def _add(d: dict, key: str, v: float) -> None:
    if v:
        # counts end up in report.json: keep them plain Python numbers (shapes may be numpy)
        d[key] = d.get(key, 0) + (v.item() if isinstance(v, np.generic) else v)


def layer_dtype(plan: HwPlan, layer: HwLayer):
    """The precision a hardware layer computes in (per layer when the plan mixes them)."""
    f = getattr(plan, "layer_dtype", None)
    return f(layer) if f is not None else plan.dtype


def _is_image(plan: HwPlan, layer: HwLayer) -> bool:
    # The compiler reads a network input of at most 4 channels as an image (emit_conv.py).
    c = layer.conv
    return (layer.inputs and layer.inputs[0].tensor == plan.network.input_name
            and c.in_channels <= 4)


def conv_counts(hw, plan: HwPlan, layer: HwLayer, timing: LayerTiming | None,
                out: dict) -> None:
    c = layer.conv
    dt = layer_dtype(plan, layer)
    elem = dt.bytes
    entry = hw.cbuf.bank_width_bytes
    group = hw.atomic_k // elem
    image = _is_image(plan, layer)
    r, s = c.kernel
    kernel_c = s * (1 if c.in_channels == 1 else 4) if image else c.in_channels
    geom = csc_geometry(hw, image, c.out_w, c.out_h, r, 1 if image else s, kernel_c,
                        c.out_channels, kernel_group=group, elem_bytes=elem)
    atomic_ops = geom.mac_cycles
    stripes = len(geom.stripes)
    weight_entries = sum(-(-k * hw.atomic_c * elem // entry) for k in geom.group_kernels)
    _add(out, "cbuf_read", atomic_ops + geom.packages * stripes * weight_entries)
    data_bytes = c.in_channels * c.in_h * c.in_w * elem
    weight_bytes = c.out_channels * c.in_channels * r * s * elem
    fetched = data_bytes + weight_bytes
    if timing is not None and timing.cbuf_refetch:
        read = timing.dram_read_bytes + timing.cvsram_read_bytes
        fetched = max(fetched, read - sdp_operand_bytes(plan, layer))
    _add(out, "cbuf_write", math.ceil(fetched / entry))
    _add(out, event_key("mac", dt), c.macs)
    _add(out, event_key("cacc_add", dt), geom.packages * sum(geom.stripes) * sum(geom.group_kernels))
    halves = 2 if elem == 1 else 1
    _add(out, event_key("cacc_abuf_read", dt), atomic_ops * halves)
    _add(out, event_key("cacc_abuf_write", dt), atomic_ops * halves)
    out_atoms = sum(geom.stripes) * len(geom.group_kernels)
    _add(out, "cacc_dbuf_write", out_atoms * halves)
    _add(out, "cacc_dbuf_read", out_atoms * halves)


def sdp_operand_bytes(plan: HwPlan, layer: HwLayer) -> int:
    """Bytes the SDP RDMA reads for element-wise operands (per-channel arrays neglected)."""
    if layer.sdp is None:
        return 0
    s = layer.sdp
    n = sum(1 for p in s.post_ops if p.operand is not None)
    return n * s.channels * s.h * s.w * layer_dtype(plan, layer).bytes


def sdp_counts(layer: HwLayer, dt, out: dict) -> None:
    s = layer.sdp
    elems = s.channels * s.h * s.w
    adds = mults = 1                            # output converter: multiply + add (shift/offset)
    for st in s.stages:
        adds += st.alu is not None
        mults += st.mul is not None
        if st.lut:
            adds += 1
            mults += 1
    _add(out, event_key("sdp_add", dt), elems * adds)
    _add(out, event_key("sdp_mult", dt), elems * mults)


def pdp_counts(hw, layer: HwLayer, dt, out: dict) -> None:
    p = layer.pdp
    outs = p.channels * p.out_h * p.out_w
    _add(out, event_key("pdp_add", dt), outs * p.kernel[0] * p.kernel[1])
    if p.method == "avg":
        _add(out, event_key("pdp_mult", dt), outs)
    lines = math.ceil(p.channels * p.in_h * p.in_w / hw.pdp_throughput)
    _add(out, "pdp_lbuf_read", lines)
    _add(out, "pdp_lbuf_write", lines)


def cdp_counts(layer: HwLayer, dt, out: dict) -> None:
    c = layer.cdp
    elems = c.channels * c.h * c.w
    _add(out, event_key("cdp_mult", dt), elems * (c.size + 2))
    _add(out, event_key("cdp_add", dt), elems * (c.size + 1))


def layer_counts(hw, plan: HwPlan, layer: HwLayer, timing: LayerTiming | None) -> dict:
    """Counted events of one DLA hardware layer (keys of model.COMPONENT_OF, no leakage)."""
    out: dict[str, float] = {}
    if timing is not None:
        _add(out, "dram_bit", 8 * (timing.dram_read_bytes + timing.dram_write_bytes))
        if hw.secondary_memif is not None:
            w = hw.secondary_memif.width_bytes
            _add(out, "cvsram_read", math.ceil(timing.cvsram_read_bytes / w))
            _add(out, "cvsram_write", math.ceil(timing.cvsram_write_bytes / w))
    if layer.conv is not None:
        conv_counts(hw, plan, layer, timing, out)
    dt = layer_dtype(plan, layer)
    if layer.sdp is not None:
        sdp_counts(layer, dt, out)
    if layer.pdp is not None:
        pdp_counts(hw, layer, dt, out)
    if layer.cdp is not None:
        cdp_counts(layer, dt, out)
    return out


def price(counts: dict, pj: dict) -> dict[str, float]:
    """pJ per component of the counted events."""
    out = {c: 0.0 for c in COMPONENTS}
    for key, n in counts.items():
        if key not in pj:
            if n:
                raise KeyError(f"no energy for event '{key}'")
            continue
        out[component_of(key)] += n * pj[key]
    return out


@dataclass
class RowEnergy:
    row: str
    counts: dict
    split_pj: dict
    cycles: float

    @property
    def pj(self) -> float:
        return sum(self.split_pj.values())


@dataclass
class RunEnergy:
    model: EnergyModel
    rows: list[RowEnergy]
    total_cycles: float
    idle_leak_pj: float                      # leakage of cycles outside every row's span
    spans: list[tuple[float, float, float]] = field(default_factory=list)   # start, end, pJ

    @property
    def total_pj(self) -> float:
        return sum(r.pj for r in self.rows) + self.idle_leak_pj

    def split_pj(self) -> dict[str, float]:
        out = {c: 0.0 for c in COMPONENTS}
        for r in self.rows:
            for k, v in r.split_pj.items():
                out[k] += v
        out["leakage"] += self.idle_leak_pj
        return out

    def peak_power_mw(self, window_us: float = 1.0) -> float:
        """Highest average power over any `window_us` window of the run (the whole run if it is
        shorter): dynamic energy spread evenly over each hardware layer's span, plus leakage."""
        cyc = self.model.clock_mhz * window_us
        width = min(cyc, self.total_cycles) if self.total_cycles else 0.0
        if width <= 0:
            return 0.0
        pts = sorted({0.0, self.total_cycles} | {x for s, e, _ in self.spans for x in (s, e)})
        starts = {p for p in pts} | {p - width for p in pts}
        starts = [min(max(0.0, s), self.total_cycles - width) for s in starts]
        best = 0.0
        for s in starts:
            e = s + width
            dyn = sum(pj * (min(e, b) - max(s, a)) / (b - a)
                      for a, b, pj in self.spans if b > a and min(e, b) > max(s, a))
            best = max(best, dyn)
        leak_pj = self.model.pj["leak_cycle"] * width
        return (best + leak_pj) / width * self.model.clock_mhz * 1e-3   # pJ/cycle -> mW


def run_energy(model: EnergyModel, plan: HwPlan, timings: list[LayerTiming],
               total_cycles: float) -> RunEnergy:
    hw = plan.hw
    by_name = {t.name: t for t in timings}
    rows, spans = [], []
    covered = 0.0
    for row in plan.rows:
        layers = [layer for layer in plan.layers_of_row(row) if layer.on_dla]
        counts: dict[str, float] = {}
        ts = [by_name[layer.name] for layer in layers if layer.name in by_name]
        for layer in layers:
            t = by_name.get(layer.name)
            own = layer_counts(hw, plan, layer, t)
            for k, v in own.items():
                _add(counts, k, v)
            if t is not None:
                dyn = sum(price(own, model.pj).values())
                spans.append((t.start_cycle, t.end_cycle, dyn))
        cycles = (max(t.end_cycle for t in ts) - min(t.start_cycle for t in ts)) if ts else 0.0
        covered += cycles
        _add(counts, "leak_cycle", cycles)
        rows.append(RowEnergy(row, counts, price(counts, model.pj), cycles))
    idle = max(0.0, total_cycles - covered) * model.pj["leak_cycle"]
    return RunEnergy(model, rows, total_cycles, idle, spans)
