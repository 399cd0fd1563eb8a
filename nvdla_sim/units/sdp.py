"""SDP (single data point processor) and SDP_RDMA (its input and operand DMA).

SDP takes its cube either on the fly from CACC ("cacc->sdp", D_FEATURE_MODE_CFG.FLYING_MODE = ON:
int32 values, or FP32 bit patterns for FP16) or from SDP_RDMA, which reads the INT8 / INT16 / FP16
cube from memory.  Precision is data: SDP's D_DATA_FORMAT (PROC_PRECISION, OUT_PRECISION) and
SDP_RDMA's D_FEATURE_MODE_CFG (IN_PRECISION, PROC_PRECISION) decode to `DataType`s that size the
surfaces (32 INT8 or 16 INT16 / FP16 elements per 32-byte atom), the operand layout (surfaces of
PROC_PRECISION elements) and the output.  SDP_RDMA also reads the BS / BN / EW operand arrays its
BRDMA / NRDMA / ERDMA are enabled for; it hands the input and the operands to SDP in one payload
on "sdp_rdma->sdp".  SDP waits for SDP_RDMA only when it needs something from memory (its input,
or an operand a stage takes from MEM).  The result goes to memory in OUT_PRECISION at the DST
address (an INT8 cube written as INT16 / FP16 becomes two 16-channel surfaces per 32-channel
one), or to PDP on "sdp->pdp" (OUTPUT_DST = PDP; nothing is written); in EW EQL mode nothing is
written either and D_STATUS.STATUS_UNEQUAL records whether some result was not 0.

The arithmetic is the kernel `kernels/sdp.pyx`; `sdp_compute` runs it for a register group and
is usable without the engine.  The LUT tables (LE 65, LO 257 16-bit entries: INT16, or FP16 bit
patterns in FP16 processing) are single, shared by both register groups, and loaded through
S_LUT_ACCESS_CFG / S_LUT_ACCESS_DATA.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generator

import numpy as np

from ..datatype import FP16, INT8, INT16, DataType, from_code, require_supported
from ..errors import NvdlaSimError
from ..kernels.sdp import ALGO_EQL, LE_ENTRIES, LO_ENTRIES, fp16_input, sdp_layer
from ..layout import read_cube, surfaces, write_cube
from ..regs import GroupView
from ..timing import sdp as sdp_timing
from .base import Unit
from .lut_memory import LutMemory

CHANNEL_RDMA = "sdp_rdma->sdp"
CHANNEL_CACC = "cacc->sdp"
CHANNEL_PDP = "sdp->pdp"

FLYING_ON = 1                  # SDP / SDP_RDMA FLYING_MODE: 1 = input from CACC
OUTPUT_DST_PDP = 1
SRC_MEM = 1
DATA_USE_MUL, DATA_USE_ALU, DATA_USE_BOTH = 0, 1, 2
DATA_MODE_PER_ELEMENT = 1

STAGES = ("BS", "BN", "EW")
# The operand DMA of each stage (D_<DMA>_CFG); its address registers are D_<stage>_*
STAGE_DMA = {"BS": "BRDMA", "BN": "NRDMA", "EW": "ERDMA"}


# -- operands ----------------------------------------------------------------------------------
@dataclass
class StageOperands:
    """Memory operands of one stage as SDP_RDMA delivered them: int16 arrays, per kernel
    (lanes,) or per element (lanes, H, W); None where the DMA's DATA_USE does not supply one."""
    alu: np.ndarray | None = None
    mul: np.ndarray | None = None


@dataclass
class RdmaPayload:
    input: np.ndarray | None = None      # IN_PRECISION (lanes, H, W), or None when flying
    operands: dict[str, StageOperands] = field(default_factory=dict)   # "BS" / "BN" / "EW"
    in_bytes: int | None = None          # bytes per input element read (None when flying)


