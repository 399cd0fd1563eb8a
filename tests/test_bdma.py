"""BDMA (v1): line/surface copies against numpy, RAM types, groups, interrupts, status, errors."""
from __future__ import annotations

import numpy as np
import pytest

from nvdla_sim.config import load_hardware
from nvdla_sim.engine import Engine
from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.program import MemLoad, ReadReg, RegisterProgram, RegWrite, WaitInterrupt
from nvdla_sim.regs import register_map

NV_FULL = load_hardware("nv_full")
REGMAP = register_map(1)
DBB, CVSRAM = 0x8000_0000, 0x5000_0000


def write(unit: str, reg: str, value: int) -> RegWrite:
    u, r = REGMAP.resolve(unit, reg)
    return RegWrite(REGMAP.base(u.name) + r.offset, value, f"{unit}.{reg}")


def status_poll(bit: int) -> ReadReg:
    u, r = REGMAP.resolve("GLB", "S_INTR_STATUS")
    return ReadReg(REGMAP.base(u.name) + r.offset, 1 << bit, 1 << bit, 10_000, "GLB.S_INTR_STATUS")


def operation(src: int, dst: int, line_atoms: int, lines: int, surfaces: int, src_line: int,
              dst_line: int, src_surf: int, dst_surf: int, src_mc: bool = True,
              dst_mc: bool = True) -> list[RegWrite]:
    return [write("BDMA", "CFG_SRC_ADDR_LOW", src & 0xFFFFFFFF), write("BDMA", "CFG_SRC_ADDR_HIGH", src >> 32),
            write("BDMA", "CFG_DST_ADDR_LOW", dst & 0xFFFFFFFF), write("BDMA", "CFG_DST_ADDR_HIGH", dst >> 32),
            write("BDMA", "CFG_LINE", line_atoms - 1), write("BDMA", "CFG_LINE_REPEAT", lines - 1),
            write("BDMA", "CFG_SURF_REPEAT", surfaces - 1),
            write("BDMA", "CFG_SRC_LINE", src_line), write("BDMA", "CFG_DST_LINE", dst_line),
            write("BDMA", "CFG_SRC_SURF", src_surf), write("BDMA", "CFG_DST_SURF", dst_surf),
            write("BDMA", "CFG_CMD", int(src_mc) | int(dst_mc) << 1),
            write("BDMA", "CFG_OP", 1)]


def reference_copy(src_img: np.ndarray, src_off: int, line_bytes: int, lines: int, surfaces: int,
                   src_line: int, src_surf: int, dst_line: int, dst_surf: int,
                   dst_bytes: int) -> np.ndarray:
    """What the destination window holds after the copy (untouched bytes stay zero)."""
    out = np.zeros(dst_bytes, np.uint8)
    for s in range(surfaces):
        for l in range(lines):
            a = src_off + s * src_surf + l * src_line
            b = s * dst_surf + l * dst_line
            out[b:b + line_bytes] = src_img[a:a + line_bytes]
    return out


@pytest.mark.parametrize("src_mc, dst_mc", [(True, True), (True, False), (False, True),
                                            (False, False)])
def test_strided_copy_matches_numpy(src_mc, dst_mc):
    rng = np.random.default_rng(7)
    src_img = rng.integers(0, 256, 0x4000, dtype=np.uint8)
    src_base = DBB if src_mc else CVSRAM
    dst_base = (DBB if dst_mc else CVSRAM) + 0x10_0000
    # 3 surfaces of 5 lines of 2 atoms; gaps between lines and surfaces on both sides.
    geom = dict(line_atoms=2, lines=5, surfaces=3, src_line=0x60, dst_line=0x80, src_surf=0x400,
                dst_surf=0x300)
    low_bits = 0x1f        # the address/stride registers ignore bits 4:0
    program = RegisterProgram("bdma", [MemLoad("", src_base, src_img)]
                              + operation(src_base + 0x20 + low_bits, dst_base, **geom,
                                          src_mc=src_mc, dst_mc=dst_mc)
                              + [write("BDMA", "CFG_LAUNCH0", 1), status_poll(6)])
    engine = Engine(NV_FULL)
    result = engine.run(program)
    assert result.passed
    dst_space = engine.memory.space(int(dst_mc))
    actual = dst_space.read(dst_base, 0x1000)
    expected = reference_copy(src_img, 0x20, 64, 5, 3, 0x60, 0x400, 0x80, 0x300, 0x1000)
    assert np.array_equal(actual, expected)
    iface = engine.mcif if src_mc else engine.cvif
    assert iface.bytes_by_client["BDMA"]["read"] == 64 * 5 * 3
    assert result.cycles > 0


