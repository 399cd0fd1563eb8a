"""TensorRT's DLA restrictions ("Working with DLA", DLA supported layers and restrictions) as named
placement rules, and the DLA targets (Jetson Xavier / Orin) the `xavier_dla` / `orin_dla` presets
stand for.

Every rule has a name (`conv.kernel`, `pool.window`, ...) and a scope:

- `hardware`: the limit is NVDLA's own (a register field's range: CSC WEIGHT_WIDTH_EXT and
  CDMA PAD_LEFT/PAD_TOP are 5 bits, CONV_X_STRIDE 3 bits, PDP PAD_LEFT 3 bits and
  KERNEL_STRIDE_WIDTH 4 bits, CDP NORMALZ_LEN 2 bits for 3/5/7/9, ...): applied on every preset;
- `tensorrt`: TensorRT's limit, narrower than the registers (PDP KERNEL_WIDTH is 4 bits but
  TensorRT allows windows 1..8; clipped ReLU ceiling 1..127; padding below the kernel): the
  compiler applied these on every preset before the DLA presets existed, so they stay on every
  preset;
- `dla`: TensorRT's limit applied only when the preset is a DLA target (`DLA_TARGETS`): the CBUF
  bank budget of one kernel group plus the lines of one output row, Softmax only on Orin, the
  batch range.

`op_violations` returns, per op, reasons of the form `"<text> [rule <name>]"`; `compiler/support.py`
turns them into GPU fallback (or the `gpu_fallback: false` error naming the first).

Precision upgrades (`UPGRADES`): in INT8, TensorRT runs LRN, sigmoid and tanh in FP16 on the DLA
("auto-upgrading to FP16"); `resolve_precisions` applies them for `precision: [int8, fp16]`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..config import HardwareConfig
from ..datatype import INT8, DataType
from ..errors import NvdlaSimError
from .network import EXT_KINDS, Network, Op

MAX_DIM = 8192                  # every non-batch dimension (13-bit width/height/channel fields)
MAX_BATCH = 4096                # TensorRT: "The maximum supported batch size is 4096"
CBUF_BANKS_ALLOTTED = 16        # TensorRT: numConvBufBankAllotted


@dataclass(frozen=True)
class DlaTarget:
    """A Jetson DLA: what the hardware preset cannot hold (clock, managed SRAM, pool defaults).
    Sources: [TRT] TensorRT "Working with DLA" (docs/sources/tensorrt-working-with-dla.txt) and
    the TensorRT MemoryPoolType reference; [JETSON] NVIDIA's public Jetson module figures."""
    name: str
    clock_mhz: float            # [JETSON] the DLA's maximum clock
    sram_bytes: int             # [TRT] the SRAM the managed-SRAM pool lives in
    sram_shared: bool           # [TRT] Xavier: shared by the cores; Orin: per core
    managed_sram_default: int   # [TRT] default kDLA_MANAGED_SRAM pool
    softmax: bool               # [TRT] Softmax "only supported on NVIDIA Orin, not Xavier"
    cores: int = 2              # [JETSON] two DLA cores (AGX Xavier, AGX Orin)
    local_dram_default: int = 1 << 30      # [TRT] kDLA_LOCAL_DRAM "defaults to 1 GiB"
    global_dram_default: int = 512 << 20   # [TRT] kDLA_GLOBAL_DRAM "defaults to 512 MiB"
    max_loadables: int = 16     # [TRT] "only 16 DLA loadable can be loaded concurrently per core"


DLA_TARGETS = {
    # [JETSON] Jetson AGX Xavier DLA clock 1395.2 MHz; [TRT] "On Xavier, 4 MiB of SRAM is shared
    # across multiple cores, including the 2 DLA cores"; "Xavier has 1 MiB as the default"
    "xavier_dla": DlaTarget("xavier_dla", 1395.2, 4 << 20, True, 1 << 20, softmax=False),
    # [JETSON] Jetson AGX Orin DLA clock up to 1.6 GHz; [TRT] "On Orin, each DLA core has 1 MiB
    # of dedicated SRAM"; "The default managed SRAM pool size for NVIDIA Orin is set to 0.5 MiB"
    "orin_dla": DlaTarget("orin_dla", 1600.0, 1 << 20, False, 512 << 10, softmax=True),
}


