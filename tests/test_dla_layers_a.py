"""Deconvolution on the DLA (issue 11): TensorRT's rules, each with a network just inside and one
just outside; the lowering (a phase convolution + RUBIK CONTRACT) checked by value against the
float reference within the INT8 / FP16 SQNR floors used elsewhere (25 / 40 dB); RUBIK CONTRACT
itself at register level against a numpy model of the C model's address walk."""
from __future__ import annotations

import numpy as np
import pytest

from nvdla_sim.compiler.dla_rules import RULES
from nvdla_sim.compiler.emit import ProgramBuilder, cube_image, read_output
from nvdla_sim.compiler.emit_rubik import emit_contract
from nvdla_sim.compiler.deconv import ContractSpec, edge_bands
from nvdla_sim.compiler.lower import lower, run_lowered
from nvdla_sim.compiler.hwlayers import TensorRef
from nvdla_sim.compiler.network import Network, Shape
from nvdla_sim.compiler.placement import Allocator
from nvdla_sim.compiler.support import check_support
from nvdla_sim.config import load_hardware
from nvdla_sim.datatype import FP16, INT8
from nvdla_sim.engine import Engine
from nvdla_sim.errors import NvdlaSimError, UnsupportedError
from nvdla_sim.scenario.reference import sqnr_db
from nvdla_sim.scenario.reference_resample import deconv2d
from nvdla_sim.scenario.runner import context, dla_tensors, prepare
from nvdla_sim.scenario.schema import parse_scenario

XAVIER, NV_FULL, NV_SMALL = (load_hardware(n) for n in ("xavier_dla", "nv_full", "nv_small"))


def rules_of(net: Network, hw=XAVIER, op="x") -> set[str]:
    reason = check_support(net, hw, INT8).reason(op)
    return {r.split("[rule ")[1].rstrip("]") for r in reason.split("; ") if "[rule " in r}


def deconv_net(c=8, h=4, w=4, k=8, kernel=(2, 2), stride=(2, 2), pad=(0, 0, 0, 0), dil=(1, 1),
               groups=1) -> Network:
    n = Network("t", "data", Shape(c, h, w))
    n.add("deconv", "x", "data", out_channels=k, kernel=kernel, stride=stride, pad=pad,
          dilation=dil, groups=groups, bias=True)
    return n


# (rule, inside, outside)
CASES = [
    ("deconv.kernel", dict(kernel=(32, 31), stride=(16, 16)), dict(kernel=(33, 1), stride=(16, 1))),
    ("deconv.kernel", dict(kernel=(1, 64), stride=(1, 64)), dict(kernel=(1, 65), stride=(1, 65))),
    ("deconv.stride", dict(kernel=(2, 2), stride=(32, 31)), dict(kernel=(2, 2), stride=(33, 2))),
    ("deconv.stride", dict(kernel=(96, 1), stride=(96, 1)), dict(kernel=(2, 2), stride=(2, 64))),
    ("deconv.square_23_32", dict(kernel=(22, 22), stride=(22, 22)),
     dict(kernel=(23, 23), stride=(2, 2))),
    ("deconv.square_23_32", dict(kernel=(2, 2), stride=(32, 31)), dict(kernel=(2, 2), stride=(32, 32))),
    ("deconv.padding", dict(pad=(0, 0, 0, 0)), dict(pad=(1, 0, 0, 0))),
    ("deconv.groups", dict(groups=1), dict(groups=2)),
    ("deconv.dilation", dict(dil=(1, 1)), dict(dil=(1, 2))),
    ("deconv.input_channels", dict(c=8192, h=1, w=1), dict(c=8193, h=1, w=1)),
    ("deconv.output_maps", dict(k=8192, h=1, w=1, kernel=(1, 1), stride=(1, 1)),
     dict(k=8193, h=1, w=1, kernel=(1, 1), stride=(1, 1))),
    ("deconv.subkernel", dict(kernel=(1, 64), stride=(1, 64)), dict(kernel=(1, 64), stride=(1, 1))),
]


