"""The join: a hardware-layer plan (`hwlayers.HwPlan`) becomes ONE register program for the whole
network, which runs on the engine; `lower_and_run` is the hook `scenario/runner.py` calls.

    place tensors  -> every root buffer a TensorPlacement: DRAM, or CVSRAM when the scenario has
                      some (first fit over the buffers' lifetimes, reused once dead)
    emit steps     -> one *step* per hardware layer, or per convolution / SDP pass with the PDP it
                      feeds on the fly; each step is one or more `begin_layer`s of the
                      ProgramBuilder (a CBUF partial-height split gives several), so the next step
                      waits for it with sync_wait, as a multi-layer trace does
    run            -> the program runs on one Engine step by step: each step is a piece of the
                      program, run on the same engine from where the previous piece stopped
                      (the same schedule as the whole program, whose sync_waits hold every layer
                      until the previous one interrupted); between pieces the step's cycles, DRAM /
                      CVSRAM bytes and unit busy cycles are read, and in values mode its outputs
                      are read back and GPU-fallback layers are computed and written to memory

A batch (`ctx.batch` N > 1) runs N images through the same program: every buffer holds N cubes
one *batch stride* apart (`Lowered.batch_strides`).  A direct convolution on feature input
whose N input cubes fit the CBUF data banks beside its weights (no partial-height split, no
fused PDP, no Winograd, no per-element SDP operand), and that is fully connected (1x1 output) or
1x1, is ONE hardware layer with BATCH_NUMBER = N - 1: the weights are fetched once and serve
every image.  (A KxK kernel over an output map loses more to the batch's short stripes than it
saves in weight traffic; see batch_rule.)  Every other step is repeated image by image, layer by
layer, with the weights placed once.

A fused PDP that the hardware cannot feed on the fly (the convolution needs a CBUF partial-height
split, or the pooled line is wider than the PDP line buffer) is *unfused*: the SDP writes a
temporary cube to DRAM and the PDP reads it as a separate step (noted in the layer's notes).

Timing-only runs (`ctx.values` False) use the same program without memory images on an engine with
`compute_values=False`; the integer parameters come from a *structural* quantisation (every scale
1/127), which has the same SDP stages and operand kinds as the calibrated one.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ..datatype import INT8
from ..engine import Engine, RunResult
from ..errors import NvdlaSimError, UnsupportedError
from ..progress_hook import follow as follow_progress
from ..program import IntrNotify, RegisterProgram, RegWrite, SyncWait
from .emit import ProgramBuilder, cube_image, read_output
from .emit_cdp import emit_cdp
from .deconv import contracted_outputs
from .emit_rubik import emit_contract
from .io_formats import check_outputs, image_line_align
from .sparsity import sparsity_verdicts
from .emit_conv import ConvBatch, ConvLayer, conv_cbuf_plan, emit_conv, image_placement, \
    pixel_channels, place_weights
from ..formats import pre_extend
from .emit_pdp import emit_pdp, plan_pdp
from .emit_sdp import SdpLayer, emit_sdp
from .hwlayers import HwLayer, HwPlan, LayerTiming, LoweringContext, PlanResult, TensorRef
from .winograd import choose_conv_features
from .placement import CVSRAM, DBB, DEFAULT_BASE, BUFFER_ALIGN_BYTES, Allocator, Buffer, \
    TensorPlacement, align_up

MAC, MEMORY, CBUF = "MAC", "memory", "CBUF"


@dataclass
class Step:
    """A piece of the program: the hardware layers it implements and the commands it spans."""
    layers: list[HwLayer]
    first_command: int = 0
    end_command: int = 0
    outputs: list[tuple[TensorRef, TensorPlacement]] = field(default_factory=list)
    done: list[str] = field(default_factory=list)      # completion sync ids
    refetch: bool = False                               # CBUF partial-height split
    gpu: bool = False
    images: tuple[int, ...] = (0,)                      # images of a batch it runs (outputs: the first's)
    allocated: list = field(default_factory=list)       # buffers its emission placed (weights,
                                                        # operands, temporaries: subnetworks.py)

    @property
    def name(self) -> str:
        return self.layers[0].name


@dataclass
class Lowered:
    """A compiled network: the program, its steps and where every buffer lives."""
    plan: HwPlan
    program: RegisterProgram
    steps: list[Step]
    buffers: dict[str, TensorPlacement]
    notes: dict[str, list[str]] = field(default_factory=dict)   # layer -> lowering notes
    batch_strides: dict[str, int] = field(default_factory=dict)  # root buffer -> bytes per image
    images: bool = False               # memory images loaded (values mode); False: timing only


# --------------------------------------------------------------------------------------------------
# Tensor placement

def _steps_of(plan: HwPlan) -> list[list[HwLayer]]:
    """Hardware layers grouped as they are emitted: a conv / SDP pass with its on-the-fly PDP."""
    groups, i = [], 0
    layers = plan.layers
    while i < len(layers):
        layer = layers[i]
        if layer.kind in ("conv", "sdp") and layer.output is None:
            nxt = layers[i + 1] if i + 1 < len(layers) else None
            if nxt is None or nxt.kind != "pdp" or not nxt.pdp.on_the_fly:
                raise NvdlaSimError(f"{layer.name}: streams to PDP but no on-the-fly PDP layer "
                                    "follows it in the plan")
            groups.append([layer, nxt])
            i += 2
            continue
        groups.append([layer])
        i += 1
    return groups


def _operand_refs(layer: HwLayer) -> list[TensorRef]:
    if layer.sdp is None:
        return []
    return [p.operand for p in layer.sdp.post_ops if p.operand is not None]


def _lifetimes(plan: HwPlan, groups: list[list[HwLayer]]) -> dict[str, list[int]]:
    """Root buffer -> [first step writing it, last step reading it] (network outputs: the end)."""
    life: dict[str, list[int]] = {}
    input_root = plan.root(plan.network.input_name)[0]
    life[input_root] = [0, 0]
    for i, group in enumerate(groups):
        for layer in group:
            for ref in layer.inputs + _operand_refs(layer):
                span = life.setdefault(ref.tensor, [i, i])
                span[1] = max(span[1], i)
            if layer.output is not None:
                span = life.setdefault(layer.output.tensor, [i, i])
                span[0], span[1] = min(span[0], i), max(span[1], i)
    for name in plan.network.outputs:
        root = plan.root(name)[0]
        if root in life:
            life[root][1] = len(groups)
    return life


class _CvsramFit:
    """First-fit placement of buffers in CVSRAM by lifetime (a buffer's bytes are reused once
    its last reader has run)."""

    def __init__(self, base: int, size: int):
        self.base, self.size = base, size
        self.live: list[tuple[int, int, int]] = []      # (offset, bytes, last step)

    def take(self, nbytes: int, first: int, last: int) -> int | None:
        self.live = [b for b in self.live if b[2] >= first]
        offset = 0
        for o, n, _ in sorted(self.live):
            if offset + nbytes <= o:
                break
            offset = max(offset, align_up(o + n, BUFFER_ALIGN_BYTES))
        if offset + nbytes > self.size:
            return None
        self.live.append((offset, nbytes, last))
        return self.base + offset


def image_input(plan: HwPlan) -> bool:
    """Whether the network input is read as an image: INT8, at most 4 channels, and only
    whole-input convolutions (no dilation) read it -- the first layer of the built-in networks."""
    root = plan.root(plan.network.input_name)[0]
    if plan.tensor_dtype(root) != INT8:  # INT16/FP16 pixel formats: not modelled, read as features
        return False
    t = plan.tensors[root]
    if pixel_channels(t.stored_channels) is None:
        return False
    readers = [layer for layer in plan.layers
               if any(r.tensor == root for r in layer.inputs + _operand_refs(layer))]
    return bool(readers) and all(
        layer.kind == "conv" and layer.inputs[0].channels == t.stored_channels
        and tuple(layer.conv.dilation) == (1, 1)
        and not any(r.tensor == root for r in _operand_refs(layer)) for layer in readers)


def place_tensors(plan: HwPlan, ctx: LoweringContext, alloc: Allocator,
                  groups: list[list[HwLayer]],
                  strides: dict[str, int] | None = None) -> dict[str, TensorPlacement]:
    """Every root buffer's placement (with a batch: image 0's; `strides` gets each buffer's
    bytes per image, the N cubes one after another)."""
    images = ctx.batch
    if images > 1:
        return _place_batch(plan, ctx, alloc, groups, images, strides if strides is not None else {})
    life, line_align, image_root, atom, cvsram = _placement_start(plan, ctx, groups)
    buffers = {}
    padded = {**winograd_outputs(plan), **contracted_outputs(plan)}   # (deconv.py: RUBIK)
    wide = int8_written_wide(plan, atom)
    for name in sorted(life, key=lambda n: life[n][0]):
        t = plan.tensors[name]
        c, h, w = t.stored_channels, t.shape.h, t.shape.w
        dtype = plan.tensor_dtype(name)
        atom_channels = dtype.elements_per_atom(atom)
        address = None
        if name == image_root:
            probe = image_placement(name, DBB, 0, c, h, w, line_align)
            address = alloc.buffer(name, probe.size_bytes).address
            buffers[name] = image_placement(name, DBB, address, c, h, w, line_align)
            continue
        ph, pw = padded.get(name, (h, w))     # a Winograd layer writes whole 4x4 blocks
        reserved = wide.get(name, c)          # channels whose surfaces a writer may write
        if cvsram is not None:
            nbytes = -(-reserved // atom_channels) * atom * ph * pw
            address = cvsram.take(nbytes, *life[name])
        if address is None:
            buffers[name] = replace(alloc.feature(name, reserved, ph, pw, DBB, dtype), channels=c)
        else:
            buffers[name] = TensorPlacement(name, CVSRAM, address, pw, ph, c, atom, pw * atom,
                                            ph * pw * atom, dtype)
        if (ph, pw) != (h, w):                # readers see the real size, padded strides
            buffers[name] = replace(buffers[name], height=h, width=w)
    return buffers


def _placement_start(plan: HwPlan, ctx: LoweringContext, groups: list[list[HwLayer]]):
    """What both placements (one image, a batch) start from: each buffer's lifetime, the network
    input's image line alignment (None: a feature cube) and its root buffer, the memory atom and
    the CVSRAM fit (None without CVSRAM)."""
    life = _lifetimes(plan, groups)
    line_align = image_line_align(plan, ctx, image_input(plan))     # input_format (io_formats)
    image_root = plan.root(plan.network.input_name)[0] if line_align else None
    cvsram = _CvsramFit(DEFAULT_BASE[CVSRAM], ctx.cvsram_bytes) \
        if ctx.cvsram_bytes and ctx.hw.secondary_memif is not None else None
    return life, line_align, image_root, ctx.hw.memory_atomic_bytes, cvsram


def int8_written_wide(plan: HwPlan, atom: int) -> dict[str, int]:
    """Root buffers of 16-bit elements an SDP processing INT8 writes (reformat pass `a`, an INT8
    layer writing INT16): the channels to reserve.  Such an SDP writes two 16-bit surfaces per
    32-channel INT8 surface, the padding lanes too (v1 C model: surface count ceil(C/32)*2), so
    a 16-channel cube spills a whole surface past a ceil(C/16)-surface buffer."""
    out: dict[str, int] = {}
    int8_lanes = INT8.elements_per_atom(atom)
    for layer in plan.layers:
        if layer.kind not in ("conv", "sdp") or layer.output is None \
                or plan.layer_dtype(layer) != INT8:
            continue
        root = plan.root(layer.output.tensor)[0]
        if plan.tensor_dtype(root).bytes == 2:
            end = align_up(layer.output.channel_offset + layer.output.channels, int8_lanes)
            out[root] = max(out.get(root, 0), end, plan.tensors[root].stored_channels)
    return out


def winograd_outputs(plan: HwPlan) -> dict[str, tuple[int, int]]:
    """Root buffers written by Winograd layers: their (height, width) padded to whole 4x4
    output blocks."""
    out: dict[str, tuple[int, int]] = {}
    for layer in plan.layers:
        wino = layer.lowering.get("winograd") if layer.kind == "conv" else None
        if wino is not None and layer.output is not None:
            h, w = out.get(layer.output.tensor, (0, 0))
            out[layer.output.tensor] = (max(h, wino.out_h), max(w, wino.out_w))
    return out


def _place_batch(plan: HwPlan, ctx: LoweringContext, alloc: Allocator,
                 groups: list[list[HwLayer]], images: int,
                 strides: dict[str, int]) -> dict[str, TensorPlacement]:
    """place_tensors for N images: each buffer N packed cubes, 32-byte aligned apart (the CDMA
    BATCH_STRIDE granularity, at least one whole cube as the C model requires)."""
    life, line_align, image_root, atom, cvsram = _placement_start(plan, ctx, groups)
    buffers = {}
    wide = int8_written_wide(plan, atom)
    for name in sorted(life, key=lambda n: life[n][0]):
        t = plan.tensors[name]
        c, h, w = t.stored_channels, t.shape.h, t.shape.w
        dtype = plan.tensor_dtype(name)
        if name == image_root:
            one = image_placement(name, DBB, 0, c, h, w, line_align)
        else:
            surf = h * w * atom
            one = TensorPlacement(name, DBB, 0, w, h, c, atom, w * atom, surf, dtype)
        surfs = -(-wide.get(name, c) // one.atom_channels) if name != image_root else one.surfaces
        stride = align_up(surfs * one.surf_stride, BUFFER_ALIGN_BYTES)
        address = cvsram.take(stride * images, *life[name]) if cvsram is not None else None
        space = DBB if address is None else CVSRAM
        if address is None:
            address = alloc.buffer(name, stride * images).address
        buffers[name] = replace(one, space=space, address=address)
        strides[name] = stride
    return buffers


def image_buffers(buffers: dict[str, TensorPlacement], strides: dict[str, int],
                  image: int) -> dict[str, TensorPlacement]:
    """The placements of image `image` of a batch (image 0: `buffers` itself)."""
    if image == 0:
        return buffers
    return {name: replace(p, name=f"{p.name}#{image}", address=p.address + image * strides[name])
            for name, p in buffers.items()}


def _view(buffers: dict[str, TensorPlacement], ref: TensorRef) -> TensorPlacement:
    buf = buffers[ref.tensor]
    if ref.window is not None:              # a spatial slice read in place: same strides
        r0, rows, c0, cols = ref.window
        buf = replace(buf.rows(r0, rows), address=buf.address + r0 * buf.line_stride
                      + c0 * buf.atom, width=cols)
    if ref.channel_offset == 0 and ref.channels == buf.channels:
        return buf
    return buf.channel_slice(ref.channel_offset, ref.channels)


# --------------------------------------------------------------------------------------------------
# Emission

def _with_placements(sdp: SdpLayer, buffers: dict[str, TensorPlacement]) -> SdpLayer:
    """The SDP layer with every per-element operand (a TensorRef) replaced by its placement."""
    stages = {}
    for kind in ("x1", "x2", "y"):
        stage = getattr(sdp, kind)
        if stage is None:
            continue
        parts = {}
        for attr in ("alu_operand", "mul_operand"):
            v = getattr(stage, attr)
            if isinstance(v, TensorRef):
                parts[attr] = _view(buffers, v)
        if parts:
            stages[kind] = replace(stage, **parts)
    return replace(sdp, **stages) if stages else sdp


def _virtual(name: str, like: TensorPlacement, channels: int, height: int, width: int) -> TensorPlacement:
    """The shape of a cube streamed on the fly (never in memory) for the emitters' checks."""
    atom = like.atom
    return TensorPlacement(name, like.space, like.address, width, height, channels, atom,
                           width * atom, height * width * atom, like.dtype)