def test_two_groups_raise_their_own_interrupts_in_order():
    rng = np.random.default_rng(1)
    img = rng.integers(0, 256, 0x1000, dtype=np.uint8)
    commands = [MemLoad("", DBB, img)]
    commands += operation(DBB, DBB + 0x10000, 4, 4, 1, 0x80, 0x80, 0, 0)
    commands += operation(DBB + 0x200, DBB + 0x20000, 4, 4, 1, 0x80, 0x80, 0, 0)
    commands += [write("BDMA", "CFG_LAUNCH0", 1)]                 # both operations: group 0
    commands += operation(DBB + 0x400, DBB + 0x30000, 1, 1, 1, 0x20, 0x20, 0, 0)
    commands += [write("BDMA", "CFG_LAUNCH1", 1), status_poll(6), status_poll(7)]
    engine = Engine(NV_FULL)
    assert engine.run(RegisterProgram("groups", commands)).passed
    raised = [(src, grp) for _, src, grp in engine.glb.raised]
    assert raised == [("BDMA", 0), ("BDMA", 1)]
    assert engine.units["BDMA"].stats["layers"] == 2
    for off, dst in ((0, 0x10000), (0x200, 0x20000)):
        assert np.array_equal(engine.memory.primary.read(DBB + dst, 0x200), img[off:off + 0x200])
    assert np.array_equal(engine.memory.primary.read(DBB + 0x30000, 32), img[0x400:0x420])
    status = engine.regs.read(REGMAP.base("BDMA") + REGMAP.units["BDMA"].regs["STATUS"].offset)
    assert status == (1 << 8) | 20        # idle, every slot free


def test_status_counts_free_slots_and_busy_groups():
    engine = Engine(NV_FULL)
    commands = operation(DBB, DBB + 0x1000, 1, 1, 1, 0x20, 0x20, 0, 0) * 3
    engine.run(RegisterProgram("queued", commands))
    status = engine.regs["BDMA"].read_word(REGMAP.units["BDMA"].regs["STATUS"])
    assert status & 0xFF == 17 and not status >> 8 & 1     # three queued: not idle


def test_wait_ends_at_the_bdma_interrupt():
    commands = operation(DBB, DBB + 0x1000, 8, 8, 1, 0x100, 0x100, 0, 0)
    commands += [write("BDMA", "CFG_LAUNCH0", 1), WaitInterrupt()]
    engine = Engine(NV_FULL)
    result = engine.run(RegisterProgram("wait", commands))
    assert engine.glb.raised and engine.env.now >= engine.glb.raised[0][0]
    assert result.cycles == engine.glb.raised[0][0] - engine.first_op_enable


def test_timing_only_moves_the_same_bytes():
    commands = operation(DBB, DBB + 0x1000, 8, 8, 2, 0x100, 0x100, 0x800, 0x800)
    commands += [write("BDMA", "CFG_LAUNCH0", 1), WaitInterrupt()]
    full, timing = Engine(NV_FULL), Engine(NV_FULL, compute_values=False)
    a = full.run(RegisterProgram("v", list(commands)))
    b = timing.run(RegisterProgram("t", list(commands)))
    assert a.cycles == b.cycles > 0
    assert timing.mcif.bytes_by_client["BDMA"] == {"read": 4096, "write": 4096}


def test_more_bytes_take_longer():
    def cycles(lines):
        commands = operation(DBB, DBB + 0x100000, 8, lines, 1, 0x100, 0x100, 0, 0)
        commands += [write("BDMA", "CFG_LAUNCH0", 1), WaitInterrupt()]
        return Engine(NV_FULL).run(RegisterProgram("n", commands)).cycles
    assert cycles(64) > cycles(8) > 0


def test_relaunching_a_running_group_is_an_error():
    commands = operation(DBB, DBB + 0x1000, 8, 8, 1, 0x100, 0x100, 0, 0)
    commands += [write("BDMA", "CFG_LAUNCH0", 1), write("BDMA", "CFG_LAUNCH0", 1)]
    with pytest.raises(NvdlaSimError, match="CFG_LAUNCH0: group 0 launched again"):
        Engine(NV_FULL).run(RegisterProgram("twice", commands))


def test_config_fifo_overflow_is_an_error():
    commands = operation(DBB, DBB + 0x1000, 1, 1, 1, 0x20, 0x20, 0, 0) * 21
    with pytest.raises(NvdlaSimError, match="more than 20 operations queued"):
        Engine(NV_FULL).run(RegisterProgram("full", commands))


def test_no_bdma_on_configs_without_it():
    assert "BDMA" not in Engine(load_hardware("nv_small")).units
    assert "BDMA" in Engine(NV_FULL).units
