"""SDP hardware layers (bias, batch norm, ReLU/PReLU, element-wise, LUT, output converter) as
NVDLA register writes, memory->memory or fed on the fly by CACC (see emit_conv), optionally
streaming to PDP.

The datapath per element is X1 (BS) -> X2 (BN) -> Y (EW) -> C (reference map 5.6):
  X stage:  ALU (max/min/sum with operand << ALU_SHIFT) -> MUL (or PReLU) -> >> MUL_SHIFT -> ReLU
  Y stage:  MUL (or PReLU) >> EW_TRUNCATE -> ALU (max/min/sum/eql) -> LUT
  C:        (x - CVT_OFFSET) * CVT_SCALE >> CVT_SHIFT, saturated to int8
Each operand is a register value (an int: the same for every element), one value per channel
(a 1-D array: SDP_RDMA reads it PER_KERNEL), or one value per element (a 3-D array, or a
TensorPlacement already in memory such as the other input of an element-wise add: PER_ELEMENT).

Precision (`SdpLayer.dtype`, PROC and OUT precision): INT8 and INT16 run the integer datapath
(int16 operands, output saturated to the type); FP16 runs the float one (C model sdp_x/sdp_c):
operands are FP16 values (a register operand is a float, written as its binary16 bits; memory
operands float16 arrays, always TWO_BYTE), ALU/MUL shifts and the output converter are unused
(written 0 / identity), LUT tables are FP16 designs (nvdla_sim.lut.fit), and an atom of operands
holds 16 elements (INT16 too).
When a stage takes both its ALU and MUL operands from memory, SDP_RDMA reads them interleaved
(DATA_USE BOTH: ALU then MUL of each element; reference map 5.1, unverified by the official tests).

Register order and field derivation follow nvdla/sw kmd firmware/sdp.c.  Deviation: SDP_RDMA
registers are written only when SDP_RDMA runs (the firmware also writes its mode registers when it
stays idle, which would land in a register group SDP_RDMA is not going to execute).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .. import formats
from ..datatype import INT8, INT16, DataType
from ..errors import NvdlaSimError, UnsupportedError
from .emit import IDENTITY, Converter, ProgramBuilder
from .emit_pdp import PdpLayer, plan_pdp, write_pdp
from .lut import Lut, write_lut
from .placement import Allocator, Buffer, TensorPlacement

Operand = int | float | np.ndarray | TensorPlacement
ALU_ALGO = {"max": "MAX", "min": "MIN", "sum": "SUM", "eql": "EQL"}
STAGE_REGS = {"x1": ("BS", "BRDMA"), "x2": ("BN", "NRDMA"), "y": ("EW", "ERDMA")}


@dataclass(frozen=True)
class XStage:
    """BS (x1) or BN (x2).  `mul` is "mul" or "prelu" (negative values multiplied, others pass);
    MUL_SHIFT applies even without `mul`."""
    alu: str | None = None                 # "sum", "max", "min"
    alu_operand: Operand = 0               # int16 values
    alu_shift: int = 0                     # ALU operand << shift (0..63)
    mul: str | None = None
    mul_operand: Operand = 1               # int16 values
    mul_shift: int = 0                     # >> shift, rounded (0..63)
    relu: bool = False


@dataclass(frozen=True)
class YStage:
    """EW.  Memory operands pass through their converter (int32 result); register operands are
    int32 and used as they are."""
    mul: str | None = None                 # "mul" or "prelu"
    mul_operand: Operand = 1
    mul_cvt: Converter | None = None       # None: converter bypassed
    truncate: int = 0                      # EW_TRUNCATE: >> after the multiply (0..1023)
    alu: str | None = None                 # "sum", "max", "min", "eql"
    alu_operand: Operand = 0
    alu_cvt: Converter | None = None
    lut: Lut | None = None                 # None: LUT bypassed


@dataclass(frozen=True)
class SdpLayer:
    x1: XStage | None = None
    x2: XStage | None = None
    y: YStage | None = None
    out_cvt: Converter = IDENTITY
    name: str = "sdp"
    dtype: DataType = INT8                 # PROC precision (and the input's)
    out_dtype: DataType | None = None      # OUT precision when wider (INT8 -> INT16); None: dtype
    in_dtype: DataType | None = None       # IN precision from memory (INT16 read as INT8, a
                                           # compiler/reformat.py pass); None: dtype

    @property
    def output_type(self) -> DataType:
        return self.out_dtype or self.dtype

    @property
    def input_type(self) -> DataType:
        return self.in_dtype or self.dtype


# The conversions the SDP performs (v1 C model: SDP_RDMA, the output converter sdp_c): PROC INT8 to
# a 16-bit OUT (INT16, or FP16 of the converter's integer), PROC FP16 to INT16 (the FP16 value
# rounded); IN INT16 read by PROC INT8 (the integer datapath, saturated to INT8 by the converter).
SDP_CONVERSIONS = {("INT8", "INT16"), ("INT8", "FP16"), ("FP16", "INT16")}


DATAPATH_MIN, DATAPATH_MAX = -(1 << 31), (1 << 31) - 1     # X/Y stage results: 32 bits


def converter_output(values, cvt: Converter, out_dtype: DataType = INT8) -> np.ndarray:
    """What the integer output converter writes for 32-bit datapath values (the kernel's C
    stage itself, kernels/sdp.pyx output_converter)."""
    from ..kernels.sdp import output_converter
    v = np.ascontiguousarray(np.atleast_1d(values), np.int64)
    out = np.zeros_like(v)
    output_converter(v, cvt.offset, cvt.scale, cvt.shift, out_dtype == INT16, out)
    return out


def converter_preimage(code: int, cvt: Converter, out_dtype: DataType = INT8,
                       upper: bool = True) -> int:
    """The largest (upper) or smallest datapath value the converter writes as at most (upper) or
    at least `code`; found by bisection on the converter (monotonic for CVT_SCALE >= 0)."""
    if cvt.scale < 0:
        raise NvdlaSimError(f"converter_preimage: CVT_SCALE {cvt.scale} is negative")
    lo, hi = DATAPATH_MIN, DATAPATH_MAX

    def ok(v: int) -> bool:
        out = int(converter_output(v, cvt, out_dtype)[0])
        return out <= code if upper else out >= code
    if upper:                                # largest v with ok(v): ok holds on [MIN, v]
        if not ok(lo):
            raise NvdlaSimError(f"converter_preimage: no datapath value converts to <= {code}")
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if ok(mid) else (lo, mid - 1)
        return lo
    if not ok(hi):
        raise NvdlaSimError(f"converter_preimage: no datapath value converts to >= {code}")
    while lo < hi:                           # smallest v with ok(v): ok holds on [v, MAX]
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid + 1, hi)
    return lo


def _x_bound(layer: SdpLayer, code: int, upper: bool) -> XStage:
    """An X2 (BN) stage clamping at `code`: ALU MIN (upper) or MAX with an int16 << shift operand
    inside the converter's preimage of the code (MUL bypassed, shift 0, no ReLU)."""
    cvt, out_dtype = layer.out_cvt, layer.output_type
    edge = converter_preimage(code, cvt, out_dtype, upper)
    reached = int(converter_output(edge, cvt, out_dtype)[0])
    other = converter_preimage(reached, cvt, out_dtype, not upper)
    low, high = (other, edge) if upper else (edge, other)
    where = f"{layer.name}: grid {'ceiling' if upper else 'floor'} {code}"
    for shift in range(64):
        # the value nearest the edge that is a multiple of 2^shift and fits int16
        op = (high >> shift) if upper else -((-low) >> shift)
        if low <= (op << shift) <= high and -(1 << 15) <= op < (1 << 15):
            return XStage(alu="min" if upper else "max", alu_operand=op, alu_shift=shift)
    raise NvdlaSimError(f"{where}: no int16 << shift operand lies in [{low}, {high}]")