def memory_operands(view: GroupView) -> dict[str, tuple[str, ...]]:
    """Which operands ("alu", "mul") each stage takes from memory under these SDP registers."""
    needed: dict[str, tuple[str, ...]] = {}
    for stage in STAGES:
        cfg = f"D_DP_{stage}_CFG"
        if view.field(cfg, f"{stage}_BYPASS"):
            continue
        kinds = tuple(kind for kind in ("alu", "mul")
                      if not view.field(cfg, f"{stage}_{kind.upper()}_BYPASS")
                      and view.field(f"D_DP_{stage}_{kind.upper()}_CFG",
                                     f"{stage}_{kind.upper()}_SRC") == SRC_MEM)
        if kinds:
            needed[stage] = kinds
    return needed


# -- register decoding -------------------------------------------------------------------------
def _x_stage(view: GroupView, stage: str) -> dict:
    cfg = f"D_DP_{stage}_CFG"
    return {
        "bypass": view.field(cfg, f"{stage}_BYPASS"),
        "alu_bypass": view.field(cfg, f"{stage}_ALU_BYPASS"),
        "alu_algo": view.field(cfg, f"{stage}_ALU_ALGO"),
        "alu_shift": view.field(f"D_DP_{stage}_ALU_CFG", f"{stage}_ALU_SHIFT_VALUE") & 63,
        "mul_bypass": view.field(cfg, f"{stage}_MUL_BYPASS"),
        "mul_prelu": view.field(cfg, f"{stage}_MUL_PRELU"),
        # The 8-bit field is 6 bits wide in the datapath.
        "mul_shift": view.field(f"D_DP_{stage}_MUL_CFG", f"{stage}_MUL_SHIFT_VALUE") & 63,
        "relu_bypass": view.field(cfg, f"{stage}_RELU_BYPASS"),
    }


def _y_stage(view: GroupView) -> dict:
    cfg = "D_DP_EW_CFG"
    out = {
        "bypass": view.field(cfg, "EW_BYPASS"),
        "alu_bypass": view.field(cfg, "EW_ALU_BYPASS"),
        "alu_algo": view.field(cfg, "EW_ALU_ALGO"),
        "mul_bypass": view.field(cfg, "EW_MUL_BYPASS"),
        "mul_prelu": view.field(cfg, "EW_MUL_PRELU"),
        "truncate": view.field("D_DP_EW_TRUNCATE_VALUE", "EW_TRUNCATE"),
        "lut_bypass": view.field(cfg, "EW_LUT_BYPASS"),
    }
    for kind in ("ALU", "MUL"):
        # Only memory operands pass the converter; register operands are 32-bit values as is.
        mem = view.field(f"D_DP_EW_{kind}_CFG", f"EW_{kind}_SRC") == SRC_MEM
        out[f"{kind.lower()}_mem"] = mem
        out[f"{kind.lower()}_cvt"] = (
            mem and not view.field(f"D_DP_EW_{kind}_CFG", f"EW_{kind}_CVT_BYPASS"))
        out[f"{kind.lower()}_cvt_offset"] = view.sfield(f"D_DP_EW_{kind}_CVT_OFFSET_VALUE",
                                                        f"EW_{kind}_CVT_OFFSET")
        out[f"{kind.lower()}_cvt_scale"] = view.sfield(f"D_DP_EW_{kind}_CVT_SCALE_VALUE",
                                                       f"EW_{kind}_CVT_SCALE")
        out[f"{kind.lower()}_cvt_truncate"] = view.field(f"D_DP_EW_{kind}_CVT_TRUNCATE_VALUE",
                                                         f"EW_{kind}_CVT_TRUNCATE")
    return out