def _shape(p: TensorPlacement) -> tuple[int, int, int]:
    return (p.channels, p.height, p.width)


def _fusable(b: ProgramBuilder, layer: HwLayer, src: TensorPlacement, pool: HwLayer,
             pdp_in: tuple[int, int, int], pdp_out: TensorPlacement,
             conv: ConvLayer | None = None) -> str | None:
    """Why the PDP cannot take this layer's output on the fly (None: it can)."""
    hw = b.hw
    if layer.kind == "conv" and conv.winograd is not None:
        return "Winograd writes whole 4x4 output blocks"
    if layer.kind == "conv":
        cbuf = conv_cbuf_plan(hw, conv, src)
        if cbuf.split:
            return f"CBUF split by height into {len(cbuf.parts)} parts"
    try:
        plan_pdp(hw, pool.quant, pdp_in, _shape(pdp_out), flying=True)
    except NvdlaSimError as exc:
        return str(exc)
    return None


def _conv_layer(layer: HwLayer, buffers, hw) -> ConvLayer:
    q, c = layer.quant, layer.conv
    image = buffers[layer.inputs[0].tensor].atom != hw.memory_atomic_bytes    # image_placement
    conv = ConvLayer(q.weight, tuple(c.stride), tuple(c.pad), tuple(c.dilation), 0,
                     q.clip_truncate, None, _with_placements(q.sdp, buffers), layer.name,
                     image=image)
    # Winograd / compressed weights as compiler/winograd.py chose them (lower)
    return replace(conv, **layer.lowering) if layer.lowering else conv


