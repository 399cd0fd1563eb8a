"""ProgramBuilder (register encoding by field name, groups, waits, interrupt mask) and tensor
placement (reference map 5.1 layout, alignment, views)."""
from __future__ import annotations

import numpy as np
import pytest

from nvdla_sim import precision
from nvdla_sim.compiler.emit import Converter, ProgramBuilder, cube_image, simulate_crcs
from nvdla_sim.compiler.emit_cdp import CdpLayer, emit_cdp
from nvdla_sim.compiler.lut import constant_lut
from nvdla_sim.compiler.placement import CVSRAM, DBB, Allocator
from nvdla_sim.config import load_hardware
from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.program import CheckCrc, RegWrite, SyncWait

SMALL = load_hardware("nv_small")
LARGE = load_hardware("nv_large")


def writes(b: ProgramBuilder) -> list[RegWrite]:
    return [c for c in b.commands if isinstance(c, RegWrite)]


# -- register encoding -------------------------------------------------------------------------
def test_fields_by_name_enum_and_address():
    b = ProgramBuilder(SMALL)
    word = b.reg("PDP", "D_POOLING_KERNEL_CFG", KERNEL_WIDTH=2, KERNEL_HEIGHT=1,
                 KERNEL_STRIDE_WIDTH=3, KERNEL_STRIDE_HEIGHT=4)
    assert word == 2 | 1 << 8 | 3 << 16 | 4 << 20
    assert b.reg("PDP", "D_OPERATION_MODE_CFG", POOLING_METHOD="POOLING_METHOD_MIN",
                 FLYING_MODE="OFF_FLYING", SPLIT_NUM=5) == 2 | 1 << 4 | 5 << 8
    w = writes(b)[-1]
    assert w.addr == 0xB000 + 0x24 and w.name == "PDP.D_OPERATION_MODE_CFG"


def test_unnamed_fields_are_zero_and_negative_values_wrap_in_the_field():
    b = ProgramBuilder(SMALL)
    # SDP BS stage resets to bypassed; a write names only what it sets, the rest is 0.
    assert b.reg("SDP", "D_DP_BS_CFG", BS_RELU_BYPASS="YES") == 1 << 6
    assert b.reg("SDP", "D_DP_BS_ALU_SRC_VALUE", BS_ALU_OPERAND=-2) == 0xFFFE
    assert b.reg("CDP", "S_LUT_INFO", LUT_LE_INDEX_OFFSET=-1, LUT_LO_INDEX_SELECT=3) \
        == 0xFF | 3 << 16
    assert b.word("SDP", "D_CVT_OFFSET", -1) == 0xFFFFFFFF


@pytest.mark.parametrize("call, message", [
    (lambda b: b.reg("PDP", "D_POOLING_KERNEL_CFG", KERNEL_DEPTH=1), "unknown field 'KERNEL_DEPTH'"),
    (lambda b: b.reg("PDP", "D_NO_SUCH_REG"), "unknown register"),
    (lambda b: b.reg("XYZ", "D_OP_ENABLE"), "unknown unit"),
    (lambda b: b.reg("PDP", "D_POOLING_KERNEL_CFG", KERNEL_WIDTH=16), "does not fit the 4-bit"),
    (lambda b: b.reg("PDP", "D_POOLING_KERNEL_CFG", KERNEL_WIDTH=-9), "does not fit"),
    (lambda b: b.reg("PDP", "D_DATA_FORMAT", INPUT_DATA="INT4"), "unknown value name 'INT4'"),
    (lambda b: b.reg("CDMA", "S_CBUF_FLUSH_STATUS", FLUSH_DONE=1), "read-only"),
])
def test_bad_register_writes_are_errors(call, message):
    with pytest.raises(NvdlaSimError, match=message):
        call(ProgramBuilder(SMALL))


# -- layers: groups, waits, interrupts ---------------------------------------------------------
def test_layers_alternate_groups_and_wait_for_the_previous_layer():
    b = ProgramBuilder(SMALL, "p")
    g1 = b.begin_layer("a", ["PDP_RDMA", "PDP"])
    s1 = b.intr_notify("PDP", g1["PDP"])
    b.end_layer(s1)
    g2 = b.begin_layer("a", ["PDP_RDMA", "PDP"])      # same name: gets a suffix
    s2 = b.intr_notify("PDP", g2["PDP"])
    assert (g1, g2) == ({"PDP_RDMA": 0, "PDP": 0}, {"PDP_RDMA": 1, "PDP": 1})
    assert (s1, s2) == ("a_PDP_0", "a_2_PDP_1")
    waits = [c for c in b.commands if isinstance(c, SyncWait)]
    assert [(w.block, w.sync_id) for w in waits] == [("PDP_RDMA", s1), ("PDP", s1)]
    pointers = [(c.name, c.value) for c in writes(b) if c.name.endswith("S_POINTER")]
    assert pointers == [("PDP_RDMA.S_POINTER", 0), ("PDP.S_POINTER", 0),
                        ("PDP_RDMA.S_POINTER", 1), ("PDP.S_POINTER", 1)]
    with pytest.raises(NvdlaSimError, match="used twice"):
        b.intr_notify("PDP", 1, s2)