def _lut_table(view: GroupView, name: str) -> dict:
    """LE or LO range, index and slope registers."""
    scale, shift = f"S_LUT_{name}_SLOPE_SCALE", f"S_LUT_{name}_SLOPE_SHIFT"
    return {
        "exponent": name == "LE" and view.field("S_LUT_CFG", "LUT_LE_FUNCTION") == 0,
        "index_offset": view.sfield("S_LUT_INFO", "LUT_LE_INDEX_OFFSET"),
        "index_select": view.sfield("S_LUT_INFO", f"LUT_{name}_INDEX_SELECT"),
        "start": view.sfield(f"S_LUT_{name}_START", f"LUT_{name}_START"),
        "end": view.sfield(f"S_LUT_{name}_END", f"LUT_{name}_END"),
        "uflow_scale": view.sfield(scale, f"LUT_{name}_SLOPE_UFLOW_SCALE"),
        "uflow_shift": view.sfield(shift, f"LUT_{name}_SLOPE_UFLOW_SHIFT"),
        "oflow_scale": view.sfield(scale, f"LUT_{name}_SLOPE_OFLOW_SCALE"),
        "oflow_shift": view.sfield(shift, f"LUT_{name}_SLOPE_OFLOW_SHIFT"),
    }


def is_eql_mode(view: GroupView) -> bool:
    return (not view.field("D_DP_EW_CFG", "EW_BYPASS")
            and not view.field("D_DP_EW_CFG", "EW_ALU_BYPASS")
            and view.field("D_DP_EW_CFG", "EW_ALU_ALGO") == ALGO_EQL)


def data_format(view: GroupView) -> tuple[DataType, DataType]:
    """(processing, output) element types of an SDP register group (D_DATA_FORMAT)."""
    return (from_code(view.field("D_DATA_FORMAT", "PROC_PRECISION"),
                      "SDP.D_DATA_FORMAT.PROC_PRECISION"),
            from_code(view.field("D_DATA_FORMAT", "OUT_PRECISION"),
                      "SDP.D_DATA_FORMAT.OUT_PRECISION"))


def datapath_config(view: GroupView) -> dict:
    """The kernel configuration (kernels/sdp.pyx structs) of an SDP register group."""
    proc_type, out_type = data_format(view)
    return {
        "x1": _x_stage(view, "BS"),
        "x2": _x_stage(view, "BN"),
        "y": _y_stage(view),
        "le": _lut_table(view, "LE"),
        "lo": _lut_table(view, "LO"),
        "priority": {
            "uflow_lo": view.field("S_LUT_CFG", "LUT_UFLOW_PRIORITY"),
            "oflow_lo": view.field("S_LUT_CFG", "LUT_OFLOW_PRIORITY"),
            "hybrid_lo": view.field("S_LUT_CFG", "LUT_HYBRID_PRIORITY"),
        },
        "c": {
            "offset": view.sfield("D_CVT_OFFSET", "CVT_OFFSET"),
            "scale": view.sfield("D_CVT_SCALE", "CVT_SCALE"),
            "shift": view.field("D_CVT_SHIFT", "CVT_SHIFT"),
            "eql": is_eql_mode(view),
            "proc_precision": proc_type.code,
            "out_precision": out_type.code,
            "nan_to_zero": view.field("D_FEATURE_MODE_CFG", "NAN_TO_ZERO"),
        },
    }


def _register_operand(view: GroupView, stage: str, kind: str) -> int:
    reg = f"D_DP_{stage}_{kind.upper()}_SRC_VALUE"
    return view.sfield(reg, f"{stage}_{kind.upper()}_OPERAND")


def operand_arrays(view: GroupView, shape: tuple[int, int, int],
                   operands: dict[str, StageOperands]) -> list[np.ndarray]:
    """The six int32 operand arrays of the kernel (x1 alu/mul, x2 alu/mul, y alu/mul), each
    broadcast to `shape`: the memory operand where the stage takes one, else the register."""
    needed = memory_operands(view)
    arrays = []
    for stage in STAGES:
        for kind in ("alu", "mul"):
            if kind in needed.get(stage, ()):
                data = getattr(operands.get(stage, StageOperands()), kind)
                if data is None:
                    raise ValueError(f"SDP {stage} takes its {kind.upper()} operand from memory "
                                     "but SDP_RDMA did not read one")
                data = np.asarray(data, np.int32)
                if data.ndim == 1:
                    data = data[:, None, None]
                if data.shape[0] != shape[0] or data.ndim != 3 or \
                        not all(d in (1, s) for d, s in zip(data.shape, shape)):
                    raise ValueError(f"SDP {stage} {kind.upper()} operand {data.shape} does not "
                                     f"fit the cube {shape}")
                arrays.append(np.broadcast_to(data, shape))
            else:
                arrays.append(np.broadcast_to(np.int32(_register_operand(view, stage, kind)),
                                              shape))
    return arrays


