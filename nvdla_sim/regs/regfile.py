"""Register files: single (S_*) registers, dual (D_*) register groups, producer/consumer pointers.

Semantics follow the NVDLA C model register models: every offset at or above D_OP_ENABLE exists
once per register group; CSB writes to dual registers go to the group S_POINTER.PRODUCER selects;
the hardware executes groups in turn (consumer 0, 1, 0, ...) as their OP_EN is set, and clears
OP_EN when the layer is done.  Writes to read-only fields are ignored.
"""
from __future__ import annotations

from typing import Callable

from .regmap import RegisterMap, RegisterDef, UnitDef


class GroupView:
    """One unit's registers as one register group sees them, decoded by field name."""

    def __init__(self, unit: "UnitRegisters", group: int):
        self._unit = unit
        self.group = group

    @property
    def unit_name(self) -> str:
        return self._unit.definition.name

    def word(self, reg: str) -> int:
        return self._unit.read_word(self._unit.definition.regs[reg], self.group)

    def field(self, reg: str, field: str) -> int:
        """Unsigned value of REG.FIELD (register names without the trailing _0)."""
        r = self._unit.definition.regs[reg]
        f = r.fields[field]
        return (self._unit.read_word(r, self.group) & f.mask) >> f.lo

    def sfield(self, reg: str, field: str, bits: int | None = None) -> int:
        """REG.FIELD as a two's-complement value of `bits` bits (default: the field's width)."""
        f = self._unit.definition.regs[reg].fields[field]
        width = bits if bits is not None else f.hi - f.lo + 1
        v = self.field(reg, field) & ((1 << width) - 1)
        return v - (1 << width) if v >> (width - 1) else v

    def addr(self, low_reg: str, high_reg: str | None = None) -> int:
        """A 64-bit address from its LOW (and optional HIGH) register words."""
        low = self.word(low_reg)
        return low | (self.word(high_reg) << 32) if high_reg else low


class UnitRegisters:
    """The register storage of one unit."""

    def __init__(self, definition: UnitDef):
        self.definition = definition
        # offsets from here up are dual (UnitDef.is_dual, as one comparison per access)
        op = definition.op_enable_offset
        self.dual_from = op if op is not None else 1 << 32
        self.single: dict[int, int] = {}
        self.dual: list[dict[int, int]] = [{}, {}]
        self.producer = 0
        self.consumer = 0
        # Hooks the engine installs: called after a write lands (offset, value, group).
        self.write_hooks: dict[int, Callable[[int, int], None]] = {}
        # Observers of hardware-side updates (reg name, value, group): report/statistics.py
        # takes each layer's statistics registers as the unit writes them.
        self.update_hooks: list[Callable[[str, int, int | None], None]] = []
        for reg in definition.regs.values():
            self._store(reg, None)[reg.offset] = reg.reset_value

    def _store(self, reg: RegisterDef, group: int | None) -> dict[int, int]:
        if reg.offset >= self.dual_from:
            return self.dual[self.producer if group is None else group]
        return self.single

    def read_word(self, reg: RegisterDef, group: int | None = None) -> int:
        if reg.name == "S_POINTER":
            return self.producer | (self.consumer << 16)
        store = self._store(reg, group)
        if reg.offset not in store:
            store[reg.offset] = reg.reset_value
        return store[reg.offset]

    def csb_write(self, reg: RegisterDef, value: int) -> None:
        if reg.name == "S_POINTER":
            self.producer = value & 1
            return
        mask = reg.writable_mask
        if mask == 0:
            return
        if reg.offset >= self.dual_from:
            group = self.producer
            store = self.dual[group]
        else:
            group, store = None, self.single
        old = store.get(reg.offset, reg.reset_value)
        store[reg.offset] = (old & ~mask) | (value & mask)
        hook = self.write_hooks.get(reg.offset)
        if hook is not None:
            hook(value & 0xFFFFFFFF, group if group is not None else 0)

    def set_word(self, reg_name: str, value: int, group: int | None = None) -> None:
        """Hardware-side update (status, counters, OP_EN clear): bypasses the access rules."""
        reg = self.definition.regs[reg_name]
        self._store(reg, group)[reg.offset] = value & 0xFFFFFFFF
        for hook in self.update_hooks:
            hook(reg_name, value & 0xFFFFFFFF, group)

    def view(self, group: int) -> GroupView:
        return GroupView(self, group)


class RegisterFile:
    """Every unit's registers, addressed by CSB byte address or by name."""

    def __init__(self, regmap: RegisterMap):
        self.map = regmap
        self.units = {name: UnitRegisters(u) for name, u in regmap.units.items()}
        self._targets: dict[int, tuple[UnitRegisters, RegisterDef | None]] = {}

    def __getitem__(self, unit: str) -> UnitRegisters:
        return self.units[unit]

    def write(self, addr: int, value: int) -> None:
        hit = self._targets.get(addr)
        if hit is None:
            unit, reg = self.map.decode_address(addr)
            hit = self._targets[addr] = (self.units[unit.name], reg)
        unit_regs, reg = hit
        if reg is None:
            return  # undefined offsets inside a unit: the hardware ignores them
        unit_regs.csb_write(reg, value)   # (looked up per write: the step cache wraps it)

    def read(self, addr: int) -> int:
        unit, reg = self.map.decode_address(addr)
        if reg is None:
            return 0
        return self.units[unit.name].read_word(reg)
