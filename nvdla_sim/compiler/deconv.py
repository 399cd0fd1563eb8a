"""Deconvolution (transposed convolution) and resize lowered the way NVDLA does it: a convolution
whose output channels are the stride *phases*, then RUBIK CONTRACT moving those channels into
space.

For stride s and kernel k (per axis), output position o = q*s + p (phase p in 0..s-1) gathers
    out[q*s + p] = sum_m in[q - m] * w[m*s + p],   m = 0 .. M-1,  M = ceil(k / s)
so each phase is a stride-1 convolution with the M-tap sub-kernel w[p], w[s + p], ... flipped,
over the input padded by M-1 on both sides: Q = H + M - 1 outputs per phase.  One NVDLA
convolution computes every phase at once, phase (py, px) in its own atom-aligned block of
output channels; RUBIK CONTRACT (DECONV_X/Y_STRIDE s) then writes phase block (iy, ix) of input
pixel (h, w) to output pixel (h*sy + iy, w*sx + ix).  The contracted cube is (H + M - 1) * s
high, at least the deconvolution's (H - 1) * s + k: the tensor is the top-left window of it
(same strides; readers see the real size).  Stride 1 needs no RUBIK: the convolution with the
flipped kernel and padding k - 1 writes the output directly.

DECONV_X_STRIDE is 5 bits (1..32): a stride of 64, 96 or 128 (TensorRT's 1x64 ... kernels) is
two contracts, strides B then A with A * B = s: phase p = b*A + a lives in phase block
b*A + a of the convolution's output, the first contract spreads the b blocks (each A phases of
K channels) and the second the a blocks.

Resize (integer scales) is the same lowering with fixed weights (TensorRT does it so): nearest
is a deconvolution whose kernel is s x s ones on the channel's own input (identity across
channels), stride s.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .network import Network, Op, Shape

PHASED = ("deconv", "resize")        # op kinds lowered here
MAX_CONTRACT_STRIDE = 32             # RBK D_DECONV_STRIDE.DECONV_X_STRIDE: 5 bits
MAX_CUBE_CHANNELS = 8192             # 13-bit channel fields (CACC/SDP/RBK DATAOUT_CHANNEL)


@dataclass(frozen=True)
class ContractSpec:
    """One RUBIK CONTRACT pass: input (phase blocks x out_channels) x in_h x in_w ->
    out_channels x in_h*stride_y x in_w*stride_x."""
    stride: tuple[int, int]            # (y, x)
    out_channels: int                  # stored channels of the output (atom multiple)
    in_h: int
    in_w: int

    @property
    def in_channels(self) -> int:
        return self.stride[0] * self.stride[1] * self.out_channels

    @property
    def out_h(self) -> int:
        return self.in_h * self.stride[0]

    @property
    def out_w(self) -> int:
        return self.in_w * self.stride[1]


@dataclass
class RubikSpec:
    """A RUBIK hardware layer (hwlayers.HwLayer.rubik)."""
    mode: str                          # contract (split / merge: not compiled)
    contract: ContractSpec
    out_h: int                         # the tensor's real size (<= the contracted cube's)
    out_w: int
    notes: list[str] = field(default_factory=list)


def stride_stages(s: int) -> list[int]:
    """Contract strides whose product is `s`, each at most 32 (outer first); [] for 1."""
    if s == 1:
        return [1]
    if s <= MAX_CONTRACT_STRIDE:
        return [s]
    for a in range(2, MAX_CONTRACT_STRIDE + 1):
        if s % a == 0 and s // a <= MAX_CONTRACT_STRIDE:
            return [s // a, a]
    raise ValueError(f"stride {s} is not a product of two strides of at most 32")


def op_geometry(op: Op, net: Network) -> tuple[tuple[int, int], tuple[int, int]]:
    """(kernel, stride) of a deconvolution or resize op."""
    if op.kind == "resize":
        s = tuple(op.attrs["scale"])
        return s, s
    return tuple(op.attrs["kernel"]), tuple(op.attrs["stride"])


def subkernel(kernel: tuple[int, int], stride: tuple[int, int]) -> tuple[int, int]:
    """Taps M per axis of each phase's convolution."""
    return (-(-kernel[0] // stride[0]), -(-kernel[1] // stride[1]))


def fixed_weights(op: Op, channels: int) -> np.ndarray:
    """The deconvolution weights (C, K, R, S) a resize stands for."""
    sh, sw = op.attrs["scale"]
    if op.attrs["mode"] != "nearest" and (sh, sw) != (1, 1):      # (scale 1: a copy either way)
        raise ValueError(f"resize mode '{op.attrs['mode']}' has no fixed-weight lowering")
    w = np.zeros((channels, channels, sh, sw), np.float32)
    w[np.arange(channels), np.arange(channels)] = 1.0
    return w


def phase_channel(py: int, px: int, stages_y: list[int], stages_x: list[int], kpad: int) -> int:
    """First convolution output channel of phase (py, px) (see the module doc)."""
    ay_n = stages_y[1] if len(stages_y) > 1 else 1
    ax_n = stages_x[1] if len(stages_x) > 1 else 1
    bx_n = stages_x[0]
    by, ay = divmod(py, ay_n)
    bx, ax = divmod(px, ax_n)
    return ((by * bx_n + bx) * (ay_n * ax_n) + ay * ax_n + ax) * kpad


def phase_weights(weight: np.ndarray, stride: tuple[int, int], kpad: int,
                  x_index: np.ndarray, in_stored: int) -> np.ndarray:
    """The phase convolution's weights (sy*sx*kpad, in_stored, My, Mx) from deconvolution
    weights (C, K, R, S); input channel c sits at stored channel x_index[c]."""
    c, k, r, s = weight.shape
    sy, sx = stride
    my, mx = subkernel((r, s), stride)
    st_y, st_x = stride_stages(sy), stride_stages(sx)
    out = np.zeros((sy * sx * kpad, in_stored, my, mx), np.float32)
    wt = np.transpose(weight, (1, 0, 2, 3))                  # (K, C, R, S)
    for py in range(sy):
        for px in range(sx):
            base = phase_channel(py, px, st_y, st_x, kpad)
            for t in range(my):
                ky = (my - 1 - t) * sy + py
                if ky >= r:
                    continue
                for u in range(mx):
                    kx = (mx - 1 - u) * sx + px
                    if kx < s:
                        out[base:base + k, x_index, t, u] = wt[:, :, ky, kx]
    return out


def contracts(stride: tuple[int, int], kpad: int, in_h: int, in_w: int) -> list[ContractSpec]:
    """The RUBIK CONTRACT passes after the phase convolution (empty for stride 1)."""
    st_y, st_x = stride_stages(stride[0]), stride_stages(stride[1])
    if stride == (1, 1):
        return []
    n = max(len(st_y), len(st_x))
    st_y += [1] * (n - len(st_y))
    st_x += [1] * (n - len(st_x))
    out, h, w = [], in_h, in_w
    for i in range(n):
        rest = 1
        for j in range(i + 1, n):
            rest *= st_y[j] * st_x[j]
        spec = ContractSpec((st_y[i], st_x[i]), rest * kpad, h, w)
        out.append(spec)
        h, w = spec.out_h, spec.out_w
    return out


def bilinear_taps(s: int) -> np.ndarray:
    """(s, 3): per phase p the weights of input offsets -1, 0, +1 of half-pixel linear
    interpolation at scale s: source = q + d, d = (p + 0.5) / s - 0.5 in (-0.5, 0.5)."""
    k = np.zeros((s, 3), np.float64)
    for p in range(s):
        d = (p + 0.5) / s - 0.5
        if d < 0:
            k[p, 0], k[p, 1] = -d, 1 + d
        else:
            k[p, 1], k[p, 2] = 1 - d, d
    return k


def edge_bands(n: int) -> list[tuple[int, int, bool, bool]]:
    """Output positions per phase split where the clamped edge differs from zero padding:
    (first, count, clamp below, clamp above).  At q = 0 the tap on in[-1] reads in[0] (the
    source coordinate is clamped), at q = n-1 the tap on in[n] reads in[n-1]."""
    if n == 1:
        return [(0, 1, True, True)]
    return [(0, 1, True, False)] + ([(1, n - 2, False, False)] if n > 2 else []) + \
        [(n - 1, 1, False, True)]


def _folded(k: np.ndarray, lo: bool, hi: bool) -> np.ndarray:
    k = k.copy()
    if lo:
        k[:, 1] += k[:, 0]
        k[:, 0] = 0
    if hi:
        k[:, 1] += k[:, 2]
        k[:, 2] = 0
    return k


def emit_bilinear_chain(builder, ch, row: str) -> None:
    """Bilinear resize (integer scale s <= 4, half-pixel centres, edge-clamped), one axis at a
    time (the interpolation is separable): per pass, a 3-tap depthwise kernel per phase as
    convolutions over bands of lines -- the first and last line fold the outside tap onto the
    edge pixel (the clamp), the middle is one convolution -- writing windows of the phase cube,
    then one RUBIK contract along that axis.  A band is a whole line of the other axis (a 1x1
    window would be written packed: the SDP ignores the strides of a 1x1 cube), hence the
    separable passes and, for a 1-pixel-wide input, the W pass first.  A first pass writes at
    the input's scale (the interpolation stays within its range), the last at the output's."""
    from .hwlayers import ConvSpec, HwLayer, SdpSpec, Tensor, TensorRef, allocate_sdp
    op = ch.anchor
    x_t = builder.tensors[ch.main_input]
    c = x_t.shape.c
    sy, sx = op.attrs["scale"]
    cpad = -(-c // builder.atom) * builder.atom
    axes = [a for a in ((1, 0) if x_t.shape.w == 1 else (0, 1)) if (sy, sx)[a] > 1]
    src = builder.ref(ch.main_input)
    idx, cin = x_t.stored_index(), x_t.stored_channels
    h, w = x_t.shape.h, x_t.shape.w
    for n_pass, axis in enumerate(axes):
        last = n_pass == len(axes) - 1
        s = (sy, sx)[axis]
        n = (h, w)[axis]
        taps = bilinear_taps(s)
        phases = s * cpad
        mid = f"{op.name}.phases{n_pass}"
        builder.tensors[mid] = Tensor(mid, Shape(phases, h, w))
        base = src.window or (0, builder.tensors[src.tensor].shape.h, 0,
                              builder.tensors[src.tensor].shape.w)
        post = list(ch.post) if last else []
        stages, _ = allocate_sdp(post, builder.hw, "flying")
        for q0, qn, lo, hi in edge_bands(n):
            k = _folded(taps, lo, hi)
            kernel = (3, 1) if axis == 0 else (1, 3)
            wt = np.zeros((phases, cin) + kernel, np.float32)
            for p in range(s):
                wt[p * cpad + np.arange(c), idx] = k[p].reshape(kernel).astype(np.float32)
            i0, i1 = max(q0 - 1, 0), min(q0 + qn, n - 1)
            before, after = int(q0 == 0), int(q0 + qn == n)
            if axis == 0:
                window = (base[0] + i0, i1 - i0 + 1, base[2], w)
                pad, out_hw, out_win = (before, 0, after, 0), (qn, w), (q0, qn, 0, w)
            else:
                window = (base[0], h, base[2] + i0, i1 - i0 + 1)
                pad, out_hw, out_win = (0, before, 0, after), (h, qn), (0, h, q0, qn)
            full_src = builder.tensors[src.tensor].shape
            in_win = None if window == (0, full_src.h, 0, full_src.w) else window
            out_win = None if out_win == (0, h, 0, w) else out_win
            conv = ConvSpec(cin, window[1], window[3], phases, out_hw[0], out_hw[1], kernel,
                            (1, 1), (1, 1), pad, wt, np.zeros(phases, np.float32), False,
                            c * 2 * out_hw[0] * out_hw[1] * s)
            sdp = SdpSpec("flying", post, stages, phases, out_hw[0], out_hw[1])
            name = f"{op.name}.{'hw'[axis]}{q0}"
            layer = HwLayer(name, "conv", row, list(ch.ops) if last else [op.name],
                            [TensorRef(src.tensor, src.channel_offset, src.channels, in_win)],
                            TensorRef(mid, 0, phases, out_win), conv=conv, sdp=sdp)
            if not last:                # the first pass writes at the input's scale
                layer.out_scale = ch.main_input
            if q0 == 0:
                layer.notes.append(f"bilinear along {'HW'[axis]}: {s} phases of 3-tap "
                                   f"convolutions over {len(edge_bands(n))} bands (edges "
                                   "clamped), then RUBIK contract")
            builder.layers.append(layer)
        spec = ContractSpec((s, 1) if axis == 0 else (1, s), cpad, h, w)
        h, w = spec.out_h, spec.out_w
        if last:
            out_ref = builder.ref(ch.end)
        else:
            nxt = f"{op.name}.{'hw'[axis]}"
            builder.tensors[nxt] = Tensor(nxt, Shape(cpad, h, w))
            out_ref = TensorRef(nxt, 0, cpad)
        layer = HwLayer(f"{op.name}.rubik{n_pass}", "rubik", row, [ch.end],
                        [TensorRef(mid, 0, phases)], out_ref)
        layer.rubik = layer.quant = RubikSpec("contract", spec, h, w)
        builder.layers.append(layer)
        src, idx, cin = out_ref, np.arange(c), cpad


def emit_phased_chain(builder, ch, row: str) -> None:
    """hwlayers._Builder hook: the hardware layers of a deconvolution / resize chain (the op
    with its fused ReLU): the phase convolution(s), then the RUBIK contract(s)."""
    from .hwlayers import ConvSpec, HwLayer, PostOp, SdpSpec, Tensor, TensorRef, allocate_sdp
    op = ch.anchor
    if op.kind == "resize" and op.attrs["mode"] == "bilinear" and tuple(op.attrs["scale"]) != (1, 1):
        return emit_bilinear_chain(builder, ch, row)
    net = builder.net
    x_t = builder.tensors[ch.main_input]
    x = x_t.shape
    end_t = builder.tensors[ch.end]
    kernel, stride = op_geometry(op, net)
    if op.kind == "resize":
        weight, bias = fixed_weights(op, x.c), np.zeros(x.c, np.float32)
    else:
        w = builder.weights[op.name]
        weight = np.asarray(w["weight"], np.float32)
        bias = np.asarray(w.get("bias", np.zeros(weight.shape[1])), np.float32)
    k = weight.shape[1]
    atom = builder.atom
    kpad = end_t.stored_channels if stride == (1, 1) else -(-k // atom) * atom
    my, mx = subkernel(kernel, stride)
    q_h, q_w = x.h + my - 1, x.w + mx - 1
    wp = phase_weights(weight, stride, kpad, x_t.stored_index(), x_t.stored_channels)
    phases = wp.shape[0]
    full_bias = np.zeros(phases, np.float32)
    for p0 in range(0, phases, kpad):
        full_bias[p0:p0 + k] = bias
    post = list(ch.post)
    if np.any(full_bias != 0):
        post = [PostOp("bias", op.name, bias=full_bias)] + post
    stages, n = allocate_sdp(post, builder.hw, "flying")
    assert n == len(post), (op.name, [p.kind for p in post])
    specs = contracts(stride, kpad, q_h, q_w)
    if specs:
        mid = f"{op.name}.phases"
        builder.tensors[mid] = Tensor(mid, Shape(phases, q_h, q_w), on_dla=True)
        conv_out = TensorRef(mid, 0, phases)
    else:
        conv_out = builder.ref(ch.end)
    src = builder.ref(ch.main_input)
    macs = k * x.c * kernel[0] * kernel[1] * x.h * x.w
    # One convolution per block of at most 8192 output channels (13-bit fields), each writing
    # its channel window of the phase cube.
    block = MAX_CUBE_CHANNELS // kpad * kpad or kpad
    for i, k0 in enumerate(range(0, phases, block)):
        kn = min(block, phases - k0)
        name = op.name if kn == phases else f"{op.name}.k{i}"
        gpost = [builder._slice_post(p, k0, kn) for p in post]
        g_stages, _ = allocate_sdp(gpost, builder.hw, "flying")
        conv = ConvSpec(x_t.stored_channels, x.h, x.w, kn, q_h, q_w, (my, mx), (1, 1), (1, 1),
                        (my - 1, mx - 1, my - 1, mx - 1), wp[k0:k0 + kn],
                        full_bias[k0:k0 + kn], False, macs * kn // phases)
        sdp = SdpSpec("flying", gpost, g_stages, kn, q_h, q_w)
        out = TensorRef(conv_out.tensor, conv_out.channel_offset + k0, kn)
        layer = HwLayer(name, "conv", row, list(ch.ops), [src], out, conv=conv, sdp=sdp)
        if specs:
            layer.notes.append(f"{op.kind}: {stride[0]}x{stride[1]} phases of a "
                               f"{my}x{mx} convolution, then RUBIK contract")
        builder.layers.append(layer)
    cur = conv_out.tensor
    for i, spec in enumerate(specs):
        last = i == len(specs) - 1
        if last:
            out_ref = builder.ref(ch.end)
        else:
            nxt = f"{op.name}.contract{i}"
            builder.tensors[nxt] = Tensor(nxt, Shape(spec.out_channels, spec.out_h, spec.out_w))
            out_ref = TensorRef(nxt, 0, spec.out_channels)
        rubik = RubikSpec("contract", spec, end_t.shape.h if last else spec.out_h,
                          end_t.shape.w if last else spec.out_w)
        name = f"{op.name}.rubik" if len(specs) == 1 else f"{op.name}.rubik{i}"
        layer = HwLayer(name, "rubik", row, [ch.end], [TensorRef(cur, 0, spec.in_channels)],
                        out_ref)
        layer.rubik = rubik
        layer.quant = rubik                  # a copy: no integer parameters to calibrate
        builder.layers.append(layer)
        cur = out_ref.tensor


def contracted_outputs(plan) -> dict[str, tuple[int, int]]:
    """Root buffers a RUBIK contract writes: their (height, width) as contracted (readers see
    the tensor's real size, lowering places the whole cube)."""
    out = {}
    for layer in plan.layers:
        if layer.kind == "rubik" and layer.output is not None:
            c = layer.rubik.contract
            out[layer.output.tensor] = (c.out_h, c.out_w)
    return out