@dataclass
class SdpResult:
    output: np.ndarray               # OUT_PRECISION (lanes, H, W); zeros in EQL mode
    counters: dict[str, int]


def widen_fp16(x: np.ndarray) -> tuple[np.ndarray, int, int]:
    """An FP16 cube as FP32 bit patterns (int32) the way SDP widens SDP_RDMA's input, with its
    NaN and INF counts."""
    bits = np.ascontiguousarray(x).view(np.int16)
    out = np.empty(bits.shape, np.int32)
    nan, inf = fp16_input(bits, out)
    return out, nan, inf


def sdp_compute(view: GroupView, x: np.ndarray, operands: dict[str, StageOperands] | None = None,
                lut: LutMemory | None = None) -> SdpResult:
    """Run the SDP datapath of register group `view` over the cube `x` (lanes, H, W) with the
    memory operands `operands` and the LUT tables `lut` (zeros if None): `x` is int32 (or int8 /
    int16) for INT8 / INT16 processing, FP32 bit patterns (int32, as CACC delivers them) or a
    float16 cube (as SDP_RDMA reads it) for FP16.  The output is OUT_PRECISION (float16 for
    FP16).  A compiler can use it as the reference of what the hardware computes for a layer."""
    proc_type, out_type = data_format(view)
    if x.dtype == np.float16:
        x = widen_fp16(x)[0]
    elif x.dtype in (np.float32, np.uint32):       # FP32 values / bit patterns from CACC
        x = np.ascontiguousarray(x).view(np.int32)
    if out_type.bytes < proc_type.bytes:
        raise ValueError(f"PROC_PRECISION {proc_type} with OUT_PRECISION {out_type} (output "
                         "cube written as INT8) is not modelled")
    x = np.ascontiguousarray(x, np.int32)
    le = np.zeros(LE_ENTRIES, np.int64) if lut is None else np.ascontiguousarray(lut.le, np.int64)
    lo = np.zeros(LO_ENTRIES, np.int64) if lut is None else np.ascontiguousarray(lut.lo, np.int64)
    ops = operand_arrays(view, x.shape, operands or {})
    out = np.empty(x.shape, np.int8 if out_type.bytes == 1 else np.int16)
    counters = sdp_layer(x, *ops, le, lo, datapath_config(view), out)
    return SdpResult(out.view(out_type.numpy), counters)