def dla_target(hw: HardwareConfig) -> DlaTarget | None:
    """The DLA target `hw` stands for (a preset `xavier_dla` / `orin_dla`, overrides kept), or None."""
    return DLA_TARGETS.get(hw.name)


@dataclass(frozen=True)
class Rule:
    name: str
    scope: str                  # hardware / tensorrt / dla (module doc)
    text: str                   # what the document (or the register) says


RULES = {r.name: r for r in (
    Rule("general.max_dim", "hardware", "every non-batch dimension in 1..8192"),
    Rule("general.batch", "dla", "batch size at most 4096, one batch size per loadable"),
    Rule("conv.kernel", "hardware", "kernel dimensions in 1..32"),
    Rule("conv.padding", "hardware", "padding in 0..31"),
    Rule("conv.padding_below_kernel", "tensorrt", "padding less than the kernel dimension"),
    Rule("conv.stride", "hardware", "stride in 1..8"),
    Rule("conv.dilation", "hardware", "dilation in 1..32"),
    Rule("conv.output_maps", "tensorrt", "output maps in 1..8192"),
    Rule("conv.input_channels", "tensorrt", "input channels in 1..8192"),
    Rule("conv.groups", "tensorrt", "groups in 1..8192"),
    Rule("conv.cbuf_banks", "dla", "weight banks of one kernel group + data banks of one output "
                                   "row at most numConvBufBankAllotted (16)"),
    Rule("pool.method", "hardware", "max or average pooling"),
    Rule("pool.window", "tensorrt", "window dimensions in 1..8"),
    Rule("pool.padding", "hardware", "padding in 0..7"),
    Rule("pool.stride", "hardware", "stride in 1..16"),
    Rule("pool.exclude_pad", "hardware", "average pooling divides by the whole window"),
    Rule("lrn.window", "hardware", "window 3, 5, 7 or 9"),
    Rule("lrn.region", "hardware", "normalization across channels"),
    Rule("activation.lut", "hardware", "sigmoid / tanh need the SDP lookup table"),
    Rule("activation.clip", "tensorrt", "clipped ReLU: floor 0, ceiling in 1..127"),
    Rule("eltwise.inputs", "tensorrt", "two inputs"),
    Rule("concat.inputs", "tensorrt", "at least two inputs"),
    Rule("softmax.orin_only", "dla", "Softmax only on Orin, not Xavier"),
    Rule("softmax.engine", "hardware", "NVDLA v1/v2 has no softmax engine"),
    # scale, element-wise sub/div/pow/comparisons, unary, reduce, softmax (compiler/ext_ops.py)
    Rule("scale.power", "tensorrt", "scale and shift only (power 1)"),
    Rule("eltwise.broadcast", "tensorrt", "operand shapes NCHW, NC11 or N111"),
    Rule("eltwise.constant_uniform", "tensorrt", "a constant operand of Div / Pow / a comparison "
                                                 "is filled with one value"),
    Rule("eltwise.div_operands", "tensorrt", "the divisor is an INT8 tensor or an FP32 constant"),
    Rule("eltwise.pow_operands", "tensorrt", "Pow: a uniform FP32 constant exponent, an INT8 "
                                             "tensor base"),
    Rule("eltwise.compare_int8", "tensorrt", "Equal / Greater / Less in INT8 only"),
    Rule("eltwise.compare_cast", "tensorrt", "a comparison is read by one Cast (to INT8 / FP16) "
                                             "only"),
    Rule("unary.int8", "tensorrt", "SIN, COS, ATAN in INT8 only"),
    Rule("reduce.op", "tensorrt", "Reduce MAX only"),
    Rule("reduce.axes", "tensorrt", "any combination of the C, H, W axes"),
    Rule("reduce.channel_max", "model", "a max over at most 2048 channels (Reduce over C, "
                                        "Softmax: rotation convolutions of C x C weights)"),
    Rule("softmax.axis", "model", "softmax over H / W: at most 32 positions, on a preset with "
                                  "RUBIK (the max and 1/sum broadcast back by a nearest resize)"),
    Rule("softmax.optimized_axis", "dla", "optimized mode (H x W > 1): axis at most 1024"),
    Rule("sdp.lut", "hardware", "a function through the SDP lookup table needs it"),
    Rule("prelu.slope_constant", "tensorrt", "the slope is a build-time constant"),
    # deconvolution, resize, slice, shuffle (compiler/deconv.py; slices: hwlayers.py views)
    Rule("deconv.kernel", "tensorrt", "kernel dimensions in 1..32, or 1x[64, 96, 128] / [64, 96, 128]x1"),
    Rule("deconv.stride", "tensorrt", "stride in 1..32, or 1x[64, 96, 128] / [64, 96, 128]x1"),
    Rule("deconv.square_23_32", "dla", "square kernels and strides 23..32 disabled"),
    Rule("deconv.padding", "tensorrt", "padding 0"),
    Rule("deconv.groups", "tensorrt", "groups 1"),
    Rule("deconv.dilation", "tensorrt", "dilation 1"),
    Rule("deconv.input_channels", "tensorrt", "input channels in 1..8192"),
    Rule("deconv.output_maps", "tensorrt", "output maps in 1..8192"),
    Rule("deconv.subkernel", "hardware", "each phase's sub-kernel ceil(k/s) at most 32 taps "
                                         "(CSC WEIGHT_WIDTH_EXT)"),
    Rule("deconv.rubik", "hardware", "a stride above 1 needs RUBIK contract (nv_full, DLA)"),
    Rule("resize.nearest", "tensorrt", "nearest: integer scales in 1..32"),
    Rule("resize.bilinear", "tensorrt", "bilinear: integer scales in 1..4"),
    Rule("resize.rubik", "hardware", "a scale above 1 needs RUBIK contract (nv_full, DLA)"),
    Rule("slice.channel_atom", "hardware", "a channel slice starts on an atom and ends on one "
                                           "(or at the tensor's last channel): read in place"),
    Rule("slice.spatial", "hardware", "a slice along H / W is read in place by convolutions, "
                                      "pooling and LRN only (32-byte atoms, not an output)"),
    Rule("slice.view_consumer", "hardware", "a slice view cannot also be a concatenation part"),
    Rule("shuffle.transpose", "hardware", "a transpose moves data: RUBIK split/merge convert "
                                          "feature <-> planar only, no CHW permutation"),
    Rule("shuffle.reshape", "hardware", "a reshape that changes the CHW layout needs a copy"),
)}


