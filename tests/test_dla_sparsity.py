"""Structured sparsity (compiler/sparsity.py, `sparse_weights: true`): the 2:4 pattern check, the
document's requirements and limitations (each rule just inside / just outside), the MAC-cycle
model against a hand count, the report's per-layer mark, and unchanged engine cycles."""
from __future__ import annotations

import numpy as np
import pytest

from nvdla_sim.compiler.lower import lower_and_run
from nvdla_sim.compiler.sparsity import mac_cycles, two_four
from nvdla_sim.config import load_hardware
from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.scenario.runner import context, prepare
from nvdla_sim.scenario.schema import parse_scenario


def scenario(c=128, k=64, kernel=3, precision="int8", pattern="2:4", hardware="orin_dla",
             sparse=True, layers=None, fc=False, size=6, winograd="off"):
    layers = layers or ([{"name": "f", "type": "fc", "out_features": k}] if fc else
                        [{"name": "c", "type": "conv", "out_channels": k, "kernel": kernel,
                          "pad": kernel // 2}])
    weights = {"seed": 1} if pattern is None else {"seed": 1, "pattern": pattern}
    data = {"name": "ss", "hardware": hardware, "precision": precision,
            "network": {"input": [c, size, size], "layers": layers}, "weights": weights,
            "mode": "timing-only", "outputs": {"plots": False}, "sparse_weights": sparse,
            "winograd": winograd}
    return parse_scenario(data, ".")


def marks(scn):
    prep = prepare(scn)
    result = lower_and_run(prep.plan, context(prep))
    notes = {layer.name: " ".join(n for n in layer.notes if "sparsity" in n)
             for layer in prep.plan.layers if layer.kind == "conv"}
    return notes, result


def test_two_four_pattern():
    w = np.zeros((2, 8, 1, 1), np.int8)
    w[:, [0, 3, 5, 6]] = 1                      # two of each block of four
    assert two_four(w)
    w[1, 2] = 1                                 # three in the first block of kernel 1
    assert not two_four(w)
    w = np.zeros((1, 6, 1, 1), np.int8)
    w[0, [4, 5]] = 1                            # a partial last block: padded with zeros
    assert two_four(w)
    w[0, 1] = w[0, 2] = 1
    assert two_four(w) and not two_four(np.ones((1, 3, 1, 1), np.int8))


def test_mac_cycles_hand_count():
    hw = load_hardware("orin_dla")
    # ceil(C / ATOMIC_C) x ceil(K / ATOMIC_K) x R x S x out_H x out_W
    c, k = 3 * hw.atomic_c + 1, 2 * hw.atomic_k
    assert mac_cycles(hw, c, k, (3, 3), 5, 7) == 4 * 2 * 9 * 35
    assert mac_cycles(hw, c, k, (3, 3), 5, 7, sparse=True) == 2 * 2 * 9 * 35


def test_a_benefiting_convolution_is_marked_and_engine_cycles_do_not_move():
    notes, sparse = marks(scenario())
    assert "MAC cycles" in notes["c"] and "no benefit" not in notes["c"]
    hw = load_hardware("orin_dla")
    dense = mac_cycles(hw, 128, 64, (3, 3), 6, 6)
    assert f"{dense} -> {mac_cycles(hw, 128, 64, (3, 3), 6, 6, sparse=True)}" in notes["c"]
    _, plain = marks(scenario(sparse=False))
    assert sparse.total_cycles == plain.total_cycles     # the engine runs the dense program


@pytest.mark.parametrize("inside, outside, rule", [
    ({"c": 65}, {"c": 64}, "sparsity.channels"),
    ({"k": 64}, {"k": 65 + 2}, "sparsity.kernels"),
    ({"k": 96}, {"k": 64 + 3}, "sparsity.kernels"),
    ({"c": 1024, "k": 256, "kernel": 1}, {"c": 1024, "k": 257, "kernel": 1},
     "sparsity.weight_bytes"),
    ({"precision": "int8"}, {"precision": "fp16"}, "sparsity.int8"),
    ({"pattern": "2:4"}, {"pattern": None}, "sparsity.pattern"),
    ({"size": 28, "winograd": "off"}, {"size": 28, "winograd": "on"}, "sparsity.winograd"),
])
def test_each_rule_just_inside_and_just_outside(inside, outside, rule):
    notes, _ = marks(scenario(**inside))
    assert "MAC cycles" in notes["c"], notes
    notes, _ = marks(scenario(**outside))
    assert f"[rule {rule}]" in notes["c"], notes


def test_fully_connected_and_image_input_do_not_benefit():
    notes, _ = marks(scenario(c=128, k=64, fc=True))
    assert all("[rule sparsity.conv]" in n for n in notes.values())
    notes, _ = marks(scenario(c=3, k=64, pattern=None))   # 3 channels: the pixel image input
    assert "[rule sparsity.not_nhwc]" in notes["c"]


def test_sparse_weights_needs_an_orin_class_preset():
    with pytest.raises(NvdlaSimError, match=r"sparsity.orin_only"):
        scenario(hardware="xavier_dla")
    with pytest.raises(NvdlaSimError, match="sparse_weights"):
        parse_scenario({"hardware": "orin_dla", "network": {"builtin": "lenet5"},
                        "sparse_weights": "yes"}, ".")


def test_the_report_rows_carry_the_mark():
    from nvdla_sim.report.tables import build_report
    scn = scenario(layers=[{"name": "a", "type": "conv", "out_channels": 128, "kernel": 3,
                            "pad": 1},
                           {"name": "b", "type": "conv", "out_channels": 67, "kernel": 1}])
    prep = prepare(scn)
    rep = build_report(prep, lower_and_run(prep.plan, context(prep)))
    note = {row.layer: row.note for row in rep.rows}
    assert "MAC cycles" in note["a"] and "[rule sparsity.kernels]" in note["b"]


def test_model_cycles_shrink_only_mac_bound_benefiting_layers():
    from nvdla_sim.compiler.sparsity import sparse_cycles, sparsity_verdicts
    scn = scenario(c=256, size=28, layers=[        # C=256: two channel steps of orin_dla's 128
        {"name": "a", "type": "conv", "out_channels": 64, "kernel": 3, "pad": 1},
        {"name": "b", "type": "conv", "out_channels": 67, "kernel": 1}])
    prep = prepare(scn)
    result = lower_and_run(prep.plan, context(prep))
    verdicts = {v.layer: v for v in sparsity_verdicts(prep.plan, scn.hardware, None)}
    timing = {t.name: t for t in result.layers}
    for name, (cycles, est) in sparse_cycles(list(verdicts.values()), result).items():
        v, t = verdicts[name], timing[name]
        assert cycles == t.end_cycle - t.start_cycle
        if v.benefits and t.bound == "MAC":
            saved = v.dense_mac_cycles - v.sparse_mac_cycles
            assert est == max(cycles - saved, v.sparse_mac_cycles) < cycles
        else:
            assert est == cycles
    assert verdicts["a"].benefits and timing["a"].bound == "MAC"    # both branches seen
    assert not verdicts["b"].benefits
