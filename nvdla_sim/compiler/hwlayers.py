"""Hardware layers: the network as the DLA runs it, and the seam to register-program lowering.

`build_plan(network, weights, hw, support)` groups the network's ops into *hardware layers*, each one
pass of one NVDLA pipeline, the way the NVDLA compiler fuses them:

    conv  CDMA -> CSC -> CMAC -> CACC -> SDP (flying): a convolution or fully connected layer, with its
          bias, folded batch norm, ReLU / PReLU / clipped ReLU, element-wise operand and LUT
          activation done by the SDP stages (see `SdpStage`); optionally streaming to a fused PDP
    sdp   SDP_RDMA -> SDP: the same post-operations on a tensor read from memory
    pdp   PDP_RDMA -> PDP (or on the fly from the SDP of the conv before it): max / average pooling
    cdp   CDP_RDMA -> CDP: LRN
    gpu   an op the DLA cannot run (GPU fallback): computed in float, outside DLA timing

Concatenation is no layer: its inputs are written into one buffer at channel offsets (aligned to
the atom: `memory_atomic_bytes` bytes, i.e. 32 INT8 or 16 INT16/FP16 channels on nv_full; an
input whose channel count is not a multiple of the atom leaves a hole of zero channels, and the
consumers' weights get zero columns there).  An element-wise op reads both operands at the
stored channels it writes, so a holed operand gives the other operand's convolution the same
holes (refused, one line, when that producer cannot write them).  Flatten in front of a fully connected layer is no
layer either: the FC becomes a convolution whose kernel covers the whole input.  Grouped convolutions become one conv layer per group when each group's output starts
on an atom boundary, else one conv with block-diagonal weights.

Everything a hardware layer needs is here in float and in NVDLA terms (channel windows, kernel,
stride, padding per side, the SDP stage allocation); `scenario.quantize` then fills the integer
parameters (`HwLayer.quant`), and `compiler/lower.py` turns each layer into register writes, CBUF
allocation and tensor placement.  The tensors' memory placement (addresses, strides, DRAM or
CVSRAM) is lowering's: a `Tensor` here is logical plus its channel layout.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..config import HardwareConfig
from ..datatype import INT8, DataType
from ..errors import NvdlaSimError
from .deconv import PHASED, emit_phased_chain
from .network import Network, Op, Shape
from .support import SupportReport
from .weight_views import block_diagonal, kernels_at, kernels_in_window, scale_kernels

SDP_KINDS = ("relu", "prelu", "clip", "sigmoid", "tanh", "batchnorm", "add", "mul", "max", "min")
ELEMENTWISE = ("add", "mul", "max", "min")


# --------------------------------------------------------------------------------------------------
# Tensors

@dataclass
class Tensor:
    """A feature cube.  `layout` maps logical channel ranges to stored channels:
    [(logical_start, stored_start, count)], holes (zero channels) between them."""
    name: str
    shape: Shape
    producer: str | None = None        # hw layer name, "input", or None (an alias, a fused value)
    alias_of: str | None = None        # concat buffer / flatten source holding this tensor's data
    channel_offset: int = 0            # first stored channel inside alias_of
    origin: tuple[int, int] = (0, 0)   # first row / column inside alias_of (a spatial slice)
    layout: list[tuple[int, int, int]] = field(default_factory=list)
    stored_channels: int = 0
    materialised: bool = True          # False: lives only inside a fused pipeline, never in memory
    on_dla: bool = True                # False: produced by a GPU fallback op
    scale: float | None = None         # real = scale * stored value (set by quantisation; FP16: 1)
    dtype: DataType | None = None      # element type in memory (build_plan: its readers' precision)

    def __post_init__(self):
        if not self.layout:
            self.layout = [(0, 0, self.shape.c)]
        if not self.stored_channels:
            self.stored_channels = max(s + n for _, s, n in self.layout)

    @property
    def has_holes(self) -> bool:
        return self.stored_channels != self.shape.c

    def stored_index(self) -> np.ndarray:
        """Stored channel of each logical channel."""
        idx = np.empty(self.shape.c, np.int64)
        for lo, so, n in self.layout:
            idx[lo:lo + n] = np.arange(so, so + n)
        return idx

    def to_stored(self, logical: np.ndarray, fill: float = 0.0) -> np.ndarray:
        """Spread a per-channel array (channels on axis 0) into the stored layout, holes = fill."""
        out = np.full((self.stored_channels,) + logical.shape[1:], fill, logical.dtype)
        out[self.stored_index()] = logical
        return out

    def from_stored(self, stored: np.ndarray) -> np.ndarray:
        """The logical channels of a stored-layout cube (channels on axis 0)."""
        return stored[self.stored_index()]


@dataclass(frozen=True)
class TensorRef:
    """A window of stored channels [channel_offset, +channels) of tensor `tensor` (its root buffer);
    `window` (first row, rows, first column, columns): a spatial slice read in place."""
    tensor: str
    channel_offset: int
    channels: int
    window: tuple[int, int, int, int] | None = None


# --------------------------------------------------------------------------------------------------
# Per-kind parameters (float, NVDLA terms)

@dataclass
class ConvSpec:
    in_channels: int                   # channels of the input window read (stored, holes included)
    in_h: int
    in_w: int
    out_channels: int                  # kernels of this hardware layer
    out_h: int
    out_w: int
    kernel: tuple[int, int]            # R, S
    stride: tuple[int, int]
    dilation: tuple[int, int]
    pad: tuple[int, int, int, int]     # top, left, bottom, right
    weight: np.ndarray = field(repr=False)   # float32 (K, in_channels, R, S), zeros in holes
    bias: np.ndarray = field(repr=False)     # float32 (K,)
    fc: bool = False                   # a fully connected layer run as this convolution
    macs: int = 0                      # useful multiply-accumulates (holes and zero blocks excluded)


@dataclass
class PostOp:
    """One operation the SDP applies after the convolution (or to the tensor it reads)."""
    kind: str                          # bias, affine, relu, clip, prelu, add, mul, max, min, sigmoid, tanh
    op: str                            # network op it comes from
    operand: TensorRef | None = None   # element-wise: the other tensor (same channel window)
    operand_tensor: str | None = None  # its logical tensor name (for its scale)
    scale: np.ndarray | None = field(default=None, repr=False)   # affine: per-channel scale
    bias: np.ndarray | None = field(default=None, repr=False)    # bias / affine: per-channel bias
    slope: np.ndarray | None = field(default=None, repr=False)   # prelu: per-channel slope
    value: float | None = None         # clip ceiling
    out_tensor: str | None = None      # the network tensor this post-op produces


@dataclass
class SdpStage:
    """Use of one SDP stage.  X stages (`x1` = BS, `x2` = BN) are ALU -> MUL -> ReLU; `y` (EW) is
    MUL -> ALU -> LUT.  Entries name what each part does:
      alu: None | "bias" (per-kernel operand) | ("add"|"max"|"min", post-op index) (per-element)
      mul: None | "rescale" (the stage moves values to a new scale) | "prelu" (per-kernel slopes)
           | ("product", post-op index) (per-element)
      relu: ReLU at the end of the stage;  lut: None | "sigmoid" | "tanh" (y only)."""
    name: str
    alu: object = None
    mul: object = None
    relu: bool = False
    lut: str | None = None
    post_ops: list[int] = field(default_factory=list)   # indexes of the post-ops it implements


@dataclass
class SdpSpec:
    source: str                        # "flying" (from CACC) or "memory" (SDP_RDMA)
    post_ops: list[PostOp]
    stages: list[SdpStage]
    channels: int                      # stored channels processed
    h: int
    w: int
    dst: str = "memory"                # "memory" or "pdp" (on-the-fly into the next PDP layer)


@dataclass
class PdpSpec:
    method: str                        # max / avg
    kernel: tuple[int, int]
    stride: tuple[int, int]
    pad: tuple[int, int, int, int]     # top, left, bottom, right (ceil-mode overhang included)
    channels: int
    in_h: int
    in_w: int
    out_h: int
    out_w: int
    on_the_fly: bool = False           # input streamed from the previous layer's SDP


@dataclass
class CdpSpec:
    size: int                          # LRN window 3/5/7/9
    alpha: float
    beta: float
    k: float
    channels: int
    h: int
    w: int


@dataclass
class HwLayer:
    name: str
    kind: str                          # conv, sdp, pdp, cdp, gpu
    row: str                           # report row (the network layer it mostly is)
    ops: list[str]                     # network ops it implements
    inputs: list[TensorRef]            # data read from memory (conv/sdp/pdp/cdp: one; gpu: all)
    output: TensorRef | None           # written window (None: streamed to the fused PDP)
    conv: ConvSpec | None = None
    sdp: SdpSpec | None = None
    pdp: PdpSpec | None = None
    cdp: CdpSpec | None = None
    rubik: object = None               # compiler/deconv.RubikSpec (kind "rubik")
    out_scale: str | None = None       # the tensor whose scale the output has (None: ops[-1])
    reason: str = ""                   # gpu: why it is not on the DLA
    notes: list[str] = field(default_factory=list)
    quant: object = None               # integer parameters, filled by scenario.quantize
    dtype: DataType | None = None      # precision it computes in (build_plan; None: the plan's)
    lowering: dict = field(default_factory=dict)   # conv: emit_conv.ConvLayer fields lowering
                                       # chose (winograd, clip_truncate, sdp, compress)
    reformat: dict | None = None       # an INT8 <-> FP16 reformat pass (compiler/reformat.py):
                                       # pass, in_dtype, source buffer, scale_of

    @property
    def macs(self) -> int:
        return self.conv.macs if self.conv else 0

    @property
    def on_dla(self) -> bool:
        return self.kind != "gpu"

    def describe(self) -> str:
        io = ", ".join(f"{r.tensor}[{r.channel_offset}:+{r.channels}]" for r in self.inputs)
        out = f"{self.output.tensor}[{self.output.channel_offset}:+{self.output.channels}]" \
            if self.output else "-> PDP"
        extra = ""
        if self.conv:
            c = self.conv
            extra = (f" {c.in_channels}x{c.in_h}x{c.in_w} -> {c.out_channels}x{c.out_h}x{c.out_w} "
                     f"k{c.kernel[0]}x{c.kernel[1]} s{c.stride[0]}")
        if self.sdp:
            extra += " sdp[" + " ".join(_stage_text(s) for s in self.sdp.stages) + "]"
        if self.pdp:
            extra += f" {self.pdp.method}{self.pdp.kernel[0]}x{self.pdp.kernel[1]}" + \
                     (" on-the-fly" if self.pdp.on_the_fly else "")
        if self.kind == "gpu":
            extra += f" ({self.reason})"
        return f"{self.name:<28} {self.kind:<4} {io} -> {out}{extra}"


def _runs(layout: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """A channel layout with adjacent runs merged (two spellings of one mapping compare equal)."""
    out: list[tuple[int, int, int]] = []
    for lo, so, n in sorted(layout):
        if out and out[-1][0] + out[-1][2] == lo and out[-1][1] + out[-1][2] == so:
            out[-1] = (out[-1][0], out[-1][1], out[-1][2] + n)
        else:
            out.append((lo, so, n))
    return out


def _window(tensors: dict[str, Tensor], name: str) -> tuple[int, int, int, int] | None:
    """(first row, rows, first column, columns) of tensor `name` inside its root buffer when a
    spatial slice is on its alias chain, else None."""
    t = tensors[name]
    r0 = c0 = 0
    while t.alias_of is not None:
        r0, c0 = r0 + t.origin[0], c0 + t.origin[1]
        t = tensors[t.alias_of]
    s = tensors[name].shape
    return None if (r0, c0, s.h, s.w) == (0, 0, t.shape.h, t.shape.w) else (r0, s.h, c0, s.w)


def _root(tensors: dict[str, Tensor], name: str) -> tuple[str, int]:
    t = tensors[name]
    offset = 0
    while t.alias_of is not None:
        offset += t.channel_offset
        t = tensors[t.alias_of]
    return t.name, offset


def _stage_text(s: SdpStage) -> str:
    parts = []
    for part in (s.alu, s.mul):
        if part is not None:
            parts.append(part if isinstance(part, str) else part[0])
    if s.relu:
        parts.append("relu")
    if s.lut:
        parts.append(s.lut)
    return f"{s.name}:" + "+".join(parts or ["-"])


@dataclass
class HwPlan:
    network: Network
    hw: HardwareConfig
    layers: list[HwLayer]
    tensors: dict[str, Tensor]
    fallback: dict[str, str]           # op -> reason, for ops computed as GPU fallback
    rows: list[str] = field(default_factory=list)   # report rows in order
    dtype: DataType = INT8             # the precision every DLA layer and tensor runs in

    def root(self, name: str) -> tuple[str, int]:
        """The buffer holding tensor `name` and the tensor's first stored channel in it."""
        return _root(self.tensors, name)

    def layer_dtype(self, layer: HwLayer) -> DataType:
        """The precision a hardware layer computes in (reads its input and operands in)."""
        return layer.dtype or self.dtype

    def tensor_dtype(self, name: str) -> DataType:
        """The element type tensor `name` (or its root buffer) has in memory."""
        return self.tensors[self.root(name)[0]].dtype or self.dtype

    def out_dtype(self, layer: HwLayer) -> DataType:
        """The element type a layer writes: its output buffer's (the SDP converts INT8 to INT16);
        a convolution or SDP pass streaming to PDP writes the PDP's precision."""
        if layer.output is not None:
            return self.tensor_dtype(layer.output.tensor)
        nxt = self.layers[self.layers.index(layer) + 1]
        return self.layer_dtype(nxt)

    def ref(self, name: str) -> TensorRef:
        root, offset = self.root(name)
        return TensorRef(root, offset, self.tensors[name].stored_channels,
                         _window(self.tensors, name))

    def window(self, name: str) -> tuple[int, int, int, int] | None:
        """Tensor `name`'s rows / columns inside its root buffer (a spatial slice), else None."""
        return _window(self.tensors, name)

    def layers_of_row(self, row: str) -> list[HwLayer]:
        return [layer for layer in self.layers if layer.row == row]

    def describe(self) -> str:
        return "\n".join(layer.describe() for layer in self.layers)


