"""Silicon area estimate (mm^2) of a configuration, replacing the sweep's area proxy.

Scope: the SRAM macros (CACTI: CBUF banks, CVSRAM, CACC assembly/delivery buffers, PDP line
buffer) and the arithmetic datapaths (Horowitz 2014 operator areas at 45 nm, scaled to the node):
  MAC array   atomic_c x atomic_k INT8 MACs (8x8 multiplier + 16-bit adder-tree adder); on a
              configuration with INT16 / FP16 also half as many 16x16 / FP16 MACs (the NVDLA
              CMAC pairs two INT8 cells for one 16-bit product; counting a separate 16-bit
              datapath is an upper bound of what sharing the multipliers costs)
  CACC        atomic_k accumulator adders per datapath (34-bit INT8, 48-bit INT16, FP32 FP16)
  SDP         per element lane of BS, BN and EW: a 32-bit ALU and a 32x16 multiplier (FP32 on
              FP16 configurations), plus an interpolation multiply-add per EW (LUT) lane
  PDP         per lane: a 16-bit adder/comparator and a 16x16 multiplier (average)
  CDP         per lane: 9 squarers and adders (the widest LRN window) and 2 multipliers
It omits wiring, DMA engines, register files and flops, control, clock tree and I/O, so it is a
lower bound that ranks configurations more faithfully than the proxy (docs/energy.md).
"""
from __future__ import annotations

from .table import EnergyTable


def _lanes(hw, table: EnergyTable, ops: list[tuple[str, float]]) -> float:
    node = hw.technology_nm
    return sum(table.area_um2(op, node) * n for op, n in ops) / 1e6


def logic_areas(hw, table: EnergyTable) -> dict[str, float]:
    node = hw.technology_nm
    types = {str(t).lower() for t in hw.data_types}
    um2 = lambda op: table.area_um2(op, node)   # noqa: E731
    mac = hw.macs * table.mac_um2("INT8", node)
    cacc = hw.atomic_k * um2("int_add_34")
    if "int16" in types:
        mac += hw.macs // 2 * table.mac_um2("INT16", node)
        cacc += hw.atomic_k // 2 * um2("int_add_48")
    if "fp16" in types:
        mac += hw.macs // 2 * table.mac_um2("FP16", node)
        cacc += hw.atomic_k // 2 * um2("fp_add_32")
    fp = "fp16" in types
    sdp_lane = [("int_add_32", 1), ("int_mult_32x16", 1)] + ([("fp_add_32", 1), ("fp_mult_32", 1)]
                                                             if fp else [])
    sdp_lanes = hw.sdp.bs_throughput + hw.sdp.bn_throughput + hw.sdp.ew_throughput
    sdp = _lanes(hw, table, [(op, n * sdp_lanes) for op, n in sdp_lane])
    sdp += _lanes(hw, table, [("int_mult_32x16", hw.sdp.ew_throughput),
                              ("int_add_32", hw.sdp.ew_throughput)])
    pdp_lane = [("int_add_16", 1), ("int_mult_16x16", 1)] + ([("fp_add_16", 1), ("fp_mult_16", 1)]
                                                              if fp else [])
    pdp = _lanes(hw, table, [(op, n * hw.pdp_throughput) for op, n in pdp_lane])
    cdp_lane = [("int_mult_8x8", 9), ("int_add_32", 9), ("int_mult_32x16", 2)]
    cdp = _lanes(hw, table, [(op, n * hw.cdp_throughput) for op, n in cdp_lane])
    return {"MAC": mac / 1e6, "CACC logic": cacc / 1e6, "SDP": sdp, "PDP": pdp, "CDP": cdp}


def area_breakdown(hw, table: EnergyTable, macros: dict) -> dict:
    """Component -> mm^2 (SRAM macros by name, logic by unit), with `sram_mm2`, `logic_mm2` and
    `total_mm2`."""
    out = {name: m.area_mm2 for name, m in macros.items()}
    sram = sum(out.values())
    logic = logic_areas(hw, table)
    out.update(logic)
    out["sram_mm2"] = sram
    out["logic_mm2"] = sum(logic.values())
    out["total_mm2"] = sram + out["logic_mm2"]
    return out