def grid_clamp(layer: SdpLayer, low: int | None, high: int, ew: bool = True
               ) -> tuple[SdpLayer, tuple[str, ...]]:
    """`layer` with its output codes clamped to [low, high] (low None: only the ceiling) by ALU
    stages in front of the output converter, in the converter's input domain: an unused BN (X2)
    ALU in MIN or MAX mode (int16 << ALU_SHIFT register operand) and, when both bounds are needed
    or BN is taken, an unused EW (Y) ALU (`ew`: the hardware has it) in MIN mode with a 32-bit
    register operand.  A stage in use (BN's multiply, a LUT) would follow the bound, so it is not
    used.  The bounds lie in the converter's preimages of the codes, so a value converts to
    clip(code, low, high).  No floor is needed when the last X stage ends in ReLU and low <= 0.
    Returns the new layer and the bounds placed ("low", "high"): a bound with no free stage is
    not placed (the output then saturates at the type's limit on that side)."""
    if layer.dtype.is_float or layer.y is not None:
        return layer, ()
    last = layer.x2 if layer.x2 is not None else layer.x1
    need_low = low is not None and not (last is not None and last.relu and low <= 0)
    x2, y, placed = layer.x2, None, []
    bn_free = x2 is None
    if need_low and bn_free and ew:
        x2, placed = _x_bound(layer, low, upper=False), ["low"]
    elif bn_free:                            # the ceiling on BN (EW may be narrower in RTL)
        x2, placed = _x_bound(layer, high, upper=True), ["high"]
    if ew and "high" not in placed:
        y = YStage(alu="min", alu_operand=converter_preimage(
            high, layer.out_cvt, layer.output_type, upper=True))
        placed.append("high")
    return replace(layer, x2=x2, y=y), tuple(placed)