# -- checks shared by SDP_RDMA and SDP ---------------------------------------------------------
def precisions(unit: Unit, view: GroupView, precision_reg: str,
               precision_fields: tuple[str, ...]) -> tuple[DataType, ...]:
    """The element types of the precision fields, refused where the hardware has no such type;
    batches and Winograd output in flying mode only."""
    types = []
    for fld in precision_fields:
        where = f"{unit.block}.{precision_reg}.{fld}"
        dtype = from_code(view.field(precision_reg, fld), where)
        if dtype == INT16 and fld in ("OUT_PRECISION", "IN_PRECISION") and \
                "fp16" in [str(t).lower() for t in unit.hw.data_types]:
            # an SDP with FP16 has the 16-bit integer words its FP16 -> INT16 converter writes
            # (v1 C model sdp_c): memory INT16 in and out, with no INT16 MACs (compiler/reformat.py)
            types.append(dtype)
            continue
        require_supported(dtype, unit.hw.data_types, unit.hw.name, where)
        types.append(dtype)
    if view.field("D_FEATURE_MODE_CFG", "WINOGRAD"):
        # Winograd only changes the order the CACC delivers output atoms in (2x2 blocks, which the
        # WDMA writes back in place): values and addresses are those of the direct layout.
        if view.field("D_FEATURE_MODE_CFG", "FLYING_MODE") != FLYING_ON:
            raise unit.unsupported("WINOGRAD without FLYING_MODE (Winograd output comes from "
                                   "the CACC)")
        width, height, _ = cube_dims(view)
        if width % 4 or height % 4:
            raise NvdlaSimError(f"{unit.block}.D_FEATURE_MODE_CFG.WINOGRAD: the cube "
                                f"({width}x{height}) must be a multiple of 4 wide and high")
    batches = view.field("D_FEATURE_MODE_CFG", "BATCH_NUMBER") + 1
    if batches > 1:
        if not unit.hw.features.batch:
            raise unit.unsupported(f"BATCH_NUMBER={batches - 1}: this configuration has no "
                                   "batch feature")
        if view.field("D_FEATURE_MODE_CFG", "FLYING_MODE") != FLYING_ON:
            raise unit.unsupported("BATCH_NUMBER without FLYING_MODE (batches come from the "
                                   "CACC)")
    return tuple(types)


def batch_number(view: GroupView) -> int:
    """Images of a batched layer (D_FEATURE_MODE_CFG.BATCH_NUMBER + 1)."""
    return view.field("D_FEATURE_MODE_CFG", "BATCH_NUMBER") + 1


def cube_dims(view: GroupView) -> tuple[int, int, int]:
    """(width, height, channels) of the SDP / SDP_RDMA data cube."""
    return (view.field("D_DATA_CUBE_WIDTH", "WIDTH") + 1,
            view.field("D_DATA_CUBE_HEIGHT", "HEIGHT") + 1,
            view.field("D_DATA_CUBE_CHANNEL", "CHANNEL") + 1)


