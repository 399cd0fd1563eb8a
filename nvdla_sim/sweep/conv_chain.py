"""A small real point runner for networks made of convolutions (and fully connected layers).

It lowers each `conv` hardware layer of the point's plan with the compiler's own emitter
(`compiler.emit_conv.emit_conv`: CBUF bank split, partial-height split, weight image), places
every tensor in DRAM, and runs the whole register program on the engine with the scenario's DRAM
profile and clock.  The cycles and DRAM bytes are what the engine measured.  What it leaves out,
so its numbers are those of a plainer network: weights are random INT8 (values do not change
timing), and each convolution's SDP only converts to INT8 (no bias, ReLU or element-wise
operand, so no SDP_RDMA reads).  A plan with any other kind of hardware layer (pooling, LRN, an
SDP pass, GPU fallback) or with a fused element-wise operand is refused with the layer's name.

Tests and the sweep benchmark use it on small networks; `nvdla-sim sweep --runner conv-chain`
selects it.  The default runner is `point.run_scenario_point` (the full scenario lowering).
"""
from __future__ import annotations

import numpy as np

from ..compiler.emit import ProgramBuilder
from ..compiler.emit_conv import ConvLayer, emit_conv
from ..compiler.hwlayers import HwPlan, TensorRef
from ..compiler.placement import Allocator, TensorPlacement
from ..engine import Engine
from ..errors import NvdlaSimError
from .point import compile_point


def _check(plan: HwPlan) -> None:
    for layer in plan.layers:
        if layer.kind != "conv" or layer.output is None:
            raise NvdlaSimError(f"conv-chain runner: layer {layer.name} is a {layer.kind} hardware "
                                "layer; this runner lowers convolutions only")
        if layer.sdp is not None and any(p.operand is not None for p in layer.sdp.post_ops):
            raise NvdlaSimError(f"conv-chain runner: layer {layer.name} has an element-wise "
                                "operand; this runner lowers plain convolutions only")


def run_conv_chain(scenario: dict, base_dir: str) -> dict:
    prep = compile_point(scenario, base_dir)
    plan, scn = prep.plan, prep.scenario
    _check(plan)
    hw = scn.hardware
    alloc = Allocator(hw)
    b = ProgramBuilder(hw, f"{plan.network.name}_conv_chain")
    rng = np.random.default_rng(0)
    buffers: dict[str, TensorPlacement] = {}

    def place(ref: TensorRef) -> TensorPlacement:
        buf = buffers.get(ref.tensor)
        if buf is None:
            t = plan.tensors[ref.tensor]
            buf = buffers[ref.tensor] = alloc.feature(ref.tensor, t.stored_channels, t.shape.h,
                                                      t.shape.w)
            if t.producer == "input" or ref.tensor == plan.network.input_name:
                b.load_cube(buf, rng.integers(-128, 128, (buf.channels, buf.height, buf.width),
                                              dtype=np.int8))
        if ref.channel_offset == 0 and ref.channels == buf.channels:
            return buf
        return buf.channel_slice(ref.channel_offset, ref.channels)

    for layer in plan.layers:
        c = layer.conv
        src, dst = place(layer.inputs[0]), place(layer.output)
        weights = rng.integers(-8, 8, (c.out_channels, c.in_channels, *c.kernel), dtype=np.int8)
        emit_conv(b, alloc, ConvLayer(weights, c.stride, c.pad, c.dilation, name=layer.name), src, dst)
    result = Engine(hw, scn.memory.dram, scn.clock_mhz).run(b.build())
    dram = result.memory_bytes.get("MCIF", {})
    return {"cycles": result.cycles,
            "dram_bytes": sum(v["read"] + v["write"] for v in dram.values())}