def _emitted(b: ProgramBuilder, step: Step, emit) -> Step:
    """Run `emit()` (returns the completion sync id or ids) and record the step's commands."""
    step.first_command = len(b.commands)
    done = emit()
    step.done = [done] if isinstance(done, str) else list(done)
    step.end_command = len(b.commands)
    return step


def _emit_step(b: ProgramBuilder, alloc: Allocator, group: list[HwLayer],
               buffers: dict[str, TensorPlacement], notes: dict[str, list[str]],
               weights: dict[str, Buffer] | None = None) -> list[Step]:
    """The steps of one group; `weights` (a batch repeated per image): the weight buffers of
    convolutions already placed, by layer name (the first image places and records them)."""
    layer = group[0]
    if layer.kind == "gpu":
        out = _view(buffers, layer.output)
        return [Step(group, len(b.commands), len(b.commands), [(layer.output, out)], gpu=True)]
    src = _view(buffers, layer.inputs[0])
    pool = group[1] if len(group) > 1 else None
    if layer.kind == "conv":
        return _emit_conv_step(b, alloc, layer, pool, src, buffers, notes, weights)
    if layer.kind == "sdp":
        sdp = _with_placements(layer.quant, buffers)
        if pool is None:
            dst = _view(buffers, layer.output)
            return [_emitted(b, Step([layer], outputs=[(layer.output, dst)]),
                             lambda: emit_sdp(b, alloc, sdp, src, dst))]
        pdp_dst = _view(buffers, pool.output)
        why = _fusable(b, layer, src, pool, _shape(src), pdp_dst)
        if why is None:
            return [_emitted(b, Step(group, outputs=[(pool.output, pdp_dst)]),
                             lambda: emit_sdp(b, alloc, sdp, src, None, (pool.quant, pdp_dst)))]
        tmp = alloc.feature(f"{layer.name}_out", *_shape(src), dtype=pdp_dst.dtype)
        notes.setdefault(pool.name, []).append(f"PDP not on the fly ({why}): via DRAM")
        return [_emitted(b, Step([layer]), lambda: emit_sdp(b, alloc, sdp, src, tmp)),
                _emitted(b, Step([pool], outputs=[(pool.output, pdp_dst)]),
                         lambda: emit_pdp(b, pool.quant, tmp, pdp_dst))]
    dst = _view(buffers, layer.output)
    if layer.kind == "rubik":               # a RUBIK contract of a deconvolution (deconv.py)
        return [_emitted(b, Step([layer], outputs=[(layer.output, dst)]),
                         lambda: emit_contract(b, layer.name, layer.rubik.contract, src, dst))]
    emitters = {"pdp": emit_pdp, "cdp": emit_cdp}
    if layer.kind not in emitters:
        raise NvdlaSimError(f"{layer.name}: no lowering for hardware layer kind '{layer.kind}'")
    return [_emitted(b, Step([layer], outputs=[(layer.output, dst)]),
                     lambda: emitters[layer.kind](b, layer.quant, src, dst))]