# -- SDP_RDMA ----------------------------------------------------------------------------------
class SdpRdma(Unit):
    block = "SDP_RDMA"

    def execute(self, view: GroupView) -> Generator:
        in_type, proc_type = precisions(self, view, "D_FEATURE_MODE_CFG",
                                        ("IN_PRECISION", "PROC_PRECISION"))
        atom = self.hw.memory_atomic_bytes
        width, height, channels = cube_dims(view)
        payload = RdmaPayload()
        transfers: list[tuple[int, int]] = []           # (bytes, ram_type)
        timing_operands = []
        flying = view.field("D_FEATURE_MODE_CFG", "FLYING_MODE") == FLYING_ON
        in_lanes = in_type.elements_per_atom(atom)
        read_channels = channels
        if not flying:
            if in_type != proc_type and (in_type, proc_type) != (INT16, INT8):
                raise self.unsupported(f"IN_PRECISION {in_type} processed as {proc_type} "
                                       "is not modelled (INT16 as INT8 is)")
            if in_type != proc_type:
                # INT16 processed as INT8: surfaces read in pairs, 32 channels of 16-bit values
                # per INT8 surface (the values are not narrowed)
                read_channels = surfaces(channels, 2 * in_lanes) * 2 * in_lanes
            payload.in_bytes = in_type.bytes
            ram_type = view.field("D_SRC_DMA_CFG", "SRC_RAM_TYPE")
            line_stride = view.word("D_SRC_LINE_STRIDE")
            surf_stride = view.word("D_SRC_SURFACE_STRIDE")
            if width == 1 and height == 1:
                line_stride = surf_stride = atom        # a 1x1 cube is read as packed surfaces
            if self.engine.compute_values:
                payload.input = read_cube(
                    self.engine.memory.space(ram_type),
                    view.addr("D_SRC_BASE_ADDR_LOW", "D_SRC_BASE_ADDR_HIGH"), width, height,
                    read_channels, line_stride, surf_stride, in_lanes,
                    np.int8 if in_type.bytes == 1 else np.int16).view(in_type.numpy)
            transfers.append((surfaces(read_channels, in_lanes) * atom * height * width,
                              ram_type))
        for stage in STAGES:
            dma = STAGE_DMA[stage]
            if view.field(f"D_{dma}_CFG", f"{dma}_DISABLE"):
                continue
            payload.operands[stage], nbytes, ram_type = self.read_operands(view, stage)
            transfers.append((nbytes, ram_type))
            per_element = view.field(f"D_{dma}_CFG", f"{dma}_DATA_MODE") == DATA_MODE_PER_ELEMENT
            timing_operands.append(sdp_timing.Operand(
                f"SDP_{dma}", ram_type, per_element, nbytes))
        if not transfers:
            return                                      # nothing to fetch for SDP
        if not flying:
            self.engine.timing.announce(sdp_timing.CH_RDMA)
        elif any(op.per_element for op in timing_operands):
            self.engine.timing.announce(sdp_timing.CH_OPERANDS)
        yield from self.send(CHANNEL_RDMA, payload)
        yield from sdp_timing.rdma(self, sdp_timing.SdpRdmaGeometry(
            atoms=surfaces(read_channels, in_lanes) * height * width, flying=flying,
            ram_type=view.field("D_SRC_DMA_CFG", "SRC_RAM_TYPE"),
            operands=tuple(timing_operands)))

    def read_operands(self, view: GroupView, stage: str) -> tuple[StageOperands, int, int]:
        """Read the operand array(s) of one stage; returns them, the bytes read, the RAM type.
        Operands come in surfaces of PROC_PRECISION elements (32 INT8 or 16 INT16 / FP16 per
        atom) whatever their own size of 1 or 2 bytes; 1-byte values are sign-extended."""
        dma = STAGE_DMA[stage]
        cfg = f"D_{dma}_CFG"
        use = view.field(cfg, f"{dma}_DATA_USE")
        if use not in (DATA_USE_MUL, DATA_USE_ALU, DATA_USE_BOTH):
            raise self.unsupported(f"{dma}_DATA_USE={use} is reserved")
        size = 2 if view.field(cfg, f"{dma}_DATA_SIZE") else 1
        ram_type = view.field(cfg, f"{dma}_RAM_TYPE")
        components = 2 if use == DATA_USE_BOTH else 1
        element = {1: np.int8, 2: np.int16, 4: np.int32}[size * components]
        component = np.int8 if size == 1 else np.int16
        proc_type = from_code(view.field("D_FEATURE_MODE_CFG", "PROC_PRECISION"),
                              "SDP_RDMA.D_FEATURE_MODE_CFG.PROC_PRECISION")
        per_surface = proc_type.elements_per_atom(self.hw.memory_atomic_bytes)
        width, height, channels = cube_dims(view)
        lanes = surfaces(channels, per_surface) * per_surface
        per_element = view.field(cfg, f"{dma}_DATA_MODE") == DATA_MODE_PER_ELEMENT
        if per_element and batch_number(view) > 1:
            raise self.unsupported(f"{dma}_DATA_MODE=PER_ELEMENT with batches (per-image "
                                   f"operands {dma}_BATCH_STRIDE apart are not modelled)")
        if not self.engine.compute_values:      # timing only: the size of what would be read
            n = lanes * components * (height * width if per_element else 1)
            return StageOperands(), n * size, ram_type
        space = self.engine.memory.space(ram_type)
        base = view.addr(f"D_{stage}_BASE_ADDR_LOW", f"D_{stage}_BASE_ADDR_HIGH")
        if per_element:
            cube = read_cube(space, base, width, height, channels,
                             view.word(f"D_{stage}_LINE_STRIDE"),
                             view.word(f"D_{stage}_SURFACE_STRIDE"), per_surface, element)
            # Both components of an element are adjacent: ALU first, then MUL.
            parts = np.ascontiguousarray(cube).view(component).reshape(lanes, height, width,
                                                                       components)
        else:
            # One value per channel, all surfaces back to back from the base address.
            raw = space.read(base, lanes * size * components)
            parts = raw.view(component).reshape(lanes, components)
        parts = parts.astype(np.int16)
        split = {DATA_USE_ALU: ("alu",), DATA_USE_MUL: ("mul",), DATA_USE_BOTH: ("alu", "mul")}[use]
        operands = StageOperands(**{kind: np.ascontiguousarray(parts[..., i])
                                    for i, kind in enumerate(split)})
        return operands, parts.size * size, ram_type