def test_build_masks_every_interrupt_not_waited_for():
    b = ProgramBuilder(SMALL)
    b.begin_layer("x", ["SDP", "PDP"])
    b.intr_notify("SDP", 0)
    b.intr_notify("PDP", 1)
    program = b.build()
    first = program.commands[0]
    assert first.name == "GLB.S_INTR_MASK"
    # all 16 defined mask bits except SDP0 (bit 0) and PDP1 (bit 5)
    assert first.value == 0x3F03FF & ~(1 << 0) & ~(1 << 5)


def test_check_crc_expected_values_come_from_a_run():
    alloc = Allocator(SMALL)
    b = ProgramBuilder(SMALL, "lut")
    t = alloc.feature("t", 3, 2, 2)
    out = alloc.feature("o", 3, 2, 2)
    b.load_cube(t, np.arange(12, dtype=np.int8).reshape(3, 2, 2))
    sid = emit_cdp(b, CdpLayer(3, constant_lut(1)), t, out)
    b.check_output(sid, out)
    program, result = simulate_crcs(b.build(), SMALL)
    checks = [c for c in program.commands if isinstance(c, CheckCrc)]
    assert len(checks) == 1 and checks[0].expected == result.checks[0].actual
    assert checks[0].mem == "1" and checks[0].nbytes == out.size_bytes == 32
    assert result.passed is False          # the run itself compared against the placeholder 0


# -- converters --------------------------------------------------------------------------------
def test_fixed_point_keeps_15_bits():
    assert precision.fixed_point(1.0) == (16384, 14, True)
    assert precision.fixed_point(0.75) == (24576, 15, True)
    assert precision.fixed_point(3.0) == (24576, 13, True)
    assert precision.fixed_point(1e-30)[1] == 63
    assert precision.fixed_point(0.0) == (0, 0, True)
    assert precision.fixed_point(40000.0)[2] is False
    assert Converter() == Converter(0, 1, 0)


# -- placement ---------------------------------------------------------------------------------
@pytest.mark.parametrize("hw, atom", [(SMALL, 8), (LARGE, 32)])
def test_feature_layout_follows_the_configuration_atom(hw, atom):
    alloc = Allocator(hw)
    t = alloc.feature("t", 40, 3, 5)
    assert (t.atom, t.line_stride, t.surf_stride) == (atom, 5 * atom, 15 * atom)
    assert t.surfaces == -(-40 // atom) and t.lanes == t.surfaces * atom
    assert t.size_bytes == t.surfaces * t.surf_stride
    assert t.address == 0x8000_0000 and t.ram_type == 1 and t.mem == "pri_mem"
    u = alloc.feature("u", 1, 1, 1)
    assert u.address == 0x8000_0000 + -(-t.size_bytes // 32) * 32


def test_placements_are_32_byte_aligned_and_weights_128_byte_sized():
    alloc = Allocator(SMALL)
    a = alloc.buffer("a", 3)
    w = alloc.weights("w", 130)
    f = alloc.feature("f", 1, 1, 1)
    assert (a.address % 32, w.address % 32, f.address % 32) == (0, 0, 0)
    assert w.size_bytes == 256 and w.address == a.address + 32


def test_cvsram_only_where_the_configuration_has_it():
    assert not Allocator(SMALL, cvsram_bytes=1 << 20).has_space(CVSRAM)
    alloc = Allocator(LARGE, cvsram_bytes=4096)
    t = alloc.feature("t", 32, 2, 2, space=CVSRAM)
    assert t.ram_type == 0 and t.mem == "sec_mem" and t.address == 0x5000_0000
    with pytest.raises(NvdlaSimError, match="do not fit in CVSRAM"):
        alloc.feature("big", 64, 64, 64, space=CVSRAM)
    with pytest.raises(NvdlaSimError, match="no CVSRAM"):
        Allocator(SMALL).feature("t", 8, 1, 1, space=CVSRAM)
    assert alloc.free_bytes(DBB) > 0


def test_views_rows_and_channel_slices_keep_the_strides():
    t = Allocator(SMALL).feature("t", 24, 6, 4)
    band = t.rows(2, 3)
    assert (band.address, band.height, band.line_stride, band.surf_stride) == \
        (t.address + 2 * 32, 3, 32, 6 * 32)
    assert not band.surf_packed and band.line_packed
    part = t.channel_slice(8, 16)
    assert (part.address, part.channels, part.surfaces) == (t.address + 6 * 32, 16, 2)
    with pytest.raises(NvdlaSimError, match="atom boundary"):
        t.channel_slice(4, 8)
    with pytest.raises(NvdlaSimError, match="outside"):
        t.rows(5, 2)


def test_cube_image_is_the_reference_map_layout():
    t = Allocator(SMALL).feature("t", 10, 2, 3)      # 2 surfaces of 8 channels
    cube = np.arange(60, dtype=np.int64).reshape(10, 2, 3).astype(np.int8)
    image = cube_image(t, cube).view(np.int8)
    for c, y, x in [(0, 0, 0), (7, 1, 2), (8, 0, 1), (9, 1, 2)]:
        addr = (c // 8) * t.surf_stride + y * t.line_stride + x * 8 + c % 8
        assert image[addr] == cube[c, y, x]
    # padding lanes of the last surface are zero
    assert not image[t.surf_stride + 2:t.surf_stride + 8].any()