def _placed_weights(b: ProgramBuilder, alloc: Allocator, conv: ConvLayer, src: TensorPlacement,
                    weights: dict[str, Buffer] | None) -> Buffer | None:
    """The layer's weight buffer when a batch shares it (placed by the first image), else None
    (emit_conv places it)."""
    if weights is None:
        return None
    if conv.name not in weights:
        weights[conv.name] = place_weights(b, alloc, replace(conv, weights=pre_extend(
            conv.weights, pixel_channels(src.channels))) if conv.image else conv)
    return weights[conv.name]


def _emit_conv_step(b, alloc, layer, pool, src, buffers, notes, weights=None) -> list[Step]:
    conv = _conv_layer(layer, buffers, b.hw)
    c = layer.conv
    k = conv.kernels
    cbuf = conv_cbuf_plan(b.hw, conv, src)
    refetch = refetched(cbuf, src.height)
    if cbuf.split:
        again = " and ".join(w for w, n in (("input lines", refetch[0]), ("weights", refetch[1])) if n)
        notes.setdefault(layer.name, []).append(
            f"CBUF: input split by height into {len(cbuf.parts)} parts ({cbuf.mode} weights"
            + (f"; {again} read again)" if again else ")"))
    refetch = any(refetch)
    if pool is None:
        dst = _view(buffers, layer.output)
        return [_emitted(b, Step([layer], outputs=[(layer.output, dst)], refetch=refetch),
                         lambda: emit_conv(b, alloc, conv, src, dst, weights=_placed_weights(
                             b, alloc, conv, src, weights)))]
    pdp_dst = _view(buffers, pool.output)
    conv_out = (k, c.out_h, c.out_w)
    why = _fusable(b, layer, src, pool, conv_out, pdp_dst, conv)
    if why is None:
        virtual = _virtual(f"{layer.name}_out", pdp_dst, *conv_out)
        return [_emitted(b, Step([layer, pool], outputs=[(pool.output, pdp_dst)]),
                         lambda: emit_conv(b, alloc, conv, src, virtual, (pool.quant, pdp_dst),
                                           weights=_placed_weights(b, alloc, conv, src, weights)))]
    tmp = _conv_output(alloc, f"{layer.name}_out", conv, conv_out, pdp_dst.dtype)
    notes.setdefault(pool.name, []).append(f"PDP not on the fly ({why}): via DRAM")
    return [_emitted(b, Step([layer], refetch=refetch), lambda: emit_conv(
                b, alloc, conv, src, tmp, weights=_placed_weights(b, alloc, conv, src, weights))),
            _emitted(b, Step([pool], outputs=[(pool.output, pdp_dst)]),
                     lambda: emit_pdp(b, pool.quant, tmp, pdp_dst))]


