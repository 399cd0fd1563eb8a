"""Winograd convolution and sparse weight compression in the compiler (nv_full).

Winograd F(2x2, 3x3) (data-format document, "Basic weight for Winograd convolution"): the CDMA pads
the input and channel-extends it by the stride, so a kernel whose height and width are at most 3
after the extension (3x3 stride 1; 5x5/6x6 stride 2; 7x7..9x9 stride 3) runs as a 3x3 stride-1
layer in the 4x4 domain: 16 products per 4 outputs of each 4-channel super channel, against
R*S per output for direct convolution.  A layer can run so when that is fewer products
(R*S > 4*sx*sy: 3x3 stride 1 needs 2.25x fewer MAC cycles), on feature input (not an image)
without dilation, when its SDP takes no per-element operand (it would see the padded cube) and the
whole extended input and a kernel group of weights fit CBUF (no partial-height split).  `on` runs
every such layer (a PDP it fed on the fly then reads its output from DRAM); `auto` only INT16 and
FP16 ones (INT8 loses ~6-23 dB SQNR in the PRA: `INT8_AUTO_REASON`) whose roofline estimate
(`roofline_cycles`: MAC cycles against DRAM bytes, the Winograd weights being 16/9 of the direct
ones and the output padded) is lower than the direct one's, and never
one feeding a PDP on the fly.  The hardware computes whole 4x4 output blocks, so the output is
padded to multiples of 4 in the memory the SDP writes (`padded_output`); consumers read the real
width and height with the padded strides.

Integer arithmetic (precision-preservation document): each kernel's quantised weights are
transformed to scale_k * G g G^T (`formats.pack_winograd_weights`), scale_k the multiple of 2^-8
that fills the type's range (a 3x3 kernel's transform reaches up to 2.25x its largest weight, so
a fixed power-of-two scale would waste up to 2 bits; measured +3.5 dB in INT8), the CSC pre-adds
the input tiles (B^T d B) and drops PRA_TRUNCATE bits (INT8 1, or 2 after a sigmoid / tanh; INT16
2, so a tile's sums of four values rarely / never saturate), so the accumulator holds
scale_k / 2^PRA_TRUNCATE times the direct one.  CACC CLIP_TRUNCATE drops what it can of that
(t - PRA_TRUNCATE, at least 0) and the SDP X1 stage multiplies the rest back per kernel
(`_sdp_rescale`: its MUL operand times the factor, the bias operand divided by it).  FP16: scale 1,
no truncation (the document's bound CC Winograd).

Weight compression (`weight_compression: auto`): a layer's weights are compressed when the
compressed surface, the WMB bit masks and the WGS sizes (128-byte surfaces each) take fewer bytes
than the dense image; the last CBUF bank is left to the WMB.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from .. import formats
from ..config import HardwareConfig
from ..datatype import DataType
from ..formats.compression import SURFACE_ALIGN_BYTES
from .placement import align_up

TILE = 4
MODES = ("auto", "on", "off")
# PRA_TRUNCATE by element bytes.  A tile's pre-added values sum four inputs: INT16 drops 2 bits so
# they never saturate; INT8 drops 1 (a 3x3 INT8 layer measured 28.8 dB at 1, 27.5 at 2, 14.7 at 0:
# the bit lost costs less than the saturation it avoids)
PRA_TRUNCATE = {1: 1, 2: 2}
# `auto` keeps INT8 layers direct: the PRA writes each tile sum of four INT8 values (10 bits) back
# as INT8, so it either drops a bit or saturates.  Measured (tests/test_winograd_accuracy.py, a 3x3
# layer after another, 16 channels): zero-centred input 28.7 dB against 34.7 direct; a sigmoid's
# output (codes 0..127, the constant part summed into one tile position, 4x its value) 15.7
# against 38.6; PRA_TRUNCATE 2 gives 32.9 there but 25.6 on zero-centred input.  `on` still runs
# them.  INT16 (PRA_TRUNCATE 2, 16 of 18 bits) stays above 72 dB and keeps `auto`.
# INT8 inputs a sigmoid or tanh wrote: codes fill the range densely (not set by rare peaks), so
# PRA_TRUNCATE 1 saturates; 2 never does (measured with `on`: 32.9 dB against 15.7 after a
# sigmoid, 29.2 against 11.0 after tanh; zero-centred inputs keep 1: 28.7 against 25.6)
DENSE_RANGE_ACTIVATIONS = ("sigmoid", "tanh")
INT8_DENSE_PRA_TRUNCATE = 2
INT8_AUTO_REASON = ("INT8: the CSC pre-addition rounds each 10-bit tile sum to 8 bits or "
                    "saturates it (~6 dB SQNR on zero-centred input, ~23 dB on a sigmoid's output)")
MAX_WEIGHT_SCALE = 64.0                # per-kernel transformed-weight scale cap (near-zero kernels)
INT16_MAX = 32767                      # SDP X1 operands are int16


@dataclass(frozen=True)
class WinogradPlan:
    """How one convolution runs in Winograd mode (everything the registers need)."""
    stride: tuple[int, int]
    pad: tuple[int, int, int, int]          # CDMA padding top, left, bottom, right (to 4 x stride)
    ext_h: int                               # extended input lines / columns (multiples of 4)
    ext_w: int
    ext_channels: int                        # C' = channel lanes x sy x sx
    out_h: int                               # padded output (multiples of 4)
    out_w: int
    pra_truncate: int
    clip_truncate: int                       # CACC CLIP_TRUNCATE of the Winograd layer
    weight_scale: np.ndarray                 # (K,): transformed weights = scale_k x G g_k G^T
    packed: object = field(repr=False, default=None)   # formats.WinogradWeights (image, 4x4 kernels)


def padded_output(height: int, width: int) -> tuple[int, int]:
    """The output a Winograd layer writes: whole 4x4 blocks."""
    return align_up(height, TILE), align_up(width, TILE)


def structural_reason(hw: HardwareConfig, kernel: tuple[int, int], stride: tuple[int, int],
                      dilation: tuple[int, int], image: bool) -> str | None:
    """Why a convolution of this shape cannot or should not run as Winograd (None: it can)."""
    if not hw.features.winograd:
        return f"{hw.name} has no Winograd"
    r, s = kernel
    sy, sx = stride
    if image:
        return "image input"
    if tuple(dilation) != (1, 1):
        return "dilation"
    if -(-r // sy) > 3 or -(-s // sx) > 3:
        return f"a {r}x{s} kernel with stride {sy}x{sx} is larger than 3x3 after extension"
    if r * s <= 4 * sx * sy:
        return f"a {r}x{s} kernel with stride {sy}x{sx} needs no fewer MACs in Winograd"
    return None


def _sdp_rescale(sdp, factor: np.ndarray):
    """The SDP layer whose X1 stage takes a CACC output `1 / factor[k]` times the direct one:
    its MUL operand times factor (per kernel; MUL_SHIFT lowered where the int16 operand would
    overflow), its ALU operand (the bias, added before the MUL) divided by it (ALU_SHIFT raised
    where that would overflow).  None when X1 has no MUL or its shift cannot make room."""
    x1 = sdp.x1 if sdp is not None else None
    if x1 is None or x1.mul != "mul":
        return None
    k = factor.size
    m = np.broadcast_to(np.asarray(x1.mul_operand, np.float64), (k,)) * factor
    shift = x1.mul_shift
    while np.abs(m).max() > INT16_MAX:
        if shift == 0:
            return None
        m, shift = m / 2, shift - 1
    parts = dict(mul_operand=np.rint(m).astype(np.int64), mul_shift=shift)
    if x1.alu is not None:
        b = np.broadcast_to(np.asarray(x1.alu_operand, np.float64), (k,)) / factor
        alu_shift = x1.alu_shift
        while np.abs(b).max() > INT16_MAX:
            b, alu_shift = b / 2, alu_shift + 1
        if alu_shift > 63:
            return None
        parts.update(alu_operand=np.rint(b).astype(np.int64), alu_shift=alu_shift)
    return replace(sdp, x1=replace(x1, **parts))


def plan_winograd(hw: HardwareConfig, layer, in_h: int, in_w: int, out_h: int, out_w: int,
                  pra_truncate: int | None = None):
    """(the ConvLayer in Winograd mode, None) or (None, the reason it cannot run so).  `layer` is
    an emit_conv.ConvLayer of feature input (in_h x in_w) giving out_h x out_w outputs;
    `pra_truncate` replaces the integer type's PRA_TRUNCATE."""
    dtype = layer.dtype
    weights = np.asarray(layer.weights)
    k, c, r, s = weights.shape
    sy, sx = layer.stride
    top, left, _, _ = layer.pad
    oh, ow = padded_output(out_h, out_w)
    ext_h, ext_w = oh + TILE, ow + TILE            # tiles read 2 beyond the last output; whole 4s
    bottom = ext_h * sy - top - in_h
    right = ext_w * sx - left - in_w
    if bottom > 63 or right > 63:
        return None, f"padding to whole 4x4 tiles needs {max(bottom, right)} lines (max 63)"
    if layer.pad_value and not dtype.is_float:
        return None, "a non-zero padding value"
    w3 = np.zeros((k, c, 3 * sy, 3 * sx), weights.dtype)
    w3[:, :, :r, :s] = weights
    sdp = layer.sdp
    if dtype.is_float:
        scale, pra, clip = np.ones(k), 0, layer.clip_truncate
    else:
        # Each kernel's 4x4 weights G g G^T (multiples of 1/4) use the type's whole range: times
        # a per-kernel scale, a multiple of 2^-8 so the products stay exact.
        q = dtype.integer_range()[1]
        u = formats.winograd_transform(formats.winograd_channel_extend(
            w3.astype(np.float64), dtype, (sy, sx)))
        peak = np.abs(u).reshape(k, -1).max(axis=1)
        scale = np.floor(np.minimum(q / np.maximum(peak, 1e-30), MAX_WEIGHT_SCALE) * 256) / 256
        pra = PRA_TRUNCATE[dtype.bytes] if pra_truncate is None else pra_truncate
        clip = max(0, layer.clip_truncate - pra)
        # the CACC output is 2^(t - pra - clip) x scale_k times the direct one: the X1 stage
        # multiplies it back per kernel
        sdp = _sdp_rescale(sdp, 2.0 ** (pra + clip - layer.clip_truncate) / scale)
        if sdp is None:
            return None, "the SDP X1 stage cannot take the per-kernel Winograd rescale"
        w3 = w3 * scale[:, None, None, None]
    group = formats.kernel_group(hw.atomic_k, dtype)
    packed = formats.pack_winograd_weights(w3, dtype, (sy, sx), scale=1.0, kernel_group_=group)
    lanes = align_up(c, dtype.elements_per_atom(hw.memory_atomic_bytes))
    plan = WinogradPlan((sy, sx), (top, left, bottom, right), ext_h, ext_w, lanes * sy * sx,
                        oh, ow, pra, clip, scale, packed)
    return replace(layer, winograd=plan, clip_truncate=clip, sdp=sdp), None


