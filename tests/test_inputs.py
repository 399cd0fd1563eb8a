"""Bad input gets one line naming the problem and a non-zero exit, never a traceback."""
from __future__ import annotations

from pathlib import Path

import pytest

from nvdla_sim.cli import main
from nvdla_sim.config import load_hardware
from nvdla_sim.errors import NvdlaSimError

GOOD_DAT = "{\n{offset:0x0, size:4, payload:0x01 0x02 0x03 0x04} ,\n}\n"


def write_test(tmp_path: Path, cfg: str, dat: str | None = GOOD_DAT) -> Path:
    d = tmp_path / "t"
    d.mkdir()
    (d / "t.cfg").write_text(cfg)
    if dat is not None:
        (d / "t.dat").write_text(dat)
    return d


def run_cli(args, capsys) -> tuple[int, str]:
    code = main(args)
    err = capsys.readouterr().err.strip()
    return code, err


@pytest.mark.parametrize("cfg, expect", [
    ("reg_write(NVDLA_SDP.D_OP_ENABLE_0, 0x", "t.cfg:1: command does not end with ';'"),
    ("reg_write(NVDLA_SDP.D_NO_SUCH_REG_0, 0x1);", "t.cfg:1: unknown register 'D_NO_SUCH_REG_0'"),
    ("\nreg_write(NVDLA_FOO.D_OP_ENABLE_0, 0x1);", "t.cfg:2: unknown unit 'NVDLA_FOO'"),
    ("mem_load(pri_mem, 0x80000000, \"missing.dat\");", "missing.dat: memory image not found"),
    ("mem_load(pri_mem, 0xfffffffe, \"t.dat\");", "t.cfg:1: 4 bytes at 0xfffffffe lie outside"),
    ("reg_write(NVDLA_SDP.D_OP_ENABLE_0, banana);", "t.cfg:1: value 'banana' is not a number"),
    ("frobnicate(1);", "t.cfg:1: unknown command 'frobnicate'"),
    ("check_crc(sync_x, 1, 0x80000000, 4, 0x0);", "no intr_notify arms"),
])
def test_malformed_trace(tmp_path, capsys, cfg, expect):
    test_dir = write_test(tmp_path, cfg + "\n")
    code, err = run_cli(["replay", str(test_dir)], capsys)
    assert code != 0
    assert expect in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err


def test_malformed_memory_image(tmp_path, capsys):
    dat = "{\n{offset:0x0, size:4, payload:0x01 0x02 0x03 0x04} ,\n{offset:0x4, size:4, payload:0x01} ,\n}\n"
    test_dir = write_test(tmp_path, "mem_load(pri_mem, 0x80000000, \"t.dat\");\n", dat)
    code, err = run_cli(["replay", str(test_dir)], capsys)
    assert code != 0 and "t.dat:3:" in err and "size 4" in err


def test_unknown_preset(tmp_path, capsys):
    test_dir = write_test(tmp_path, "\n")
    code, err = run_cli(["replay", str(test_dir), "--project", "nv_tiny"], capsys)
    assert code != 0 and "unknown hardware preset 'nv_tiny'" in err


def test_interrupt_never_raised_is_reported(tmp_path, capsys):
    test_dir = write_test(tmp_path, "intr_notify(SDP_0, s0);\ncheck_nothing(s0);\n")
    code, err = run_cli(["replay", str(test_dir)], capsys)
    assert code != 0 and "deadlock" in err


def test_hardware_overrides_are_validated(tmp_path):
    cfg = load_hardware({"preset": "nv_small", "cbuf": {"banks": 16}})
    assert cfg.cbuf.banks == 16 and cfg.cbuf.total_bytes == 64 * 1024
    with pytest.raises(NvdlaSimError, match=r"cbuf: unknown field 'bank_count'"):
        load_hardware({"preset": "nv_small", "cbuf": {"bank_count": 16}})
    with pytest.raises(NvdlaSimError, match=r"atomic_c: must be a power of two"):
        load_hardware({"preset": "nv_small", "atomic_c": 12, "cbuf": {"bank_width_bytes": 12}})
    bad = tmp_path / "hw.yaml"
    bad.write_text("preset: nv_small\ncbuf: {banks: 7}\n")
    with pytest.raises(NvdlaSimError, match=r"hw.yaml: cbuf.banks: must be a power of two"):
        load_hardware(bad)
    bad.write_text("preset: nv_small\ncbuf: [\n")
    with pytest.raises(NvdlaSimError, match=r"hw.yaml:\d+: malformed YAML"):
        load_hardware(bad)


def test_every_preset_loads():
    from nvdla_sim.config import preset_names
    names = preset_names()
    assert {"nv_small", "nv_small_256", "nv_small_256_full", "nv_medium_512",
            "nv_medium_1024_full", "nv_large", "nv_full"} <= set(names)
    large = load_hardware("nv_large")
    assert large.macs == 2048 and large.cbuf.total_bytes == 512 * 1024
    assert load_hardware("nv_full").nvdla_version == 1
