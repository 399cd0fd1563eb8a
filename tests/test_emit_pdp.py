"""PDP emitter: register program of pooling layers, checked by running it on the engine against
numpy pooling, hand-computed averages and the split-width plan."""
from __future__ import annotations

import numpy as np
import pytest

from emit_helpers import random_cube, run_layer
from nvdla_sim.compiler.emit_pdp import (PdpLayer, emit_pdp, max_flying_width, output_size,
                                         plan_pdp, recip_q16)
from nvdla_sim.config import load_hardware
from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.program import RegWrite

SMALL = load_hardware("nv_small")
LARGE = load_hardware("nv_large")


def numpy_pool(x: np.ndarray, method: str, kernel, stride, pad, out_hw) -> np.ndarray:
    """Max/min over the in-range elements of each window (padding is no value)."""
    c, h, w = x.shape
    out = np.zeros((c,) + tuple(out_hw), np.int64)
    for oy in range(out_hw[0]):
        for ox in range(out_hw[1]):
            y0, x0 = oy * stride[0] - pad[0], ox * stride[1] - pad[1]
            win = x[:, max(y0, 0):min(y0 + kernel[0], h), max(x0, 0):min(x0 + kernel[1], w)]
            win = win.reshape(c, -1)
            out[:, oy, ox] = win.max(1) if method == "max" else win.min(1)
    return out


def pool_on_engine(preset, x, layer: PdpLayer, out_hw):
    def emit(b, alloc, p):
        emit_pdp(b, layer, p["x"], p["y"])
    cubes, result, program = run_layer(preset, {"x": x}, {"y": (x.shape[0],) + tuple(out_hw)},
                                       emit)
    return cubes["y"], program


@pytest.mark.parametrize("preset, shape, kernel, stride, pad", [
    ("nv_small", (19, 9, 13), (3, 3), (2, 2), (1, 1, 1, 1)),
    ("nv_small", (8, 7, 6), (2, 3), (1, 3), (1, 2, 0, 0)),
    ("nv_large", (40, 7, 9), (3, 2), (1, 3), (1, 0, 1, 1)),
    ("nv_large", (70, 5, 5), (8, 8), (16, 16), (0, 0, 3, 3)),
])
@pytest.mark.parametrize("method", ["max", "min"])
def test_max_min_pooling_matches_numpy(preset, shape, kernel, stride, pad, method):
    x = random_cube(np.random.default_rng(7), shape)
    out_hw = (output_size(shape[1], kernel[0], stride[0], pad[0], pad[2]),
              output_size(shape[2], kernel[1], stride[1], pad[1], pad[3]))
    out, _ = pool_on_engine(preset, x, PdpLayer(method, kernel, stride, pad), out_hw)
    assert np.array_equal(out, numpy_pool(x, method, kernel, stride, pad, out_hw))


def test_average_pools_padding_values_and_rounds_twice():
    x = np.arange(1, 10, dtype=np.int8).reshape(1, 3, 3)
    # 2x2 windows, stride 2, output 2x2: the right column and bottom row of windows hang over.
    out, _ = pool_on_engine("nv_small", x, PdpLayer("avg", (2, 2), (2, 2)), (2, 2))
    # (1+2+4+5)/4 = 3; (3+6)/2/2: 4.5 -> 5, 2.5 -> 3; (7+8): 7.5 -> 8 -> 4; 9: 4.5 -> 5 -> 3
    assert out.tolist() == [[[3, 3], [4, 3]]]
    out, _ = pool_on_engine("nv_small", x, PdpLayer("avg", (2, 2), (2, 2), pad_value=10), (2, 2))
    # padded elements count 10 each: 3+6+2*10 = 29 -> 14.5 -> 15 -> 7.5 -> 8;
    # 7+8+2*10 = 35 -> 18 -> 9;  9+3*10 = 39 -> 20 -> 10
    assert out.tolist() == [[[3, 8], [9, 10]]]


def test_plan_values():
    plan = plan_pdp(SMALL, PdpLayer("avg", (3, 7), (2, 1), (1, 3, 0, 0), pad_value=-5),
                    (4, 9, 9), (4, 5, 9))
    assert (plan.recip_h, plan.recip_w) == (0x5555, 0x2492) == (recip_q16(3), recip_q16(7))
    assert plan.pad_values == (-5, -10, -15, -20, -25, -30, -35)
    # bottom/right padding is what the last window needs: (5-1)*2+3-(9+1) = 1, (9-1)+7-(9+3) = 3
    assert (plan.pad_bottom, plan.pad_right, plan.in_height, plan.in_width) == (1, 3, 9, 9)
    # a window that ends before the input does: the input is cut, no padding
    plan = plan_pdp(SMALL, PdpLayer("max", (3, 3), (2, 2)), (4, 6, 6), (4, 2, 2))
    assert (plan.pad_bottom, plan.pad_right, plan.in_height, plan.in_width) == (0, 0, 5, 5)
    assert plan.split is None


