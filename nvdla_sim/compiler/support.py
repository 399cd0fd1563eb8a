"""DLA support checks: which network ops the DLA can run, after the TensorRT DLA restrictions.

Each op that cannot run gets reason strings; the scenario then either runs it as a "GPU fallback"
(computed in float beside the DLA, left out of DLA timing) or stops with an error
(`gpu_fallback: false`).  Limits (TensorRT "DLA supported layers and restrictions"):

- every tensor dimension (C, H, W) at most 8192;
- convolution / fully connected: kernel 1..32, padding 0..31 and below the kernel size, stride 1..8,
  dilation 1..32, input channels and output maps 1..8192, groups 1..8192;
- pooling: max or average, window 1..8, padding 0..7, stride 1..16; average pooling counts the
  padding (PDP divides by the window area);
- LRN: across channels, window 3, 5, 7 or 9;
- activations: ReLU, sigmoid, tanh, clipped ReLU with a ceiling in 1..127, leaky/parametric ReLU;
  sigmoid and tanh need the SDP lookup table (`sdp.lut` and the EW block `sdp.ew`);
- element-wise sum, product, max, min of equal shapes;
- concatenation along channels with at least two inputs;
- reshape/flatten only in front of fully connected layers (other layouts need a copy);
- softmax: no engine for it in NVDLA v1/v2;
- channel shuffle: a channel permutation, which only Rubik could do (not modelled);
- reflect / edge padding: the CDMA and PDP pad with a constant (PAD_VALUE) only;
- channel split: the compiler places every tensor as a buffer of its own; a part starting on an
  atom boundary could be read in place (address + surfaces x SURF_STRIDE), not modelled.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..config import HardwareConfig
from .network import Network, Op

MAX_DIM = 8192


@dataclass
class SupportReport:
    violations: dict[str, list[str]] = field(default_factory=dict)   # op name -> reasons

    def on_dla(self, op_name: str) -> bool:
        return op_name not in self.violations

    @property
    def fallback_ops(self) -> list[str]:
        return list(self.violations)

    def reason(self, op_name: str) -> str:
        return "; ".join(self.violations.get(op_name, []))


def _range(name: str, values, lo: int, hi: int) -> list[str]:
    bad = [v for v in values if not lo <= v <= hi]
    if not bad:
        return []
    shown = "x".join(str(v) for v in values)
    return [f"{name} {shown} outside {lo}..{hi}"]


def _conv_reasons(op: Op, net: Network) -> list[str]:
    a = op.attrs
    x = net.shapes[op.inputs[0]]
    if op.kind == "fc":
        kernel, stride, pad, dil, groups = (x.h, x.w), (1, 1), (0, 0, 0, 0), (1, 1), 1
        maps = a["out_features"]
    else:
        kernel, stride, pad, dil, groups = a["kernel"], a["stride"], a["pad"], a["dilation"], a["groups"]
        maps = a["out_channels"]
    r = _range("kernel", kernel, 1, 32)
    r += _range("padding", pad, 0, 31)
    kh, kw = kernel
    pt, pl, pb, pr = pad
    if max(pt, pb) >= kh or max(pl, pr) >= kw:
        r.append(f"padding {pt},{pl},{pb},{pr} not below the kernel {kh}x{kw}")
    r += _range("stride", stride, 1, 8)
    r += _range("dilation", dil, 1, 32)
    r += _range("output maps", [maps], 1, MAX_DIM)
    r += _range("input channels", [x.c], 1, MAX_DIM)
    r += _range("groups", [groups], 1, MAX_DIM)
    return r


def _pool_reasons(op: Op) -> list[str]:
    a = op.attrs
    r = []
    if a["method"] not in ("max", "avg"):
        r.append(f"pooling method '{a['method']}' (DLA pools max or average)")
    r += _range("pooling window", a["kernel"], 1, 8)
    r += _range("pooling padding", a["pad"], 0, 7)
    r += _range("pooling stride", a["stride"], 1, 16)
    if a["method"] == "avg" and any(a["pad"]) and not a.get("count_include_pad", True):
        r.append("average pooling that excludes padding (PDP divides by the whole window)")
    return r


def check_support(net: Network, hw: HardwareConfig) -> SupportReport:
    """Reasons, per op, why the DLA of `hw` cannot run it (ops absent from the report can run)."""
    report = SupportReport()
    consumers = net.consumers()
    for op in net.ops:
        reasons: list[str] = []
        for t in op.inputs + [op.name]:
            s = net.shapes[t]
            if max(s.c, s.h, s.w) > MAX_DIM:
                reasons.append(f"tensor '{t}' {s.c}x{s.h}x{s.w} has a dimension above {MAX_DIM}")
                break
        k = op.kind
        if k in ("conv", "fc"):
            reasons += _conv_reasons(op, net)
        elif k == "pool":
            reasons += _pool_reasons(op)
        elif k == "lrn":
            if op.attrs.get("size") not in (3, 5, 7, 9):
                reasons.append(f"LRN window {op.attrs.get('size')} (DLA: 3, 5, 7 or 9)")
            if op.attrs.get("region", "across") != "across":
                reasons.append("LRN within a channel (DLA normalises across channels)")
        elif k in ("sigmoid", "tanh"):
            if not (hw.sdp.lut and hw.sdp.ew):
                reasons.append(f"{k} needs the SDP lookup table, which {hw.name} does not have")
        elif k == "clip":
            lo, hi = op.attrs.get("min"), op.attrs.get("max")
            if lo != 0 or hi is None or not 1 <= hi <= 127:
                reasons.append(f"clip [{lo}, {hi}] (DLA: clipped ReLU, floor 0, ceiling 1..127)")
        elif k in ("add", "mul", "max", "min"):
            if len(op.inputs) != 2:
                reasons.append(f"element-wise {k} of {len(op.inputs)} inputs (DLA: two)")
        elif k == "concat":
            if len(op.inputs) < 2:
                reasons.append("concatenation of fewer than two inputs")
        elif k == "flatten":
            users = consumers.get(op.name, [])
            if not users or any(u.kind != "fc" for u in users):
                reasons.append("reshape feeding something other than a fully connected layer "
                               "(the DLA would need a layout copy)")
        elif k == "softmax":
            reasons.append("softmax: NVDLA has no engine for it")
        elif k == "shuffle":
            reasons.append("channel shuffle: NVDLA has no channel permutation outside Rubik "
                           "(not modelled); it runs on the GPU")
        elif k == "pad":
            reasons.append(f"{op.attrs.get('mode')} padding: the DLA pads with a constant only "
                           "(CDMA/PDP PAD_VALUE); it runs on the GPU")
        elif k == "slice":
            reasons.append("channel split: a part is a tensor of its own and NVDLA has no copy "
                           "engine for it (in-place reads of atom-aligned parts are not modelled); "
                           "it runs on the GPU")
        elif k not in ("relu", "prelu", "batchnorm"):
            reasons.append(f"op kind '{k}' has no DLA mapping")
        if reasons:
            report.violations[op.name] = reasons
    return report
