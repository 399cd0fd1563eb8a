"""Hostile RUBIK register values (units/rubik.py, nv_full): a valid CONTRACT program from the
compiler's emitter with its RBK registers mutated (seeded), run in values+timing and in timing
only.  Each run completes with a finite cycle count or stops with one NvdlaSimError line that
names the RUBIK register (or the memory access / deadlock it caused); a contract that would read
or write outside its memory is refused in both modes, before any data moves; a valid change of
the deconvolution stride changes where the atoms land.
NVDLA_FUZZ_SEED / NVDLA_FUZZ_ROUNDS vary and lengthen the mutation run."""
from __future__ import annotations

import dataclasses
import math
import os
import random

import numpy as np
import pytest

from nvdla_sim.compiler.deconv import ContractSpec
from nvdla_sim.compiler.emit import ProgramBuilder, cube_image, read_output
from nvdla_sim.compiler.emit_rubik import emit_contract
from nvdla_sim.compiler.placement import Allocator
from nvdla_sim.config import load_hardware
from nvdla_sim.datatype import INT8
from nvdla_sim.engine import Engine
from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.program import RegWrite

SEED = int(os.environ.get("NVDLA_FUZZ_SEED", "13"))
ROUNDS = int(os.environ.get("NVDLA_FUZZ_ROUNDS", "1"))
HW = load_hardware("nv_full")


def contract_program(stride=(2, 3), channels=32, h=3, w=5):
    """A CONTRACT of a (channels x sy*sx) phase cube in DRAM; returns the program, the source cube
    and the destination placement."""
    spec = ContractSpec(stride, channels, h, w)
    alloc = Allocator(HW)
    src = alloc.feature("src", spec.in_channels, h, w, dtype=INT8)
    dst = alloc.feature("dst", spec.out_channels, spec.out_h, spec.out_w, dtype=INT8)
    cube = np.random.default_rng(3).integers(-100, 100, (spec.in_channels, h, w)).astype(np.int8)
    b = ProgramBuilder(HW, "rubik")
    b.load_cube(src, cube)
    emit_contract(b, "contract", spec, src, dst)
    return b.build(), cube, src, dst


def with_registers(program, changes: dict[str, int]):
    cmds = list(program.commands)
    for reg, value in changes.items():
        i = next(i for i, c in enumerate(cmds) if isinstance(c, RegWrite) and c.name == f"RBK.{reg}")
        cmds[i] = dataclasses.replace(cmds[i], value=value)
    return dataclasses.replace(program, commands=cmds)


def rbk_registers(program) -> list[str]:
    return [c.name.split(".", 1)[1] for c in program.commands
            if isinstance(c, RegWrite) and c.name.startswith("RBK.") and c.name != "RBK.D_OP_ENABLE"]


# register -> words a refusal must contain
HOSTILE = [
    ({"D_MISC_CFG": 0x300}, "RBK.D_MISC_CFG.IN_PRECISION=3"),
    ({"D_MISC_CFG": 0x1}, "RUBIK_MODE=SPLIT"),
    ({"D_MISC_CFG": 0x3}, "RUBIK_MODE=3"),
    ({"D_DAIN_ADDR_HIGH": 0xffffffff}, "RBK"),                # reads past the 40-bit DRAM
    ({"D_DAOUT_ADDR_LOW": 0xffffffe0, "D_DAOUT_ADDR_HIGH": 0xff}, "RBK"),
    ({"D_DAOUT_RAM_TYPE": 0}, "RBK"),                         # DRAM address in CVSRAM
    ({"D_DAIN_RAM_TYPE": 0}, "RBK"),
    ({"D_CONTRACT_STRIDE_0": 0xffffffe0}, "RBK"),             # the blocks far past the source
    ({"D_DAOUT_SURF_STRIDE": 0x7fffffe0, "D_DATAOUT_SIZE_1": 0x1fff}, "RBK"),
    ({"S_POINTER": 1}, "never raised"),                       # programmed in the idle group
]


@pytest.mark.parametrize("values", [True, False], ids=["values", "timing"])
@pytest.mark.parametrize("changes, needle", HOSTILE, ids=[f"case{i}" for i in range(len(HOSTILE))])
def test_hostile_rubik_registers_are_one_line(changes, needle, values):
    program, *_ = contract_program()
    with pytest.raises(NvdlaSimError) as exc:
        Engine(HW, compute_values=values).run(with_registers(program, changes))
    msg = str(exc.value)
    assert "\n" not in msg and needle in msg, msg


VALUES = [0, 1, 2, 3, 0x1f, 0x20, 0xff, 0x1fff, 0xffff, 0x10001, 0x7fffffff, 0xffffffff,
          0xffffffe0, 0x80000000]
