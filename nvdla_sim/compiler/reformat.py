"""INT8 <-> FP16 reformats inside one register program (`precision: [int8, fp16]`, issue 11).

TensorRT runs a layer it upgrades to FP16 (LRN, sigmoid, tanh) between INT8 layers and reformats
the tensors around it.  NVDLA v1 converts element types only in the SDP (v1 C model, sdp_c and
SDP_RDMA; the CDMA's feature converter keeps the element width, PDP and CDP write the type they
read):
- PROC INT8 -> OUT FP16: the output converter's 17-bit integer written as FP16 (an integer);
- PROC FP16 -> OUT INT16: the FP16 result rounded to INT16 (there is no FP16 -> INT8: an INT8
  output would keep the low byte of the FP16 word);
- IN INT16 -> PROC INT8: SDP_RDMA feeds the 16-bit values to the integer datapath, whose output
  converter saturates them to INT8.
An FP16 SDP cannot read INT8 and has no output converter, so each direction takes two SDP passes
from memory to memory, placed right before the first layer that reads the reformatted copy:

  INT8 -> FP16   `a`  PROC INT8, identity converter, OUT FP16: the codes q as FP16 (exact)
                 `b`  PROC FP16, BS MUL s (the INT8 tensor's scale, an FP16 register): q * s
  FP16 -> INT8   `c`  PROC FP16, BS MUL 1/s, OUT INT16: round(x / s), not yet saturated
                 `d`  IN INT16, PROC INT8, identity converter: saturated to [-128, 127]

The reformatted copy is a new buffer (`<tensor>@fp16` / `@int8`, intermediates `@fp16q` /
`@int16`) with no logical tensor of its own: the report keeps the network's tensors.  A buffer
read in both precisions is reformatted once per precision.  INT8 <-> INT16 needs no pass (the
INT8 producer's SDP writes INT16, hwlayers.assign_precisions).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..datatype import FP16, INT8, INT16, DataType
from ..errors import NvdlaSimError, UnsupportedError
from .emit import IDENTITY
from .emit_sdp import SdpLayer, XStage
from .network import Shape

# (pass, PROC precision, IN precision, OUT precision, suffix of the buffer it writes)
PASSES = {("INT8", "FP16"): (("a", INT8, INT8, FP16, "fp16q"), ("b", FP16, FP16, FP16, "fp16")),
          ("FP16", "INT8"): (("c", FP16, FP16, INT16, "int16"), ("d", INT8, INT16, INT8, "int8"))}
FP16_MIN_NORMAL = 2.0 ** -14


def _layer_type(layer, layer_precision: dict[str, DataType], default: DataType) -> DataType:
    """The precision hwlayers.assign_precisions gives a layer (named for one of its ops, else the
    plan's)."""
    named = [layer_precision[o] for o in layer.ops if o in layer_precision]
    return named[0] if named else default


def needed(layer_precision: dict[str, DataType], default: DataType,
           input_dtype: DataType | None = None) -> bool:
    """True when the plan mixes FP16 with an integer type (reformats may be needed)."""
    used = {default, *layer_precision.values()} | ({input_dtype} if input_dtype else set())
    return any(t.is_float for t in used) and any(not t.is_float for t in used)


def widen_fused(plan, layer_precision: dict[str, DataType]) -> dict[str, DataType]:
    """Layer precisions with every op of a hardware layer that holds an FP16 op in FP16 (one SDP
    pass computes in one precision: a convolution fused with an upgraded sigmoid runs in FP16),
    and every DLA layer writing a part of a buffer another FP16 layer writes (a concatenation
    holds one element type) in FP16 too; repeated until nothing changes."""
    out = dict(layer_precision)
    is_float = lambda layer: any(out.get(o, plan.dtype).is_float for o in layer.ops)  # noqa: E731
    changed = True
    while changed:
        changed = False
        writers: dict[str, list] = {}
        for layer in plan.layers:
            if layer.on_dla and layer.output is not None:
                writers.setdefault(layer.output.tensor, []).append(layer)
        for layer in plan.layers:
            shared = writers.get(layer.output.tensor, []) if layer.output is not None else []
            if layer.on_dla and (is_float(layer) or any(is_float(w) for w in shared)):
                for o in layer.ops:
                    if not out.get(o, plan.dtype).is_float:
                        out[o] = FP16
                        changed = True
    return out


def insert_reformats(plan, layer_precision: dict[str, DataType],
                     input_dtype: DataType | None = None) -> list[str]:
    """Insert the reformat passes into `plan` (before hwlayers.assign_precisions): every DLA layer
    reading a buffer written in the other kind of type (FP16 vs integer) reads a reformatted copy
    instead.  `input_dtype`: the type the host stores the network input in (an FP16 kCHW16
    input of an INT8 network); None: the type of its first reader.  Returns the names of the
    inserted layers."""
    from .hwlayers import HwLayer, SdpSpec, SdpStage, Tensor, TensorRef
    default = plan.dtype
    written: dict[str, DataType] = {}
    for layer in plan.layers:
        if layer.on_dla and layer.output is not None:
            written.setdefault(layer.output.tensor, _layer_type(layer, layer_precision, default))
    if input_dtype is not None:
        written[plan.root(plan.network.input_name)[0]] = input_dtype
    copies: dict[tuple, TensorRef] = {}
    out: list = []
    inserted: list[str] = []
    for layer in plan.layers:
        if not layer.on_dla:
            out.append(layer)
            continue
        want = _layer_type(layer, layer_precision, default)
        refs = [("in", i, r) for i, r in enumerate(layer.inputs)]
        if layer.sdp:
            refs += [("op", i, p.operand) for i, p in enumerate(layer.sdp.post_ops) if p.operand]
        for where, i, ref in refs:
            have = written.get(ref.tensor)
            if have is None:
                if ref.tensor == plan.root(plan.network.input_name)[0]:
                    written[ref.tensor] = have = want      # the host stores the input as read first
                else:
                    continue
            if have.is_float == want.is_float:
                continue
            # the whole tensor is converted; a window (compiler/deconv.py bands, slices) reads
            # the copy at the same place
            window, ref = ref.window, replace(ref, window=None)
            key = (ref, want.is_float)
            if key not in copies:
                if INT16 in (have, want):
                    raise UnsupportedError(f"'{layer.name}' reads {have} '{ref.tensor}' in "
                                           f"{want}: INT16 <-> FP16 reformats are not modelled")
                src_type = have
                base = plan.tensors[ref.tensor]
                src = ref
                for tag, proc, in_type, out_type, suffix in PASSES[(src_type.name, want.name)]:
                    name = f"{ref.tensor}@{suffix}" + (f"+{ref.channel_offset}"
                                                      if ref.channels != base.stored_channels else "")
                    shape = Shape(ref.channels, base.shape.h, base.shape.w)
                    plan.tensors[name] = Tensor(name, shape, producer=f"reformat_{name}",
                                                dtype=out_type)
                    stages = [SdpStage("x1", mul="rescale")] if tag in "bc" else []
                    spec = SdpSpec("memory", [], stages, ref.channels, shape.h, shape.w)
                    pass_layer = HwLayer(f"reformat_{name}", "sdp", layer.row, [], [src],
                                         TensorRef(name, 0, ref.channels), sdp=spec, dtype=proc)
                    pass_layer.reformat = {"pass": tag, "in_dtype": in_type,
                                           "scale_of": ref.tensor if ref.channels ==
                                           base.stored_channels else None,
                                           "source": ref.tensor}
                    pass_layer.notes.append(f"reformat {src_type} -> {want} pass {tag} "
                                            f"({in_type} in, {proc} SDP, {out_type} out)")
                    out.append(pass_layer)
                    inserted.append(pass_layer.name)
                    src = TensorRef(name, 0, ref.channels)
                copies[key] = src
            new = replace(copies[key], window=window)
            if where == "in":
                layer.inputs[i] = new
            else:
                p = layer.sdp.post_ops[i]
                p.operand = new
        out.append(layer)
    plan.layers[:] = out
    return inserted


def is_reformat(layer) -> bool:
    return bool(getattr(layer, "reformat", None))


def reformat_quant(layer, plan, scales: dict[str, float]) -> SdpLayer:
    """The SDP parameters of a reformat pass; `scales` holds the INT8 scale of every logical
    tensor (calibration: real = scale * code)."""
    tag = layer.reformat["pass"]
    source = layer.reformat["source"]
    # the scale of the INT8 buffer (a concat window: the concat's scale, shared by its inputs)
    s = scales.get(layer.reformat["scale_of"] or source)
    if s is None:
        s = scales.get(_logical(plan, source), 1.0)
    if tag in "bc" and not FP16_MIN_NORMAL <= s <= 65504.0:
        raise UnsupportedError(f"{layer.name}: INT8 scale {s:.3g} is outside FP16's normal range "
                               "(the reformat multiplies by it in FP16)")
    if tag == "a":
        return SdpLayer(None, None, None, IDENTITY, layer.name, INT8, FP16)
    if tag == "b":
        return SdpLayer(XStage(mul="mul", mul_operand=float(np.float16(s))), None, None,
                        IDENTITY, layer.name, FP16)
    if tag == "c":
        return SdpLayer(XStage(mul="mul", mul_operand=float(np.float16(1.0 / s))), None, None,
                        IDENTITY, layer.name, FP16, INT16)
    if tag == "d":
        return SdpLayer(None, None, None, IDENTITY, layer.name, INT8, None, INT16)
    raise NvdlaSimError(f"{layer.name}: unknown reformat pass {tag!r}")


def _logical(plan, root: str) -> str:
    """A logical tensor stored in buffer `root` (for its scale)."""
    for name, t in plan.tensors.items():
        if plan.root(name)[0] == root and t.scale is not None:
            return name
    return root
