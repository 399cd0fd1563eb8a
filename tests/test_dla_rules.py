"""TensorRT's DLA restrictions as named placement rules (compiler/dla_rules.py): for each rule a
network just inside and one just outside it, placed on the DLA or sent to the GPU naming the rule."""
from __future__ import annotations

import math

import pytest

from nvdla_sim.compiler.dla_rules import MAX_BATCH, RULES, op_violations
from nvdla_sim.compiler.network import Network, Shape
from nvdla_sim.compiler.support import check_support
from nvdla_sim.config import load_hardware
from nvdla_sim.datatype import FP16, INT8
from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.scenario.runner import prepare
from nvdla_sim.scenario.schema import parse_scenario

XAVIER, ORIN = load_hardware("xavier_dla"), load_hardware("orin_dla")
NV_FULL, NV_SMALL = load_hardware("nv_full"), load_hardware("nv_small")


def net_of(c: int, h: int, w: int, build) -> Network:
    n = Network("t", "data", Shape(c, h, w))
    build(n)
    return n


def rules_of(net: Network, hw=XAVIER, dtype=INT8, op="x") -> set[str]:
    reason = check_support(net, hw, dtype).reason(op)
    return {r.split("[rule ")[1].rstrip("]") for r in reason.split("; ") if "[rule " in r}


# (rule, input C/H/W, build just inside, build just outside)
CASES = [
    ("general.max_dim", (8, 4, 4),
     lambda n: [n.conv("a", "data", 4096, 1), n.conv("b", "data", 4096, 1),
                n.add("concat", "x", ["a", "b"])],
     lambda n: [n.conv("a", "data", 4096, 1), n.conv("b", "data", 4097, 1),
                n.add("concat", "x", ["a", "b"])]),
    ("conv.kernel", (8, 40, 40), lambda n: n.conv("x", "data", 8, 32), lambda n: n.conv("x", "data", 8, 33)),
    ("conv.padding", (8, 40, 40), lambda n: n.conv("x", "data", 8, 32, pad=31),
     lambda n: n.conv("x", "data", 8, 32, pad=(32, 0, 0, 0))),
    ("conv.padding_below_kernel", (8, 40, 40), lambda n: n.conv("x", "data", 8, 3, pad=2),
     lambda n: n.conv("x", "data", 8, 3, pad=3)),
    ("conv.stride", (8, 40, 40), lambda n: n.conv("x", "data", 8, 1, stride=8),
     lambda n: n.conv("x", "data", 8, 1, stride=9)),
    ("conv.dilation", (8, 40, 40), lambda n: n.conv("x", "data", 8, 2, dilation=32),
     lambda n: n.conv("x", "data", 8, 2, dilation=33)),
    ("conv.output_maps", (8, 4, 4), lambda n: n.conv("x", "data", 8192, 1),
     lambda n: n.conv("x", "data", 8193, 1)),
    ("conv.input_channels", (8, 4, 4),
     lambda n: [n.conv("a", "data", 4096, 1), n.conv("b", "data", 4096, 1),
                n.add("concat", "c", ["a", "b"]), n.conv("x", "c", 8, 1)],
     lambda n: [n.conv("a", "data", 4096, 1), n.conv("b", "data", 4097, 1),
                n.add("concat", "c", ["a", "b"]), n.conv("x", "c", 8, 1)]),
    ("conv.groups", (8, 4, 4),
     lambda n: [n.conv("a", "data", 4096, 1), n.conv("b", "data", 4096, 1),
                n.add("concat", "c", ["a", "b"]), n.conv("x", "c", 8192, 1, groups=8192)],
     lambda n: [n.conv("a", "data", 8192, 1), n.conv("b", "data", 8192, 1),
                n.add("concat", "c", ["a", "b"]), n.conv("x", "c", 16384, 1, groups=16384)]),
    ("pool.window", (8, 40, 40), lambda n: n.pool("x", "data", "max", 8, 1),
     lambda n: n.pool("x", "data", "max", 9, 1)),
    ("pool.padding", (8, 40, 40), lambda n: n.pool("x", "data", "max", 8, 1, pad=7),
     lambda n: n.pool("x", "data", "max", 8, 1, pad=(8, 0, 0, 0))),
    ("pool.stride", (8, 40, 40), lambda n: n.pool("x", "data", "max", 8, 16),
     lambda n: n.pool("x", "data", "max", 8, 17)),
    ("pool.exclude_pad", (8, 40, 40),
     lambda n: n.add("pool", "x", "data", method="avg", kernel=(3, 3), stride=(1, 1),
                     pad=(1, 1, 1, 1), count_include_pad=True),
     lambda n: n.add("pool", "x", "data", method="avg", kernel=(3, 3), stride=(1, 1),
                     pad=(1, 1, 1, 1), count_include_pad=False)),
    ("lrn.window", (8, 8, 8), lambda n: n.add("lrn", "x", "data", size=9, alpha=1e-4, beta=0.75),
     lambda n: n.add("lrn", "x", "data", size=11, alpha=1e-4, beta=0.75)),
    ("activation.clip", (8, 8, 8), lambda n: n.add("clip", "x", "data", min=0.0, max=127.0),
     lambda n: n.add("clip", "x", "data", min=0.0, max=128.0)),
    ("concat.inputs", (8, 8, 8),
     lambda n: [n.conv("a", "data", 8, 1), n.add("concat", "x", ["a", "data"])],
     lambda n: [n.conv("a", "data", 8, 1), n.add("concat", "x", ["a"])]),
]