def batch_rule(hw, group: list[HwLayer], buffers: dict[str, TensorPlacement],
               images: int) -> str | None:
    """Why the group is not one batched hardware layer (None: it is; see the module doc)."""
    layer = group[0]
    if layer.kind != "conv":
        return f"{layer.kind} has no batch registers"
    if len(group) > 1:
        return "PDP on the fly takes one image"
    conv = _conv_layer(layer, buffers, hw)
    if conv.image:
        return "image input"
    if getattr(conv, "winograd", False):
        return "Winograd"
    if _operand_refs(layer):
        return "per-element SDP operand"
    c = layer.conv
    if (c.out_h, c.out_w) != (1, 1) and tuple(c.kernel) != (1, 1):
        # A batched stripe holds a few output atoms of every image (BATCH_STRIPE_ATOMS), so a
        # KxK kernel over a map re-walks its weights per short stripe: measured slower than one
        # image at a time (SqueezeNet's 3x3 expands 1.3-1.8x per image at batch 8).
        return "a KxK kernel over an output map: batched stripes cost more than they save"
    try:
        conv_cbuf_plan(hw, conv, _view(buffers, layer.inputs[0]), images)
    except NvdlaSimError:
        return f"{images} input cubes do not fit the CBUF beside the weights"
    return None


def _emit_batch_step(b: ProgramBuilder, alloc: Allocator, layer: HwLayer,
                     buffers: dict[str, TensorPlacement], strides: dict[str, int],
                     images: int) -> Step:
    conv = _conv_layer(layer, buffers, b.hw)
    src, dst = _view(buffers, layer.inputs[0]), _view(buffers, layer.output)
    batch = ConvBatch(images, strides[layer.inputs[0].tensor], strides[layer.output.tensor])
    step = Step([layer], outputs=[(layer.output, dst)], images=tuple(range(images)))
    return _emitted(b, step, lambda: emit_conv(b, alloc, conv, src, dst, batch=batch))


def _conv_output(alloc: Allocator, name: str, conv: ConvLayer, shape: tuple[int, int, int],
                 dtype) -> TensorPlacement:
    """A DRAM cube for a convolution's output: a Winograd layer's with room for its padded
    4x4 blocks (readers see the real size)."""
    c, h, w = shape
    if conv.winograd is None:
        return alloc.feature(name, c, h, w, dtype=dtype)
    cube = alloc.feature(name, c, conv.winograd.out_h, conv.winograd.out_w, dtype=dtype)
    return replace(cube, height=h, width=w)


def refetched(cbuf, in_height: int) -> tuple[int, int]:
    """(input lines, weight passes) a CBUF partial-height split reads more than once."""
    lines = sum(p.bottom - p.top + 1 for p in cbuf.parts) - in_height
    return max(0, lines), 0 if cbuf.keep_weights else len(cbuf.parts) - 1


def structural_quantization(plan: HwPlan) -> None:
    """Parameters for a timing-only run: every tensor's range 1.  The SDP stages, the operand
    kinds (register, per kernel, per element) and the weights' shapes and element type are those
    of a calibrated run; only the values differ, and timing never depends on values."""
    from ..scenario.quantize import quantize_plan
    quantize_plan(plan, {name: np.ones(1, np.float32) for name in plan.tensors})


def lower(plan: HwPlan, ctx: LoweringContext, images: bool | None = None,
          crc_checks: bool = False, name: str | None = None, perf_counters: bool = True,
          dbb_base: int | None = None) -> Lowered:
    """Place the tensors and emit every hardware layer of `plan` into one register program.
    `images` (default: values mode) loads the input, weights and operand arrays; `crc_checks`
    adds a check_crc of each step's output (expected values to be filled by `simulate_crcs`);
    `perf_counters` sets the SDP counter enables the report reads (compiler/perf_enable.py);
    `dbb_base`: where DRAM placement starts (a second DLA core's tensors: compiler/multicore.py)."""
    images = ctx.values if images is None else images
    if any(layer.quant is None for layer in plan.layers if layer.on_dla):
        if images:
            raise NvdlaSimError("the plan has no integer parameters (run quantisation first)")
        structural_quantization(plan)
    hw = ctx.hw
    alloc = Allocator(hw, base=None if dbb_base is None else {DBB: dbb_base})
    b = ProgramBuilder(hw, name or plan.network.name, images=images)
    groups = _steps_of(plan)
    strides: dict[str, int] = {}
    chosen = choose_conv_features(plan, ctx, plan.root(plan.network.input_name)[0]
                                  if image_line_align(plan, ctx, image_input(plan)) else None,
                                  {g[0].name for g in groups if len(g) > 1})
    buffers = place_tensors(plan, ctx, alloc, groups, strides)
    check_outputs(plan, ctx, buffers)                               # output_format (io_formats)
    if ctx.sparse_weights:                  # 2:4 structured sparsity: a report mark per conv
        image_root = next((p for p, q in buffers.items() if q.atom != hw.memory_atomic_bytes), None)
        for v in sparsity_verdicts(plan, hw, image_root):
            chosen.setdefault(v.layer, []).append(v.note())
    n = ctx.batch
    if n > 1 and any(layer.kind == "rubik" for layer in plan.layers):
        raise UnsupportedError("batch: a RUBIK contract (deconvolution / resize) runs one image "
                               "(its padded output cube is not placed per image)")
    if images:
        if ctx.input_int8 is None:
            raise NvdlaSimError("values mode needs the quantised network input")
        root = plan.root(plan.network.input_name)[0]
        for i in range(n):
            b.load_cube(image_buffers(buffers, strides, i)[root],
                        ctx.input_int8 if n == 1 else ctx.input_int8[i])
    notes: dict[str, list[str]] = {name: list(v) for name, v in chosen.items()}
    steps: list[Step] = []
    weights: dict[str, Buffer] | None = {} if n > 1 else None
    for group in groups:
        mark = len(alloc.placements)
        if n == 1:
            emitted = _emit_step(b, alloc, group, buffers, notes)
        elif (why := batch_rule(hw, group, buffers, n)) is None:
            emitted = [_emit_batch_step(b, alloc, group[0], buffers, strides, n)]
            notes.setdefault(group[0].name, []).append(
                f"batch: one hardware layer for {n} images (BATCH_NUMBER), weights read once")
        else:
            emitted = []
            for i in range(n):
                for step in _emit_step(b, alloc, group, image_buffers(buffers, strides, i),
                                       notes, weights):
                    step.images = (i,)
                    emitted.append(step)
            if group[0].kind != "gpu":
                notes.setdefault(group[0].name, []).append(f"batch: repeated per image ({why})")
        if emitted:
            emitted[0].allocated = alloc.placements[mark:]
        for step in emitted:
            if crc_checks and not step.gpu:
                for _, p in step.outputs:
                    b.check_crc(step.done[-1], p.address, p.size_bytes)
                step.end_command = len(b.commands)
            steps.append(step)
    from .perf_enable import enable_perf_counters
    if perf_counters:                       # SDP counters on, in CSB slots that cost no cycle
        enable_perf_counters(b, steps)
    program = b.build()
    # build() puts the interrupt mask first: every range shifts by one, and the first piece run
    # on the engine starts at the mask (with the input image before its first layer).
    for step in steps:
        step.first_command += 1
        step.end_command += 1
    first = next((step for step in steps if not step.gpu), None)
    if first is not None:
        first.first_command = 0
    for layer in plan.layers:
        if layer.name in notes:
            mine = list(dict.fromkeys(notes[layer.name]))     # a batch repeats a step's notes
            layer.notes = [n for n in layer.notes if n not in mine] + mine
    return Lowered(plan, program, steps, buffers, notes, strides if n > 1 else {}, images)


