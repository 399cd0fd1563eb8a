"""ProgramBuilder: write NVDLA register programs by register and field name.

Emitters (emit_pdp, emit_cdp, emit_sdp, emit_conv) describe hardware layers through this builder:

    b = ProgramBuilder(hw, "lenet")
    groups = b.begin_layer("pool1", ["PDP_RDMA", "PDP"])   # next register group of each unit
    b.reg("PDP", "D_POOLING_KERNEL_CFG", KERNEL_WIDTH=1, KERNEL_HEIGHT=1)
    b.enable("PDP_RDMA"); b.enable("PDP")
    b.end_layer(b.intr_notify("PDP", groups["PDP"]))
    program = b.build()

Register and field names are those of the register map (`nvdla_sim/regs`); a field value is an int
(negative values are written in two's complement if they fit the field) or an enum name of the
field ("MAX", "MC", ...).  Unnamed fields of a written register are 0, as the NVDLA firmware
writes them.  Unknown registers or fields, values that do not fit and writes to read-only fields
are errors.

Layers run one after another: `begin_layer` makes the register stream of each unit of the new
layer wait (`sync_wait(NVDLA_<unit>, id)`) for the completion interrupt of every layer still
running, so a layer never reads memory its predecessor has not finished writing, and a register
group is never reprogrammed while it runs.  Each unit runs its register groups in turn (0, 1, 0,
...), so `begin_layer` points S_POINTER.PRODUCER at the group the unit will execute next.
`build()` masks in GLB S_INTR_MASK every interrupt the program does not wait for (the RTL trace
player stops on an unexpected unmasked interrupt).  The Verilator trace flow ignores sync_wait
(it loads memory, writes every register, then waits), so a program of several dependent layers
replays there only when written one layer per trace.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable

import numpy as np

from ..config import HardwareConfig
from ..datatype import FP16, INT8, INT16, DataType
from .. import formats
from ..errors import NvdlaSimError
from ..formats import FeatureLayout
from ..formats.feature import pack_feature_layout
from ..program import (CheckCrc, CheckNothing, IntrNotify, MemFill, MemLoad, PollRegEqual,
                       RegisterProgram, RegWrite, SyncWait)
from ..regs import register_map
from ..regs.regmap import FieldDef, RegisterDef
from .placement import Buffer, TensorPlacement

# GLB S_INTR_STATUS/MASK field stem of each interrupt source (reference map 2.6).
INTR_FIELD = {"SDP": "SDP", "CDP": "CDP", "PDP": "PDP", "BDMA": "BDMA", "RUBIK": "RUBIK",
              "CDMA_DAT": "CDMA_DAT", "CDMA_WT": "CDMA_WT", "CACC": "CACC"}
DBB_ADDRESS_BIT = 1 << 31        # trace commands route to DBB when address bit 31 is set
CRC_MEM_DBB = "1"        # what most official checks say for DBB (the Verilator flow's only form)


@dataclass(frozen=True)
class Converter:
    """An NVDLA converter stage: out = (in - offset) * scale >> shift, rounded half away from
    zero and saturated (CDMA/CDP input converters, SDP/CDP output converters, SDP EW operand
    converters).  The identity is offset 0, scale 1, shift 0."""
    offset: int = 0
    scale: int = 1
    shift: int = 0


IDENTITY = Converter()


def element_type(array, where: str) -> DataType:
    """The element type an array of values holds (int8, int16 or float16)."""
    kind = np.asarray(array).dtype
    for dtype in (INT8, INT16, FP16):
        if kind == dtype.numpy:
            return dtype
    raise NvdlaSimError(f"{where}: {kind} is not an element type (int8, int16, float16)")


def mem_name(address: int) -> str:
    return "pri_mem" if address & DBB_ADDRESS_BIT else "sec_mem"


def encode_field(reg: RegisterDef, fdef: FieldDef, value: int | str) -> int:
    """The bits of REG.FIELD = value, placed in the register word."""
    where = f"{reg.unit}.{reg.name}.{fdef.name}"
    if isinstance(value, str):
        if not fdef.enum or value not in fdef.enum:
            known = ", ".join(sorted(fdef.enum)) if fdef.enum else "none"
            raise NvdlaSimError(f"{where}: unknown value name '{value}' (known: {known})")
        value = fdef.enum[value]
    if isinstance(value, (bool, np.bool_)):
        value = int(value)
    if not isinstance(value, (int, np.integer)):
        raise NvdlaSimError(f"{where}: value {value!r} is not an integer")
    value = int(value)
    width = fdef.hi - fdef.lo + 1
    if not -(1 << (width - 1)) <= value < (1 << width):
        raise NvdlaSimError(f"{where}: value {value} does not fit the {width}-bit field")
    if fdef.access == "r":
        raise NvdlaSimError(f"{where}: field is read-only")
    return (value & ((1 << width) - 1)) << fdef.lo


def sync_name(layer: str) -> str:
    """A layer name as a sync id may hold it: nvdla/hw's trace parser
    (verif/tools/nvdla_trace_parser.py) takes sync ids of word characters only, so every other
    character (the dot of `conv2.g0`, ONNX's `/` and `:`) becomes `_`."""
    out = "".join(c if c.isascii() and (c.isalnum() or c == "_") else "_" for c in layer)
    return out or "layer"


class ProgramBuilder:
    """Accumulates the commands of one RegisterProgram (see the module doc)."""

    def __init__(self, hw: HardwareConfig, name: str = "program", images: bool = True):
        """`images` False: memory images are left out (a timing-only program, whose engine
        never reads memory contents); buffers are still allocated and addressed."""
        self.hw = hw
        self.name = name
        self.images = images
        self.regmap = register_map(hw.nvdla_version)
        self._targets = self.regmap.write_targets   # (unit, register) -> RegisterMap.target
        self.commands: list = []
        # per-channel SDP operand bytes by the operand objects (emit_sdp.place_operands)
        self.operand_images: dict = {}
        self._next_group: dict[str, int] = {}
        self._pending: list[str] = []        # completion sync ids of layers not yet waited for
        self._armed: set[str] = set()
        self._layer_names: list[str] = []
        self._sync_bases: list[str] = []    # each layer's name as sync ids spell it (sync_name)

    # -- registers -------------------------------------------------------------------------------
    def _register(self, unit: str, register: str) -> tuple[str, RegisterDef]:
        try:
            u, r = self.regmap.resolve(unit, register)
        except KeyError as exc:
            raise NvdlaSimError(f"{exc.args[0]}") from None
        return u.name, r

    def _target(self, unit: str, register: str) -> tuple[str, RegisterDef, int, str]:
        """`RegisterMap.target` (cached there: `self._targets` is its table) as an NvdlaSimError."""
        try:
            return self.regmap.target(unit, register)
        except KeyError as exc:
            raise NvdlaSimError(f"{exc.args[0]}") from None

    def reg(self, unit: str, register: str, value: int | None = None, **fields) -> int:
        """Write one register: `value` (whole word, default 0) with the named fields set."""
        hit = self._targets.get((unit, register))
        if hit is None:
            hit = self._target(unit, register)
        unit_name, r, addr, name = hit
        word = 0 if value is None else int(value) & 0xFFFFFFFF
        if fields:
            codes = r.field_codes
            for field_name, field_value in fields.items():
                code = codes.get(field_name)
                if code is None:
                    raise NvdlaSimError(f"{unit_name}.{r.name}: unknown field '{field_name}' "
                                        f"(fields: {', '.join(sorted(r.fields))})")
                mask, lo, low, high, names = code
                # a plain int or a value name that fits a writable field: encode_field's bits
                # without its checks (bools, numpy ints, errors: encode_field itself)
                v = names.get(field_value, field_value) if type(field_value) is str \
                    else field_value
                if type(v) is int and low <= v < high:
                    word = (word & ~mask) | ((v << lo) & mask)
                else:
                    word = (word & ~mask) | encode_field(r, r.fields[field_name], field_value)
        self.commands.append(RegWrite(addr, word, name))
        return word

    def word(self, unit: str, register: str, value: int) -> int:
        """Write a whole 32-bit word (address/stride registers); negative values wrap."""
        hit = self._targets.get((unit, register))
        if hit is None:
            hit = self._target(unit, register)
        word = int(value) & 0xFFFFFFFF
        self.commands.append(RegWrite(hit[2], word, hit[3]))
        return word

    def address(self, unit: str, low_reg: str, high_reg: str | None, address: int) -> None:
        """A 64-bit address as the firmware writes it: HIGH (if the unit has it) then LOW."""
        if high_reg is not None:
            self.word(unit, high_reg, address >> 32)
        elif address >> 32:
            raise NvdlaSimError(f"{unit}.{low_reg}: address 0x{address:x} needs more than 32 bits")
        self.word(unit, low_reg, address & 0xFFFFFFFF)

    def poll(self, unit: str, register: str, value: int) -> None:
        unit_name, r = self._register(unit, register)
        self.commands.append(PollRegEqual(self.regmap.base(unit_name) + r.offset, value,
                                          f"{unit_name}.{r.name}"))

    # -- layers, groups, interrupts --------------------------------------------------------------
    def begin_layer(self, name: str, units: Iterable[str]) -> dict[str, int]:
        """Start a hardware layer on `units`: wait for running layers, select each unit's group.
        A layer name used before gets a suffix (_2, _3, ...); sync ids derive from it."""
        units = [self._register(unit, "S_POINTER")[0] for unit in units]
        base, n = name, 1
        while name in self._layer_names:
            n += 1
            name = f"{base}_{n}"
        self._layer_names.append(name)
        self._sync_bases.append(self._unique_sync_base(name))
        # The RTL trace player runs each block's commands in its own thread: every block of the
        # new layer waits for the running layers itself.
        for sync_id in self._pending:
            for unit in units:
                self.commands.append(SyncWait(unit, sync_id))
        self._pending = []
        groups = {}
        for unit_name in units:
            group = self._next_group.get(unit_name, 0)
            self._next_group[unit_name] = group ^ 1
            self.reg(unit_name, "S_POINTER", PRODUCER=group)
            groups[unit_name] = group
        return groups

    def _unique_sync_base(self, layer: str) -> str:
        """`sync_name(layer)`, with a suffix when another layer's name spells the same."""
        base = name = sync_name(layer)
        n = 1
        while name in self._sync_bases:
            n += 1
            name = f"{base}_{n}"
        return name

    def enable(self, unit: str) -> None:
        self.reg(unit, "D_OP_ENABLE", OP_EN=1)

    def intr_notify(self, source: str, group: int, sync_id: str | None = None) -> str:
        """Arm a wait on <source><group>; returns the sync id."""
        if source not in INTR_FIELD:
            raise NvdlaSimError(f"intr_notify: unknown interrupt source '{source}'")
        if sync_id is None:
            layer = self._sync_bases[-1] if self._sync_bases else "program"
            sync_id = f"{layer}_{source}_{group}"
        if sync_id in self._armed:
            raise NvdlaSimError(f"intr_notify: sync id '{sync_id}' used twice")
        self._armed.add(sync_id)
        self.commands.append(IntrNotify(source, group, sync_id))
        return sync_id

    def end_layer(self, *completion: str) -> None:
        """The sync ids whose interrupts mean the layer is done (waited for by the next layer)."""
        self._pending.extend(completion)

    def sync_wait(self, sync_id: str, block: str = "GLB") -> None:
        if sync_id not in self._armed:
            raise NvdlaSimError(f"sync_wait: '{sync_id}' is not an armed interrupt")
        self.commands.append(SyncWait(block, sync_id))
        if sync_id in self._pending:
            self._pending.remove(sync_id)

    # -- memory and checks -----------------------------------------------------------------------
    def mem_fill(self, address: int, nbytes: int, value: int = 0) -> None:
        self.commands.append(MemFill(mem_name(address), address, nbytes, value))

    def mem_load(self, address: int, data, source: str = "", zero_fill: bool = True) -> None:
        """Place a byte image (any numpy array, viewed as bytes) at `address`.  With `zero_fill`
        the region is first cleared (`mem_init ... ALL_ZERO`), as the official traces do, so a
        .dat file may leave zero runs out whatever player loads it."""
        if not self.images:
            return
        image = np.ascontiguousarray(data).view(np.uint8).reshape(-1).copy()
        if zero_fill:
            self.mem_fill(address, image.size)
        self.commands.append(MemLoad(mem_name(address), address, image, source))

    def load_cube(self, placement: TensorPlacement, cube: np.ndarray, source: str = "") -> None:
        """Load a (C, H, W) cube into its placement (padding lanes and line gaps zero)."""
        if not self.images:
            return
        self.mem_load(placement.address, cube_image(placement, cube),
                      source or placement.name)

    def check_crc(self, sync_id: str, address: int, nbytes: int, expected: int = 0) -> None:
        """CRC-32 check of a region when `sync_id` fires; `expected` is usually filled in later by
        `simulate_crcs` from a run of the program."""
        mem = CRC_MEM_DBB if address & DBB_ADDRESS_BIT else "sec_mem"
        self.commands.append(CheckCrc(sync_id, mem, address, nbytes, expected))

    def check_output(self, sync_id: str, target: TensorPlacement | Buffer) -> None:
        self.check_crc(sync_id, target.address, target.size_bytes)

    def check_nothing(self, sync_id: str) -> None:
        self.commands.append(CheckNothing(sync_id))

    # -- result --------------------------------------------------------------------------------
    def intr_mask(self) -> int:
        """GLB S_INTR_MASK value masking every source/group the program does not wait for."""
        mask_reg = self._register("GLB", "S_INTR_MASK")[1]
        armed = {(c.source, c.group) for c in self.commands if isinstance(c, IntrNotify)}
        word = 0
        for source, stem in INTR_FIELD.items():
            for group in (0, 1):
                fdef = mask_reg.fields[f"{stem}_DONE_MASK{group}"]
                if (source, group) not in armed:
                    word |= fdef.mask
        return word

    def build(self) -> RegisterProgram:
        unit, r = self._register("GLB", "S_INTR_MASK")
        mask = RegWrite(self.regmap.base(unit) + r.offset, self.intr_mask(), f"{unit}.{r.name}")
        return RegisterProgram(self.name, [mask] + list(self.commands))


def feature_layout(placement: TensorPlacement) -> FeatureLayout:
    """The placement as a `formats.FeatureLayout` (an image placement: one pixel per atom)."""
    return FeatureLayout(placement.width, placement.height, placement.channels, placement.dtype,
                         placement.line_stride, placement.surf_stride, placement.atom)


def cube_image(placement: TensorPlacement, cube: np.ndarray) -> np.ndarray:
    """The bytes of the placement's footprint holding `cube` (C, H, W) in the feature format
    (`formats.pack_feature_layout`); the cube may include the padding lanes of the last surface."""
    cube = np.asarray(cube)
    c, h, w = cube.shape
    if (c, h, w) != (placement.channels, placement.height, placement.width) \
            and not (c == placement.lanes and (h, w) == (placement.height, placement.width)):
        raise NvdlaSimError(f"{placement.name}: cube of shape {cube.shape} does not match the "
                            f"placement {placement.channels}x{placement.height}x{placement.width}")
    # Not pack_feature: its alignment check is nv_full's table (nv_small atoms are 8 bytes).
    return pack_feature_layout(cube.astype(placement.dtype.numpy), feature_layout(placement))


def read_output(engine, placement: TensorPlacement) -> np.ndarray:
    """The (C, H, W) cube (of the placement's element type) in an engine's memory after a run."""
    raw = engine.memory.space(placement.ram_type).read(placement.address, placement.size_bytes)
    return formats.unpack_feature(raw, feature_layout(placement))


def simulate_crcs(program: RegisterProgram, hw: HardwareConfig, memory: str = "rtl_testbench"):
    """Run `program` and return (program with every check_crc's expected value set to what the
    simulator computed, the RunResult)."""
    from ..engine import Engine
    result = Engine(hw, memory).run(program)
    # Checks of one sync id are reported in program order.
    by_sync: dict[str, list[int]] = {}
    for c in result.checks:
        if c.kind == "crc":
            by_sync.setdefault(c.sync_id, []).append(c.actual)
    commands = []
    for cmd in program.commands:
        if isinstance(cmd, CheckCrc):
            cmd = replace(cmd, expected=by_sync[cmd.sync_id].pop(0))
        commands.append(cmd)
    return RegisterProgram(program.name, commands, program.source), result