# --------------------------------------------------------------------------------------------------
# SDP stage allocation

def allocate_sdp(post_ops: list[PostOp], hw: HardwareConfig, source: str) -> tuple[list[SdpStage], int]:
    """Place post-ops on SDP stages X1, X2, Y in pipeline order; return the stages and how many
    post-ops fit (the rest need another SDP pass).  X1 always rescales its input (the convolution's
    per-kernel accumulator scale, or the memory tensor's scale) and adds the bias."""
    x1 = SdpStage("x1", mul="rescale")
    stages = [x1]
    cur = x1
    n_x = 1
    used_y = False
    for i, p in enumerate(post_ops):
        k = p.kind
        if k == "bias" and cur is x1 and x1.alu is None and not x1.relu:
            x1.alu = "bias"
        elif k in ("relu", "clip") and cur.name != "y":
            cur.relu = True            # clip's ceiling comes from the output scale's saturation
        elif k in ("sigmoid", "tanh") and not used_y and hw.sdp.ew and hw.sdp.lut:
            cur = SdpStage("y", lut=k)
            stages.append(cur)
            used_y = True
        elif k in ("add", "max", "min", "mul", "prelu", "affine", "bias") and not used_y and n_x < 2:
            n_x += 1
            cur = SdpStage("x2")
            if k in ("add", "max", "min"):
                cur.alu, cur.mul = (k, i), "rescale"
            elif k == "mul":
                cur.mul = ("product", i)
            elif k == "prelu":
                cur.mul = "prelu"
            else:                      # affine, or a bias that is not the convolution's
                cur.alu, cur.mul = "bias", "rescale"
            stages.insert(1, cur)
        else:
            return stages, i
        cur.post_ops.append(i)
    return stages, len(post_ops)