# -- SDP ---------------------------------------------------------------------------------------
class Sdp(Unit):
    block = "SDP"
    interrupt = "SDP"

    def __init__(self, engine):
        super().__init__(engine)
        definition = self.regs.definition
        self.lut = LutMemory(definition).install(self.regs)

    def execute(self, view: GroupView) -> Generator:
        proc_type, out_type = precisions(self, view, "D_DATA_FORMAT",
                                         ("PROC_PRECISION", "OUT_PRECISION"))
        if out_type.bytes < proc_type.bytes:
            raise self.unsupported(f"PROC_PRECISION {proc_type} with OUT_PRECISION {out_type} "
                                   "(a 16-bit cube written as INT8) is not modelled")
        atom = self.hw.memory_atomic_bytes
        lanes = proc_type.elements_per_atom(atom)
        width, height, channels = cube_dims(view)
        shape = (surfaces(channels, lanes) * lanes, height, width)
        flying = view.field("D_FEATURE_MODE_CFG", "FLYING_MODE") == FLYING_ON
        needed = memory_operands(view)
        batches = batch_number(view)
        if batches > 1:
            shape = (batches,) + shape                  # the CACC's cubes, image by image

        rdma = RdmaPayload()
        if not flying or needed:
            rdma = yield from self.receive(CHANNEL_RDMA)
        if flying:
            x = yield from self.receive(CHANNEL_CACC)
            source = "CACC"
        else:
            x, source = rdma.input, "SDP_RDMA"
        values = self.engine.compute_values
        if values and (x is None or tuple(x.shape) != shape):
            got = "nothing" if x is None else f"a {x.shape} cube"
            raise self.unsupported(f"{source} delivered {got}; the SDP registers describe "
                                   f"{shape[0]} lanes x {height} x {width} ({proc_type})")
        in_bytes = proc_type.bytes if flying or rdma.in_bytes is None else rdma.in_bytes
        if values and not flying and x.dtype.itemsize != in_bytes:
            raise self.unsupported(f"SDP_RDMA delivered {x.dtype} elements; SDP processes "
                                   f"{proc_type}")
        result = None                                   # timing only: no values
        if values:
            if x.dtype == np.float16:
                x, nan, inf = widen_fp16(x)
                self.record_input_counters(view, nan, inf)
            try:
                if batches == 1:
                    result = sdp_compute(view, x, rdma.operands, self.lut)
                else:                                   # the same operands for every image
                    parts = [sdp_compute(view, cube, rdma.operands, self.lut) for cube in x]
                    result = SdpResult(np.stack([p.output for p in parts]),
                                       {key: sum(p.counters[key] for p in parts)
                                        for key in parts[0].counters})
            except ValueError as exc:
                raise self.unsupported(str(exc)) from None
            self.record_counters(view, result.counters)
        to_pdp = view.field("D_FEATURE_MODE_CFG", "OUTPUT_DST") == OUTPUT_DST_PDP
        ram_type = view.field("D_DST_DMA_CFG", "DST_RAM_TYPE")
        # The core takes its input in atoms of what SDP_RDMA read (16-bit INT16 values in
        # INT8 processing: twice the INT8 atoms, each at the 16-bit rate).
        timing = sdp_timing.SdpGeometry(
            atoms=shape[-3] * in_bytes // atom * height * width * batches, flying=flying,
            to_pdp=to_pdp,
            stages=sum(1 for stage in STAGES
                       if not view.field(f"D_DP_{stage}_CFG", f"{stage}_BYPASS")
                       and (stage != "EW" or self.hw.sdp.ew)),     # no EW hardware: skipped
            ram_type=ram_type, writes=not is_eql_mode(view), element_bytes=in_bytes,
            out_ratio=out_type.bytes / in_bytes)
        if is_eql_mode(view):
            yield from sdp_timing.core(self, timing)
            return                                      # EQL mode only compares
        if to_pdp and batches > 1:
            raise self.unsupported("OUTPUT_DST=PDP with batches (PDP takes one image)")
        if to_pdp:
            self.engine.timing.announce(sdp_timing.CH_PDP)
            yield from self.send(CHANNEL_PDP, result.output if values else None)
            yield from sdp_timing.core(self, timing)
            return
        line_stride = view.word("D_DST_LINE_STRIDE")
        surf_stride = view.word("D_DST_SURFACE_STRIDE")
        if width == 1 and height == 1:
            line_stride = surf_stride = atom            # a 1x1 cube is written as packed surfaces
        if values:
            # An INT8 cube written as INT16 / FP16: each 32-channel surface becomes two of 16.
            base = view.addr("D_DST_BASE_ADDR_LOW", "D_DST_BASE_ADDR_HIGH")
            cubes = [result.output] if batches == 1 else list(result.output)
            for b, cube in enumerate(cubes):        # image b at b x DST_BATCH_STRIDE
                write_cube(self.engine.memory.space(ram_type),
                           base + b * view.word("D_DST_BATCH_STRIDE"), cube,
                           line_stride, surf_stride, out_type.elements_per_atom(atom))
        yield from sdp_timing.core(self, timing)

    def record_counters(self, view: GroupView, counters: dict) -> None:
        """Status and performance registers the C model updates at the end of a layer."""
        group = view.group
        if is_eql_mode(view):
            self.regs.set_word("D_STATUS", int(bool(counters["unequal"])), group)
        lut_on = not view.field("D_DP_EW_CFG", "EW_BYPASS") \
            and not view.field("D_DP_EW_CFG", "EW_LUT_BYPASS")
        if view.field("D_PERF_ENABLE", "PERF_LUT_EN") and lut_on:
            for reg, key in (("D_PERF_LUT_UFLOW", "lut_uflow"), ("D_PERF_LUT_OFLOW", "lut_oflow"),
                             ("D_PERF_LUT_HYBRID", "lut_hybrid"),
                             ("D_PERF_LUT_LE_HIT", "lut_le_hit"),
                             ("D_PERF_LUT_LO_HIT", "lut_lo_hit")):
                self.regs.set_word(reg, counters[key], group)
        if view.field("D_PERF_ENABLE", "PERF_SAT_EN"):
            self.regs.set_word("D_PERF_OUT_SATURATION", counters["out_saturation"], group)
        if view.field("D_PERF_ENABLE", "PERF_NAN_INF_COUNT_EN") \
                and view.field("D_DATA_FORMAT", "OUT_PRECISION") == FP16.code:
            self.regs.set_word("D_STATUS_NAN_OUTPUT_NUM", counters["nan_output"], group)

    def record_input_counters(self, view: GroupView, nan: int, inf: int) -> None:
        """NaN / INF elements of an FP16 input from SDP_RDMA: the C model counts them in SDP
        and stores them in SDP_RDMA's registers of the group SDP runs, if SDP_RDMA's
        PERF_NAN_INF_COUNT_EN is set."""
        rdma = self.engine.regs["SDP_RDMA"]
        if rdma.view(view.group).field("D_PERF_ENABLE", "PERF_NAN_INF_COUNT_EN"):
            rdma.set_word("D_STATUS_NAN_INPUT_NUM", nan, view.group)
            rdma.set_word("D_STATUS_INF_INPUT_NUM", inf, view.group)