def _is_memory(operand: Operand) -> bool:
    return not isinstance(operand, (int, np.integer, float, np.floating))


def register_operand(value: int | float, dtype: DataType, where: str) -> int:
    """The register encoding of a scalar operand: the integer, or an FP16 value's binary16 bits."""
    if dtype.is_float:
        bits = np.array([value], np.float32).astype(np.float16)
        if not np.isfinite(bits[0]):
            raise NvdlaSimError(f"{where}: {value} does not fit FP16")
        return int(bits.view(np.uint16)[0])
    if isinstance(value, (float, np.floating)) and value != int(value):
        raise NvdlaSimError(f"{where}: {value} is not an integer ({dtype} SDP)")
    return int(value)


def _stage_parts(stage: XStage | YStage | None) -> dict[str, Operand]:
    """The parts of a stage that are active, with their operands."""
    if stage is None:
        return {}
    parts = {}
    if stage.alu is not None:
        parts["alu"] = stage.alu_operand
    if stage.mul is not None:
        parts["mul"] = stage.mul_operand
    return parts


@dataclass(frozen=True)
class MemoryOperand:
    """A stage's operands as SDP_RDMA reads them."""
    use: str                  # MUL, ALU or BOTH
    size: str                 # ONE_BYTE / TWO_BYTE
    mode: str                 # PER_KERNEL / PER_ELEMENT
    where: TensorPlacement | Buffer
    line_stride: int = 0
    surf_stride: int = 0


def _fits_int8(values: np.ndarray) -> bool:
    return bool(np.all((values >= -128) & (values <= 127)))


