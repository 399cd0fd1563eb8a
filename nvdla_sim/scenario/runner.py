"""`nvdla-sim run`: a scenario from YAML to report.

    load_scenario -> build the network and its weights -> DLA support checks -> hardware-layer plan
    -> (values mode) float32 reference + calibration and per-layer parameters in the scenario's
       precision (INT8 / INT16 integers, or FP16 values)
    -> compiler.lower.lower_and_run(plan, ctx): one register program on the engine
    -> report: per-layer cycles, MAC utilisation, DRAM bytes, bound, SQNR; totals; plots

`lower_and_run` lowers every DLA layer of `plan.layers` (in order; `HwLayer.quant` holds the
integer parameters in values mode) into register writes, places the tensors, runs the program on
the engine with `ctx.dram` / `ctx.cvsram`, calls `ctx.gpu_fallback(layer, inputs)` for `gpu`
layers in values mode, and returns per-layer timing and, in values mode, the content of every
root buffer (int8, int16 or float16 elements).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..compiler.hwlayers import HwLayer, HwPlan, LoweringContext, build_plan
from ..compiler.lower import lower_and_run
from ..compiler.network import Network
from ..compiler.support import SupportReport, check_support
from ..compiler.zoo import BUILTIN
from ..errors import NvdlaSimError
from .quantize import (Calibration, QuantConfig, dequantize, quantize_input, quantize_plan,
                       quantize_tensor)
from .reference import run_op, run_reference, sqnr_db
from .limits import check_memory
from .schema import Scenario, load_scenario
from .weights import Weights, check_weights, load_npz, prune, random_weights, stand_in_weights

@dataclass
class Prepared:
    """A scenario compiled up to the seam."""
    scenario: Scenario
    network: Network
    weights: Weights | None
    support: SupportReport
    plan: HwPlan
    input: np.ndarray                           # float32 (C, H, W); a batch: (N, C, H, W)
    reference: dict[str, np.ndarray] | None = None      # float32 value of every tensor (a batch:
                                                        # each stacked (N, ...) over the images)
    calibration: Calibration | None = None
    precisions: dict | None = None      # `precision: [int8, fp16]`: op -> (precision, why)


def build_network(scn: Scenario) -> tuple[Network, Weights | None]:
    spec = scn.network
    if spec.source == "builtin":
        return BUILTIN[spec.builtin](), None
    if spec.source == "onnx":
        from .onnx_import import load_onnx
        try:
            return load_onnx(spec.path)
        except NvdlaSimError as exc:
            raise NvdlaSimError(f"network.onnx: {exc}") from None
    return spec.network, None


def network_weights(scn: Scenario, network: Network, model_weights: Weights | None) -> Weights:
    w = scn.weights
    if w.source == "npz":
        try:
            return load_npz(w.path, network)
        except NvdlaSimError as exc:
            raise NvdlaSimError(f"weights.npz: {exc}") from None
    if w.source == "model" and model_weights is not None:
        check_weights(network, model_weights, "network.onnx")
        return model_weights
    # timing only: stand-ins of the right shapes (weights.stand_in_weights; same register writes)
    # (a pruned network's compressed weight sizes depend on the values: real weights then)
    rnd = (random_weights if scn.values or w.sparsity > 0 else stand_in_weights)(network, w.seed)
    if model_weights:                     # ONNX with a seed: keep the model's constants for non-weights
        rnd = {**model_weights, **rnd}
    return rnd


def make_input(scn: Scenario, network: Network) -> np.ndarray:
    """The float32 input (C, H, W); with `batch: N`, (N, C, H, W): a .npy of N images, or N
    seeded images drawn one after another (image 0 is the batch-1 input)."""
    s = network.input_shape
    shape = (s.c, s.h, s.w)
    spec = scn.input
    n = scn.batch
    if n > 1 and spec.source == "npy":
        try:
            x = np.load(spec.path)
        except (OSError, ValueError) as exc:
            raise NvdlaSimError(f"input.npy: {spec.path}: not a readable .npy file ({exc})") from None
        if tuple(x.shape) != (n,) + shape:
            raise NvdlaSimError(f"input.npy: {spec.path} holds shape {tuple(x.shape)}, batch {n} "
                                f"of network '{network.name}' expects {(n,) + shape} (N, C, H, W)")
        return np.ascontiguousarray(x, np.float32)
    if n > 1:
        rng = np.random.default_rng(spec.seed)
        draw = (lambda: rng.uniform(-1.0, 1.0, shape)) if spec.distribution == "uniform" \
            else (lambda: rng.standard_normal(shape, dtype=np.float32))
        return np.stack([draw() for _ in range(n)]).astype(np.float32)
    if spec.source == "npy":
        try:
            x = np.load(spec.path)
        except (OSError, ValueError) as exc:
            raise NvdlaSimError(f"input.npy: {spec.path}: not a readable .npy file ({exc})") from None
        if x.ndim == 4 and x.shape[0] == 1:
            x = x[0]
        if tuple(x.shape) != shape:
            raise NvdlaSimError(f"input.npy: {spec.path} holds shape {tuple(x.shape)}, network "
                                f"'{network.name}' expects {shape} (C, H, W)")
        return np.ascontiguousarray(x, np.float32)
    rng = np.random.default_rng(spec.seed)
    if spec.distribution == "uniform":
        return rng.uniform(-1.0, 1.0, shape).astype(np.float32)
    return rng.standard_normal(shape, dtype=np.float32)


def check_fallback(scn: Scenario, network: Network, support: SupportReport) -> None:
    if scn.gpu_fallback or not support.violations:
        return
    name = support.fallback_ops[0]
    op = network.op(name)
    more = len(support.violations) - 1
    raise NvdlaSimError(f"gpu_fallback: false, but layer '{name}' ({op.kind}) cannot run on the DLA: "
                        f"{support.reason(name)}" + (f" (and {more} more layers)" if more else ""))


def prepare(scn: Scenario) -> Prepared:
    """Everything up to the lowering seam; errors name the scenario file and the field."""
    try:
        return _prepare(scn)
    except NvdlaSimError as exc:
        if scn.path is None:
            raise
        raise type(exc)(f"{scn.path}: {exc}") from None


def _prepare(scn: Scenario, forced: dict[str, str] | None = None) -> Prepared:
    network, model_weights = build_network(scn)
    support = check_support(network, scn.hardware, scn.dtype, scn.batch)   # (dla_rules)
    _force(support, forced)                 # a subnetwork above a memory pool (execute)
    precisions = None
    if scn.precision_flags:                 # INT8 where possible, FP16 otherwise
        scn, precisions, support = mixed_precision(scn, network, support)
        _force(support, forced)
    check_fallback(scn, network, support)
    w = scn.weights
    arrays = w.source == "npz" or w.sparsity > 0 or (w.source == "model" and bool(model_weights))
    check_memory(network, scn.values, getattr(scn, "batch", 1),   # before any array
                 input_image=scn.values or scn.input.source == "npy",
                 weights=arrays, gpu_ops=set(support.fallback_ops))
    weights = network_weights(scn, network, model_weights)
    weights = prune(network, weights, w.sparsity, w.pattern, w.seed)   # weights.sparsity
    # timing: activations are sized tokens, so no random image is drawn (a .npy is still read:
    # its shape is checked)
    x = make_input(scn, network) if scn.values or scn.input.source == "npy" else None
    plan = build_plan(network, weights, scn.hardware, support, scn.dtype,
                      mixed_layer_dtypes(precisions) if precisions else scn.layer_dtypes,
                      input_dtype=mixed_input_dtype(scn) if precisions else None)
    if precisions:
        fused_precisions(plan, precisions)
    prep = Prepared(scn, network, weights, support, plan, x, precisions=precisions)
    if scn.values:
        net = plan.network                  # with the ops compiler/ext_ops.py expanded
        prep.reference = batch_reference(net, weights, x) if scn.batch > 1 \
            else run_reference(net, weights, x)
        q = scn.quantization
        prep.calibration = quantize_plan(plan, prep.reference, quant_config(q))
    return prep


def quant_config(q) -> QuantConfig:
    """The quantisation settings of a scenario's `quantization` section (schema.QuantizationSpec)."""
    return QuantConfig(q.weights, q.calibration, q.percentile, q.weight_bits, q.activation_bits,
                       q.rounding, q.seed)