@pytest.mark.parametrize("rule, shape, inside, outside", CASES, ids=[c[0] for c in CASES])
def test_rule_just_inside_and_just_outside(rule, shape, inside, outside):
    assert rule in RULES
    assert rule not in rules_of(net_of(*shape, inside))
    assert check_support(net_of(*shape, inside), XAVIER).on_dla("x")
    out = net_of(*shape, outside)
    assert not check_support(out, XAVIER).on_dla("x")
    assert rule in rules_of(out)
    if RULES[rule].scope != "dla":      # hardware / TensorRT limits apply on every preset
        assert rule in rules_of(out, NV_FULL)


def test_lut_rule_follows_the_preset():
    n = net_of(8, 8, 8, lambda n: n.add("sigmoid", "x", "data"))
    assert check_support(n, XAVIER).on_dla("x")
    assert rules_of(n, NV_SMALL) == {"activation.lut"}      # nv_small has no SDP LUT


def test_eltwise_takes_two_inputs():
    n = net_of(8, 8, 8, lambda n: [n.conv("a", "data", 8, 1), n.add("add", "x", ["a", "data"])])
    assert check_support(n, XAVIER).on_dla("x")
    n = net_of(8, 8, 8, lambda n: [n.conv("a", "data", 8, 1),
                                   n.add("add", "x", ["a", "data", "a"])])
    assert rules_of(n) == {"eltwise.inputs"}


def test_softmax_orin_only():
    n = net_of(16, 1, 1, lambda n: n.add("softmax", "x", "data"))
    assert rules_of(n, XAVIER) == {"softmax.orin_only"}
    assert rules_of(n, ORIN) == set()           # decomposed (compiler/ext_ops.py)
    assert rules_of(n, NV_FULL) == {"softmax.engine"}


def test_batch_rule():
    n = net_of(8, 8, 8, lambda n: n.conv("x", "data", 8, 1))
    op = n.op("x")
    assert op_violations(op, n, XAVIER, INT8, MAX_BATCH) == []
    assert "[rule general.batch]" in op_violations(op, n, XAVIER, INT8, MAX_BATCH + 1)[0]
    assert op_violations(op, n, NV_FULL, INT8, MAX_BATCH + 1) == []    # DLA presets only


def cbuf_banks_by_bytes(c: int, w: int, k: int, elem: int) -> tuple[int, int]:
    """Independent count: 128-byte CBUF entries (64 channels of 2 bytes), 256 entries a bank;
    a line of C channels x W pixels takes ceil(C x elem / 128) entries per pixel (C a multiple
    of 128 / elem here); one kernel group is 32 kernels in INT8, 16 in FP16 (1024 FP16 MACs)."""
    entry, depth = 128, 256
    line_entries = math.ceil(c * elem / entry) * w
    data = math.ceil(line_entries * k / depth)
    group = 32 if elem == 1 else 16
    weights = math.ceil(math.ceil(group * k * k * c * elem / entry) / depth)
    return weights, data


@pytest.mark.parametrize("dtype", [INT8, FP16])
def test_cbuf_bank_rule(dtype):
    """wtBanksForOneKernel + minDataBanks <= 16: the widest input a 3x3 convolution of 512
    channels takes on the DLA, and one pixel more."""
    c, k = 512, 3
    widest = max(w for w in range(1, 2000)
                 if sum(cbuf_banks_by_bytes(c, w + 2, k, dtype.bytes)) <= 16)
    inside = net_of(c, 8, widest, lambda n: n.conv("x", "data", 64, k, pad=1))
    outside = net_of(c, 8, widest + 1, lambda n: n.conv("x", "data", 64, k, pad=1))
    assert check_support(inside, XAVIER, dtype).on_dla("x")
    assert rules_of(outside, XAVIER, dtype) == {"conv.cbuf_banks"}
    assert check_support(outside, NV_FULL, dtype).on_dla("x")     # a DLA-preset rule


LAYERS = """
hardware: xavier_dla
network:
  input: [8, 32, 32]
  layers:
    - {name: c1, type: conv, out_channels: 16, kernel: 3, pad: 1, relu: true}
    - {name: p1, type: pool, method: max, kernel: %d, stride: 1}
    - {name: c2, type: conv, out_channels: 8, kernel: 1}
mode: timing
"""


def test_outside_goes_to_gpu_or_errors_naming_the_rule(tmp_path):
    scn = parse_scenario(__import__("yaml").safe_load(LAYERS % 9), tmp_path)
    prep = prepare(scn)
    assert prep.support.fallback_ops == ["p1"]
    assert "[rule pool.window]" in prep.plan.fallback["p1"]
    assert [layer.kind for layer in prep.plan.layers].count("gpu") == 1
    scn = parse_scenario(__import__("yaml").safe_load(LAYERS % 9 + "gpu_fallback: false\n"), tmp_path)
    with pytest.raises(NvdlaSimError, match=r"layer 'p1' \(pool\).*\[rule pool\.window\]"):
        prepare(scn)
    scn = parse_scenario(__import__("yaml").safe_load(LAYERS % 8 + "gpu_fallback: false\n"), tmp_path)
    assert prepare(scn).support.fallback_ops == []