# registers whose largest values make a legal but enormous contract (8192 x 8192 lines): drawn
# from small values only, so the run stays bounded in time
SIZES = {"D_DATAIN_SIZE_0", "D_DATAOUT_SIZE_1", "D_DECONV_STRIDE"}


def test_mutated_rubik_registers_run_or_fail_cleanly():
    rng = random.Random(SEED)
    program, *_ = contract_program()
    regs = rbk_registers(program)
    assert len(regs) >= 15
    ok = refused = 0
    for i in range(60 * ROUNDS):
        changes = {}
        for _ in range(rng.randint(1, 2)):
            reg = rng.choice(regs)
            if reg in SIZES:
                changes[reg] = rng.choice([0, 1, 2, 0x10001, 0x30007, 0x70003, 0x1f, 0x1f001f])
            else:
                changes[reg] = rng.choice(VALUES) if rng.random() < 0.7 else rng.getrandbits(32)
        values = bool(i % 2)
        try:
            result = Engine(HW, compute_values=values).run(with_registers(program, changes))
        except NvdlaSimError as exc:
            msg = str(exc)
            assert msg and "\n" not in msg, (changes, msg)
            refused += 1
            continue
        assert math.isfinite(result.cycles) and result.cycles > 0, changes
        ok += 1
    assert ok > 10 and refused > 10, (ok, refused)


def test_out_of_memory_contract_is_refused_in_both_modes_alike():
    """The same contract reads past DRAM: values and timing-only runs agree (the timing-only run
    moves no data, so the check has to look at the addresses)."""
    program, *_ = contract_program()
    bad = with_registers(program, {"D_DAIN_ADDR_HIGH": 0x1})
    messages = []
    for values in (True, False):
        with pytest.raises(NvdlaSimError) as exc:
            Engine(HW, compute_values=values).run(bad)
        messages.append(str(exc.value))
    assert all("D_DAIN_ADDR" in m and "outside pri_mem" in m for m in messages), messages


def test_a_valid_stride_change_moves_the_atoms():
    """Stride 2x3 vs 3x2 on the same 6 phase blocks: the same bytes, other places."""
    outs = []
    for stride in ((2, 3), (3, 2)):
        program, cube, src, dst = contract_program(stride)
        engine = Engine(HW)
        result = engine.run(program)
        assert result.cycles > 0
        outs.append(cube_image(dst, read_output(engine, dst)))
    a, b = outs
    assert a.shape == b.shape or a.size == b.size
    assert sorted(a.reshape(-1).tolist()) == sorted(b.reshape(-1).tolist())
    assert not np.array_equal(a.reshape(-1), b.reshape(-1))


def test_rubik_registers_in_a_replayed_trace(tmp_path):
    """The same through the command line: a deconvolution compiled to an nv_full trace
    (`compile --emit-cfg`, RUBIK CONTRACT in it) replays; with one RBK register changed, the
    replay stops with one line naming RUBIK and a non-zero exit."""
    import contextlib
    import io
    import re

    from nvdla_sim.cli import main

    def cli(argv):
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            rc = main(argv)
        return rc, err.getvalue()

    scn = tmp_path / "dcv.yaml"
    scn.write_text("name: dcv\nhardware: nv_full\nmode: values+timing\noutputs: {plots: false}\n"
                   "network: {input: [8, 4, 4], layers: [{name: d, type: deconv, out_channels: 8, "
                   "kernel: 2, stride: 2}]}\n")
    rc, err = cli(["compile", str(scn), "--emit-cfg", str(tmp_path / "emit")])
    assert rc == 0, err
    folder = tmp_path / "emit" / "dcv"
    txn = folder / "input.txn"
    text = txn.read_text()
    assert "#NVDLA_RBK.D_MISC_CFG_0" in text
    replay = ["replay", str(folder), "--project", "nv_full", "--quiet", "--no-progress"]
    assert cli(replay) == (0, "")
    for reg, value, needle in (("D_MISC_CFG", 0x1, "RUBIK_MODE=SPLIT"),
                               ("D_MISC_CFG", 0x300, "IN_PRECISION=3"),
                               ("D_DAIN_ADDR_HIGH", 0xff, "D_DAIN_ADDR")):
        txn.write_text(re.sub(rf"(write_reg 0x[0-9a-f]+ )0x[0-9a-f]+( #NVDLA_RBK\.{reg}_0)",
                              rf"\g<1>{value:#x}\g<2>", text))
        rc, err = cli(replay)
        lines = err.splitlines()
        assert rc != 0 and len(lines) == 1 and needle in lines[0], err
