"""Energy counts reach report.json as plain numbers (a numpy count once crashed json.dumps)."""
import json

import numpy as np

from nvdla_sim.energy.accounting import _add


def test_counts_from_numpy_shapes_are_plain_python_numbers():
    counts: dict = {}
    _add(counts, "mac_int8", np.int64(3) * np.int64(5))
    _add(counts, "mac_int8", 2)
    _add(counts, "sdp_op", np.float32(0.5))
    assert counts == {"mac_int8": 17, "sdp_op": 0.5}
    assert all(type(v) in (int, float) for v in counts.values())
    assert json.loads(json.dumps(counts)) == counts