def test_registers_of_a_layer():
    x = random_cube(np.random.default_rng(1), (16, 4, 4))
    _, program = pool_on_engine("nv_small", x, PdpLayer("min", (2, 2), (2, 2)), (2, 2))
    regs = {c.name: c.value for c in program.commands if isinstance(c, RegWrite)}
    assert regs["PDP.D_OPERATION_MODE_CFG"] == 2 | 1 << 4          # MIN, from memory, no split
    assert regs["PDP_RDMA.D_FLYING_MODE"] == 1
    assert regs["PDP.D_POOLING_KERNEL_CFG"] == 1 | 1 << 8 | 1 << 16 | 1 << 20
    assert regs["PDP.D_DST_LINE_STRIDE"] == 2 * 8 and regs["PDP.D_DST_SURFACE_STRIDE"] == 4 * 8
    enables = [c.name for c in program.commands
               if isinstance(c, RegWrite) and c.name.endswith("D_OP_ENABLE")]
    assert enables == ["PDP_RDMA.D_OP_ENABLE", "PDP.D_OP_ENABLE"]


def test_line_buffer_width_scales_with_the_configuration():
    assert max_flying_width(SMALL, 2, 2) == 512       # 7 KiB / (1 line * 8 kernels * 14 bits)
    assert max_flying_width(SMALL, 3, 1) == 128       # 3 overlapping lines cost 4 RTL lines
    assert max_flying_width(LARGE, 2, 2) == 128       # 32 kernels per group


@pytest.mark.parametrize("preset, shape, kernel, stride, pad, splits", [
    ("nv_small", (8, 4, 1100), (2, 2), (2, 2), (0, 0, 0, 0), 2),
    ("nv_large", (33, 3, 300), (3, 3), (1, 1), (1, 1, 1, 1), 10),  # 32 outputs per strip
    ("nv_large", (32, 2, 520), (1, 3), (1, 2), (0, 1, 0, 1), 3),
    ("nv_large", (32, 2, 300), (1, 1), (1, 2), (0, 0, 0, 0), 2),   # stride skips columns
])
def test_split_width_strips_pool_like_one_pass(preset, shape, kernel, stride, pad, splits):
    hw = load_hardware(preset)
    out_hw = (output_size(shape[1], kernel[0], stride[0], pad[0], pad[2]),
              output_size(shape[2], kernel[1], stride[1], pad[1], pad[3]))
    layer = PdpLayer("max", kernel, stride, pad)
    plan = plan_pdp(hw, layer, shape, (shape[0],) + out_hw)
    s = plan.split
    assert s is not None and s.splits == splits
    assert s.first_out + s.mid_out * (splits - 2) + s.last_out == out_hw[1]
    assert max(s.first_out, s.mid_out, s.last_out) <= max_flying_width(hw, kernel[0], stride[0])
    x = random_cube(np.random.default_rng(3), shape)
    out, _ = pool_on_engine(preset, x, layer, out_hw)
    assert np.array_equal(out, numpy_pool(x, "max", kernel, stride, pad, out_hw))


def test_split_width_fields():
    plan = plan_pdp(SMALL, PdpLayer("max", (2, 2), (2, 2)), (8, 4, 1100), (8, 2, 550))
    s = plan.split
    # 512 outputs from 1024 columns, then 38 from the remaining 76 (overlap kernel - stride = 0)
    assert (s.first_out, s.last_out, s.first_in, s.last_in, s.mid_in) == (512, 38, 1024, 76, 0)


@pytest.mark.parametrize("layer, in_shape, out_shape, message", [
    (PdpLayer("max", (9, 1), (1, 1)), (8, 9, 9), (8, 1, 9), "kernel size 9"),
    (PdpLayer("max", (2, 2), (17, 1)), (8, 9, 9), (8, 1, 8), "stride 17"),
    (PdpLayer("max", (2, 2), (1, 1), (2, 0, 0, 0)), (8, 9, 9), (8, 10, 8), "smaller than"),
    (PdpLayer("sum", (2, 2), (1, 1)), (8, 9, 9), (8, 8, 8), "method 'sum'"),
    (PdpLayer("max", (2, 2), (1, 1)), (8, 9, 9), (16, 8, 8), "channels"),
    (PdpLayer("max", (2, 2), (2, 2)), (8, 4, 4), (8, 4, 4), "bottom/right padding"),
])
def test_invalid_layers_are_errors(layer, in_shape, out_shape, message):
    with pytest.raises(NvdlaSimError, match=message):
        plan_pdp(SMALL, layer, in_shape, out_shape)


def test_on_the_fly_cannot_split():
    with pytest.raises(NvdlaSimError, match="cannot split"):
        plan_pdp(SMALL, PdpLayer("max", (2, 2), (2, 2)), (8, 4, 1100), (8, 2, 550), flying=True)