def batch_reference(network: Network, weights: Weights, x: np.ndarray) -> dict[str, np.ndarray]:
    """The float32 reference of each image of a batch, every tensor stacked (N, ...); the
    calibration takes its ranges over all images."""
    refs = [run_reference(network, weights, image) for image in x]
    return {name: np.stack([r[name] for r in refs]) for name in refs[0]}


def gpu_fallback_fn(plan: HwPlan, weights: Weights):
    """The callback lowering uses for `gpu` layers: dequantise, run the op in float, quantise."""
    def run(layer: HwLayer, inputs: dict[str, np.ndarray]) -> np.ndarray:
        op = plan.network.op(layer.ops[0])
        ins = []
        for name in op.inputs:
            t = plan.tensors[name]
            ins.append(dequantize(t.from_stored(inputs[name]), t.scale))
        y = run_op(op, ins, weights)
        t = plan.tensors[op.name]
        return t.to_stored(quantize_tensor(y, t.scale, plan.tensor_dtype(op.name)))
    return run


def context(prep: Prepared) -> LoweringContext:
    scn = prep.scenario
    x_int8 = None
    if scn.values:
        name = prep.network.input_name
        t = prep.plan.tensors[name]
        dtype = prep.plan.tensor_dtype(name)
        grid = prep.calibration.grid.get(name) if prep.calibration else None
        images = [prep.input] if scn.batch == 1 else list(prep.input)
        stored = [t.to_stored(quantize_input(x, t.scale, dtype, grid, quant_config(
            scn.quantization)) if grid and not dtype.is_float else quantize_tensor(x, t.scale, dtype))
            for x in images]
        x_int8 = stored[0] if scn.batch == 1 else np.stack(stored)
    return LoweringContext(scn.hardware, scn.clock_mhz, scn.memory.dram, scn.memory.cvsram,
                           cvsram_capacity(scn), scn.values, x_int8,
                           gpu_fallback_fn(prep.plan, prep.weights) if scn.values else None,
                           scn.outputs.timeline, batch=scn.batch, winograd=scn.winograd,
                           weight_compression=scn.weight_compression,
                           post_extension=getattr(scn, "post_extension", "off"),
                           input_format=scn.input_format, output_format=scn.output_format,
                           sparse_weights=scn.sparse_weights)


