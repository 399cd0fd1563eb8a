"""Float32 reference: hand-computed convolution, pooling, LRN, SQNR; conv2d against a direct loop."""
from __future__ import annotations

import math

import numpy as np
import pytest

from nvdla_sim.compiler.network import Network, Shape
from nvdla_sim.compiler.zoo import BUILTIN
from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.scenario.reference import conv2d, lrn, pool2d, run_reference, sqnr_db
from nvdla_sim.scenario.weights import fold_batchnorm, random_weights


def test_conv_hand_computed():
    x = np.arange(9, dtype=np.float32).reshape(1, 3, 3)          # 0..8
    w = np.ones((1, 1, 2, 2), np.float32)
    y = conv2d(x, w, np.array([1.0], np.float32))
    # windows: 0+1+3+4, 1+2+4+5, 3+4+6+7, 4+5+7+8, each plus the bias 1
    assert y.tolist() == [[[9.0, 13.0], [21.0, 25.0]]]


def test_conv_padding_stride_dilation_hand_computed():
    x = np.ones((1, 3, 3), np.float32)
    w = np.ones((1, 1, 2, 2), np.float32)
    # pad top 1 only, stride 2: rows -1..0 and 1..2; columns 0..1 and 2..3 (3 is outside) -> counts
    y = conv2d(x, w, None, stride=(2, 2), pad=(1, 0, 0, 1))
    assert y.tolist() == [[[2.0, 1.0], [4.0, 2.0]]]
    # dilation 2: a 3x3 span, corners of the input only
    x = np.arange(9, dtype=np.float32).reshape(1, 3, 3)
    assert conv2d(x, w, None, dilation=(2, 2)).tolist() == [[[0.0 + 2 + 6 + 8]]]


def _direct_conv(x, w, b, stride, pad, dil, groups):
    c, h, wd = x.shape
    k, cg, r, s = w.shape
    xp = np.pad(x, ((0, 0), (pad[0], pad[2]), (pad[1], pad[3])))
    oh = (h + pad[0] + pad[2] - dil[0] * (r - 1) - 1) // stride[0] + 1
    ow = (wd + pad[1] + pad[3] - dil[1] * (s - 1) - 1) // stride[1] + 1
    out = np.zeros((k, oh, ow))
    kg = k // groups
    for o in range(k):
        g = o // kg
        for i in range(oh):
            for j in range(ow):
                acc = b[o]
                for ci in range(cg):
                    for u in range(r):
                        for v in range(s):
                            acc += w[o, ci, u, v] * xp[g * cg + ci, i * stride[0] + u * dil[0],
                                                      j * stride[1] + v * dil[1]]
                out[o, i, j] = acc
    return out


@pytest.mark.parametrize("stride, pad, dil, groups", [
    ((1, 1), (0, 0, 0, 0), (1, 1), 1), ((2, 1), (1, 2, 0, 1), (1, 1), 1),
    ((1, 2), (2, 2, 2, 2), (2, 1), 2), ((3, 3), (0, 1, 1, 0), (1, 2), 4)])
