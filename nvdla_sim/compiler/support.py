"""DLA support checks: which network ops the DLA can run, after the TensorRT DLA restrictions.

Each op that cannot run gets reason strings (the limits below are named rules in
`compiler/dla_rules.py`, each reason ending `[rule NAME]`); the scenario then either runs it as a "GPU fallback"
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
- channel shuffle / transpose / layout-changing reshape: a permutation NVDLA has no engine for
  (`shuffle.*` rules);
- reflect / edge padding: the CDMA and PDP pad with a constant (PAD_VALUE) only;
- deconvolution, resize, channel slices: `deconv.*`, `resize.*`, `slice.*` rules (a slice on
  atoms is read in place: compiler/hwlayers.py aliases it).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..config import HardwareConfig
from ..datatype import INT8, DataType
from .dla_rules import COVERED_KINDS, MAX_DIM, op_violations
from .network import Network

__all__ = ["MAX_DIM", "SupportReport", "check_support"]


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


def check_support(net: Network, hw: HardwareConfig, dtype: DataType = INT8,
                  batch: int = 1) -> SupportReport:
    """Reasons, per op, why the DLA of `hw` cannot run it in `dtype` (ops absent from the report
    can run); the named rules of compiler/dla_rules.py, then the kinds they do not cover."""
    report = SupportReport()
    consumers = net.consumers()
    for op in net.ops:
        reasons: list[str] = op_violations(op, net, hw, dtype, batch)
        k = op.kind
        if k in COVERED_KINDS:
            pass
        elif k == "flatten":
            users = consumers.get(op.name, [])
            if not users or any(u.kind != "fc" for u in users):
                reasons.append("reshape feeding something other than a fully connected layer "
                               "(the DLA would need a layout copy)")
        elif k == "pad":
            reasons.append(f"{op.attrs.get('mode')} padding: the DLA pads with a constant only "
                           "(CDMA/PDP PAD_VALUE); it runs on the GPU")
        elif k not in ("relu", "prelu", "batchnorm"):
            reasons.append(f"op kind '{k}' has no DLA mapping")
        if reasons:
            report.violations[op.name] = reasons
    return report