def _tag(rule: str, text: str) -> str:
    assert rule in RULES, rule
    return f"{text} [rule {rule}]"


def _range(rule: str, name: str, values, lo: int, hi: int) -> list[str]:
    if all(lo <= v <= hi for v in values):
        return []
    shown = "x".join(str(v) for v in values)
    return [_tag(rule, f"{name} {shown} outside {lo}..{hi}")]


def _conv(op: Op, net: Network, hw: HardwareConfig, dtype: DataType, dla: bool) -> list[str]:
    a = op.attrs
    x = net.shapes[op.inputs[0]]
    if op.kind == "fc":
        kernel, stride, pad, dil, groups = (x.h, x.w), (1, 1), (0, 0, 0, 0), (1, 1), 1
        maps = a["out_features"]
    else:
        kernel, stride, pad, dil, groups = a["kernel"], a["stride"], a["pad"], a["dilation"], a["groups"]
        maps = a["out_channels"]
    r = _range("conv.kernel", "kernel", kernel, 1, 32)
    r += _range("conv.padding", "padding", pad, 0, 31)
    kh, kw = kernel
    pt, pl, pb, pr = pad
    if max(pt, pb) >= kh or max(pl, pr) >= kw:
        r.append(_tag("conv.padding_below_kernel",
                      f"padding {pt},{pl},{pb},{pr} not below the kernel {kh}x{kw}"))
    r += _range("conv.stride", "stride", stride, 1, 8)
    r += _range("conv.dilation", "dilation", dil, 1, 32)
    r += _range("conv.output_maps", "output maps", [maps], 1, MAX_DIM)
    r += _range("conv.input_channels", "input channels", [x.c], 1, MAX_DIM)
    r += _range("conv.groups", "groups", [groups], 1, MAX_DIM)
    if dla and not r:
        r += _cbuf_banks(hw, dtype, x.c // groups, x.w + pl + pr, kernel, dil)
    return r


def cbuf_banks(hw: HardwareConfig, dtype: DataType, channels: int, padded_width: int,
               kernel: tuple[int, int], dilation: tuple[int, int]) -> tuple[int, int]:
    """(weight banks of one kernel group, data banks of the input lines one output row needs),
    counted as the compiler places a direct convolution (emit_conv.plan_cbuf)."""
    from .emit_conv import entry_per_slice, kernel_group, weight_banks
    kh, kw = kernel
    dilated_r = (kh - 1) * dilation[0] + 1
    eps = entry_per_slice(hw, channels, padded_width, dtype)
    data = -(-eps * dilated_r // hw.cbuf.bank_depth)
    weights = weight_banks(hw, kernel_group(hw, dtype), kh * kw * channels * dtype.bytes)
    return weights, data


def _cbuf_banks(hw, dtype, channels, padded_width, kernel, dilation) -> list[str]:
    weights, data = cbuf_banks(hw, dtype, channels, padded_width, kernel, dilation)
    allotted = min(CBUF_BANKS_ALLOTTED, hw.cbuf.banks)
    if weights + data <= allotted:
        return []
    return [_tag("conv.cbuf_banks", f"CBUF needs {weights} weight banks (one kernel group) + "
                                    f"{data} data banks (one output row) > {allotted}")]


def _pool(op: Op) -> list[str]:
    a = op.attrs
    r = []
    if a["method"] not in ("max", "avg"):
        r.append(_tag("pool.method", f"pooling method '{a['method']}' (DLA pools max or average)"))
    r += _range("pool.window", "pooling window", a["kernel"], 1, 8)
    r += _range("pool.padding", "pooling padding", a["pad"], 0, 7)
    r += _range("pool.stride", "pooling stride", a["stride"], 1, 16)
    if a["method"] == "avg" and any(a["pad"]) and not a.get("count_include_pad", True):
        r.append(_tag("pool.exclude_pad", "average pooling that excludes padding (PDP divides "
                                          "by the whole window)"))
    return r


def _deconv(op: Op, net: Network, hw: HardwareConfig, dtype: DataType, dla: bool) -> list[str]:
    a = op.attrs
    x = net.shapes[op.inputs[0]]
    r = []
    for rule, name, v in (("deconv.kernel", "kernel", a["kernel"]), ("deconv.stride", "stride", a["stride"])):
        long_ok = tuple(v) in {(1, n) for n in (64, 96, 128)} | {(n, 1) for n in (64, 96, 128)}
        if not long_ok:
            r += _range(rule, name, v, 1, 32)
    for name, v in (("kernel", a["kernel"]), ("stride", a["stride"])):
        if dla and v[0] == v[1] and 23 <= v[0] <= 32:
            r.append(_tag("deconv.square_23_32", f"square {name} {v[0]}x{v[1]} in 23..32 "
                                                 "(TensorRT disables it on DLA)"))
    if any(a["pad"]):
        r.append(_tag("deconv.padding", f"padding {','.join(map(str, a['pad']))} (DLA: 0)"))
    if a.get("groups", 1) != 1:
        r.append(_tag("deconv.groups", f"groups {a['groups']} (DLA: 1)"))
    if tuple(a["dilation"]) != (1, 1):
        r.append(_tag("deconv.dilation", f"dilation {a['dilation'][0]}x{a['dilation'][1]} (DLA: 1)"))
    r += _range("deconv.input_channels", "input channels", [x.c], 1, MAX_DIM)
    r += _range("deconv.output_maps", "output maps", [a["out_channels"]], 1, MAX_DIM)
    if not r:
        r += _phased(op, net, hw, dtype, dla, "deconv", a["kernel"], a["stride"])
    return r


def _phased(op, net, hw, dtype, dla, family: str, kernel, stride) -> list[str]:
    """What the lowering of compiler/deconv.py needs: M = ceil(k/s) taps per phase, RUBIK for a
    stride above 1, and on a DLA preset the CBUF budget of the phase convolution."""
    from .deconv import subkernel
    x = net.shapes[op.inputs[0]]
    m = subkernel(tuple(kernel), tuple(stride))
    r = []
    if max(m) > 32:
        r.append(_tag(f"{family}.subkernel", f"sub-kernel {m[0]}x{m[1]} of kernel "
                      f"{kernel[0]}x{kernel[1]} at stride {stride[0]}x{stride[1]} above 32 taps"))
    if tuple(stride) != (1, 1) and not (hw.features.rubik and hw.memory_atomic_bytes == 32):
        r.append(_tag(f"{family}.rubik", f"stride {stride[0]}x{stride[1]} needs RUBIK contract, "
                                         f"which {hw.name} does not have"))
    if dla and not r:
        r += _cbuf_banks(hw, dtype, x.c, x.w + 2 * (m[1] - 1), m, (1, 1))
    return r


def _resize(op: Op, net: Network, hw: HardwareConfig, dtype: DataType, dla: bool) -> list[str]:
    mode, scale = op.attrs["mode"], tuple(op.attrs["scale"])
    if mode == "nearest":
        r = _range("resize.nearest", "nearest scale", scale, 1, 32)
        return r or _phased(op, net, hw, dtype, dla, "resize", scale, scale)
    r = _range("resize.bilinear", "bilinear scale", scale, 1, 4)
    x = net.shapes[op.inputs[0]]
    if (x.h == 1 and scale[0] == 1 < scale[1] and x.w > 1) or \
            (x.w == 1 and scale[1] == 1 < scale[0] and x.h > 1):
        r.append(_tag("resize.bilinear", f"bilinear {scale[0]}x{scale[1]} of a {x.h}x{x.w} cube: "
                                         "its edge bands would be 1x1 windows (written packed)"))
    # 3-tap phase kernels per axis (compiler/deconv.emit_bilinear_chain)
    return r or _phased(op, net, hw, dtype, dla, "resize", (3 * scale[0], 3 * scale[1]), scale)


def _spatial_view(op: Op, net: Network, hw: HardwareConfig) -> str | None:
    """Why a slice of rows / columns cannot be read in place (base address + first row x line
    stride + first column x atom, the parent's strides), or None."""
    readers = net.consumers().get(op.name, [])
    if op.inputs[0] == net.input_name:
        return "a window of the network input (its image / format placement) is not a view"
    if op.name in net.outputs or not readers:
        return "a network output is stored whole, not a view"
    if hw.memory_atomic_bytes != 32:
        return f"{hw.memory_atomic_bytes}-byte atoms: the window's address would leave 32-byte alignment"
    if net.shapes[op.name].h == net.shapes[op.name].w == 1:
        return "a 1x1 cube is read as packed surfaces (its strides are ignored)"
    for r in readers:
        if r.kind == "conv" and r.attrs.get("groups", 1) == 1 or r.kind in ("pool", "lrn"):
            continue
        return f"read by '{r.name}' ({r.kind}); views are read by convolutions, pooling and LRN"
    return None


def _slice(op: Op, net: Network, hw: HardwareConfig, dtype: DataType) -> list[str]:
    a = op.attrs
    x = net.shapes[op.inputs[0]]
    y = net.shapes[op.name]
    if (y.h, y.w) != (x.h, x.w):
        why = _spatial_view(op, net, hw)
        if why:
            return [_tag("slice.spatial", f"slice of rows/columns {x.h}x{x.w} -> {y.h}x{y.w}: "
                                          f"{why}")]
    atom = dtype.elements_per_atom(hw.memory_atomic_bytes)
    start, n = a["start"], a["channels"]
    if start % atom or (n % atom and start + n != x.c):
        return [_tag("slice.channel_atom", f"channel split: channels {start}..{start + n - 1} of {x.c} not on "
                                           f"{atom}-channel atoms (a copy would be needed)")]
    if any(u.kind == "concat" for u in net.consumers().get(op.name, [])):
        return [_tag("slice.view_consumer", "channel split: a part read by a concatenation (the view "
                                            "cannot move into the concatenation's buffer)")]
    return []


def op_violations(op: Op, net: Network, hw: HardwareConfig, dtype: DataType = INT8,
                  batch: int = 1) -> list[str]:
    """Reasons (each naming its rule) why the DLA of `hw` cannot run `op` in `dtype` (for kinds
    outside COVERED_KINDS only the general rules; support.py checks the rest)."""
    target = dla_target(hw)
    dla = target is not None
    r: list[str] = []
    for t in op.inputs + [op.name]:
        s = net.shapes[t]
        if max(s.c, s.h, s.w) > MAX_DIM:
            r.append(_tag("general.max_dim",
                          f"tensor '{t}' {s.c}x{s.h}x{s.w} has a dimension above {MAX_DIM}"))
            break
    if dla and not 1 <= batch <= MAX_BATCH:
        r.append(_tag("general.batch", f"batch {batch} outside 1..{MAX_BATCH}"))
    k = op.kind
    if k in ("conv", "fc"):
        r += _conv(op, net, hw, dtype, dla)
    elif k == "pool":
        r += _pool(op)
    elif k == "lrn":
        if op.attrs.get("size") not in (3, 5, 7, 9):
            r.append(_tag("lrn.window", f"LRN window {op.attrs.get('size')} (DLA: 3, 5, 7 or 9)"))
        if op.attrs.get("region", "across") != "across":
            r.append(_tag("lrn.region", "LRN within a channel (DLA normalises across channels)"))
    elif k in ("sigmoid", "tanh"):
        if not (hw.sdp.lut and hw.sdp.ew):
            r.append(_tag("activation.lut",
                          f"{k} needs the SDP lookup table, which {hw.name} does not have"))
    elif k == "clip":
        lo, hi = op.attrs.get("min"), op.attrs.get("max")
        if lo != 0 or hi is None or not 1 <= hi <= 127:
            r.append(_tag("activation.clip",
                          f"clip [{lo}, {hi}] (DLA: clipped ReLU, floor 0, ceiling 1..127)"))
    elif k in ("add", "mul", "max", "min"):
        if len(op.inputs) != 2:
            r.append(_tag("eltwise.inputs", f"element-wise {k} of {len(op.inputs)} inputs (DLA: two)"))
    elif k == "concat":
        if len(op.inputs) < 2:
            r.append(_tag("concat.inputs", "concatenation of fewer than two inputs"))
    elif k == "deconv":
        r += _deconv(op, net, hw, dtype, dla)
    elif k == "resize":
        r += _resize(op, net, hw, dtype, dla)
    elif k == "slice":
        r += _slice(op, net, hw, dtype)
    elif k in ("shuffle", "transpose"):
        r.append(_tag("shuffle.transpose", f"{'channel shuffle' if k == 'shuffle' else 'transpose'}"
                                           ": a channel permutation NVDLA cannot do (Rubik "
                                           "split/merge only convert feature <-> planar); it "
                                           "runs on the GPU"))
    elif k == "reshape":
        r.append(_tag("shuffle.reshape", "reshape changing the CHW layout: the DLA would need a "
                                         "copy; it runs on the GPU"))
    elif k == "softmax" and dla and target.softmax:       # Orin: decomposed (ext_ops.py)
        from .ext_ops import violations as ext_violations
        r += ext_violations(op, net, hw, dtype, dla, _tag)
    elif k in EXT_KINDS or k == "prelu":
        from .ext_ops import violations as ext_violations
        r += ext_violations(op, net, hw, dtype, dla, _tag)
    elif k == "softmax":
        if dla and not target.softmax:
            r.append(_tag("softmax.orin_only", f"softmax: TensorRT runs it on Orin's DLA only, "
                                               f"not on {target.name}"))
        else:
            r.append(_tag("softmax.engine", "softmax: NVDLA has no engine for it (Orin's DLA "
                                            "softmax is not modelled)" if dla else
                                            "softmax: NVDLA has no engine for it"))
    return r


COVERED_KINDS = frozenset(("conv", "fc", "pool", "lrn", "sigmoid", "tanh", "clip", "add", "mul",
                           "max", "min", "concat", "softmax"))
COVERED_KINDS |= EXT_KINDS - {"sdpfn"}
COVERED_KINDS |= {"deconv", "resize", "slice", "shuffle", "transpose", "reshape"}


# --------------------------------------------------------------------------------------------------
# Precision: TensorRT's flags

@dataclass(frozen=True)
class Upgrade:
    rule: str
    kinds: tuple[str, ...]
    text: str
    when: Callable[[Op], bool] | None = None     # the ops of those kinds it applies to


UPGRADES = (
    Upgrade("lrn.int8_upgrade", ("lrn",), "LRN INT8 is supported by auto-upgrading to FP16"),
    Upgrade("activation.int8_upgrade", ("sigmoid", "tanh"),
            "TanH, Sigmoid INT8 support is supported by auto-upgrading to FP16"),
    # An interpolation's output lies inside its input's range, so its input dynamic range is
    # the larger one (equal only when the extreme pixels have equal neighbours): modelled as
    # always upgraded (an assumption; TensorRT decides on the calibrated ranges)
    Upgrade("resize.bilinear_int8_upgrade", ("resize",),
            "for bilinear resize INT8 mode, when the input dynamic range is larger than the output "
            "dynamic range, the layer will be upgraded to FP16",
            lambda op: op.attrs.get("mode") == "bilinear" and tuple(op.attrs["scale"]) != (1, 1)),
)


def upgrade_of(op: Op) -> Upgrade | None:
    return next((u for u in UPGRADES if op.kind in u.kinds and (u.when is None or u.when(op))),
                None)


@dataclass
class PrecisionChoice:
    """The precision a `precision: [int8, fp16]` scenario runs in, and why, per layer."""
    dtype: DataType
    per_layer: dict[str, tuple[str, str]]      # op -> (precision, why)


def resolve_precisions(net: Network, on_dla: Callable[[str], bool],
                       overrides: dict[str, str]) -> PrecisionChoice:
    """INT8 where possible, FP16 otherwise (TensorRT's --int8 --fp16).  An op the document
    upgrades (UPGRADES) or given fp16 in `overrides` runs in FP16, every other DLA op in INT8 (or
    its override): one register program, with SDP reformat passes where the precision changes
    (compiler/reformat.py).  `dtype` is the program's base precision (INT8)."""
    names = {op.name for op in net.ops}
    for name in overrides:                 # (assign_precisions says so for a single type)
        if name not in names:
            raise NvdlaSimError(f"precision.layers.{name}: no layer '{name}' in network "
                                f"'{net.name}'")
    per_layer = {}
    for op in net.ops:
        if not on_dla(op.name):
            per_layer[op.name] = ("gpu", "GPU fallback")
        elif op.name in overrides:
            per_layer[op.name] = (overrides[op.name], f"precision.layers names {overrides[op.name]}")
        elif (u := upgrade_of(op)) is not None:
            per_layer[op.name] = ("fp16", f"{u.text} [rule {u.rule}]")
        else:
            per_layer[op.name] = ("int8", "INT8 where possible")
    dtype = INT8
    return PrecisionChoice(dtype, per_layer)
