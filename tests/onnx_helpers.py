"""ONNX initializers for the small models the ONNX tests build (import after
`pytest.importorskip("onnx")`)."""
from __future__ import annotations

import numpy as np
from onnx import numpy_helper


def f32(name: str, arr):
    """A float32 initializer."""
    return numpy_helper.from_array(np.asarray(arr, np.float32), name)


def i64(name: str, arr):
    """An int64 initializer (shapes, axes, slice bounds)."""
    return numpy_helper.from_array(np.asarray(arr, np.int64), name)
