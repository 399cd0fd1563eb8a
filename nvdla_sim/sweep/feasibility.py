"""Can a point's configuration be built and run its network at all?

Two kinds of infeasible points, each recorded with its reason while the sweep goes on:
- a value the hardware cannot take: `nvdla_sim.config.load_hardware` validation (bank count not a
  power of two or above 32, bank width unlike atomic_c, CVSRAM without a secondary interface...),
  seen when the point's scenario is parsed;
- a CBUF too small for the network: some convolution cannot hold one kernel group of weights plus
  the data banks of one kernel-height band of input lines together.  The compiler's own bank
  planner (`compiler.emit_conv.plan_cbuf`) decides; the reason names the layer with the largest
  need and the banks it needs.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..compiler.emit_conv import entry_per_slice, plan_cbuf, weight_banks
from ..compiler.hwlayers import HwLayer, HwPlan
from ..config import HardwareConfig
from ..errors import NvdlaSimError


@dataclass(frozen=True)
class CbufNeed:
    """Fewest CBUF banks one convolution runs with: one kernel group of weights plus the data
    banks of the input lines one output line needs."""
    layer: str
    weight_banks: int
    data_banks: int
    lines: int

    @property
    def banks(self) -> int:
        return self.weight_banks + self.data_banks


def conv_need(hw: HardwareConfig, layer: HwLayer) -> CbufNeed:
    c = layer.conv
    dilated_r = (c.kernel[0] - 1) * c.dilation[0] + 1
    eps = entry_per_slice(hw, c.in_channels, c.in_w)
    bytes_per_kernel = c.in_channels * c.kernel[0] * c.kernel[1]
    return CbufNeed(layer.name, weight_banks(hw, hw.atomic_k, bytes_per_kernel),
                    -(-eps * dilated_r // hw.cbuf.bank_depth), dilated_r)


def largest_need(hw: HardwareConfig, plan: HwPlan) -> CbufNeed | None:
    needs = [conv_need(hw, layer) for layer in plan.layers if layer.kind == "conv"]
    return max(needs, key=lambda n: n.banks) if needs else None


def cbuf_infeasibility(hw: HardwareConfig, plan: HwPlan) -> str | None:
    """None when every convolution of `plan` fits the CBUF, else the reason."""
    for layer in plan.layers:
        if layer.kind != "conv":
            continue
        c = layer.conv
        try:
            plan_cbuf(hw, c.in_channels, c.in_h, c.in_w, c.out_channels,
                      c.in_channels * c.kernel[0] * c.kernel[1], (c.kernel[0] - 1) * c.dilation[0] + 1,
                      c.stride[0], c.pad[0], c.pad[2])
        except NvdlaSimError:
            # plan_cbuf fails exactly when the banks are fewer than the layer's need.
            need = largest_need(hw, plan)
            return (f"CBUF of {hw.cbuf.banks} banks ({hw.cbuf.total_bytes // 1024} KiB) is too "
                    f"small: layer {need.layer} needs {need.banks} banks, one kernel group of "
                    f"weights ({need.weight_banks}) and {need.lines} input lines "
                    f"({need.data_banks})")
    return None
