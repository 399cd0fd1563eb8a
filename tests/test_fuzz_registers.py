"""Registers that change what the hardware does but that the units derive from the rest of the
layer (units/checks.py): an official trace with one of them contradicting the layer is refused
with the register named, before anything is computed; the unchanged trace still passes."""
from __future__ import annotations

import contextlib
import io
import re
import shutil
from pathlib import Path

import pytest

from nvdla_sim.cli import main
from nvdla_sim.config import load_hardware
from nvdla_sim.conformance import run_test
from tests.conftest import nvdla_hw_root

CONV = "dc_6x8x192_3x3x192x32_int8_0"
POOL = "pdp_8x8x64_2x2_int8"


def _test_folder(tmp_path: Path, name: str) -> Path:
    root = nvdla_hw_root()
    src = None if root is None else root / "verif/tests/trace_tests/nv_small" / name
    if src is None or not src.is_dir():
        pytest.skip("the nvdla/hw trace tests are not available")
    dst = tmp_path / name
    shutil.copytree(src, dst)
    return dst


def _set(folder: Path, reg: str, value: int) -> None:
    cfg = folder / f"{folder.name}.cfg"
    text, n = re.subn(rf"(reg_write\(NVDLA_{re.escape(reg)}_0, )0x[0-9a-fA-F]+(\);)",
                      rf"\g<1>{value:#x}\g<2>", cfg.read_text())
    assert n == 1, reg
    cfg.write_text(text)


def _replay(folder: Path, *extra: str) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        rc = main(["replay", str(folder), "--project", "nv_small", "--quiet", "--no-progress",
                   *extra])
    return rc, err.getvalue()


@pytest.mark.parametrize("name, reg, value, needle", [
    (CONV, "CSC.D_ATOMICS", 0x4, "CSC.D_ATOMICS.ATOMICS=4"),
    (CONV, "CSC.D_ATOMICS", 0x6, "CSC.D_ATOMICS.ATOMICS=6"),
    (CONV, "CSC.D_ENTRY_PER_SLICE", 0x47, "CSC.D_ENTRY_PER_SLICE.ENTRIES=71"),
    (CONV, "CSC.D_WEIGHT_BYTES", 0xd780, "CSC.D_WEIGHT_BYTES=55168"),
    (POOL, "PDP.D_DATA_CUBE_OUT_CHANNEL", 0x1f, "PDP.D_DATA_CUBE_OUT_CHANNEL"),
    (POOL, "PDP_RDMA.D_DATA_CUBE_IN_CHANNEL", 0x1f, "PDP_RDMA.D_DATA_CUBE_IN_CHANNEL"),
])
@pytest.mark.parametrize("mode", ["values", "timing"])
def test_contradicting_register_is_named(tmp_path, name, reg, value, needle, mode):
    folder = _test_folder(tmp_path, name)
    _set(folder, reg, value)
    if mode == "timing":                 # timing only: the checks run before any compute too
        outcome = run_test(folder, load_hardware("nv_small"), compute_values=False)
        assert outcome.status == "error" and needle in outcome.error, outcome.error
        return
    rc, err = _replay(folder)
    assert rc != 0, err
    lines = err.splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in err, err


@pytest.mark.parametrize("name", [CONV, POOL])
def test_unchanged_trace_passes(tmp_path, name):
    rc, err = _replay(_test_folder(tmp_path, name))
    assert rc == 0, err


def test_pdp_rdma_flying_mode_is_not_read(tmp_path):
    """The RTL's PDP_RDMA uses no FLYING_MODE bit (the software leaves it ON_FLYING while the RDMA
    fetches): the trace still passes with it flipped."""
    folder = _test_folder(tmp_path, POOL)
    _set(folder, "PDP_RDMA.D_FLYING_MODE", 0x0)
    rc, err = _replay(folder)
    assert rc == 0, err
