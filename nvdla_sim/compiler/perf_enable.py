"""Turn on the SDP performance counters of a compiled program without spending a CSB cycle.

The SDP counts LUT hits / under- and overflows, output-converter saturations and FP16 NaN
outputs only when its `D_PERF_ENABLE` bits of the register group it runs are set (C model
sdp_reg_model / NV_NVDLA_sdp.cpp; RTL NV_NVDLA_SDP_CORE_Y_lut `reg2dp_perf_lut_en`).  CACC
(`D_OUT_SATURATION`), CDP (LUT and saturation counters: its `LUT_EN` bit is not consulted by
the C model or the RTL datapath) and PDP count without an enable.

`D_PERF_ENABLE` is a dual register that nothing clears, so each SDP register group needs it
written once per program.  Every register write costs the CSB master a cycle (timing/params.yaml
`csb`), and the cycles of a compiled network must not depend on whether its counters are read,
so the write takes the CSB slot of a redundant one: the first SDP layer on each register group
finds the group fresh, holding reset values, and its register block always writes some SDP
register with its reset value (a zero address HIGH word, a zero converter offset, ...).  That
write changes nothing; `D_PERF_ENABLE` replaces it, so the write count, the order of the
other writes and every cycle stay as they were.  (Were there no such write, `D_PERF_ENABLE`
would be added before the layer's OP_ENABLE, at the cost of one cycle.)
"""
from __future__ import annotations

from ..program import RegWrite
from .emit import ProgramBuilder

PERF_FIELDS = ("PERF_LUT_EN", "PERF_SAT_EN", "PERF_NAN_INF_COUNT_EN")


def enable_perf_counters(b: ProgramBuilder, steps: list) -> None:
    """Set SDP `D_PERF_ENABLE` in both register groups of the program `b` is building, free of
    CSB cycles (module doc).  `steps` (compiler.lower.Step: first_command / end_command into
    b.commands) are shifted over inserted commands."""
    regmap = b.regmap
    if "SDP" not in regmap.units:
        return
    unit = regmap.units["SDP"]
    base = regmap.base("SDP")
    perf = unit.regs.get("D_PERF_ENABLE")
    if perf is None:
        return
    ptr_reg, op_reg = unit.regs["S_POINTER"], unit.regs["D_OP_ENABLE"]
    ptr_addr, op_addr, perf_addr = base + ptr_reg.offset, base + op_reg.offset, base + perf.offset
    value = 0
    for name in PERF_FIELDS:
        if name in perf.fields:
            value |= 1 << perf.fields[name].lo
    cmds = b.commands
    if any(c.addr == perf_addr for c in cmds if type(c) is RegWrite):
        return                              # the program sets them itself
    layers = _first_sdp_layers(cmds, ptr_addr, op_addr)
    if not layers:
        return
    write = RegWrite(perf_addr, value, "SDP.D_PERF_ENABLE")
    for group in (0, 1):
        first = layers.get(group)
        if first is None:
            continue
        ptr_at, op_at = first
        slot = _redundant_write(cmds, ptr_at, op_at, base, unit)
        if slot is not None:
            cmds[slot] = write
        else:
            _insert(cmds, steps, op_at, [write])
            layers = _first_sdp_layers(cmds, ptr_addr, op_addr)


def _first_sdp_layers(cmds: list, ptr_addr: int, op_addr: int) -> dict[int, tuple[int, int]]:
    """Group -> (index of the S_POINTER write, index of the OP_ENABLE write) of the first SDP
    layer in that register group (the scan stops when both groups have one)."""
    out, producer, ptr_at = {}, 0, 0
    for i, c in enumerate(cmds):
        if type(c) is not RegWrite:
            continue
        if c.addr == ptr_addr:
            producer, ptr_at = c.value & 1, i
        elif c.addr == op_addr and c.value & 1 and producer not in out:
            out[producer] = (ptr_at, i)
            if len(out) == 2:
                break
    return out


def _redundant_write(cmds: list, start: int, end: int, base: int, unit) -> int | None:
    """Index of an SDP dual-register write in cmds[start:end] that writes the register's reset
    value and is the only write to it there (in a never-used group it changes nothing)."""
    seen: dict[int, list[int]] = {}
    for i in range(start + 1, end):
        c = cmds[i]
        if isinstance(c, RegWrite) and c.addr & ~0xFFF == base:
            seen.setdefault(c.addr - base, []).append(i)
    for offset, where in seen.items():
        reg = unit.by_offset.get(offset)
        if reg is None or len(where) != 1 or not unit.is_dual(offset) \
                or reg.name in ("D_OP_ENABLE", "D_PERF_ENABLE"):
            continue
        if cmds[where[0]].value == reg.reset_value:
            return where[0]
    return None


def _insert(cmds: list, steps: list, at: int, new: list) -> None:
    """Insert `new` at index `at` (inside a step: its OP_ENABLE follows)."""
    cmds[at:at] = new
    n = len(new)
    for step in steps:
        if step.first_command >= at:
            step.first_command += n
        if step.end_command >= at:
            step.end_command += n
