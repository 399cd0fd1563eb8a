"""CDP (channel data processor: local response normalisation) and CDP_RDMA (its input DMA).

CDP_RDMA reads the input cube (all lanes of every atom) from memory and hands it to CDP on
"cdp_rdma->cdp" together with its channel count: CDP has no cube-size registers of its own, it
works on what CDP_RDMA's registers describe.  CDP normalises across channels with the kernel
`kernels/cdp.pyx` and writes the whole output cube, padding lanes included.

The element type (INT8, INT16, FP16) comes from D_DATA_FORMAT of each unit; a 32-byte atom holds
32 INT8 or 16 INT16/FP16 channels.  FP16 runs in the C model's float formats (`lrn_fp16`): its
LUT START/END registers are FP32 patterns (LOW words), entries and slope scales FP16 patterns, and
the input/output converters are not used.  The two LUTs (LE 65 entries, LO 257 entries, 16 bits:
int16, or FP16 bit patterns in FP16) are single, shared by both register groups, and loaded through S_LUT_ACCESS_CFG / S_LUT_ACCESS_DATA: every DATA write in write mode stores
one entry and advances the address, which stops at the table's last entry.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Generator

import numpy as np

from .. import datatype
from ..datatype import DataType
from ..kernels.cdp import lrn_fp16, lrn_int
from ..kernels.fixed import sign_extend
from ..layout import surfaces, write_cube
from ..regs import GroupView
from ..timing import cdp as cdp_timing
from .base import Unit
from .lut_memory import LutMemory

CHANNEL = "cdp_rdma->cdp"

LUT_START_END_BITS = 38         # S_LUT_*_START/END: LOW[31:0] + HIGH[5:0], two's complement
# Per element type, as the C model's converters and LUT see the registers: the index selects are
# sign-extended from bit 5 (INT8) or 6 (INT16); D_DATOUT_OFFSET reaches the converter with its
# low 25 (INT8) or all 32 bits; D_DATIN_OFFSET with as many bits as an element.
LUT_INDEX_SELECT_BITS = {"INT8": 6, "INT16": 7, "FP16": 8}
DATOUT_OFFSET_BITS = {"INT8": 25, "INT16": 32}

# Perf/status registers CDP updates at the end of a layer, from the kernel's counters.
COUNTER_REGISTERS = {
    "lut_uflow": "D_PERF_LUT_UFLOW",
    "lut_oflow": "D_PERF_LUT_OFLOW",
    "lut_hybrid": "D_PERF_LUT_HYBRID",
    "lut_le_hit": "D_PERF_LUT_LE_HIT",
    "lut_lo_hit": "D_PERF_LUT_LO_HIT",
    "out_saturation": "D_OUT_SATURATION",
}
FP16_COUNTER_REGISTERS = {"nan_input": "D_NAN_INPUT_NUM", "inf_input": "D_INF_INPUT_NUM",
                          "nan_output": "D_NAN_OUTPUT_NUM"}


@dataclass(frozen=True)
class CdpInput:
    """What CDP_RDMA sends: the cube as read, (surfaces*atom, H, W) of its element type, and its
    real channels."""
    cube: np.ndarray | None          # None in timing-only runs
    channels: int
    size: tuple[int, int] = (0, 0)   # (width, height) of the cube


def element_type(unit: Unit, view: GroupView, field: str) -> DataType:
    """The element type D_DATA_FORMAT.<field> selects, if the hardware builds it."""
    where = f"{unit.block}.D_DATA_FORMAT.{field}"
    dtype = datatype.from_code(view.field("D_DATA_FORMAT", field), where)
    datatype.require_supported(dtype, unit.hw.data_types, unit.hw.name, where)
    return dtype


# -- CDP_RDMA ----------------------------------------------------------------------------------
class CdpRdma(Unit):
    block = "CDP_RDMA"

    def execute(self, view: GroupView) -> Generator:
        dtype = element_type(self, view, "INPUT_DATA")
        atom = dtype.elements_per_atom(self.hw.memory_atomic_bytes)
        width = view.field("D_DATA_CUBE_WIDTH", "WIDTH") + 1
        height = view.field("D_DATA_CUBE_HEIGHT", "HEIGHT") + 1
        channels = view.field("D_DATA_CUBE_CHANNEL", "CHANNEL") + 1
        ram_type = view.field("D_SRC_DMA_CFG", "SRC_RAM_TYPE")
        cube = self.read_src_cube(view, ram_type, width, height, channels, dtype=dtype)
        self.engine.timing.announce(cdp_timing.CH_RDMA)
        yield from self.send(CHANNEL, CdpInput(cube, channels, (width, height)))
        yield from cdp_timing.rdma(self, cdp_timing.CdpGeometry(
            width, height, surfaces(channels, atom), lrn=True, ram_type=ram_type), ram_type)


# -- LUT memory --------------------------------------------------------------------------------
# -- CDP ---------------------------------------------------------------------------------------
def _start_end(view: GroupView, name: str) -> int:
    """A 38-bit signed S_LUT_<name> value from its LOW word and HIGH[5:0]."""
    low = view.word(f"S_LUT_{name}_LOW")
    high = view.field(f"S_LUT_{name}_HIGH", f"LUT_{name}_HIGH")
    return sign_extend(low | (high << 32), LUT_START_END_BITS)


def decode_lrn(view: GroupView, dtype: DataType) -> dict[str, int]:
    """The CDP registers of one layer as the kernel's configuration (see `lrn_int`, `lrn_fp16`)."""
    cfg = {
        "normalz_len": view.field("D_LRN_CFG", "NORMALZ_LEN"),
        "sqsum_bypass": view.field("D_FUNC_BYPASS", "SQSUM_BYPASS"),   # 1 = bypass
        "mul_bypass": view.field("D_FUNC_BYPASS", "MUL_BYPASS"),
        "le_exponent": int(view.field("S_LUT_CFG", "LUT_LE_FUNCTION") == 0),
        "uflow_priority": view.field("S_LUT_CFG", "LUT_UFLOW_PRIORITY"),   # 1 = LO
        "oflow_priority": view.field("S_LUT_CFG", "LUT_OFLOW_PRIORITY"),
        "hybrid_priority": view.field("S_LUT_CFG", "LUT_HYBRID_PRIORITY"),
        "le_index_offset": view.sfield("S_LUT_INFO", "LUT_LE_INDEX_OFFSET"),
    }
    if dtype.is_float:
        cfg["nan_to_zero"] = view.field("D_NAN_FLUSH_TO_ZERO", "NAN_TO_ZERO")
    else:
        cfg.update({
            "datin_offset": view.sfield("D_DATIN_OFFSET", "DATIN_OFFSET", dtype.bits),
            "datin_scale": view.sfield("D_DATIN_SCALE", "DATIN_SCALE"),
            "datin_shift": view.field("D_DATIN_SHIFTER", "DATIN_SHIFTER"),
            "datout_offset": view.sfield("D_DATOUT_OFFSET", "DATOUT_OFFSET",
                                         DATOUT_OFFSET_BITS[dtype.name]),
            "datout_scale": view.sfield("D_DATOUT_SCALE", "DATOUT_SCALE"),
            "datout_shift": view.field("D_DATOUT_SHIFTER", "DATOUT_SHIFTER"),
        })
    for table in ("LE", "LO"):
        p = table.lower()
        for edge in ("START", "END"):
            # FP16: an FP32 pattern in the LOW word (the datapath takes the low 32 bits)
            cfg[f"{p}_{edge.lower()}"] = (view.word(f"S_LUT_{table}_{edge}_LOW") if dtype.is_float
                                          else _start_end(view, f"{table}_{edge}"))
        cfg[f"{p}_index_select"] = view.sfield("S_LUT_INFO", f"LUT_{table}_INDEX_SELECT",
                                               LUT_INDEX_SELECT_BITS[dtype.name])
        for edge in ("UFLOW", "OFLOW"):
            cfg[f"{p}_{edge.lower()}_scale"] = view.sfield(     # FP16: an FP16 pattern
                f"S_LUT_{table}_SLOPE_SCALE", f"LUT_{table}_SLOPE_{edge}_SCALE")
            cfg[f"{p}_{edge.lower()}_shift"] = view.sfield(     # signed 5-bit; unused in FP16
                f"S_LUT_{table}_SLOPE_SHIFT", f"LUT_{table}_SLOPE_{edge}_SHIFT")
    return cfg