@pytest.mark.parametrize("rule, inside, outside", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_deconv_rule_just_inside_and_just_outside(rule, inside, outside):
    assert rule in RULES
    assert check_support(deconv_net(**inside), XAVIER).on_dla("x"), \
        check_support(deconv_net(**inside), XAVIER).reason("x")
    out = deconv_net(**outside)
    assert not check_support(out, XAVIER).on_dla("x")
    assert rule in rules_of(out)
    if RULES[rule].scope != "dla":
        assert rule in rules_of(out, NV_FULL)
    else:
        assert rule not in rules_of(out, NV_FULL)


def test_strided_deconv_needs_rubik():
    """nv_small has no RUBIK: a strided deconvolution goes to the GPU; stride 1 is a plain
    convolution everywhere."""
    assert rules_of(deconv_net(), NV_SMALL) == {"deconv.rubik"}
    assert check_support(deconv_net(), NV_FULL).on_dla("x")
    assert check_support(deconv_net(kernel=(3, 3), stride=(1, 1)), NV_SMALL).on_dla("x")


# -- the float reference, independently: a scatter loop over every input pixel -------------------
def naive_deconv(x, w, b, stride):
    c, h, wd = x.shape
    _, k, r, s = w.shape
    out = np.zeros((k, (h - 1) * stride[0] + r, (wd - 1) * stride[1] + s))
    for ci in range(c):
        for y in range(h):
            for xx in range(wd):
                out[:, y * stride[0]:y * stride[0] + r, xx * stride[1]:xx * stride[1] + s] += \
                    x[ci, y, xx] * w[ci]
    return out + b[:, None, None]


def test_reference_deconv_matches_the_scatter_definition():
    rng = np.random.default_rng(1)
    x, w, b = rng.standard_normal((3, 4, 5)), rng.standard_normal((3, 2, 3, 5)), rng.standard_normal(2)
    for stride in ((1, 1), (2, 3), (3, 2)):
        np.testing.assert_allclose(deconv2d(x, w, b, stride), naive_deconv(x, w, b, stride),
                                   rtol=1e-5, atol=1e-5)


# -- values on the engine ---------------------------------------------------------------------
def scenario(hw, layers, shape, precision="int8", mode="values+timing"):
    data = {"name": "t", "hardware": hw, "precision": precision, "mode": mode,
            "network": {"input": list(shape), "layers": layers}, "input": {"seed": 5},
            "weights": {"seed": 4}, "outputs": {"plots": False}, "gpu_fallback": False}
    return parse_scenario(data, ".")


def run(scn):
    prep = prepare(scn)
    ctx = context(prep)
    lowered = lower(prep.plan, ctx)
    return prep, lowered, run_lowered(lowered, ctx)


VALUE_CASES = [   # hardware, precision, layers, input shape
    ("nv_full", "int8", [{"name": "d", "type": "deconv", "out_channels": 8, "kernel": 4, "stride": 2}],
     (16, 6, 7)),
    ("nv_full", "fp16", [{"name": "d", "type": "deconv", "out_channels": 8, "kernel": 4, "stride": 2}],
     (16, 6, 7)),
    ("nv_full", "int8", [{"name": "d", "type": "deconv", "out_channels": 5, "kernel": [5, 3],
                          "stride": [3, 2]}], (8, 5, 4)),
    ("nv_small", "int8", [{"name": "d", "type": "deconv", "out_channels": 8, "kernel": 3, "stride": 1}],
     (16, 6, 7)),
    ("xavier_dla", "int8", [{"name": "d", "type": "deconv", "out_channels": 40, "kernel": [1, 64],
                             "stride": [1, 64]}, {"name": "r", "type": "relu"}], (8, 3, 2)),
    ("xavier_dla", "fp16", [{"name": "c", "type": "conv", "out_channels": 8, "kernel": 3, "pad": 1},
                            {"name": "d", "type": "deconv", "out_channels": 300, "kernel": 8,
                             "stride": 8}, {"name": "r", "type": "relu"}], (8, 3, 4)),
]


@pytest.mark.parametrize("hw, precision, layers, shape", VALUE_CASES,
                         ids=[f"{c[0]}-{c[1]}-{c[2][-1]['name']}{i}" for i, c in enumerate(VALUE_CASES)])
def test_deconv_values_match_the_reference(hw, precision, layers, shape):
    prep, lowered, result = run(scenario(hw, layers, shape, precision))
    assert not prep.plan.fallback
    kinds = [layer.kind for layer in prep.plan.layers]
    deconv = next(op for op in prep.network.ops if op.kind == "deconv")
    if tuple(deconv.attrs["stride"]) == (1, 1):
        assert "rubik" not in kinds
    else:
        assert "rubik" in kinds             # lowered to RUBIK contract, no float stand-in
    values = dla_tensors(prep.plan, result.outputs)
    out = prep.network.outputs[0]
    floor = 25 if precision == "int8" else 40
    assert sqnr_db(prep.reference[out], values[out]) > floor
    assert result.total_cycles > 0
    rubik = [t for t in result.layers if t.name.startswith("d.rubik")]
    for t in rubik:                         # a contract reads and writes its bytes (DRAM/CVSRAM)
        assert t.dram_read_bytes + t.cvsram_read_bytes == t.dram_write_bytes + t.cvsram_write_bytes > 0


def test_deconv_timing_only_and_output_cycles():
    layers = [{"name": "d", "type": "deconv", "out_channels": 16, "kernel": 2, "stride": 2}]
    prep, _, timed = run(scenario("nv_full", layers, (32, 8, 8), mode="timing"))
    _, _, valued = run(scenario("nv_full", layers, (32, 8, 8)))
    assert timed.total_cycles == valued.total_cycles
    rubik = next(t for t in timed.layers if t.name == "d.rubik")
    # it moves the contracted cube: 4 phases x 1 surface x 8 x 8 atoms of 32 bytes, each way
    assert rubik.dram_read_bytes == 4 * 8 * 8 * 32 == rubik.dram_write_bytes


def test_deconv_batch_is_refused_in_one_line():
    data = {"name": "t", "hardware": "nv_full", "batch": 2, "mode": "timing",
            "network": {"input": [8, 4, 4], "layers": [
                {"name": "d", "type": "deconv", "out_channels": 8, "kernel": 2, "stride": 2}]},
            "outputs": {"plots": False}}
    with pytest.raises(UnsupportedError, match="batch: a RUBIK contract"):
        run(parse_scenario(data, "."))


def test_gpu_fallback_deconv_on_nv_small_values():
    layers = [{"name": "c", "type": "conv", "out_channels": 8, "kernel": 1},
              {"name": "d", "type": "deconv", "out_channels": 8, "kernel": 2, "stride": 2},
              {"name": "e", "type": "conv", "out_channels": 8, "kernel": 1}]
    data = {"name": "t", "hardware": "nv_small", "network": {"input": [8, 4, 4], "layers": layers},
            "input": {"seed": 1}, "weights": {"seed": 2}, "outputs": {"plots": False}}
    prep, _, result = run(parse_scenario(data, "."))
    assert "[rule deconv.rubik]" in prep.plan.fallback["d"]
    values = dla_tensors(prep.plan, result.outputs)
    assert sqnr_db(prep.reference["e"], values["e"]) > 25


# -- RUBIK CONTRACT at register level ----------------------------------------------------------
def contract_model(blocks, sy, sx, surfaces):
    """The C model's walk: atom (s, h, w) of block (iy, ix) -> surface s, line h*sy + iy, pixel
    w*sx + ix.  `blocks` (sy*sx*surfaces, H, W, 32) bytes; returns (surfaces, H*sy, W*sx, 32)."""
    n, h, w, a = blocks.shape
    out = np.zeros((surfaces, h * sy, w * sx, a), np.uint8)
    for iy in range(sy):
        for ix in range(sx):
            for s in range(surfaces):
                out[s, iy::sy, ix::sx] = blocks[(iy * sx + ix) * surfaces + s]
    return out


@pytest.mark.parametrize("dtype, channels, stride", [(INT8, 40, (2, 3)), (FP16, 20, (3, 9)),
                                                     (INT8, 32, (1, 1))])
def test_rubik_contract_register_level(dtype, channels, stride):
    hw = NV_FULL
    sy, sx = stride
    per_atom = 32 // dtype.bytes
    surfaces = -(-channels // per_atom)
    spec = ContractSpec(stride, surfaces * per_atom, 3, 5)
    alloc = Allocator(hw)
    src = alloc.feature("src", spec.in_channels, 3, 5, dtype=dtype)
    dst = alloc.feature("dst", spec.out_channels, spec.out_h, spec.out_w, dtype=dtype)
    rng = np.random.default_rng(3)
    cube = rng.integers(-100, 100, (spec.in_channels, 3, 5)).astype(dtype.numpy)
    b = ProgramBuilder(hw, "rubik")
    b.load_cube(src, cube)
    emit_contract(b, "contract", spec, src, dst)
    engine = Engine(hw)
    result = engine.run(b.build())
    got = read_output(engine, dst)
    blocks = cube_image(src, cube).reshape(-1, 3, 5, 32)
    want = contract_model(blocks, sy, sx, surfaces)
    have = cube_image(dst, got).reshape(surfaces, spec.out_h, spec.out_w, 32)
    np.testing.assert_array_equal(have, want)
    assert result.cycles > spec.in_channels * 15 * dtype.bytes / 64     # at most 64 B/cycle


def test_rubik_split_and_merge_are_refused():
    from nvdla_sim.program import IntrNotify, RegisterProgram
    from program_helpers import reg_writes
    for mode, name in ((1, "SPLIT"), (2, "MERGE")):
        program = RegisterProgram("rubik", reg_writes({
            "RBK.D_MISC_CFG": {"RUBIK_MODE": mode}, "RBK.D_OP_ENABLE": {"OP_EN": 1}}, version=1)
            + [IntrNotify("RUBIK", 0, "rbk_done")])
        with pytest.raises(UnsupportedError, match=f"RUBIK_MODE={name}: only CONTRACT"):
            Engine(NV_FULL).run(program)


def test_deconv_scenario_field_errors():
    for bad, field in (({"kernel": 0}, "kernel"), ({"kernel": 2, "stride": "x"}, "stride")):
        layer = {"name": "d", "type": "deconv", "out_channels": 4, **bad}
        with pytest.raises(NvdlaSimError, match=field):
            scenario("nv_full", [layer], (4, 4, 4))


# -- resize -------------------------------------------------------------------------------------
def resize_net(mode="nearest", scale=(2, 2), c=8) -> Network:
    n = Network("t", "data", Shape(c, 4, 4))
    n.add("resize", "x", "data", scale=scale, mode=mode)
    return n


@pytest.mark.parametrize("rule, inside, outside", [
    ("resize.nearest", dict(scale=(32, 1)), dict(scale=(33, 1))),
    ("resize.bilinear", dict(mode="bilinear", scale=(4, 4)), dict(mode="bilinear", scale=(5, 4))),
])
def test_resize_rule_just_inside_and_just_outside(rule, inside, outside):
    inside_rules = rules_of(resize_net(**inside))
    assert rule not in inside_rules
    assert rule in rules_of(resize_net(**outside))
    assert rule in rules_of(resize_net(**outside), NV_FULL)


def test_resize_placement():
    assert check_support(resize_net(scale=(32, 1)), XAVIER).on_dla("x")
    assert rules_of(resize_net(), NV_SMALL) == {"resize.rubik"}            # no RUBIK
    assert check_support(resize_net(scale=(1, 1)), NV_SMALL).on_dla("x")   # a copy: 1x1 conv
    assert check_support(resize_net(mode="bilinear", scale=(4, 3)), XAVIER).on_dla("x")
    thin = Network("t", "data", Shape(8, 4, 1))                  # 1 pixel wide, W not scaled
    thin.add("resize", "x", "data", scale=(2, 1), mode="bilinear")
    assert rules_of(thin) == {"resize.bilinear"}
    assert rules_of(resize_net(mode="bilinear", scale=(2, 2)), NV_SMALL) == {"resize.rubik"}


@pytest.mark.parametrize("hw, precision, scale", [("nv_full", "int8", 3), ("xavier_dla", "fp16", [2, 5]),
                                                  ("nv_full", "int8", 1)])
def test_nearest_resize_values(hw, precision, scale):
    layers = [{"name": "c", "type": "conv", "out_channels": 20, "kernel": 3, "pad": 1},
              {"name": "r", "type": "resize", "scale": scale}]
    prep, _, result = run(scenario(hw, layers, (8, 5, 6), precision))
    assert not prep.plan.fallback
    values = dla_tensors(prep.plan, result.outputs)
    s = (scale, scale) if isinstance(scale, int) else tuple(scale)
    want = np.repeat(np.repeat(prep.reference["c"], s[0], axis=1), s[1], axis=2)  # o // s
    np.testing.assert_array_equal(prep.reference["r"], want)
    assert sqnr_db(want, values["r"]) > (25 if precision == "int8" else 40)
    # nearest copies: the resized values are the convolution's own values, repeated
    np.testing.assert_array_equal(values["r"][:, ::s[0], ::s[1]], values["c"])


# -- slice ----------------------------------------------------------------------------------------
def slice_net(start, channels, c=96, rows=None, then=None) -> Network:
    n = Network("t", "data", Shape(c, 4, 4))
    n.conv("a", "data", c, 1)
    extra = {"rows": rows} if rows else {}
    n.add("slice", "x", "a", start=start, channels=channels, **extra)
    if then:
        then(n)
    return n


@pytest.mark.parametrize("rule, inside, outside", [
    ("slice.channel_atom", dict(start=32, channels=32), dict(start=16, channels=32)),
    ("slice.channel_atom", dict(start=64, channels=32), dict(start=32, channels=16)),
    ("slice.spatial", dict(start=0, channels=96, rows=(0, 4)), dict(start=0, channels=96, rows=(1, 3))),
    ("slice.spatial", dict(start=0, channels=96, rows=(1, 3), then=lambda n: n.conv("b", "x", 8, 1)),
     dict(start=0, channels=96, rows=(1, 3), then=lambda n: n.add("add", "b", ["x", "x"]))),
    ("slice.view_consumer", dict(start=32, channels=32, then=lambda n: n.conv("b", "x", 8, 1)),
     dict(start=32, channels=32, then=lambda n: [n.conv("b", "a", 8, 1),
                                                 n.add("concat", "y", ["x", "b"])])),
])
def test_slice_rule_just_inside_and_just_outside(rule, inside, outside):
    assert check_support(slice_net(**inside), XAVIER).on_dla("x")
    assert rules_of(slice_net(**outside)) == {rule}
    assert rule in rules_of(slice_net(**outside), NV_FULL)


def test_slice_tail_off_the_atom_is_in_place():
    """A part ending at the tensor's last channel may end off the atom (the padding lanes)."""
    assert check_support(slice_net(start=64, channels=20, c=84), XAVIER).on_dla("x")


@pytest.mark.parametrize("hw, precision", [("nv_full", "int8"), ("xavier_dla", "fp16"), ("nv_small", "int8")])
def test_channel_slice_is_read_in_place(hw, precision):
    """Split into parts on atoms: no layer, no copy -- the consumers read the producer's buffer
    at the part's first surface (the view's values are the producer's own)."""
    atom = 32 if precision == "int8" and hw != "nv_small" else 16 if hw != "nv_small" else 8
    layers = [{"name": "a", "type": "conv", "out_channels": 3 * atom, "kernel": 3, "pad": 1},
              {"name": "p", "type": "slice", "start": atom, "channels": atom},
              {"name": "b", "type": "conv", "out_channels": 8, "kernel": 1, "input": "p"},
              {"name": "q", "type": "slice", "start": 2 * atom, "input": "a"},
              {"name": "c", "type": "conv", "out_channels": 8, "kernel": 3, "pad": 1, "input": "q"},
              {"name": "s", "type": "add", "input": ["b", "c"]}]
    prep, lowered, result = run(scenario(hw, layers, (8, 6, 5), precision))
    assert not prep.plan.fallback
    assert [layer.name for layer in prep.plan.layers if layer.kind != "sdp"] == ["a", "b", "c"]
    b = next(layer for layer in prep.plan.layers if layer.name == "b")
    assert (b.inputs[0].tensor, b.inputs[0].channel_offset, b.inputs[0].channels) == ("a", atom, atom)
    values = dla_tensors(prep.plan, result.outputs)
    np.testing.assert_array_equal(values["p"], values["a"][atom:2 * atom])
    assert sqnr_db(prep.reference["s"], values["s"]) > (25 if precision == "int8" else 40)


# -- shuffle ----------------------------------------------------------------------------------------
def test_shuffles_that_move_data_go_to_the_gpu():
    n = Network("t", "data", Shape(8, 4, 6))
    n.add("transpose", "x", "data", perm=(1, 2, 0))
    assert rules_of(n, NV_FULL) == {"shuffle.transpose"}
    n = Network("t", "data", Shape(8, 4, 6))
    n.add("reshape", "x", "data", shape=(4, 8, 6))
    assert rules_of(n, NV_FULL) == {"shuffle.reshape"}
    n = Network("t", "data", Shape(8, 4, 6))
    n.add("shuffle", "x", "data", groups=2)
    assert rules_of(n, XAVIER) == {"shuffle.transpose"}


def test_slice_of_a_holed_concatenation_is_a_one_line_error():
    layers = [{"name": "a", "type": "conv", "out_channels": 20, "kernel": 1},
              {"name": "b", "type": "conv", "out_channels": 44, "kernel": 1, "input": "data"},
              {"name": "cat", "type": "concat", "input": ["a", "b"]},
              {"name": "p", "type": "slice", "start": 32, "channels": 32}]
    with pytest.raises(NvdlaSimError, match="layer 'p': a channel slice of 'cat'"):
        run(scenario("nv_full", layers, (8, 4, 4)))


@pytest.mark.parametrize("hw, precision", [("nv_full", "int8"), ("xavier_dla", "fp16")])
def test_spatial_slice_is_read_in_place(hw, precision):
    """Rows / columns of a tensor read by a convolution and a pooling at the window's address
    with the parent's strides: no layer, no copy."""
    layers = [{"name": "a", "type": "conv", "out_channels": 40, "kernel": 3, "pad": 1},
              {"name": "w", "type": "slice", "rows": [2, 5], "cols": [1, 7]},
              {"name": "b", "type": "conv", "out_channels": 8, "kernel": 2, "input": "w"},
              {"name": "p", "type": "pool", "method": "max", "kernel": 2, "stride": 1, "input": "w"},
              {"name": "c", "type": "conv", "out_channels": 8, "kernel": 1, "input": "p"},
              {"name": "d", "type": "conv", "out_channels": 8, "kernel": 3, "pad": 1, "input": "c"},
              {"name": "s", "type": "add", "input": ["b", "d"]}]
    prep, _, result = run(scenario(hw, layers, (8, 9, 10), precision))
    assert not prep.plan.fallback
    assert [layer.name for layer in prep.plan.layers if layer.kind != "sdp"] == ["a", "b", "p", "c", "d"]
    b = next(layer for layer in prep.plan.layers if layer.name == "b")
    assert b.inputs[0] == TensorRef("a", 0, 40, (2, 5, 1, 7))
    np.testing.assert_array_equal(prep.reference["w"], prep.reference["a"][:, 2:7, 1:8])
    values = dla_tensors(prep.plan, result.outputs)
    floor = 25 if precision == "int8" else 40
    for name in ("b", "p", "s"):
        assert sqnr_db(prep.reference[name], values[name]) > floor
    # the pooling read the convolution's own values in the window
    np.testing.assert_array_equal(values["p"], np.maximum.reduce(
        [values["a"][:, 2 + i:6 + i, 1 + j:7 + j] for i in (0, 1) for j in (0, 1)]))


def test_deconv_network_as_a_v1_trace_replays(tmp_path, capsys):
    """compile --emit-cfg writes the deconvolution (convolution + RUBIK) as a v1 trace-player
    test whose dump_mem golden images the replay matches."""
    from nvdla_sim.cli import main
    import yaml
    scn = {"name": "dcv", "hardware": "nv_full",
           "network": {"input": [16, 6, 6], "layers": [
               {"name": "c1", "type": "conv", "out_channels": 32, "kernel": 3, "pad": 1, "relu": True},
               {"name": "up", "type": "deconv", "out_channels": 16, "kernel": 3, "stride": 2},
               {"name": "r", "type": "relu"}]}, "outputs": {"plots": False}}
    path = tmp_path / "dcv.yaml"
    path.write_text(yaml.safe_dump(scn))
    assert main(["compile", str(path), "--emit-cfg", str(tmp_path / "tr")]) == 0
    txn = (tmp_path / "tr" / "dcv" / "input.txn").read_text()
    assert "NVDLA_RBK.D_DECONV_STRIDE" in txn
    assert main(["replay", str(tmp_path / "tr" / "dcv"), "--project", "nv_full"]) == 0
    assert "dcv: PASS" in capsys.readouterr().out



@pytest.mark.parametrize("hw, precision, scale, shape", [
    ("nv_full", "int8", 2, (8, 5, 6)), ("xavier_dla", "fp16", [3, 4], (8, 5, 6)),
    ("nv_full", "fp16", 2, (8, 1, 2)), ("orin_dla", "int8", 4, (40, 3, 7)),
    ("nv_full", "int8", [3, 2], (8, 4, 1)), ("nv_full", "fp16", [2, 1], (8, 3, 5))])
def test_bilinear_resize_values(hw, precision, scale, shape):
    """Bilinear resize on the DLA: 3x3 phase convolutions over the edge bands (the clamp folded
    into the kernels) and a RUBIK contract; against the half-pixel, edge-clamped definition."""
    layers = [{"name": "c", "type": "conv", "out_channels": shape[0], "kernel": 1},
              {"name": "r", "type": "resize", "mode": "bilinear", "scale": scale},
              {"name": "relu", "type": "relu"}]
    prep, _, result = run(scenario(hw, layers, shape, precision))
    assert not prep.plan.fallback
    kinds = [layer.kind for layer in prep.plan.layers]
    s = (scale, scale) if isinstance(scale, int) else tuple(scale)
    passes = [n for n, f in zip(shape[1:], s) if f > 1]       # one pass per scaled axis
    assert kinds.count("rubik") == len(passes)
    assert kinds.count("conv") == 1 + sum(len(edge_bands(n)) for n in passes)
    values = dla_tensors(prep.plan, result.outputs)
    floor = 25 if precision == "int8" else 40
    assert sqnr_db(prep.reference["relu"], values["relu"]) > floor
    if precision == "fp16":     # the DLA's own input, interpolated in float64: FP16 rounding only
        from nvdla_sim.scenario.reference_resample import resize_bilinear
        want = np.maximum(resize_bilinear(values["c"].astype(np.float64), s), 0)
        assert sqnr_db(want, values["relu"]) > 55


def test_bilinear_int8_upgrade_with_int8_fp16_flags():
    """precision [int8, fp16]: the bilinear resize runs FP16 (TensorRT's upgrade), its
    neighbours INT8; nearest resize stays INT8."""
    layers = [{"name": "c", "type": "conv", "out_channels": 16, "kernel": 3, "pad": 1},
              {"name": "r", "type": "resize", "mode": "bilinear", "scale": 2},
              {"name": "d", "type": "conv", "out_channels": 8, "kernel": 1},
              {"name": "n", "type": "resize", "scale": 2}]
    prep, _, result = run(scenario("xavier_dla", layers, (8, 5, 6), ["int8", "fp16"]))
    assert prep.precisions["r"][0] == "fp16" and "[rule resize.bilinear_int8_upgrade]" in prep.precisions["r"][1]
    assert prep.precisions["n"][0] == "int8" and prep.precisions["c"][0] == "int8"
    values = dla_tensors(prep.plan, result.outputs)
    for name in ("r", "n", "d"):
        assert sqnr_db(prep.reference[name], values[name]) > 25