def test_conv_matches_direct_loop(stride, pad, dil, groups):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 9, 10)).astype(np.float32)
    w = rng.standard_normal((4, 8 // groups, 3, 2)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    got = conv2d(x, w, b, stride, pad, dil, groups)
    np.testing.assert_allclose(got, _direct_conv(x, w, b, stride, pad, dil, groups), rtol=1e-5, atol=1e-5)


def test_pool_hand_computed():
    x = np.array([[[1, -2, 3], [4, -5, 6], [-7, 8, -9]]], np.float32)
    # max ignores padding (a -inf never wins, even over negative values)
    assert pool2d(x, "max", (2, 2), (2, 2), (1, 1, 0, 0)).tolist() == [[[1.0, 3.0], [4.0, 8.0]]]
    # average counting the padding (what PDP does) divides by 4 everywhere
    assert pool2d(x, "avg", (2, 2), (2, 2), (1, 1, 0, 0)).tolist() == [[[0.25, 0.25], [-0.75, 0.0]]]
    # excluding padding: the corner window has one element
    assert pool2d(x, "avg", (2, 2), (2, 2), (1, 1, 0, 0), count_include_pad=False)[0, 0, 0] == 1.0


def test_pool_ceil_mode_size():
    x = np.zeros((1, 112, 112), np.float32)
    assert pool2d(x, "max", (3, 3), (2, 2)).shape == (1, 55, 55)
    assert pool2d(x, "max", (3, 3), (2, 2), ceil_mode=True).shape == (1, 56, 56)


def test_lrn_hand_computed():
    x = np.array([1.0, 2.0, 3.0], np.float32).reshape(3, 1, 1)
    # size 3, alpha/size = 1, beta 1, k 1: y = x / (1 + sum of squares of c-1..c+1)
    y = lrn(x, 3, 3.0, 1.0, 1.0).ravel()
    np.testing.assert_allclose(y, [1 / 6, 2 / 15, 3 / 14], rtol=1e-6)


def test_sqnr():
    assert sqnr_db(np.array([1.0, 1.0]), np.array([1.0, 0.0])) == pytest.approx(10 * math.log10(2))
    assert sqnr_db(np.array([1.0, 2.0]), np.array([1.0, 2.0])) == math.inf


def test_fold_batchnorm_hand_computed():
    w = np.array([[[[2.0]]], [[[1.0]]]], np.float32)
    b = np.array([1.0, 0.0], np.float32)
    wf, bf = fold_batchnorm(w, b, gamma=np.array([1.0, 2.0]), beta=np.array([0.5, 0.0]),
                            mean=np.array([1.0, 1.0]), var=np.array([4.0, 1.0]), eps=0.0)
    # k0: factor 1/2 -> w 1, b (1-1)/2 + 0.5 = 0.5; k1: factor 2 -> w 2, b (0-1)*2 = -2
    assert wf.ravel().tolist() == [1.0, 2.0]
    assert bf.tolist() == [0.5, -2.0]


def test_run_reference_small_network_by_hand():
    n = Network("t", "data", Shape(1, 2, 2))
    n.conv("c", "data", 1, 1)
    n.add("relu", "r", "c")
    n.add("flatten", "f", "r")
    n.fc("fc", "f", 1)
    w = {"c": {"weight": np.array([[[[2.0]]]], np.float32), "bias": np.array([-1.0], np.float32)},
         "fc": {"weight": np.array([[1.0, 10.0, 100.0, 1000.0]], np.float32),
                "bias": np.array([0.5], np.float32)}}
    x = np.array([[[0.0, 1.0], [2.0, -3.0]]], np.float32)
    v = run_reference(n, w, x)
    # conv: 2x-1 = [-1, 1, 3, -7]; relu: [0, 1, 3, 0]; fc: 10 + 300 + 0.5
    assert v["r"].ravel().tolist() == [0.0, 1.0, 3.0, 0.0]
    assert v["fc"].ravel().tolist() == [310.5]


def test_reference_rejects_wrong_input_shape():
    n = BUILTIN["lenet5"]()
    with pytest.raises(NvdlaSimError, match=r"expects \(1, 28, 28\)"):
        run_reference(n, random_weights(n, 0), np.zeros((3, 28, 28), np.float32))


@pytest.mark.parametrize("name", list(BUILTIN))
def test_builtin_networks_run_and_stay_in_range(name):
    n = BUILTIN[name]()
    w = random_weights(n, 1)
    s = n.input_shape
    x = np.random.default_rng(0).standard_normal((s.c, s.h, s.w)).astype(np.float32)
    v = run_reference(n, w, x)
    assert set(v) == set(n.shapes)
    for name_, a in v.items():
        assert np.isfinite(a).all()
        # He initialisation keeps activations in a range INT8 per-tensor scales handle
        assert np.abs(a).max() < 1000, name_