class Cdp(Unit):
    block = "CDP"
    interrupt = "CDP"

    def __init__(self, engine):
        super().__init__(engine)
        definition = self.regs.definition
        self.lut = LutMemory(definition).install(self.regs)

    def execute(self, view: GroupView) -> Generator:
        dtype = element_type(self, view, "INPUT_DATA_TYPE")
        cfg = decode_lrn(view, dtype)
        if not dtype.is_float and cfg["le_exponent"] and cfg["le_index_offset"] > 62:
            raise self.unsupported(f"LUT_LE_INDEX_OFFSET={cfg['le_index_offset']} in exponent "
                                   "mode (2^offset does not fit the 64-bit datapath)")
        payload: CdpInput = yield from self.receive(CHANNEL)
        cube = payload.cube
        atom = dtype.elements_per_atom(self.hw.memory_atomic_bytes)
        ram_type = view.field("D_DST_DMA_CFG", "DST_RAM_TYPE")
        lrn = not (view.field("D_FUNC_BYPASS", "SQSUM_BYPASS")
                   and view.field("D_FUNC_BYPASS", "MUL_BYPASS"))
        if cube is None:                       # timing only
            width, height = payload.size
            yield from cdp_timing.core(self, cdp_timing.CdpGeometry(
                width, height, surfaces(payload.channels, atom), lrn=lrn, ram_type=ram_type))
            return
        if cube.dtype != dtype.numpy or cube.shape[0] % atom:
            raise self.unsupported(f"input cube {cube.shape} ({cube.dtype}) from CDP_RDMA is not "
                                   f"a whole-atom {dtype} cube (CDP_RDMA and CDP D_DATA_FORMAT "
                                   "must agree)")

        if dtype.is_float:
            out, counters = lrn_fp16(np.ascontiguousarray(cube).view(np.uint16),
                                     payload.channels, cfg, self.lut.le, self.lut.lo)
        else:
            out, counters = lrn_int(np.ascontiguousarray(cube), payload.channels, cfg,
                                    self.lut.le, self.lut.lo)
        write_cube(self.engine.memory.space(ram_type),
                   view.addr("D_DST_BASE_ADDR_LOW", "D_DST_BASE_ADDR_HIGH"), out,
                   view.word("D_DST_LINE_STRIDE"), view.word("D_DST_SURFACE_STRIDE"), atom)
        self.record_counters(view.group, counters)
        yield from cdp_timing.core(self, cdp_timing.CdpGeometry(
            cube.shape[2], cube.shape[1], cube.shape[0] // atom, lrn=lrn, ram_type=ram_type))

    def record_counters(self, group: int, counters: dict[str, int]) -> None:
        for key, reg in COUNTER_REGISTERS.items():
            self.regs.set_word(reg, counters[key] & 0xFFFFFFFF, group)   # 32-bit, wraps
        for key, reg in FP16_COUNTER_REGISTERS.items():        # zero unless FP16
            self.regs.set_word(reg, counters.get(key, 0) & 0xFFFFFFFF, group)