# --------------------------------------------------------------------------------------------------
# Running

CORE_UNITS = {"CMAC_A": MAC}


def _piece(program: RegisterProgram, step: Step) -> RegisterProgram:
    """The step's commands as a program of their own: sync_waits on interrupts of earlier steps
    are dropped (the previous piece ended when every interrupt it armed had fired)."""
    commands = program.commands[step.first_command:step.end_command]
    armed = {c.sync_id for c in commands if type(c) is IntrNotify}
    return RegisterProgram(f"{program.name}:{step.name}",
                           [c for c in commands if type(c) is not SyncWait or c.sync_id in armed])


def _bytes(engine: Engine) -> dict[str, int]:
    out = {}
    for key, memif in (("dram", engine.mcif), ("cvsram", engine.cvif)):
        per = memif.bytes_by_client.values() if memif is not None else []
        out[f"{key}_read"] = sum(v["read"] for v in per)
        out[f"{key}_write"] = sum(v["write"] for v in per)
    return out


def _busy(activity, since: int, start: float, end: float) -> dict[str, float]:
    """Busy cycles per core unit of the spans made since `since`, inside [start, end] (spans
    of one unit merged; the activity log's columns, no tuple per span)."""
    return {unit: kinds["busy"]
            for unit, kinds in activity.merged("busy", CORE_UNITS, since, (start, end)).items()}


def _interface_cycles(memif, read: int, write: int) -> float:
    """Cycles the interface's data path needs for the bytes (a shared cap: read + write)."""
    if memif is None:
        return 0.0
    if memif.shared_bytes_per_cycle:
        return max((read + write) / memif.shared_bytes_per_cycle,
                   max(read, write) / memif.bus_bytes_per_cycle)
    return max(read, write) / memif.bus_bytes_per_cycle