# --------------------------------------------------------------------------------------------------
# Building the plan

@dataclass
class _Chain:
    anchor: Op                          # conv / fc / first SDP op
    source: str                         # flying / memory
    main_input: str                     # tensor the chain reads (memory source) or the conv input
    post: list[PostOp] = field(default_factory=list)
    ops: list[str] = field(default_factory=list)
    end: str = ""                       # last tensor produced
    pool: Op | None = None              # fused PDP
    closed: bool = False
    fold: tuple[np.ndarray, np.ndarray] | None = None   # batch norm folded into the conv


class _Builder:
    def __init__(self, net: Network, weights: dict, hw: HardwareConfig, support: SupportReport,
                 dtype: DataType = INT8):
        self.net, self.weights, self.hw, self.support = net, weights, hw, support
        self.atom = dtype.elements_per_atom(hw.memory_atomic_bytes)     # channels per atom
        self.consumers = net.consumers()
        self.outputs = set(net.outputs)
        self.tensors: dict[str, Tensor] = {}
        self.layers: list[HwLayer] = []
        self.rows: list[str] = []

    # -- tensors ---------------------------------------------------------------------------------
    def make_tensors(self) -> None:
        net = self.net
        self.tensors[net.input_name] = Tensor(net.input_name, net.input_shape, producer="input")
        for op in net.ops:
            self.tensors[op.name] = Tensor(op.name, net.shapes[op.name])
        # Layouts flow in op order: concat places its inputs, shape-preserving ops copy their input's.
        self._ops = {op.name: op for op in net.ops}
        for op in net.ops:
            t = self.tensors[op.name]
            if op.kind == "concat" and self.support.on_dla(op.name):
                self._place_concat(op)
            elif op.kind == "flatten" and self.support.on_dla(op.name):
                t.alias_of, t.materialised = op.inputs[0], False
            elif op.kind == "slice" and self.support.on_dla(op.name):   # read in place
                if self.tensors[op.inputs[0]].has_holes:
                    raise NvdlaSimError(f"layer '{op.name}': a channel slice of '{op.inputs[0]}', "
                                        "which holds zero channels of a concatenation off the "
                                        "atom (an in-place view of it is not modelled)")
                t.alias_of, t.channel_offset = op.inputs[0], op.attrs["start"]
                rows, cols = op.attrs.get("rows"), op.attrs.get("cols")
                if rows or cols:                 # rows / columns: read in place, never stored
                    t.origin, t.materialised = ((rows or (0,))[0], (cols or (0,))[0]), False
        # An element-wise op reads its operands at the same stored channels as it writes (the SDP
        # streams both cubes surface by surface), so its inputs and output share one layout: an
        # operand with holes (a concatenation off the atom) lays out the other operand's producers
        # the same way.  Relaying out a tensor reruns the propagation, hence the loop.
        changed = True
        while changed:
            changed = False
            for op in net.ops:
                if op.kind not in ("pool", "lrn") + SDP_KINDS or not self.support.on_dla(op.name):
                    continue
                t = self.tensors[op.name]
                inputs = op.inputs if op.kind in ELEMENTWISE else op.inputs[:1]
                holed = [self.tensors[i] for i in inputs if self.tensors[i].has_holes]
                if not holed:
                    continue
                layout = holed[0].layout
                if op.kind in ELEMENTWISE:
                    for i in inputs:
                        changed |= self._relayout(i, layout, op)
                if _runs(t.layout) != _runs(layout):
                    t.layout, t.stored_channels = list(layout), max(s + n for _, s, n in layout)
                    changed = True

    def _relayout(self, name: str, layout: list, reader: Op) -> bool:
        """Give tensor `name` the channel `layout` (its producer writes holes there); False when it
        has it already.  Raises when its producer cannot (network input, concatenation, GPU op)."""
        t = self.tensors[name]
        if _runs(t.layout) == _runs(layout):
            return False
        op = self._ops.get(name)
        if op is None or t.alias_of is not None or t.has_holes or op.kind not in ("conv", "fc", "pool", "lrn") \
                + SDP_KINDS or not self.support.on_dla(name) or t.shape.c != sum(n for *_, n in layout):
            raise NvdlaSimError(
                f"layer '{reader.name}': operands '{reader.inputs[0]}' and '{reader.inputs[1]}' are "
                f"stored with different channel layouts (a concatenation part starts off the "
                f"{self.atom}-channel atom) and '{name}' cannot be written in the other's layout; "
                "an element-wise op reads both at the same stored channels")
        if op.kind not in ("conv", "fc"):
            for i in (op.inputs if op.kind in ELEMENTWISE else op.inputs[:1]):
                self._relayout(i, layout, op)
        t.layout, t.stored_channels = list(layout), max(s + n for _, s, n in layout)
        return True

    def _place_concat(self, op: Op) -> None:
        buf = self.tensors[op.name]
        layout = []
        pos = 0
        logical = 0
        for name in op.inputs:
            t = self.tensors[name]
            if t.alias_of is not None:
                raise NvdlaSimError(f"layer '{op.name}': input '{name}' already lives in buffer "
                                    f"'{t.alias_of}' (a tensor feeding two concatenations)")
            if name == self.net.input_name:
                raise NvdlaSimError(f"layer '{op.name}': concatenating the network input is not "
                                    "supported (it would need a copy)")
            t.alias_of, t.channel_offset = op.name, pos
            layout += [(logical + lo, pos + so, n) for lo, so, n in t.layout]
            logical += t.shape.c
            pos += -(-t.stored_channels // self.atom) * self.atom
        buf.layout = layout
        buf.stored_channels = max(s + n for _, s, n in layout)

    # -- chains ----------------------------------------------------------------------------------
    def single_use(self, tensor: str) -> bool:
        return len(self.consumers.get(tensor, [])) == 1 and tensor not in self.outputs \
            and self.tensors[tensor].alias_of is None

    def post_op(self, op: Op, main: str) -> PostOp:
        a = op.attrs
        t = self.tensors[main]
        if op.kind in ELEMENTWISE:
            other = op.inputs[1] if op.inputs[0] == main else op.inputs[0]
            return PostOp(op.kind, op.name, operand_tensor=other, out_tensor=op.name)
        if op.kind == "prelu":
            slope = np.full(t.shape.c, a["slope"], np.float32) if "slope" in a \
                else self.weights[op.name]["slope"]
            return PostOp("prelu", op.name, slope=slope, out_tensor=op.name)
        if op.kind == "clip":
            return PostOp("clip", op.name, value=float(a["max"]), out_tensor=op.name)
        if op.kind == "batchnorm":
            w = self.weights[op.name]
            return PostOp("affine", op.name, scale=w["scale"], bias=w["bias"], out_tensor=op.name)
        return PostOp(op.kind, op.name, out_tensor=op.name)

    def fits(self, chain: _Chain, extra: PostOp) -> bool:
        _, n = allocate_sdp(chain.post + [extra], self.hw, chain.source)
        return n == len(chain.post) + 1

    def build(self) -> None:
        self.make_tensors()
        open_chains: dict[str, _Chain] = {}          # end tensor -> chain still accepting ops
        order: list[tuple[str, object]] = []         # ("chain", chain) / ("op", op) in run order
        pending: dict[int, int] = {}                 # id(chain) -> index in order
        for op in self.net.ops:
            if not self.support.on_dla(op.name):
                self._close_inputs(op, open_chains)
                order.append(("gpu", op))
                continue
            if op.kind in ("conv", "fc") + PHASED:
                ch = _Chain(op, "flying", self._conv_input(op), ops=[op.name], end=op.name)
                if op.attrs.get("relu"):
                    ch.post.append(PostOp("relu", op.name, out_tensor=op.name))
                open_chains[op.name] = ch
                pending[id(ch)] = len(order)
                order.append(("chain", ch))
                continue
            if op.kind in ("flatten", "slice"):
                continue                             # alias; the readers read its source
            if op.kind == "concat":
                self._close_inputs(op, open_chains)
                continue
            if op.kind == "pool":
                ch = open_chains.get(op.inputs[0])
                if ch is not None and self.single_use(op.inputs[0]) and ch.pool is None \
                        and ch.anchor.kind not in PHASED:
                    ch.pool, ch.end = op, op.name
                    ch.ops.append(op.name)
                    del open_chains[op.inputs[0]]
                    self._move_to_end(order, pending, ch)
                    continue
                self._close_inputs(op, open_chains)
                order.append(("pdp", op))
                continue
            if op.kind == "lrn":
                self._close_inputs(op, open_chains)
                order.append(("cdp", op))
                continue
            if op.kind == "sdpfn":                   # one SDP pass of compiler/ext_ops.py
                self._close_inputs(op, open_chains)
                order.append(("sdpfn", op))
                continue
            if op.kind in SDP_KINDS:
                if self._try_fuse(op, open_chains, order, pending):
                    continue
                main = op.inputs[0]              # an element-wise op reads its first input
                self._close_inputs(op, open_chains)
                ch = _Chain(op, "memory", main, ops=[op.name], end=op.name)
                ch.post.append(self.post_op(op, main))
                if op.kind in ELEMENTWISE and op.attrs.get("relu"):
                    ch.post.append(PostOp("relu", op.name, out_tensor=op.name))
                open_chains[op.name] = ch
                pending[id(ch)] = len(order)
                order.append(("chain", ch))
                continue
            raise NvdlaSimError(f"layer '{op.name}': op kind '{op.kind}' has no hardware mapping")
        for kind, item in order:
            if kind == "chain":
                self._emit_chain(item)
            elif kind == "gpu":
                self._emit_gpu(item)
            elif kind == "pdp":
                self._emit_pdp(item, row=item.attrs.get("row"))
            elif kind == "sdpfn":
                from .ext_ops import emit_sdpfn
                emit_sdpfn(self, item)
            elif kind == "cdp":
                self._emit_cdp(item)
        self._mark_materialised()

    def _move_to_end(self, order, pending, ch) -> None:
        """A chain grows until its last op: it runs where that op is (its other inputs exist then)."""
        i = pending[id(ch)]
        order.pop(i)
        for key, j in pending.items():
            if j > i:
                pending[key] = j - 1
        pending[id(ch)] = len(order)
        order.append(("chain", ch))

    def _conv_input(self, op: Op) -> str:
        src = op.inputs[0]
        t = self.tensors[src]
        if op.kind == "fc" and t.alias_of is not None and not t.materialised:
            return t.alias_of                        # flatten: read its source
        return src

    def _close_inputs(self, op: Op, open_chains: dict) -> None:
        for i in op.inputs:
            open_chains.pop(i, None)

    def _try_fuse(self, op: Op, open_chains, order, pending) -> bool:
        candidates = [i for i in op.inputs if i in open_chains and self.single_use(i)]
        if op.kind in ELEMENTWISE:
            # Fuse into the operand produced last; the other one must then be in memory.
            candidates.sort(key=lambda n: -self._op_index(n))
            candidates = [c for c in candidates if not open_chains[c].pool][:1]
        for main in candidates:
            ch = open_chains[main]
            if ch.pool is not None:
                continue
            if ch.anchor.kind in PHASED and op.kind not in ("relu", "clip"):
                continue                 # the phase cube: only value-wise post-ops (deconv.py)
            if op.kind == "batchnorm" and ch.anchor.kind in ("conv", "fc") and not ch.post \
                    and ch.fold is None:
                w = self.weights[op.name]
                ch.fold = (w["scale"], w["bias"])
            else:
                p = self.post_op(op, main)
                if not self.fits(ch, p):
                    continue
                ch.post.append(p)
                if op.kind in ELEMENTWISE and op.attrs.get("relu"):
                    r = PostOp("relu", op.name, out_tensor=op.name)
                    if not self.fits(ch, r):
                        ch.post.pop()
                        continue
                    ch.post.append(r)
            ch.ops.append(op.name)
            ch.end = op.name
            del open_chains[main]
            for other in op.inputs:
                open_chains.pop(other, None)
            open_chains[op.name] = ch
            self._move_to_end(order, pending, ch)
            return True
        return False

    def _op_index(self, name: str) -> int:
        for i, o in enumerate(self.net.ops):
            if o.name == name:
                return i
        return -1

    # -- emitting hardware layers -----------------------------------------------------------------
    def _row(self, name: str) -> str:
        if name not in self.rows:
            self.rows.append(name)
        return name

    def _emit_gpu(self, op: Op) -> None:
        self.layers.append(HwLayer(op.name, "gpu", self._row(op.name), [op.name],
                                   [self.ref(i) for i in op.inputs], self.ref(op.name),
                                   reason=self.support.reason(op.name)))
        self.tensors[op.name].on_dla = False

    def ref(self, name: str) -> TensorRef:
        root, offset = _root(self.tensors, name)
        return TensorRef(root, offset, self.tensors[name].stored_channels,
                         _window(self.tensors, name))

    def _emit_pdp(self, op: Op, src_ref: TensorRef | None = None, out_ref: TensorRef | None = None,
                  on_the_fly: bool = False, name: str | None = None, row: str | None = None,
                  ops: list[str] | None = None) -> HwLayer:
        a = op.attrs
        x = self.net.shapes[op.inputs[0]]
        y = self.net.shapes[op.name]
        (kh, kw), (sh, sw), (pt, pl, pb, pr) = a["kernel"], a["stride"], a["pad"]
        pb = max(pb, (y.h - 1) * sh + kh - x.h - pt)   # ceil-mode overhang is padding to PDP
        pr = max(pr, (y.w - 1) * sw + kw - x.w - pl)
        src_ref = src_ref or self.ref(op.inputs[0])
        out_ref = out_ref or self.ref(op.name)
        spec = PdpSpec(a["method"], (kh, kw), (sh, sw), (pt, pl, pb, pr), out_ref.channels,
                       x.h, x.w, y.h, y.w, on_the_fly)
        layer = HwLayer(name or op.name, "pdp", self._row(row or op.name), ops or [op.name],
                        [] if on_the_fly else [src_ref], out_ref, pdp=spec)
        self.layers.append(layer)
        return layer

    def _emit_cdp(self, op: Op) -> None:
        a = op.attrs
        x = self.net.shapes[op.inputs[0]]
        src, out = self.ref(op.inputs[0]), self.ref(op.name)
        layer = HwLayer(op.name, "cdp", self._row(op.name), [op.name], [src], out,
                        cdp=CdpSpec(a["size"], a["alpha"], a["beta"], a.get("k", 1.0),
                                    out.channels, x.h, x.w))
        if self.tensors[op.inputs[0]].has_holes:
            layer.notes.append("LRN window crosses zero channels left by concatenation alignment")
        self.layers.append(layer)

    def _emit_chain(self, ch: _Chain) -> None:
        row = self._row(ch.anchor.attrs.get("row", ch.anchor.name))   # ext_ops: the op's row
        if ch.anchor.kind in PHASED:
            return emit_phased_chain(self, ch, row)
        sdp_end = ch.pool.inputs[0] if ch.pool is not None else ch.end
        layout = self.tensors[sdp_end].layout
        reads = [p.operand_tensor for p in ch.post if p.operand_tensor is not None]
        if ch.anchor.kind not in ("conv", "fc"):
            reads.append(ch.main_input)
        for name in reads:
            if _runs(self.tensors[name].layout) != _runs(layout):   # make_tensors matched them
                raise NvdlaSimError(f"layer '{ch.anchor.name}': SDP input '{name}' and output "
                                    f"'{sdp_end}' have different channel layouts (concatenation "
                                    "parts off the atom); the SDP reads and writes the same "
                                    "stored channels")
        for p in ch.post:
            if p.operand_tensor is not None:
                p.operand = self.ref(p.operand_tensor)
        if ch.anchor.kind in ("conv", "fc"):
            self._emit_conv_chain(ch, row, sdp_end)
        else:
            self._emit_sdp_chain(ch, row, sdp_end)

    def _emit_sdp_chain(self, ch: _Chain, row: str, sdp_end: str) -> None:
        src = self.ref(ch.main_input)
        shape = self.net.shapes[ch.main_input]
        stages, n = allocate_sdp(ch.post, self.hw, "memory")
        assert n == len(ch.post)
        for p in ch.post:
            self._spread(p, self.tensors[sdp_end])
        sdp = SdpSpec("memory", ch.post, stages, src.channels, shape.h, shape.w,
                      dst="pdp" if ch.pool else "memory")
        sdp_ops = [o for o in ch.ops if ch.pool is None or o != ch.pool.name]
        out_ref = None if ch.pool else self.ref(sdp_end)
        self.layers.append(HwLayer(ch.anchor.name, "sdp", row, sdp_ops, [src], out_ref, sdp=sdp))
        if ch.pool is not None:
            self._emit_pdp(ch.pool, on_the_fly=True, row=row)

    def _spread(self, p: PostOp, out: Tensor) -> None:
        """Per-channel parameters into the stored channel layout of the tensor being produced."""
        if not out.has_holes:
            return
        for attr in ("scale", "bias", "slope"):
            v = getattr(p, attr)
            if v is not None and len(v) == out.shape.c:
                setattr(p, attr, out.to_stored(np.asarray(v)))

    def _emit_conv_chain(self, ch: _Chain, row: str, sdp_end: str) -> None:
        op = ch.anchor
        a = op.attrs
        w = self.weights[op.name]
        weight = np.asarray(w["weight"], np.float32)
        bias = np.asarray(w.get("bias", np.zeros(weight.shape[0])), np.float32)
        src_name = ch.main_input
        x_t = self.tensors[src_name]
        x = x_t.shape
        y = self.net.shapes[op.name]
        if op.kind == "fc":
            weight = weight.reshape(weight.shape[0], x.c, x.h, x.w)
            kernel, stride, dil, pad, groups = (x.h, x.w), (1, 1), (1, 1), (0, 0, 0, 0), 1
            out_h = out_w = 1
        else:
            kernel, stride, dil, pad, groups = a["kernel"], a["stride"], a["dilation"], a["pad"], a["groups"]
            out_h, out_w = y.h, y.w
        if ch.fold is not None:
            scale, fbias = ch.fold
            weight = scale_kernels(weight, scale)       # a stand-in stays a view (weight_views)
            bias = (bias * scale + fbias).astype(np.float32)
        k_total = weight.shape[0]
        end_t = self.tensors[sdp_end]
        out_full = self.ref(sdp_end)
        post = ch.post
        if np.any(bias != 0):
            post = [PostOp("bias", op.name, bias=bias)] + post
        for p in post:
            self._spread(p, end_t)
        x_idx = x_t.stored_index()
        y_idx = end_t.stored_index()
        kg, cg = k_total // groups, x.c // groups
        split = groups > 1 and all(y_idx[g * kg] % self.atom == 0 and
                                   np.all(np.diff(y_idx[g * kg:(g + 1) * kg]) == 1)
                                   for g in range(groups))
        split = split and all(self._operand_aligned(p, g * kg, kg) for p in post for g in range(groups))
        rsx = kernel[0] * kernel[1] * out_h * out_w
        if groups == 1 or split:
            parts = []
            for g in range(groups):
                lo_c, hi_c = x_idx[g * cg], x_idx[(g + 1) * cg - 1] + 1
                c0 = lo_c // self.atom * self.atom
                c1 = min(-(-hi_c // self.atom) * self.atom, x_t.stored_channels)
                if groups == 1:
                    c0, c1 = 0, x_t.stored_channels
                # zeros in the window's holes; stand-in weights stay views (weight_views)
                wg = kernels_in_window(weight[g * kg:(g + 1) * kg], x_idx[g * cg:(g + 1) * cg] - c0,
                                       c1 - c0, tuple(kernel))
                o0 = int(y_idx[g * kg]) if groups > 1 else 0
                o_ch = kg if groups > 1 else end_t.stored_channels
                if groups == 1 and end_t.has_holes:
                    wg = kernels_at(wg, y_idx, o_ch)
                parts.append((g, c0, c1, wg, o0, o_ch))
        else:
            # Block-diagonal: one convolution over all channels, zero weights across groups.
            wg = block_diagonal(weight, groups, y_idx[:k_total], x_idx[:x.c],
                                end_t.stored_channels, x_t.stored_channels)
            parts = [(None, 0, x_t.stored_channels, wg, 0, end_t.stored_channels)]
        src_root = self.ref(src_name)
        for g, c0, c1, wg, o0, o_ch in parts:
            name = op.name if g is None or groups == 1 else f"{op.name}.g{g}"
            bias_g = self._slice_bias(post, o0, o_ch)
            gpost = [self._slice_post(p, o0, o_ch) for p in post]
            stages, n = allocate_sdp(gpost, self.hw, "flying")
            assert n == len(gpost), (op.name, [p.kind for p in gpost])
            useful_k = kg if g is not None else k_total
            useful_c = cg if groups > 1 else x.c
            macs = useful_k * useful_c * rsx if g is not None or groups == 1 else k_total * cg * rsx
            conv = ConvSpec(c1 - c0, x.h, x.w, o_ch, out_h, out_w, tuple(kernel), tuple(stride),
                            tuple(dil), tuple(pad), wg, bias_g, op.kind == "fc", macs)
            sdp = SdpSpec("flying", gpost, stages, o_ch, out_h, out_w,
                          dst="pdp" if ch.pool else "memory")
            in_ref = TensorRef(src_root.tensor, src_root.channel_offset + c0, c1 - c0,
                               src_root.window)
            out_ref = None if ch.pool else TensorRef(out_full.tensor, out_full.channel_offset + o0, o_ch)
            ops = [o for o in ch.ops if ch.pool is None or o != ch.pool.name]
            layer = HwLayer(name, "conv", row, ops, [in_ref], out_ref, conv=conv, sdp=sdp)
            if groups > 1 and g is None:
                layer.notes.append(f"{groups} groups as one block-diagonal convolution "
                                   "(group outputs not atom-aligned)")
            self.layers.append(layer)
            if ch.pool is not None:
                pool_out = self.ref(ch.pool.name)
                self._emit_pdp(ch.pool, out_ref=TensorRef(pool_out.tensor, pool_out.channel_offset + o0,
                                                          o_ch),
                               on_the_fly=True, name=f"{ch.pool.name}.g{g}" if name != op.name else None,
                               row=row)

    def _operand_aligned(self, p: PostOp, start: int, n: int) -> bool:
        if p.operand_tensor is None:
            return True
        idx = self.tensors[p.operand_tensor].stored_index()
        return idx[start] % self.atom == 0 and bool(np.all(np.diff(idx[start:start + n]) == 1))

    @staticmethod
    def _slice_bias(post: list[PostOp], o0: int, n: int) -> np.ndarray:
        for p in post:
            if p.kind == "bias":
                return p.bias[o0:o0 + n]
        return np.zeros(n, np.float32)

    def _slice_post(self, p: PostOp, o0: int, n: int) -> PostOp:
        q = PostOp(p.kind, p.op, p.operand, p.operand_tensor, value=p.value, out_tensor=p.out_tensor)
        for attr in ("scale", "bias", "slope"):
            v = getattr(p, attr)
            if v is not None:
                setattr(q, attr, np.asarray(v)[o0:o0 + n])
        if p.operand is not None:
            q.operand = TensorRef(p.operand.tensor, p.operand.channel_offset + o0, n)
        return q

    def _mark_materialised(self) -> None:
        written = set()
        for layer in self.layers:
            for op in layer.ops:
                self.tensors[op].materialised = False
            if layer.output is not None:
                last = layer.ops[-1]
                if layer.kind in ("conv", "sdp") and layer.sdp and layer.sdp.dst == "pdp":
                    continue
                written.add(last)
        for name in written:
            self.tensors[name].materialised = True
        for name, t in self.tensors.items():
            if t.producer is None:
                t.producer = next((layer.name for layer in self.layers if name in layer.ops), None)
        for op in self.net.ops:
            if op.kind == "concat" and self.support.on_dla(op.name):
                self.tensors[op.name].materialised = True


def build_plan(network: Network, weights: dict, hw: HardwareConfig, support: SupportReport,
               dtype: DataType = INT8, layer_precision: dict[str, DataType] | None = None,
               input_dtype: DataType | None = None) -> HwPlan:
    """The hardware-layer list of `network` on `hw` in precision `dtype`, the hardware layers
    holding an op named in `layer_precision` in that one (ops outside `support` become GPU
    layers)."""
    layer_precision = layer_precision or {}
    from .ext_ops import expand                 # Scale, Sub, ..., Softmax as NVDLA operations
    network = expand(network, weights, support.on_dla)
    used = {dtype, *layer_precision.values()}
    atom_type = min(used, key=lambda t: t.bytes)          # concat offsets aligned for every type
    b = _Builder(network, weights, hw, support, atom_type)
    b.build()
    fallback = {name: support.reason(name) for name in support.fallback_ops}
    plan = HwPlan(network, hw, b.layers, b.tensors, fallback, b.rows, dtype)
    from . import reformat                  # INT8 <-> FP16 in one program: SDP reformat passes
    if reformat.needed(layer_precision, dtype, input_dtype):    # (input_dtype: the host's)
        layer_precision = reformat.widen_fused(plan, layer_precision)
        reformat.insert_reformats(plan, layer_precision, input_dtype)
    assign_precisions(plan, layer_precision)
    return plan


def assign_precisions(plan: HwPlan, layer_precision: dict[str, DataType]) -> None:
    """Each hardware layer's precision (the one named for any of its ops, else the plan's) and
    each buffer's element type (that of the layers reading it; else its producer's).  Only the
    SDP converts, and only to a wider integer type (INT8 -> INT16): a PDP/CDP layer writes its
    own precision, and a buffer read in two precisions is an error naming both readers."""
    ops = {op.name for op in plan.network.ops}
    for name in layer_precision:
        if name not in ops:
            raise NvdlaSimError(f"precision.layers.{name}: no layer '{name}' in network "
                                f"'{plan.network.name}'")
    for layer in plan.layers:
        if layer.reformat:                  # compiler/reformat.py: its own precisions
            continue
        named = [layer_precision[o] for o in layer.ops if o in layer_precision]
        if len(set(named)) > 1:
            raise NvdlaSimError(f"precision.layers: the ops of hardware layer '{layer.name}' "
                                f"({', '.join(layer.ops)}) are given different precisions")
        layer.dtype = named[0] if named else plan.dtype
    readers: dict[str, tuple[DataType, str]] = {}
    for layer in plan.layers:
        if not layer.on_dla:
            continue
        refs = list(layer.inputs) + ([p.operand for p in layer.sdp.post_ops if p.operand]
                                     if layer.sdp else [])
        read_as = layer.reformat["in_dtype"] if layer.reformat else layer.dtype   # INT16 as INT8
        for ref in refs:
            seen = readers.setdefault(ref.tensor, (read_as, layer.name))
            if seen[0] != read_as:
                raise NvdlaSimError(
                    f"precision.layers: '{ref.tensor}' is read in {seen[0]} by '{seen[1]}' and in "
                    f"{read_as} by '{layer.name}' (a buffer has one element type)")
    for name, t in plan.tensors.items():
        if name in readers:
            t.dtype = readers[name][0]
    for layer in plan.layers:
        if layer.output is not None and plan.tensors[layer.output.tensor].dtype is None:
            plan.tensors[layer.output.tensor].dtype = layer.dtype if layer.on_dla else plan.dtype
    for i, layer in enumerate(plan.layers):
        if layer.on_dla and layer.output is None:       # streamed to the PDP: its precision
            plan.tensors[layer.ops[-1]].dtype = plan.layer_dtype(plan.layers[i + 1])
    for t in plan.tensors.values():
        if t.dtype is None and t.alias_of is None:
            t.dtype = plan.dtype
    for layer in plan.layers:
        if not layer.on_dla or layer.reformat:
            continue
        out = plan.out_dtype(layer)
        if out == layer.dtype:
            continue
        what = f"'{layer.name}' computes in {layer.dtype} but its output is read in {out}"
        if layer.kind in ("pdp", "cdp"):
            raise NvdlaSimError(f"precision.layers: {what}; {layer.kind.upper()} cannot convert "
                                f"(give '{layer.ops[-1]}' {out} too)")
        if out.is_float or layer.dtype.is_float or out.bytes < layer.dtype.bytes:
            raise NvdlaSimError(f"precision.layers: {what}; the SDP converts INT8 to INT16 only")


# --------------------------------------------------------------------------------------------------
# The seam: what lowering receives and returns

@dataclass
class LoweringContext:
    """Everything `lower_and_run` needs besides the plan (see scenario/runner.py)."""
    hw: HardwareConfig
    clock_mhz: float
    dram: object                       # engine.memif.MemoryProfile of the DRAM interface
    cvsram: object | None              # MemoryProfile of the CVSRAM interface, or None
    cvsram_bytes: int                  # CVSRAM capacity tensors may be placed in (0: none)
    values: bool                       # True: run the arithmetic; False: timing only
    input_int8: np.ndarray | None      # the network input in the plan's element type (int8,
                                       # int16 or float16), in its stored layout
    gpu_fallback: object = None        # callable(layer, {tensor: stored-layout cube}) -> output cube
    timeline: bool = False             # keep the engine's activity log for the timeline plot
    winograd: str = "off"              # auto / on: Winograd convolution (compiler/winograd.py)
    weight_compression: str = "off"    # auto: compress weights where that fetches fewer bytes
    post_extension: str = "off"        # auto / on: image first layer's channel post-extension
    batch: int = 1                     # images of one run; input_int8 is then (N, C, H, W)
    input_format: str = "auto"         # network input / output layout (compiler/io_formats.py):
    output_format: str = "auto"        # auto / dla_linear / dla_hwc4 / chw16 / chw32
    sparse_weights: bool = False       # mark 2:4 structured-sparsity convolutions (sparsity.py)


@dataclass
class LayerTiming:
    """One hardware layer as the engine ran it."""
    name: str                          # HwLayer.name
    start_cycle: float
    end_cycle: float
    dram_read_bytes: int = 0
    dram_write_bytes: int = 0
    cvsram_read_bytes: int = 0
    cvsram_write_bytes: int = 0
    bound: str | None = None           # MAC / memory / CBUF if lowering knows; else the report derives it
    cbuf_refetch: bool = False         # data or weights did not fit the CBUF and were fetched again
    register_writes: int = 0
    statistics: dict[str, int] | None = None   # UNIT.REG -> statistics register values the
                                       # layer's units wrote (report/statistics.py); None: timing only

    @property
    def cycles(self) -> float:
        return self.end_cycle - self.start_cycle


@dataclass
class PlanResult:
    """What `lower_and_run` returns."""
    layers: list[LayerTiming]
    total_cycles: float                # first OP_ENABLE to the last interrupt, GPU layers excluded
    outputs: dict[str, np.ndarray] = field(default_factory=dict)   # values mode: root buffer ->
                                       # (stored channels, H, W) of the plan's element type as the
                                       # DLA left it in memory
    engine_result: object = None       # engine.RunResult (activity log, transfers) for the timeline
    batch_outputs: list = field(default_factory=list)   # batch > 1: `outputs` of each image
    timing_program: object = None     # the Lowered the run executed (either mode): what the
                                       # host model reads, so the network is not lowered again