def place_operands(b: ProgramBuilder, alloc: Allocator, name: str, parts: dict[str, Operand],
                   shape: tuple[int, int, int], dtype: DataType = INT8) -> MemoryOperand | None:
    """Place (and load) the memory operands of one stage; None when it has none."""
    memory = {k: v for k, v in parts.items() if _is_memory(v)}
    if not memory:
        return None
    use = "BOTH" if len(memory) == 2 else next(iter(memory)).upper()
    c, h, w = shape
    atom = dtype.elements_per_atom(alloc.atom)       # operand elements per atom (by precision)
    lanes = -(-c // atom) * atom
    placed = [v for v in memory.values() if isinstance(v, TensorPlacement)]
    if placed:
        if len(memory) == 2:
            raise NvdlaSimError(f"{name}: an operand already in memory cannot share a stage with "
                                "another memory operand (they would have to be interleaved)")
        t = placed[0]
        if (t.channels, t.height, t.width) == (c, 1, 1) != shape and t.dtype == dtype \
                and t.surf_stride == t.atom and len(memory) == 1:
            # a C x 1 x 1 cube (broadcast NC11, compiler/ext_ops.py) is one value per channel,
            # surfaces back to back: the layout SDP_RDMA reads PER_KERNEL
            return MemoryOperand(use, "ONE_BYTE" if t.dtype.bytes == 1 else "TWO_BYTE",
                                 "PER_KERNEL", t)
        if (t.channels, t.height, t.width) != shape:
            raise NvdlaSimError(f"{name}: element-wise operand {t.name} is "
                                f"{t.channels}x{t.height}x{t.width}, the layer {c}x{h}x{w}")
        if t.dtype != dtype:
            raise NvdlaSimError(f"{name}: element-wise operand {t.name} is {t.dtype}, the SDP "
                                f"runs {dtype}")
        return MemoryOperand(use, "ONE_BYTE" if t.dtype.bytes == 1 else "TWO_BYTE", "PER_ELEMENT",
                             t, t.line_stride, t.surf_stride)
    # Per-channel operands: the parts of a partial-height split pass the same (C,) arrays,
    # checked and packed once (what follows depends on them, C, the type and the atom only);
    # each part still gets its own buffer.
    values = tuple(memory.values())
    per_channel = all(type(v) is np.ndarray and v.ndim == 1 for v in values)
    key = (tuple(memory), tuple(map(id, values)), c, dtype, alloc.atom)
    hit = b.operand_images.get(key) if per_channel else None
    if hit is not None and all(a is v for a, v in zip(hit[0], values)):
        use, size, image = hit[1]
        buf = alloc.buffer(f"{name}_operand", image.size)
        b.mem_load(buf.address, image, buf.name)
        return MemoryOperand(use, size, "PER_KERNEL", buf)
    arrays = [np.asarray(v) for v in memory.values()]
    ndims = {a.ndim for a in arrays}
    if ndims not in ({1}, {3}):
        raise NvdlaSimError(f"{name}: operands must be all per channel (1-D) or all per element "
                            f"(3-D), got shapes {[a.shape for a in arrays]}")
    for a in arrays:
        expected = (c,) if a.ndim == 1 else shape
        if a.shape != expected:
            raise NvdlaSimError(f"{name}: operand of shape {a.shape}, expected {expected}")
        if dtype.is_float:
            if not np.all(np.isfinite(a.astype(np.float16))):
                raise NvdlaSimError(f"{name}: operand values must fit FP16")
        elif np.any(a < -(1 << 15)) or np.any(a >= (1 << 15)):
            raise NvdlaSimError(f"{name}: operand values must fit int16")
    # INT8 SDP reads one byte per operand when every value fits; INT16/FP16 always two.
    one_byte = dtype == INT8 and all(_fits_int8(a) for a in arrays)
    size = "ONE_BYTE" if one_byte else "TWO_BYTE"
    nbytes = 1 if one_byte else 2
    ctype = dtype if dtype.is_float else INT8 if one_byte else INT16
    parts = [a.astype(ctype.numpy) for a in arrays]
    k = len(parts)
    if arrays[0].ndim == 1:
        # One value per lane, surfaces back to back; BOTH interleaves ALU, MUL per lane.  The
        # formats packer pads to nv_full's 32-element atoms: keep this configuration's lanes.
        image = formats.pack_per_channel(parts, dtype, nbytes)[:lanes * k * nbytes]
        if per_channel:
            b.operand_images[key] = (values, (use, size, image))   # (values: ids stay unique)
        buf = alloc.buffer(f"{name}_operand", image.size)
        b.mem_load(buf.address, image, buf.name)
        return MemoryOperand(use, size, "PER_KERNEL", buf)
    # Per element: the feature format with an element of k components (channel c, component i
    # at interleaved channel c * k + i, so an atom of `atom` elements holds atom * k values);
    # packed strides.  (formats.pack_per_element gives these bytes for 32-byte atoms only.)
    line_stride = w * atom * k * nbytes
    surf_stride = h * line_stride
    interleaved = np.zeros((lanes, k, h, w), ctype.numpy)
    for i, part in enumerate(parts):
        interleaved[:c, i] = part
    layout = formats.FeatureLayout(w, h, lanes * k, ctype, line_stride, surf_stride,
                                   atom * k * nbytes)
    image = formats.pack_feature_layout(interleaved.reshape(lanes * k, h, w), layout)
    buf = alloc.buffer(f"{name}_operand", (lanes // atom) * surf_stride)
    b.mem_load(buf.address, image, buf.name)
    return MemoryOperand(use, size, "PER_ELEMENT", buf, line_stride, surf_stride)


def _check_stage(name: str, stage: XStage | YStage | None, kind: str) -> None:
    if stage is None:
        return
    algos = ("sum", "max", "min", "eql") if kind == "y" else ("sum", "max", "min")
    if stage.alu is not None and stage.alu not in algos:
        raise NvdlaSimError(f"{name}.{kind}: ALU '{stage.alu}' is not one of {', '.join(algos)}")
    if stage.mul is not None and stage.mul not in ("mul", "prelu"):
        raise NvdlaSimError(f"{name}.{kind}: MUL '{stage.mul}' is not 'mul' or 'prelu'")


def sdp_needs_rdma(layer: SdpLayer, flying: bool) -> bool:
    return not flying or any(_is_memory(v) for s in (layer.x1, layer.x2, layer.y)
                             for v in _stage_parts(s).values())


def write_sdp(b: ProgramBuilder, alloc: Allocator, layer: SdpLayer, shape: tuple[int, int, int],
              src: TensorPlacement | None, dst: TensorPlacement | None,
              pdp: tuple[PdpLayer, TensorPlacement] | None = None,
              winograd: bool = False, batch: tuple[int, int] | None = None) -> None:
    """SDP_RDMA (when it runs) and SDP registers of a layer over a (C, H, W) cube.  `src` None:
    the input comes on the fly from CACC; `pdp` given: the output streams to that PDP layer
    (`dst` is then None) whose registers are written too; `winograd`: the CACC delivers a
    Winograd layer's output (FEATURE_MODE_CFG.WINOGRAD, flying mode only); `batch` (images,
    DST_BATCH_STRIDE bytes): a batched convolution's cubes, image b written at dst + b x stride."""
    flying = src is None
    batches = batch[0] - 1 if batch is not None else 0
    if batches and (not flying or pdp is not None or dst is None):
        raise NvdlaSimError(f"{layer.name}: a batch comes from the CACC on the fly into memory")
    for kind in ("x1", "x2", "y"):
        _check_stage(layer.name, getattr(layer, kind), kind)
    y = layer.y
    if y is not None and (y.alu or y.mul) and not b.hw.sdp.ew:
        raise NvdlaSimError(f"{layer.name}: {b.hw.name} has no SDP element-wise (Y) stage")
    if y is not None and y.lut is not None and not b.hw.sdp.lut:
        raise NvdlaSimError(f"{layer.name}: {b.hw.name} has no SDP lookup table")
    c, h, w = shape
    dtype, out_type = layer.dtype, layer.output_type
    precision = dtype.name
    in_type = layer.input_type
    if dtype.is_float and layer.out_cvt != IDENTITY:
        raise NvdlaSimError(f"{layer.name}: the FP16 SDP has no output converter (use the identity)")
    if out_type != dtype and (dtype.name, out_type.name) not in SDP_CONVERSIONS:
        raise NvdlaSimError(f"{layer.name}: the SDP converts {dtype} to {out_type}: only INT8 to "
                            "INT16 or FP16 and FP16 to INT16 exist")
    if in_type != dtype and (in_type, dtype) != (INT16, INT8) or in_type != dtype and flying:
        raise NvdlaSimError(f"{layer.name}: SDP_RDMA reads {in_type} for a {dtype} SDP: only INT16 "
                            "read as INT8 from memory exists")
    if src is not None and src.dtype != in_type:
        raise NvdlaSimError(f"{layer.name}: {src.name} is {src.dtype}, the SDP reads {in_type}")
    for p in (dst, pdp[1] if pdp is not None else None):
        if p is not None and p.dtype != out_type:
            raise NvdlaSimError(f"{layer.name}: {p.name} is {p.dtype}, the SDP writes {out_type}")
    if dtype.is_float and y is not None and (y.mul_cvt or y.alu_cvt):
        raise UnsupportedError(f"{layer.name}: the FP16 SDP Y operand converters are not "
                               "modelled by the compiler")
    operands = {kind: place_operands(b, alloc, f"{layer.name}_{kind}",
                                     _stage_parts(getattr(layer, kind)), shape, dtype)
                for kind in ("x1", "x2", "y")}

    if sdp_needs_rdma(layer, flying):
        b.reg("SDP_RDMA", "D_FEATURE_MODE_CFG", FLYING_MODE="ON" if flying else "OFF",
              WINOGRAD="ON" if winograd else "OFF", IN_PRECISION=in_type.name,
              OUT_PRECISION=out_type.name,
              PROC_PRECISION=precision, **({"BATCH_NUMBER": batches} if batches else {}))
        b.reg("SDP_RDMA", "D_DATA_CUBE_WIDTH", WIDTH=w - 1)
        b.reg("SDP_RDMA", "D_DATA_CUBE_HEIGHT", HEIGHT=h - 1)
        b.reg("SDP_RDMA", "D_DATA_CUBE_CHANNEL", CHANNEL=c - 1)
        if not flying:
            b.address("SDP_RDMA", "D_SRC_BASE_ADDR_LOW", "D_SRC_BASE_ADDR_HIGH", src.address)
            b.word("SDP_RDMA", "D_SRC_LINE_STRIDE", src.line_stride)
            b.word("SDP_RDMA", "D_SRC_SURFACE_STRIDE", src.surf_stride)
            b.reg("SDP_RDMA", "D_SRC_DMA_CFG", SRC_RAM_TYPE=src.ram_type)
        for kind in ("x1", "x2", "y"):
            stage, dma = STAGE_REGS[kind]
            op = operands[kind]
            if op is None:
                b.reg("SDP_RDMA", f"D_{dma}_CFG", **{f"{dma}_DISABLE": "YES"})
                continue
            b.reg("SDP_RDMA", f"D_{dma}_CFG", **{f"{dma}_DISABLE": "NO", f"{dma}_DATA_USE": op.use,
                                                 f"{dma}_DATA_SIZE": op.size,
                                                 f"{dma}_DATA_MODE": op.mode,
                                                 f"{dma}_RAM_TYPE": op.where.ram_type})
            b.address("SDP_RDMA", f"D_{stage}_BASE_ADDR_LOW", f"D_{stage}_BASE_ADDR_HIGH",
                      op.where.address)
            b.word("SDP_RDMA", f"D_{stage}_LINE_STRIDE", op.line_stride)
            b.word("SDP_RDMA", f"D_{stage}_SURFACE_STRIDE", op.surf_stride)

    if layer.y is not None and layer.y.lut is not None:
        write_lut(b, "SDP", layer.y.lut)
    b.reg("SDP", "D_DATA_CUBE_WIDTH", WIDTH=w - 1)
    b.reg("SDP", "D_DATA_CUBE_HEIGHT", HEIGHT=h - 1)
    b.reg("SDP", "D_DATA_CUBE_CHANNEL", CHANNEL=c - 1)
    if dst is not None:
        b.address("SDP", "D_DST_BASE_ADDR_LOW", "D_DST_BASE_ADDR_HIGH", dst.address)
        b.word("SDP", "D_DST_LINE_STRIDE", dst.line_stride)
        b.word("SDP", "D_DST_SURFACE_STRIDE", dst.surf_stride)
    for kind in ("x1", "x2"):
        _write_x_stage(b, kind, getattr(layer, kind), dtype)
    _write_y_stage(b, layer.y, dtype)
    b.reg("SDP", "D_FEATURE_MODE_CFG", FLYING_MODE="ON" if flying else "OFF",
          OUTPUT_DST="PDP" if pdp is not None else "MEM",
          WINOGRAD="ON" if winograd else "OFF", **({"BATCH_NUMBER": batches} if batches else {}))
    if batches:
        b.word("SDP", "D_DST_BATCH_STRIDE", batch[1])
    b.reg("SDP", "D_DST_DMA_CFG", DST_RAM_TYPE=dst.ram_type if dst is not None else 1)
    b.reg("SDP", "D_DATA_FORMAT", PROC_PRECISION=precision, OUT_PRECISION=out_type.name)
    cvt = layer.out_cvt
    b.word("SDP", "D_CVT_OFFSET", cvt.offset)
    b.reg("SDP", "D_CVT_SCALE", CVT_SCALE=cvt.scale)
    b.reg("SDP", "D_CVT_SHIFT", CVT_SHIFT=cvt.shift)
    if pdp is not None:
        pdp_layer, pdp_dst = pdp
        plan = plan_pdp(b.hw, pdp_layer, shape, (pdp_dst.channels, pdp_dst.height, pdp_dst.width),
                        flying=True)
        write_pdp(b, plan, None, pdp_dst)


def _write_x_stage(b: ProgramBuilder, kind: str, stage: XStage | None, dtype: DataType) -> None:
    name = STAGE_REGS[kind][0]
    if stage is None:
        b.reg("SDP", f"D_DP_{name}_CFG", **{f"{name}_BYPASS": "YES", f"{name}_ALU_BYPASS": "YES",
                                            f"{name}_MUL_BYPASS": "YES",
                                            f"{name}_RELU_BYPASS": "YES"})
        return
    b.reg("SDP", f"D_DP_{name}_CFG", **{
        f"{name}_BYPASS": "NO",
        f"{name}_ALU_BYPASS": "NO" if stage.alu else "YES",
        f"{name}_ALU_ALGO": ALU_ALGO[stage.alu] if stage.alu else "MAX",
        f"{name}_MUL_BYPASS": "NO" if stage.mul else "YES",
        f"{name}_MUL_PRELU": "YES" if stage.mul == "prelu" else "NO",
        f"{name}_RELU_BYPASS": "NO" if stage.relu else "YES"})
    if stage.alu:
        b.reg("SDP", f"D_DP_{name}_ALU_CFG", **{
            f"{name}_ALU_SRC": "MEM" if _is_memory(stage.alu_operand) else "REG",
            f"{name}_ALU_SHIFT_VALUE": stage.alu_shift})
        if not _is_memory(stage.alu_operand):
            b.reg("SDP", f"D_DP_{name}_ALU_SRC_VALUE", **{f"{name}_ALU_OPERAND": register_operand(
                stage.alu_operand, dtype, f"SDP.{name}_ALU_OPERAND")})
    if stage.mul and not _is_memory(stage.mul_operand):
        b.reg("SDP", f"D_DP_{name}_MUL_SRC_VALUE", **{f"{name}_MUL_OPERAND": register_operand(
            stage.mul_operand, dtype, f"SDP.{name}_MUL_OPERAND")})
    # The MUL shift applies even when MUL is bypassed (sdp.c writes MUL_CFG for every enabled stage).
    b.reg("SDP", f"D_DP_{name}_MUL_CFG", **{
        f"{name}_MUL_SRC": "MEM" if stage.mul and _is_memory(stage.mul_operand) else "REG",
        f"{name}_MUL_SHIFT_VALUE": stage.mul_shift})


def _write_y_stage(b: ProgramBuilder, stage: YStage | None, dtype: DataType) -> None:
    if stage is None:
        b.reg("SDP", "D_DP_EW_CFG", EW_BYPASS="YES", EW_ALU_BYPASS="YES", EW_MUL_BYPASS="YES",
              EW_LUT_BYPASS="YES")
        return
    b.reg("SDP", "D_DP_EW_CFG", EW_BYPASS="NO",
          EW_ALU_BYPASS="NO" if stage.alu else "YES",
          EW_ALU_ALGO=ALU_ALGO[stage.alu] if stage.alu else "MAX",
          EW_MUL_BYPASS="NO" if stage.mul else "YES",
          EW_MUL_PRELU="YES" if stage.mul == "prelu" else "NO",
          EW_LUT_BYPASS="NO" if stage.lut is not None else "YES")
    parts = []
    if stage.alu:
        parts.append(("ALU", stage.alu_operand, stage.alu_cvt))
    if stage.mul:
        parts.append(("MUL", stage.mul_operand, stage.mul_cvt))
    for part, operand, cvt in parts:
        memory = _is_memory(operand)
        b.reg("SDP", f"D_DP_EW_{part}_CFG", **{f"EW_{part}_SRC": "MEM" if memory else "REG",
                                              f"EW_{part}_CVT_BYPASS": "NO" if cvt else "YES"})
        if not memory:
            b.word("SDP", f"D_DP_EW_{part}_SRC_VALUE",
                   register_operand(operand, dtype, f"SDP.EW_{part}_OPERAND"))
        elif cvt is not None:
            b.word("SDP", f"D_DP_EW_{part}_CVT_OFFSET_VALUE", cvt.offset)
            b.reg("SDP", f"D_DP_EW_{part}_CVT_SCALE_VALUE", **{f"EW_{part}_CVT_SCALE": cvt.scale})
            b.reg("SDP", f"D_DP_EW_{part}_CVT_TRUNCATE_VALUE",
                  **{f"EW_{part}_CVT_TRUNCATE": cvt.shift})
    b.reg("SDP", "D_DP_EW_TRUNCATE_VALUE", EW_TRUNCATE=stage.truncate)


def emit_sdp(b: ProgramBuilder, alloc: Allocator, layer: SdpLayer, src: TensorPlacement,
             dst: TensorPlacement | None, pdp: tuple[PdpLayer, TensorPlacement] | None = None) -> str:
    """One SDP hardware layer reading `src` from memory, writing `dst` (or, with `pdp`, streaming
    to PDP); returns its completion sync id."""
    shape = (src.channels, src.height, src.width)
    if dst is not None and (dst.channels, dst.height, dst.width) != shape:
        raise NvdlaSimError(f"{layer.name}: SDP keeps the cube size; {src.name} is "
                            f"{'x'.join(map(str, shape))}, {dst.name} "
                            f"{dst.channels}x{dst.height}x{dst.width}")
    if (dst is None) == (pdp is None):
        raise NvdlaSimError(f"{layer.name}: give either a destination or a PDP layer")
    units = ["SDP_RDMA", "SDP"] + (["PDP"] if pdp else [])
    groups = b.begin_layer(layer.name, units)
    write_sdp(b, alloc, layer, shape, src, dst, pdp)
    b.enable("SDP_RDMA")
    if pdp is not None:
        b.enable("PDP")
    b.enable("SDP")
    done = [b.intr_notify("SDP", groups["SDP"])]
    if pdp is not None:
        done.append(b.intr_notify("PDP", groups["PDP"]))
    b.end_layer(*done)
    return done[-1]
