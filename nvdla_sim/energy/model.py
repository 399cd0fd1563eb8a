"""The per-event energy table and the SRAM macros of one configuration.

`EnergyModel.build(hw, dtype, clock_mhz, dram_profile, cvsram_bytes)` gathers, at the configured
`technology_nm`:
  - the SRAM macros (`sram_macros`): the CBUF (banked), the CVSRAM, the CACC assembly and delivery
    buffers and the PDP line buffer, each priced by CACTI (cacti.py);
  - `pj`: picojoules per counted event (the keys `accounting.py` counts), e.g. `cbuf_read` one
    CBUF entry read, `dram_bit` one bit over the DRAM interface, `leak_cycle` one clock cycle of
    the whole accelerator's leakage; events whose cost depends on the precision carry it:
    `mac.INT8`, `mac.FP16`, `sdp_mult.INT16`... for every precision the configuration has.
Every figure is CACTI's or comes from the constants of constants.yaml (docs/energy.md).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..datatype import DataType
from .cacti import SramCost, SramGeometry, sram_cost
from .table import EnergyTable, load_table

# Event key -> the component (unit) it is charged to.
COMPONENT_OF = {
    "dram_bit": "DRAM", "cvsram_read": "CVSRAM", "cvsram_write": "CVSRAM",
    "cbuf_read": "CBUF", "cbuf_write": "CBUF", "mac": "MAC",
    "cacc_add": "CACC", "cacc_abuf_read": "CACC", "cacc_abuf_write": "CACC",
    "cacc_dbuf_read": "CACC", "cacc_dbuf_write": "CACC",
    "sdp_add": "SDP", "sdp_mult": "SDP", "pdp_add": "PDP", "pdp_mult": "PDP",
    "pdp_lbuf_read": "PDP", "pdp_lbuf_write": "PDP", "cdp_add": "CDP", "cdp_mult": "CDP",
    "leak_cycle": "leakage",
}
COMPONENTS = ("DRAM", "CVSRAM", "CBUF", "MAC", "CACC", "SDP", "PDP", "CDP", "leakage")
PER_PRECISION = ("mac", "cacc_add", "cacc_abuf_read", "cacc_abuf_write", "sdp_add", "sdp_mult",
                 "pdp_add", "pdp_mult", "cdp_add", "cdp_mult")


def event_key(event: str, dtype: DataType) -> str:
    """The priced key of an event in a precision (`mac` -> `mac.INT8`)."""
    return f"{event}.{dtype.name}" if event in PER_PRECISION else event


def component_of(key: str) -> str:
    return COMPONENT_OF[key.split(".")[0]]

# CACC accumulator bits per kernel (NVDLA v1 RTL: INT8 partial sums 34 bits, INT16/FP16 48 bits,
# from the assembly-buffer macro widths 544 = 16 x 34 and 768 = 16 x 48 of nvdlav1
# vmod/nvdla/cacc/NV_NVDLA_CACC_assembly_buffer.v) and its SRAM depth (32 entries).
ACC_BITS = {1: 34, 2: 48}
CACC_BUFFER_DEPTH = 32
CACC_ABUF_MACROS = 4               # per datapath (INT8 and, on 16-bit configurations, INT16/FP16)
CACC_DBUF_MACROS = 8               # delivery buffer: 8 x 32 x 512 bits on nv_full (ATOMIC_K 32)
DELIVERY_BITS = 32                 # CACC delivers 32-bit results to the SDP
PDP_LBUF_MACROS, PDP_LBUF_DEPTH, PDP_LBUF_BITS = 8, 64, 116   # nvdlav1 PDP_CORE_cal2d: 64x116


@dataclass(frozen=True)
class Macro:
    geometry: SramGeometry
    cost: SramCost

    @property
    def area_mm2(self) -> float:
        return self.cost.area_mm2 * self.geometry.count

    @property
    def leakage_mw(self) -> float:
        return self.cost.leakage_mw * self.geometry.count


@dataclass
class EnergyModel:
    node_nm: float
    precisions: tuple                  # the DataType names priced
    clock_mhz: float
    table: EnergyTable
    dram_type: str
    macros: dict[str, Macro] = field(default_factory=dict)
    pj: dict[str, float] = field(default_factory=dict)
    op_of: dict[str, str] = field(default_factory=dict)   # logic event -> operator it costs
    logic_leakage_mw: float = 0.0
    area: dict = field(default_factory=dict)               # area.py: component -> mm^2

    @property
    def sram_leakage_mw(self) -> float:
        return sum(m.leakage_mw for m in self.macros.values())

    @property
    def leakage_mw(self) -> float:
        return self.sram_leakage_mw + self.logic_leakage_mw

    def as_dict(self) -> dict:
        return {"technology_nm": self.node_nm, "precisions": list(self.precisions),
                "dram_type": self.dram_type, "table": self.table.source,
                "pj_per_event": dict(self.pj), "operators": dict(self.op_of),
                "leakage_mw": self.leakage_mw, "sram_leakage_mw": self.sram_leakage_mw,
                "logic_leakage_mw": self.logic_leakage_mw,
                "sram": {name: {"depth": m.geometry.depth, "width_bytes": m.geometry.width_bytes,
                                "count": m.geometry.count, "read_pj": m.cost.read_pj,
                                "write_pj": m.cost.write_pj, "leakage_mw": m.cost.leakage_mw,
                                "area_mm2": m.cost.area_mm2, "source": m.cost.source}
                         for name, m in self.macros.items()}}


def sram_macros(hw, cvsram_bytes: int = 0) -> list[SramGeometry]:
    """Every SRAM macro the configuration has (name, depth, width, count, field)."""
    # The CBUF is one banked array (CACTI UCA banks): an access pays the routing to its bank, so
    # a bigger CBUF costs more per access, not only more area.
    out = [SramGeometry("CBUF", hw.cbuf.banks * hw.cbuf.bank_depth, hw.cbuf.bank_width_bytes, 1,
                        "cbuf.banks x cbuf.bank_depth x cbuf.bank_width_bytes", hw.cbuf.banks)]
    if cvsram_bytes and hw.secondary_memif is not None:
        width = hw.secondary_memif.width_bytes
        out.append(SramGeometry("CVSRAM", max(2, cvsram_bytes // width), width, 1,
                                "memory.cvsram_bytes"))
    out.append(SramGeometry("CACC assembly INT8", CACC_BUFFER_DEPTH,
                            hw.atomic_k * ACC_BITS[1] // 16, CACC_ABUF_MACROS, "atomic_k"))
    if hw.widest_element_bytes == 2:
        out.append(SramGeometry("CACC assembly 16-bit", CACC_BUFFER_DEPTH,
                                hw.atomic_k // 2 * ACC_BITS[2] // 8, CACC_ABUF_MACROS, "atomic_k"))
    out.append(SramGeometry("CACC delivery", CACC_BUFFER_DEPTH,
                            hw.atomic_k // 2 * DELIVERY_BITS // 8,
                            max(1, CACC_DBUF_MACROS * hw.atomic_k // 32), "atomic_k"))
    out.append(SramGeometry("PDP line buffer", PDP_LBUF_DEPTH, -(-PDP_LBUF_BITS // 8),
                            PDP_LBUF_MACROS, "pdp_throughput"))
    return out


def logic_ops(dtype: DataType) -> dict[str, str]:
    """The operator each logic event costs in a precision (table.py names)."""
    fp = dtype.is_float
    return {
        "cacc_add": "fp_add_32" if fp else f"int_add_{ACC_BITS[dtype.bytes]}",
        "sdp_add": "fp_add_32" if fp else "int_add_32",          # SDP ALUs: 32-bit operands
        "sdp_mult": "fp_mult_32" if fp else "int_mult_32x16",    # 32-bit data x 16-bit operand
        "pdp_add": "fp_add_16" if fp else "int_add_16",          # window sums / compares
        "pdp_mult": "fp_mult_16" if fp else "int_mult_16x16",    # average: x 1/(kernel size)
        "cdp_add": "fp_add_32" if fp else "int_add_32",
        "cdp_mult": "fp_mult_16" if fp else "int_mult_16x16",
    }


def build_model(hw, dtypes, clock_mhz: float, dram_profile: str = "dram",
                cvsram_bytes: int = 0, table: EnergyTable | None = None) -> EnergyModel:
    """The model pricing the precisions `dtypes` (a DataType or several) on `hw`."""
    from .area import area_breakdown
    dtypes = (dtypes,) if isinstance(dtypes, DataType) else tuple(dict.fromkeys(dtypes))
    table = table or load_table(hw.energy_table)
    node = hw.technology_nm
    m = EnergyModel(node, tuple(d.name for d in dtypes), clock_mhz, table,
                    table.dram_kind(dram_profile))
    for geom in sram_macros(hw, cvsram_bytes):
        m.macros[geom.name] = Macro(geom, sram_cost(geom, node, table.sram_cell))
    cbuf = m.macros["CBUF"].cost
    pj = {"dram_bit": table.dram_pj_bit(dram_profile),
          "cbuf_read": cbuf.read_pj, "cbuf_write": cbuf.write_pj}
    if "CVSRAM" in m.macros:
        pj["cvsram_read"] = m.macros["CVSRAM"].cost.read_pj
        pj["cvsram_write"] = m.macros["CVSRAM"].cost.write_pj
    dbuf = m.macros["CACC delivery"].cost
    pj["cacc_dbuf_read"], pj["cacc_dbuf_write"] = dbuf.read_pj, dbuf.write_pj
    lbuf = m.macros["PDP line buffer"].cost
    pj["pdp_lbuf_read"], pj["pdp_lbuf_write"] = lbuf.read_pj, lbuf.write_pj
    for dtype in dtypes:
        name = "CACC assembly 16-bit" if dtype.bytes == 2 else "CACC assembly INT8"
        if name not in m.macros:
            from ..errors import NvdlaSimError
            raise NvdlaSimError(f"energy: {hw.name} has no {dtype.name} datapath (data_types)")
        abuf = m.macros[name].cost
        pj[event_key("cacc_abuf_read", dtype)] = abuf.read_pj
        pj[event_key("cacc_abuf_write", dtype)] = abuf.write_pj
        ops = {"mac": "+".join(table.mac_ops(dtype.name)), **logic_ops(dtype)}
        for event, op in ops.items():
            key = event_key(event, dtype)
            m.op_of[key] = op
            pj[key] = (table.mac_pj(dtype.name, node) if event == "mac"
                       else table.energy_pj(op, node))
    m.area = area_breakdown(hw, table, m.macros)
    density = table.logic_leakage_mw_per_mm2
    if density is None:        # CACTI's leakage per mm^2 of the CBUF array, same device family
        density = cbuf.leakage_mw / cbuf.area_mm2 if cbuf.area_mm2 else 0.0
    m.logic_leakage_mw = density * m.area["logic_mm2"]
    pj["leak_cycle"] = m.leakage_mw / clock_mhz * 1e3      # mW over one cycle, in pJ
    m.pj = pj
    return m