def core_cycles(step: Step, engine: Engine, element_bytes: int = 1) -> dict[str, float]:
    """Cycles the SDP / PDP / CDP cores need for the step's atoms at their throughput (what they
    would take if data never waited); `element_bytes` 2 for INT16/FP16 cubes."""
    r = engine.timing.params.rates
    atom = r.atom_bytes // element_bytes            # channels per atom
    out: dict[str, float] = {}
    for layer in step.layers:
        if layer.sdp is not None:
            atoms = -(-layer.sdp.channels // atom) * layer.sdp.h * layer.sdp.w
            out["SDP"] = out.get("SDP", 0.0) + atoms * r.sdp_cycles_per_atom
        if layer.pdp is not None:
            p = layer.pdp
            atoms = -(-p.channels // atom) * p.in_h * p.in_w
            out["PDP"] = out.get("PDP", 0.0) + atoms * r.pdp_cycles_per_atom
        if layer.cdp is not None:
            c = layer.cdp
            out["CDP"] = out.get("CDP", 0.0) + -(-c.channels // atom) * c.h * c.w * r.cdp_cycles_per_atom
    return out


def classify(step: Step, busy: dict[str, float], moved: dict[str, int], engine: Engine,
             element_bytes: int = 1) -> str:
    """What bounds a step: the resource that needs the most cycles -- the MAC array (CMAC busy
    cycles of the timing model), the memory (bytes moved at the interfaces' rates), or the
    SDP / PDP / CDP core (atoms at its throughput).  Memory-bound steps that read input lines or
    weights again because of a CBUF partial-height split are CBUF-bound."""
    cand = {CORE_UNITS[u]: v for u, v in busy.items()}
    cand.update(core_cycles(step, engine, element_bytes))
    cand[MEMORY] = max(_interface_cycles(engine.mcif, moved["dram_read"], moved["dram_write"]),
                       _interface_cycles(engine.cvif, moved["cvsram_read"], moved["cvsram_write"]))
    bound = max(cand, key=cand.get)
    return CBUF if bound == MEMORY and step.refetch else bound


def _store(outputs: dict[str, np.ndarray], plan: HwPlan, ref: TensorRef, cube: np.ndarray) -> None:
    buf = outputs.get(ref.tensor)
    if buf is None:
        t = plan.tensors[ref.tensor]
        buf = outputs[ref.tensor] = np.zeros((t.stored_channels, t.shape.h, t.shape.w),
                                             plan.tensor_dtype(ref.tensor).numpy)
    if ref.window is not None:              # a window of the buffer (a bilinear band)
        r0, rows, c0, cols = ref.window
        buf[ref.channel_offset:ref.channel_offset + ref.channels, r0:r0 + rows, c0:c0 + cols] = cube
        return
    buf[ref.channel_offset:ref.channel_offset + ref.channels] = cube


def _run_gpu(step: Step, plan: HwPlan, ctx: LoweringContext, engine: Engine,
             outputs: dict[str, np.ndarray]) -> None:
    """A GPU-fallback layer between two pieces: float op on the de-quantised inputs, its result
    (in the plan's element type) written to memory where the next DLA layer reads it."""
    layer = step.layers[0]
    op = plan.network.op(layer.ops[0])
    inputs = {}
    for name in op.inputs:
        root, offset = plan.root(name)
        if root not in outputs:
            raise NvdlaSimError(f"{layer.name}: input '{name}' was never produced")
        inputs[name] = outputs[root][offset:offset + plan.tensors[name].stored_channels]
        if (w := plan.window(name)) is not None:        # a spatial slice read in place
            inputs[name] = inputs[name][:, w[0]:w[0] + w[1], w[2]:w[2] + w[3]]
    ref, p = step.outputs[0]
    y = np.asarray(ctx.gpu_fallback(layer, inputs), p.dtype.numpy)
    engine.memory.space(p.ram_type).write(p.address, cube_image(p, y))
    _store(outputs, plan, ref, y)


def step_timings(step: Step, piece: RegisterProgram, engine: Engine, plan: HwPlan, t0: float,
                 t1: float, moved: dict[str, int], busy: dict[str, float],
                 stats: list) -> list[LayerTiming]:
    """The LayerTiming of each hardware layer of a step that ran from `t0` to `t1`."""
    writes = sum(type(c) is RegWrite for c in piece.commands)
    out = []
    for i, layer in enumerate(step.layers):
        own = i == 0                # a fused PDP shares the step: bytes on the first layer
        out.append(LayerTiming(
            layer.name, t0, t1,
            moved["dram_read"] if own else 0, moved["dram_write"] if own else 0,
            moved["cvsram_read"] if own else 0, moved["cvsram_write"] if own else 0,
            bound=classify(step, busy, moved, engine, plan.layer_dtype(step.layers[0]).bytes),
            cbuf_refetch=step.refetch,
            register_writes=writes if own else 0, statistics=stats[i]))
    return out


def read_step_outputs(step: Step, lowered: Lowered, engine: Engine,
                      per_image: list[dict[str, np.ndarray]]) -> None:
    """Values mode: read the step's outputs back from memory into each image's buffers."""
    for i in step.images:
        for ref, p in step.outputs:
            if i != step.images[0]:        # a batched step: image i one stride further
                p = replace(p, address=p.address + (i - step.images[0])
                            * lowered.batch_strides[ref.tensor])
            _store(per_image[i], lowered.plan, ref, read_output(engine, p))


def step_loop(engine: Engine, lowered: Lowered, ctx: LoweringContext, tap):
    """The step loop of a lowered network on one engine, as a generator: it yields each DLA
    piece and is sent the piece's RunResult once it ran, so `run_lowered` (engine.run_step) and
    a DLA core's SimPy process (compiler/multicore.py) drive the same loop.  Returns the layer
    timings, the checks and each image's tensors."""
    from ..report.statistics import split_by_layer
    plan, n = lowered.plan, ctx.batch
    per_image: list[dict[str, np.ndarray]] = [{} for _ in range(n)]
    if ctx.values:
        for i in range(n):
            _store(per_image[i], plan, plan.ref(plan.network.input_name),
                   ctx.input_int8 if n == 1 else ctx.input_int8[i])
    timings: list[LayerTiming] = []
    checks = []
    seen_spans = 0
    for step in lowered.steps:
        t0 = engine.env.now
        if step.gpu:
            if ctx.values:
                _run_gpu(step, plan, ctx, engine, per_image[step.images[0]])
            timings += [LayerTiming(layer.name, t0, t0) for layer in step.layers]
            continue
        before = _bytes(engine)
        piece = _piece(lowered.program, step)
        result = yield piece
        stats = split_by_layer([layer.kind for layer in step.layers], tap.take()) if tap \
            else [None] * len(step.layers)
        checks += result.checks
        t1 = engine.env.now
        after = _bytes(engine)
        moved = {k: after[k] - before[k] for k in after}
        busy = _busy(engine.activity, seen_spans, t0, t1)
        seen_spans = engine.activity.mark()
        timings += step_timings(step, piece, engine, plan, t0, t1, moved, busy, stats)
        if ctx.values:
            read_step_outputs(step, lowered, engine, per_image)
    if n > 1:
        timings = _merge_images(timings)
    return timings, checks, per_image


def run_lowered(lowered: Lowered, ctx: LoweringContext) -> PlanResult:
    """Run a lowered network on one engine, step by step (see the module doc)."""
    engine = Engine(ctx.hw, ctx.dram, ctx.clock_mhz, cvsram_memory=ctx.cvsram,
                    compute_values=ctx.values, record_transfers=ctx.timeline)
    follow_progress(engine)                 # nvdla-sim run --progress (progress_hook)
    from ..report.statistics import StatisticsTap
    tap = StatisticsTap(engine) if ctx.values else None     # timing only: nothing is counted
    loop = step_loop(engine, lowered, ctx, tap)
    try:
        piece = next(loop)
        while True:
            piece = loop.send(engine.run_step(piece))
    except StopIteration as done:
        timings, checks, per_image = done.value
    total = engine.env.now
    run = RunResult(lowered.program.name, checks, total, engine.unit_summary(total),
                    {m.name: m.bytes_by_client for m in (engine.mcif, engine.cvif) if m},
                    engine.timing.cbuf_summary(), engine=engine)
    return PlanResult(timings, total, per_image[0] if ctx.values else {}, run,
                      per_image if ctx.values and ctx.batch > 1 else [], lowered)


def _merge_images(timings: list[LayerTiming]) -> list[LayerTiming]:
    """One LayerTiming per hardware layer of a batch: its repeats (image after image, one
    after another in the program) from the first start to the last end, bytes and writes summed."""
    merged: dict[str, LayerTiming] = {}
    for t in timings:
        m = merged.get(t.name)
        if m is None:
            merged[t.name] = replace(t)
            continue
        m.start_cycle, m.end_cycle = min(m.start_cycle, t.start_cycle), max(m.end_cycle, t.end_cycle)
        for attr in ("dram_read_bytes", "dram_write_bytes", "cvsram_read_bytes",
                     "cvsram_write_bytes", "register_writes"):
            setattr(m, attr, getattr(m, attr) + getattr(t, attr))
        m.cbuf_refetch = m.cbuf_refetch or t.cbuf_refetch
        if t.statistics is not None:        # every image's counters (report/statistics.py)
            m.statistics = dict(m.statistics or {})
            for key, value in t.statistics.items():
                m.statistics[key] = m.statistics.get(key, 0) + value
    return list(merged.values())


def lower_and_run(plan: HwPlan, ctx: LoweringContext) -> PlanResult:
    """The runner's hook (scenario/runner.py): lower `plan` to one register program and run it."""
    return run_lowered(lower(plan, ctx), ctx)


# --------------------------------------------------------------------------------------------------
# Trace tests out

def emit_trace(plan: HwPlan, ctx: LoweringContext, folder: Path | str, name: str,
               memory="rtl_testbench", fmt: str | None = None) -> tuple[Path, RunResult]:
    """Write the compiled network as one nvdla/hw trace test: the whole program with a check of
    every hardware layer's output, each expected value computed by a run of that very program on
    the simulator.  `fmt` "cfg" (the v2 trace tests: `<folder>/<name>/<name>.cfg` + .dat images,
    check_crc) or "txn" (the v1 trace player: `<folder>/<name>/input.txn` + .dat images, a
    dump_mem of each output against a golden image); default by the hardware's NVDLA version.
    Returns the written trace file and the run."""
    from .emit import simulate_crcs
    fmt = fmt or ("txn" if ctx.hw.nvdla_version == 1 else "cfg")
    if fmt not in ("cfg", "txn"):
        raise NvdlaSimError(f"trace format '{fmt}': use cfg (v2 trace tests) or txn (v1 trace player)")
    if not ctx.values:
        raise NvdlaSimError("--emit-cfg needs the values (memory images and CRCs)")
    gpu = [layer for layer in plan.layers if layer.kind == "gpu"]
    trailing = _trailing_gpu(plan)
    if len(gpu) != len(trailing):
        inner = next(layer for layer in gpu if layer not in trailing)
        raise NvdlaSimError(f"layer '{inner.name}' runs on the GPU between DLA layers: a trace "
                            "test cannot hold it (set the network so that only trailing layers "
                            "fall back, or drop --emit-cfg)")
    dla_plan = replace(plan, layers=[layer for layer in plan.layers if layer.kind != "gpu"])
    # (without the SDP counter enables: the written traces stay those of the committed tests)
    lowered = lower(dla_plan, ctx, images=True, crc_checks=True, name=name, perf_counters=False)
    program = lowered.program
    if ctx.hw.clock_gating:         # the clock-gating hang's workaround (compiler/clock_gating.py)
        from .clock_gating import cdma_ahead
        program = cdma_ahead(program, ctx.hw)[0]
    program, result = simulate_crcs(program, ctx.hw, memory)
    if fmt == "txn":
        from ..frontends.txn_writer import emit_txn_trace
        out, result = emit_txn_trace(program, ctx.hw, Path(folder) / name, name, memory)
        return out / "input.txn", result
    from ..frontends.cfg_writer import write_cfg
    path = write_cfg(program, Path(folder) / name, name, ctx.hw.nvdla_version)
    return path, result


def emit_summary(path: Path, result, replay_options: str) -> str:
    """The line `compile --emit-cfg` prints about a written trace: how many checks it holds (v2
    check_crc values, v1 dump_mem golden images, both from the simulator's run), its cycles and
    how to replay it (`replay_options`: config.replay_options)."""
    counts = {kind: sum(c.kind == kind for c in result.checks) for kind in ("crc", "dump_mem")}
    checks = [f"{counts['crc']} check_crc values"] if counts["crc"] or not counts["dump_mem"] else []
    if counts["dump_mem"]:
        checks.append(f"{counts['dump_mem']} dump_mem golden images")
    return (f"{path}: {' and '.join(checks)} from the simulator, {result.cycles:.0f} cycles "
            f"(replay: nvdla-sim replay {Path(path).parent} {replay_options})")


def _trailing_gpu(plan: HwPlan) -> list[HwLayer]:
    out = []
    for layer in reversed(plan.layers):
        if layer.kind != "gpu":
            break
        out.append(layer)
    return out
