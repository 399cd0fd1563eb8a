"""RUBIK SPLIT / MERGE are not modelled: enabling them is a clear UnsupportedError, never a
deadlock (CONTRACT: tests/test_dla_layers_a.py)."""
import pytest

from nvdla_sim.config import load_hardware
from nvdla_sim.engine import Engine
from nvdla_sim.errors import UnsupportedError
from nvdla_sim.program import IntrNotify, RegisterProgram

from program_helpers import reg_writes


def test_rubik_layer_is_refused_with_its_mode():
    hw = load_hardware("nv_full")
    program = RegisterProgram("rubik", reg_writes({
        "RBK.D_MISC_CFG": {"RUBIK_MODE": 1},
        "RBK.D_OP_ENABLE": {"OP_EN": 1},
    }, version=1) + [IntrNotify("RUBIK", 0, "rbk_done")])
    with pytest.raises(UnsupportedError, match="RUBIK_MODE=SPLIT: only CONTRACT"):
        Engine(hw).run(program)


def test_presets_without_rubik_build_no_rubik_unit():
    engine = Engine(load_hardware("nv_small"))
    assert "RBK" not in engine.units
    assert "RBK" in Engine(load_hardware("nv_full")).units