# -- weight compression ------------------------------------------------------------------------
@dataclass(frozen=True)
class CompressionSize:
    dense_bytes: int          # the basic image, 128-byte aligned
    weight_bytes: int         # compressed surface
    wmb_bytes: int
    wgs_bytes: int            # the WGS surface in memory (128-byte aligned)

    @property
    def total_bytes(self) -> int:
        return self.weight_bytes + self.wmb_bytes + self.wgs_bytes

    @property
    def saves(self) -> bool:
        return self.total_bytes < self.dense_bytes


def compression_size(elements: np.ndarray, dtype: DataType, kernels: int,
                     kernel_group: int) -> CompressionSize:
    """Bytes of the compressed surfaces of a weight image holding `elements` (any order: only
    the count of non-zero bit patterns matters)."""
    e = np.ascontiguousarray(elements)
    n = e.size
    # non-zero bit patterns (an FP16 -0.0 is kept, as formats.compress_weights keeps it)
    nonzero = int(np.count_nonzero(e.view(f"u{dtype.bytes}") if e.dtype.itemsize == dtype.bytes
                                   else e))
    surface = lambda nbytes: max(SURFACE_ALIGN_BYTES, align_up(nbytes, SURFACE_ALIGN_BYTES))  # noqa: E731
    groups = -(-kernels // kernel_group)
    return CompressionSize(align_up(n * dtype.bytes, 128), surface(nonzero * dtype.bytes),
                           surface(-(-n // 8)), surface(4 * groups))


# -- the compiler's choice per layer -----------------------------------------------------------
def mac_cycles(hw: HardwareConfig, layer, conv, wino: WinogradPlan | None) -> float:
    """MAC-array cycles at the array's granularity: kernel groups x ATOMIC_C channel blocks x
    kernel positions x outputs for direct convolution; for Winograd each cycle does a 2x2 tile's
    16 products of a 4-channel super channel, 2.25x the direct work, on blocks of the extended
    channels (so 3x3 stride 1 needs 2.25x fewer cycles)."""
    c = layer.conv
    k, ch = np.shape(conv.weights)[:2]
    groups = -(-k // formats.kernel_group(hw.atomic_k, conv.dtype))
    if wino is None and getattr(conv, "image", False):   # pre-extended: S*C_pixel channels, S 1
        from .emit_conv import pixel_channels
        rows = getattr(conv, "post_extension", 1)          # rows per package (post-extension)
        lanes = c.kernel[1] * pixel_channels(ch) * rows
        return groups * -(-lanes // hw.atomic_c) * -(-c.kernel[0] // rows) * c.out_h * c.out_w
    if wino is None:
        return groups * -(-ch // hw.atomic_c) * c.kernel[0] * c.kernel[1] * c.out_h * c.out_w
    return groups * -(-wino.ext_channels // hw.atomic_c) * 4 * wino.out_h * wino.out_w


def roofline_cycles(hw: HardwareConfig, dram_bytes_per_cycle: float | None, layer, conv,
                    wino: WinogradPlan | None) -> float:
    """A first-order estimate of a convolution's cycles: the larger of its MAC cycles (R*S per
    output and channel direct, 16 per 2x2 tile and extended channel in Winograd) and its DRAM
    bytes (input, output, weights) at the interface's rate.  Winograd needs ~2.25x fewer MAC
    cycles on 3x3 layers but fetches 16/9 the weight bytes and writes the padded output, so
    `auto` keeps a memory-bound layer direct."""
    c = layer.conv
    dtype = conv.dtype
    k, ch = np.shape(conv.weights)[:2]
    lanes = align_up(ch, dtype.elements_per_atom(hw.memory_atomic_bytes))
    k_lanes = align_up(k, dtype.elements_per_atom(hw.memory_atomic_bytes))
    in_bytes = lanes * c.in_h * c.in_w * dtype.bytes
    mac = mac_cycles(hw, layer, conv, wino)
    if wino is None:
        out_bytes = k_lanes * c.out_h * c.out_w * dtype.bytes
        wt_bytes = np.size(conv.weights) * dtype.bytes
    else:
        out_bytes = k_lanes * wino.out_h * wino.out_w * dtype.bytes
        wt_bytes = k * wino.ext_channels * 16 * dtype.bytes
    mem = (in_bytes + out_bytes + wt_bytes) / dram_bytes_per_cycle if dram_bytes_per_cycle \
        else 0.0
    return max(mac, mem)


def _choose_post_extension(hw: HardwareConfig, layer, conv, src, mode: str) -> int:
    """Kernel rows per atomic operation of an image-input layer (emit_conv.post_extension_rows),
    1 when it cannot be used (`on`: an error saying why) or its CBUF plan does not fit."""
    from .emit_conv import conv_cbuf_plan, pixel_channels, post_extension_rows
    from ..errors import NvdlaSimError
    c = layer.conv
    rows, why = post_extension_rows(hw, tuple(c.kernel), pixel_channels(c.in_channels),
                                    tuple(c.dilation), False)
    if rows > 1:
        try:
            conv_cbuf_plan(hw, replace(conv, post_extension=rows), src)
        except NvdlaSimError as exc:
            rows, why = 1, str(exc)
    if rows == 1 and mode == "on":
        raise NvdlaSimError(f"post_extension: on: layer {layer.name} cannot use channel "
                            f"post-extension ({why}); use auto or off")
    return rows


def _feature_src(hw: HardwareConfig, dtype: DataType, channels: int, height: int, width: int):
    from .placement import DBB, TensorPlacement
    atom = hw.memory_atomic_bytes
    return TensorPlacement("in", DBB, 0, width, height, channels, atom, width * atom,
                           height * width * atom, dtype)


def _dense_range_tensors(plan) -> set[str]:
    """Tensors whose last SDP operation is a sigmoid or tanh (DENSE_RANGE_ACTIVATIONS)."""
    found = set()
    for layer in plan.layers:
        ops = layer.sdp.post_ops if getattr(layer, "sdp", None) is not None else []
        tensor = getattr(layer.output, "tensor", None)
        if ops and ops[-1].kind in DENSE_RANGE_ACTIVATIONS and tensor is not None:
            found.add(tensor)
    return found


def choose_conv_features(plan, ctx, image_root: str | None, fused: set[str]) -> dict[str, list[str]]:
    """Set `HwLayer.lowering` (ConvLayer fields: winograd, clip_truncate, sdp, compress) of every
    convolution by `ctx.winograd` (auto: eligible layers the roofline estimate finds faster; on:
    every eligible layer; off) and `ctx.weight_compression` (auto / off) and return the notes
    saying what was chosen or why not.  `fused`: convolutions feeding a PDP on the fly."""
    from .emit_conv import ConvLayer, basic_weights, conv_cbuf_plan, image_placement, \
        pixel_channels
    from ..formats import pre_extend
    hw = ctx.hw
    notes: dict[str, list[str]] = {}
    dense_inputs = _dense_range_tensors(plan)
    for layer in plan.layers:
        layer.lowering = {}
        if layer.kind != "conv" or layer.quant is None:
            continue
        q, c = layer.quant, layer.conv
        image = image_root is not None and layer.inputs[0].tensor == image_root
        conv = ConvLayer(q.weight, tuple(c.stride), tuple(c.pad), tuple(c.dilation), 0,
                         q.clip_truncate, None, q.sdp, layer.name, image=image)
        dtype = conv.dtype
        if image:
            src = image_placement("in", "DBB", 0, c.in_channels, c.in_h, c.in_w)
        else:
            src = _feature_src(hw, dtype, c.in_channels, c.in_h, c.in_w)
        mine = notes.setdefault(layer.name, [])
        if getattr(ctx, "winograd", "off") in ("auto", "on") and hw.features.winograd:
            why = structural_reason(hw, tuple(c.kernel), tuple(c.stride), tuple(c.dilation),
                                    image)
            if why is None:
                wconv = None
                if getattr(ctx, "batch", 1) > 1:
                    why = "batch"
                elif layer.name in fused and ctx.winograd == "auto":
                    why = "feeds a PDP on the fly"      # on: the pool reads it from DRAM
                elif any(p.operand is not None for p in layer.sdp.post_ops):
                    why = "per-element SDP operand"
                elif layer.output is not None and getattr(layer.output, "window", None):
                    why = "writes a window of its buffer (whole 4x4 blocks would spill over)"
                elif ctx.winograd == "auto" and dtype.bytes == 1 and not dtype.is_float:
                    why = INT8_AUTO_REASON
                else:
                    pra = INT8_DENSE_PRA_TRUNCATE if dtype.bytes == 1 and not dtype.is_float \
                        and layer.inputs[0].tensor in dense_inputs else None
                    wconv, why = plan_winograd(hw, conv, c.in_h, c.in_w, c.out_h, c.out_w, pra)
                if wconv is not None:
                    try:
                        conv_cbuf_plan(hw, wconv, src)
                    except Exception as exc:          # NvdlaSimError: does not fit CBUF
                        wconv, why = None, str(exc)
                if wconv is not None and ctx.winograd == "auto":
                    rate = ctx.dram.bytes_per_cycle_cap(ctx.clock_mhz) if ctx.dram else None
                    direct = roofline_cycles(hw, rate, layer, conv, None)
                    faster = roofline_cycles(hw, rate, layer, wconv, wconv.winograd)
                    if faster >= direct:
                        wconv, why = None, (f"memory-bound: ~{faster:.0f} cycles against "
                                            f"~{direct:.0f} direct (16/9 the weight bytes)")
                if wconv is not None:
                    w = wconv.winograd
                    layer.lowering.update(winograd=w, clip_truncate=wconv.clip_truncate,
                                          sdp=wconv.sdp)
                    conv = wconv
                    mine.append(f"Winograd (PRA_TRUNCATE {w.pra_truncate}, "
                                f"output padded to {w.out_h}x{w.out_w}; "
                                f"{mac_cycles(hw, layer, wconv, w):.0f} MAC cycles at full use, "
                                f"{mac_cycles(hw, layer, conv, None):.0f} direct)")
                else:
                    mine.append(f"direct (Winograd: {why})")
        post = getattr(ctx, "post_extension", "off")
        if image and post in ("auto", "on"):
            rows = _choose_post_extension(hw, layer, conv, src, post)
            if rows > 1:
                layer.lowering["post_extension"] = rows
                conv = replace(conv, post_extension=rows)
                r = c.kernel[0]
                mine.append(f"{rows}-line post-extension ({-(-r // rows)} kernel-row packages "
                            f"per stripe instead of {r}: {mac_cycles(hw, layer, conv, None):.0f} "
                            f"MAC cycles at full use, "
                            f"{mac_cycles(hw, layer, replace(conv, post_extension=1), None):.0f} "
                            "without)")
        if getattr(ctx, "weight_compression", "off") == "auto" and hw.features.weight_compression \
                and conv.post_extension == 1:
            shaped = replace(conv, weights=pre_extend(conv.weights, pixel_channels(src.channels))) \
                if image else conv
            elements, _ = basic_weights(hw, shaped)
            size = compression_size(elements, dtype, elements.shape[0],
                                    formats.kernel_group(hw.atomic_k, dtype))
            if size.saves:
                try:
                    dense = conv_cbuf_plan(hw, conv, src)
                    packed = conv_cbuf_plan(hw, replace(conv, compress=True), src)
                    fits = len(packed.parts) == len(dense.parts)
                except Exception:                    # NvdlaSimError: no bank left for the WMB
                    fits = False
                if fits:
                    layer.lowering["compress"] = True
                    mine.append(f"weights compressed: {size.total_bytes} of {size.dense_bytes} "
                                "bytes fetched")
        if not mine:
            del notes[layer.name]
    return notes
