"""Register map, register groups (ping-pong), read-only fields and GLB interrupts."""
from __future__ import annotations

import simpy

from nvdla_sim.engine.glb import Glb
from nvdla_sim.regs import RegisterFile, register_map


def addr(regmap, unit, reg):
    u, r = regmap.resolve(unit, reg)
    return regmap.base(u.name) + r.offset


def test_map_decodes_v2_and_v1_bases():
    v2, v1 = register_map(2), register_map(1)
    assert addr(v2, "NVDLA_SDP", "D_OP_ENABLE_0") == 0x9038
    assert addr(v1, "NVDLA_SDP", "D_OP_ENABLE_0") == 0xB038
    assert addr(v2, "NVDLA_GLB", "S_INTR_STATUS_0") == 0x100C
    unit, reg = v2.decode_address(0x3010)
    assert (unit.name, reg.name) == ("CDMA", "D_OP_ENABLE")


def test_dual_registers_follow_the_producer_pointer():
    regmap = register_map(2)
    rf = RegisterFile(regmap)
    width = addr(regmap, "NVDLA_PDP", "D_DATA_CUBE_IN_WIDTH_0")
    pointer = addr(regmap, "NVDLA_PDP", "S_POINTER_0")
    rf.write(width, 7)
    rf.write(pointer, 1)                  # program group 1 now
    rf.write(width, 9)
    pdp = rf["PDP"]
    assert pdp.view(0).field("D_DATA_CUBE_IN_WIDTH", "CUBE_IN_WIDTH") == 7
    assert pdp.view(1).field("D_DATA_CUBE_IN_WIDTH", "CUBE_IN_WIDTH") == 9
    assert rf.read(width) == 9            # reads of dual registers see the producer group
    assert rf.read(pointer) == 1          # PRODUCER=1, CONSUMER=0


def test_writes_to_read_only_fields_are_ignored():
    regmap = register_map(2)
    rf = RegisterFile(regmap)
    flush = addr(regmap, "NVDLA_CDMA", "S_CBUF_FLUSH_STATUS_0")
    before = rf.read(flush)
    rf.write(flush, 0)
    assert rf.read(flush) == before
    # Reset values come from the map: CDMA input precision resets to INT16 (1).
    misc = rf["CDMA"].view(0)
    assert misc.field("D_MISC_CFG", "IN_PRECISION") == 1


def test_signed_fields_decode_as_twos_complement():
    regmap = register_map(2)
    rf = RegisterFile(regmap)
    rf.write(addr(regmap, "NVDLA_SDP", "D_CVT_SCALE_0"), 0xFFFE)
    assert rf["SDP"].view(0).sfield("D_CVT_SCALE", "CVT_SCALE") == -2
    assert rf["SDP"].view(0).field("D_CVT_SCALE", "CVT_SCALE") == 0xFFFE


def test_glb_status_is_write_one_to_clear_and_waits_fire_in_order():
    env = simpy.Environment()
    regmap = register_map(2)
    rf = RegisterFile(regmap)
    glb = Glb(env, rf)
    status = addr(regmap, "NVDLA_GLB", "S_INTR_STATUS_0")
    glb.raise_interrupt("PDP", 0)
    glb.raise_interrupt("CACC", 1)
    assert rf.read(status) == (1 << 4) | (1 << 21)
    rf.write(status, 1 << 4)              # W1C clears only that bit
    assert rf.read(status) == 1 << 21
    wait = glb.arm("CACC", 1)             # already set: fires at once and clears the bit
    assert wait.triggered and rf.read(status) == 0
    later = glb.arm("SDP", 0)
    assert not later.triggered
    rf.write(addr(regmap, "NVDLA_GLB", "S_INTR_SET_0"), 1)
    assert later.triggered
