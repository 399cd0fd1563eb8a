"""The LUT memory of SDP and CDP: LE (65 entries) and LO (257 entries) int16 tables.

Both units load it the same way through single (not per-group) registers: S_LUT_ACCESS_CFG sets
the table (LUT_TABLE_ID 0 = LE, 1 = LO), the start address and the access type; each
S_LUT_ACCESS_DATA write in write mode stores one signed 16-bit entry and advances the address,
which stops at the table's last entry (later writes overwrite it).
"""
from __future__ import annotations

import numpy as np

from ..regs import UnitRegisters
from ..regs.regmap import UnitDef

from ..kernels.sdp import LE_ENTRIES, LO_ENTRIES   # the same LUT memory in SDP and CDP
TABLE_LE, TABLE_LO = 0, 1
ACCESS_WRITE = 1


class LutMemory:
    def __init__(self, definition: UnitDef):
        self._cfg = definition.regs["S_LUT_ACCESS_CFG"].fields
        self.le = np.zeros(LE_ENTRIES, np.int64)
        self.lo = np.zeros(LO_ENTRIES, np.int64)
        self.table_id = TABLE_LE
        self.address = 0
        self.write_mode = False

    def install(self, regs: UnitRegisters) -> "LutMemory":
        """Hook the access registers of `regs` (the unit's register storage) to this memory."""
        d = regs.definition.regs
        regs.write_hooks[d["S_LUT_ACCESS_CFG"].offset] = self.on_access_cfg
        regs.write_hooks[d["S_LUT_ACCESS_DATA"].offset] = self.on_access_data
        return self

    def _field(self, name: str, word: int) -> int:
        f = self._cfg[name]
        return (word & f.mask) >> f.lo

    def on_access_cfg(self, value: int, group: int = 0) -> None:
        self.table_id = self._field("LUT_TABLE_ID", value)
        self.address = self._field("LUT_ADDR", value)
        self.write_mode = self._field("LUT_ACCESS_TYPE", value) == ACCESS_WRITE

    def on_access_data(self, value: int, group: int = 0) -> None:
        if not self.write_mode:
            return
        table = self.lo if self.table_id == TABLE_LO else self.le
        last = table.size - 1
        if self.address > last:
            return          # LUT_ADDR beyond the table: no entry there to write
        raw = value & 0xFFFF
        table[self.address] = raw - 0x10000 if raw & 0x8000 else raw
        if self.address < last:
            self.address += 1