def dla_tensors(plan: HwPlan, outputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Dequantised logical value of every materialised tensor found in the returned buffers."""
    found = {}
    for name, t in plan.tensors.items():
        if not t.materialised or t.scale is None:
            continue
        root, offset = plan.root(name)
        buf = outputs.get(root)
        if buf is None:
            continue
        found[name] = dequantize(t.from_stored(buf[offset:offset + t.stored_channels]), t.scale)
    return found


def output_sqnr_db(prep: Prepared, values: dict[str, np.ndarray] | None) -> float | None:
    """End-to-end SQNR (dB) of the network's output(s) against the float32 reference: every
    output's error and signal pooled (None without values)."""
    if not values or prep.reference is None:
        return None
    outs = [o for o in prep.network.outputs if o in values]
    if not outs:
        return None
    ref = np.concatenate([prep.reference[o].ravel() for o in outs])
    got = np.concatenate([values[o].ravel() for o in outs])
    return float(sqnr_db(ref, got))


def batch_values(plan: HwPlan, result) -> dict[str, np.ndarray]:
    """dla_tensors of a run; a batch: each tensor stacked (N, ...) over the images, as the
    reference is (so a layer's SQNR is over the whole batch)."""
    if not result.batch_outputs:
        return dla_tensors(plan, result.outputs)
    per_image = [dla_tensors(plan, outputs) for outputs in result.batch_outputs]
    return {name: np.stack([v[name] for v in per_image]) for name in per_image[0]}


def _force(support: SupportReport, forced: dict[str, str] | None) -> None:
    for op, why in (forced or {}).items():
        reasons = support.violations.setdefault(op, [])
        if why not in reasons:
            reasons.append(why)


def mixed_precision(scn: Scenario, network: Network, support: SupportReport):
    """`precision: [int8, fp16]` resolved (compiler/dla_rules.resolve_precisions): the scenario
    in INT8 with every op that needs FP16 (an upgrade rule, precision.layers) named fp16 in its
    layer precisions (compiler/reformat.py inserts the SDP passes between them), each op's
    precision and why, the support report."""
    from dataclasses import replace
    from ..compiler.dla_rules import resolve_precisions
    choice = resolve_precisions(network, support.on_dla, scn.layer_precision)
    if getattr(scn, "output_format", "auto") == "chw16":   # kCHW16 holds FP16: the last layers
        for name in network.outputs:                        # write it (io_formats)
            if choice.per_layer.get(name, ("",))[0] == "int8" and name not in scn.layer_precision:
                choice.per_layer[name] = ("fp16", "output_format chw16: a kCHW16 output is FP16 "
                                                  "[rule io.precision]")
    scn = replace(scn, precision=choice.dtype.name.lower())
    return scn, choice.per_layer, support


def mixed_layer_dtypes(precisions: dict) -> dict:
    """The layer precisions build_plan takes for a resolved `[int8, fp16]` (ops not in INT8)."""
    from ..datatype import BY_NAME
    return {op: BY_NAME[p] for op, (p, _) in precisions.items() if p not in ("gpu", "int8")}


def mixed_input_dtype(scn: Scenario):
    """`[int8, fp16]` with an FP16 I/O format (kCHW16) for the input: the host stores FP16 and
    the program reformats it for INT8 readers (compiler/reformat.py); else None."""
    from ..datatype import FP16
    return FP16 if getattr(scn, "input_format", "auto") == "chw16" else None


def fused_precisions(plan: HwPlan, precisions: dict) -> None:
    """An op sharing a hardware layer with an FP16 op runs in FP16 too (one SDP pass has one
    precision): its reason names that op."""
    for layer in plan.layers:
        if not layer.on_dla or not plan.layer_dtype(layer).is_float:
            continue
        first = next((o for o in layer.ops if precisions.get(o, ("",))[0] == "fp16"), None)
        why = f"in one hardware layer with '{first}' (FP16)" if first else \
            (f"writes part of '{layer.output.tensor}', which an FP16 layer writes too (one "
             "element type per buffer)")
        for op in layer.ops:
            if op in precisions and precisions[op][0] != "fp16":
                precisions[op] = ("fp16", why)


def scn_of(prep: Prepared) -> Scenario:
    """The scenario as loaded (a mixed-precision run's scenario holds the resolved precision)."""
    from dataclasses import replace
    scn = prep.scenario
    return replace(scn, precision="int8") if scn.precision_flags else scn


def cvsram_capacity(scn: Scenario) -> int:
    """CVSRAM bytes the compiler may place tensors in: on a DLA preset at most the managed-SRAM
    pool (memory_pools.managed_sram)."""
    pools = getattr(scn, "memory_pools", None)
    if pools:
        return min(scn.memory.cvsram_bytes, pools["managed_sram"])
    return scn.memory.cvsram_bytes


def deployment_of(prep: Prepared, lowered, result):
    """The DLA deployment (compiler/subnetworks.Deployment) of a run, None off DLA presets."""
    from ..compiler.dla_rules import dla_target
    from ..compiler.subnetworks import deployment
    scn = prep.scenario
    target = dla_target(scn.hardware)
    if target is None or not getattr(scn, "memory_pools", None):
        return None
    plan = prep.plan
    precisions = {}
    for row in plan.rows:
        layers = plan.layers_of_row(row)
        if all(layer.kind == "gpu" for layer in layers):
            precisions[row] = ("gpu", "GPU fallback")
        elif prep.precisions:
            precisions[row] = prep.precisions[layers[-1].ops[-1]]
        else:
            dtype = plan.layer_dtype(layers[0]).name.lower()
            named = any(o in scn.layer_precision for layer in layers for o in layer.ops)
            precisions[row] = (dtype, "precision.layers" if named else "the scenario's precision")
    try:
        return deployment(lowered, target, scn.memory_pools, precisions, result)
    except NvdlaSimError as exc:            # more loadables than a core holds
        raise NvdlaSimError(f"{scn.path}: {exc}" if scn.path else str(exc)) from None


def execute(prep: Prepared, out_dir: Path | None = None, plotter=None):
    """Lower and run the plan on the engine and write the report; returns the Report.
    `plotter`: report.plot_worker.start_plotter's, started before `prepare` (a smaller process
    to fork), else started here."""
    from ..report.tables import build_report, write_reports
    from ..compiler.lower import lower, run_lowered
    from ..compiler.subnetworks import overflow
    from ..report.plot_worker import draws_figures, start_plotter
    # the plots' process imports matplotlib on the other core while the network runs
    plotter = plotter or start_plotter(draws_figures(prep.scenario))
    forced: dict[str, str] = {}
    while True:
        ctx = context(prep)
        lowered = lower(prep.plan, ctx)
        deploy = deployment_of(prep, lowered, None)     # pool / loadable errors before the run
        over = overflow(deploy) if deploy is not None else None
        if over is None:
            break
        sub, pool, message = over
        if not prep.scenario.gpu_fallback:
            where = f"{prep.scenario.path}: " if prep.scenario.path else ""
            raise NvdlaSimError(f"{where}{message}")
        ops = [o for layer in prep.plan.layers if layer.name in sub.layers for o in layer.ops]
        forced.update({o: f"{message}: its layers run on the GPU" for o in ops})
        prep = _prepare(scn_of(prep), forced)
    from ..energy.report import check_energy
    check_energy(prep)                                  # CACTI's refusals before the run
    cores = None
    if getattr(prep.scenario, "dla_cores", 1) > 1:      # two DLA cores (compiler/multicore.py)
        from ..compiler.multicore import run_scenario_cores
        result, cores = run_scenario_cores(prep, lowered, ctx)
    else:
        result = run_lowered(lowered, ctx)
    values = batch_values(prep.plan, result) if prep.scenario.values else None
    report = build_report(prep, result, values)
    report.cores = cores
    if deploy is not None:
        report.deployment = deployment_of(prep, lowered, result).to_json()
    write_reports(report, prep, result, out_dir or prep.scenario.outputs.directory, plotter)
    return report


def run_scenario(path: str | Path, out_dir: Path | None = None):
    """Load, compile, run and report one scenario file."""
    return execute(prepare(load_scenario(path)), out_dir)
