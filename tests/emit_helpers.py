"""Shared helpers of the emitter tests: INT8 reference arithmetic in Python integers and a runner
that places tensors, emits a layer, runs the engine and reads the output back."""
from __future__ import annotations

from typing import Callable

import numpy as np

from nvdla_sim.compiler.emit import ProgramBuilder, read_output
from nvdla_sim.compiler.placement import Allocator, TensorPlacement
from nvdla_sim.config import load_hardware
from nvdla_sim.engine import Engine

INT32 = (-(1 << 31), (1 << 31) - 1)


def rha(v, shift: int) -> np.ndarray:
    """Round half away from zero of v / 2^shift on int64 arrays (shift >= 0)."""
    v = np.asarray(v, np.int64)
    if shift == 0:
        return v
    q = (np.abs(v) + (1 << (shift - 1))) >> shift
    return np.where(v >= 0, q, -q)


def sat(v, lo: int, hi: int) -> np.ndarray:
    return np.clip(np.asarray(v, np.int64), lo, hi)


def sat8(v) -> np.ndarray:
    return sat(v, -128, 127)


def random_cube(rng: np.random.Generator, shape) -> np.ndarray:
    return rng.integers(-128, 128, shape, dtype=np.int8)


def conv_reference(x: np.ndarray, w: np.ndarray, stride=(1, 1), pad=(0, 0, 0, 0),
                   dilation=(1, 1), pad_value: int = 0) -> np.ndarray:
    """Exact int64 convolution of (C, H, W) by (K, C, R, S); padded elements are `pad_value`."""
    k, c, r, s = w.shape
    _, h, wd = x.shape
    pt, pl, pb, pr = pad
    xp = np.full((c, h + pt + pb, wd + pl + pr), pad_value, np.int64)
    xp[:, pt:pt + h, pl:pl + wd] = x
    dr, ds = (r - 1) * dilation[0] + 1, (s - 1) * dilation[1] + 1
    oh = (h + pt + pb - dr) // stride[0] + 1
    ow = (wd + pl + pr - ds) // stride[1] + 1
    out = np.zeros((k, oh, ow), np.int64)
    for i in range(r):
        for j in range(s):
            y0, x0 = i * dilation[0], j * dilation[1]
            patch = xp[:, y0:y0 + (oh - 1) * stride[0] + 1:stride[0],
                       x0:x0 + (ow - 1) * stride[1] + 1:stride[1]]
            out += np.einsum("kc,chw->khw", w[:, :, i, j].astype(np.int64), patch)
    return out


def run_layer(preset: str, inputs: dict[str, np.ndarray], outputs: dict[str, tuple[int, int, int]],
              emit: Callable, cvsram_bytes: int = 0):
    """Place `inputs` (name -> (C, H, W) int8) and `outputs` (name -> shape), call
    emit(builder, allocator, placements), run, and return ({output name: cube}, run result,
    program)."""
    hw = load_hardware(preset)
    alloc = Allocator(hw, cvsram_bytes=cvsram_bytes)
    b = ProgramBuilder(hw, "test")
    places: dict[str, TensorPlacement] = {}
    for name, cube in inputs.items():
        places[name] = alloc.feature(name, *cube.shape)
        b.load_cube(places[name], cube)
    for name, shape in outputs.items():
        places[name] = alloc.feature(name, *shape)
        b.mem_fill(places[name].address, places[name].size_bytes)
    emit(b, alloc, places)
    program = b.build()
    result = Engine(hw).run(program)
    cubes = {name: read_output(result.engine, places[name]) for name in outputs}
    return cubes, result, program


def compile_and_capture(scn):
    """Compile a scenario and run its program on one engine, keeping every cube the CACC
    delivers to the SDP: (prep, ctx, lowered, engine, run result, cubes)."""
    from nvdla_sim.compiler.lower import lower
    from nvdla_sim.scenario.runner import context, prepare
    prep = prepare(scn)
    ctx = context(prep)
    lowered = lower(prep.plan, ctx)
    engine = Engine(ctx.hw, ctx.dram, ctx.clock_mhz)
    store = engine.channel("cacc->sdp")
    cubes, put = [], store.put
    store.put = lambda item: (cubes.append(item), put(item))[1]
    result = engine.run(lowered.program)
    return prep, ctx, lowered, engine, result, cubes
