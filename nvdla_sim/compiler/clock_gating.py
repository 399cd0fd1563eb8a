"""A register-level workaround for the clock-gating hang (hardware config `clock_gating: true`).

The hang (units/cdma_gating.py): CDMA's weight-entry counter runs on CDMA's gated clock, which
stops when CDMA's own layer is done (everything fetched), so the weight releases CSC sends while
it finishes the layer are lost, and a later layer's weight fetch waits for entries forever.

The gated clock follows OP_EN of CDMA's *consumer* register group.  When CDMA's next layer is
already enabled in the other group as CDMA finishes, the consumer pointer flips to an enabled
group and the clock never stops.  Enabling it early is safe when its D_BANK split differs from
the running layer's: CDMA then waits in its PEND state (NV_NVDLA_CDMA_wt.v / _dc.v
`need_pending`) -- fetching nothing, clock running -- until CSC starts that layer and sends its
pending request, which is after the host has seen the running layer's interrupt, so the input
the next layer reads is in memory by then.  `cdma_ahead` moves each such layer's CDMA writes
(S_POINTER, its registers, OP_ENABLE) to just before the host waits for the previous
convolution layer.  A layer with the same split as the previous one would start fetching at
once (possibly before its input is written), so it is left in place; so is the first layer.
The last layer's releases are still lost: the counter keeps them until a reset.

Given the hardware (`hw`), a layer with the previous layer's split gets another one where it can
(`_respill`): one weight bank more if a bank is free, one fewer if its weights still fit (all of
them when kept, else a kernel group), or one data bank fewer if its input still fits; layers that
reuse the previous layer's data or weights keep its split together with it.  CDMA.D_BANK and
CSC.D_BANK change alike.
"""
from __future__ import annotations

from dataclasses import replace

from ..program import RegisterProgram, RegWrite, SyncWait
from ..regs import register_map


def _is_cdma(cmd) -> bool:
    return isinstance(cmd, RegWrite) and cmd.name.startswith("CDMA.")


def _is_enable(cmd) -> bool:
    return isinstance(cmd, RegWrite) and cmd.name.endswith("D_OP_ENABLE") and bool(cmd.value & 1)


class _Layer:
    """One CDMA layer's register writes (command indices) and the fields the split needs."""

    def __init__(self, cmds: list, idx: list[int], csc_bank: int | None, regmap):
        self.idx, self.csc_bank = idx, csc_bank
        cdma = regmap.unit("CDMA")
        self.values = {}
        for i in idx:
            reg = cmds[i].name.split(".", 1)[1]
            self.values[reg] = cmds[i].value
        self._cdma = cdma

    def field(self, reg: str, name: str, default: int = 0) -> int:
        if reg not in self.values:
            return default
        f = self._cdma.regs[reg].fields[name]
        return (self.values[reg] & f.mask) >> f.lo

    @property
    def split(self) -> tuple[int, int] | None:
        if "D_BANK" not in self.values:
            return None
        return self.field("D_BANK", "DATA_BANK") + 1, self.field("D_BANK", "WEIGHT_BANK") + 1

    @property
    def reuses(self) -> bool:
        return bool(self.field("D_MISC_CFG", "DATA_REUSE") or self.field("D_MISC_CFG", "WEIGHT_REUSE"))

    @property
    def keeps_weights(self) -> bool:
        return bool(self.field("D_MISC_CFG", "SKIP_WEIGHT_RLS"))


def _needs(chain: list[_Layer], hw) -> tuple[int, int] | None:
    """Banks the chain's input and weights need at least (None: cannot tell)."""
    depth, entry = hw.cbuf.bank_depth, hw.cbuf.bank_width_bytes
    data = weight = 0
    for layer in chain:
        if layer.field("D_WEIGHT_FORMAT", "WEIGHT_FORMAT"):
            return None                     # compressed: the WMB has its own rules
        if layer.field("D_DATAIN_FORMAT", "DATAIN_FORMAT") or layer.field("D_MISC_CFG", "CONV_MODE"):
            data = max(data, layer.split[0])     # image / Winograd input: keep its data banks
        else:
            entries = (layer.field("D_ENTRY_PER_SLICE", "ENTRIES") + 1) * \
                (layer.field("D_DATAIN_SIZE_0", "DATAIN_HEIGHT") + 1)
            data = max(data, -(-entries // depth))
        kernels = layer.field("D_WEIGHT_SIZE_1", "WEIGHT_KERNEL") + 1
        per_kernel = layer.field("D_WEIGHT_SIZE_0", "BYTE_PER_KERNEL") + 1
        whole = layer.field("D_WEIGHT_BYTES", "WEIGHT_BYTES")
        need = whole if any(x.keeps_weights or x.reuses for x in chain) else \
            min(kernels, hw.atomic_k) * per_kernel
        weight = max(weight, -(-need // entry), -(-whole // entry) if len(chain) > 1 else 0)
    return data, -(-weight // depth)


def _respill(chain: list[_Layer], previous: tuple[int, int], following: tuple[int, int] | None,
             hw) -> tuple[int, int] | None:
    """Another split for the chain than `previous` (and, if possible, `following`)."""
    needs = _needs(chain, hw)
    if needs is None:
        return None
    d, w = chain[0].split
    total = hw.cbuf.banks
    options = [(d, w + 1), (d, w - 1), (d - 1, w), (d - 1, w + 1), (d + 1, w), (d + 1, w - 1)]
    fits = [(a, b) for a, b in options if a >= max(1, needs[0]) and b >= max(1, needs[1])
            and a + b <= total and (a, b) != previous]
    better = [x for x in fits if x != following]
    return (better or fits or [None])[0]


def _set_split(cmds: list, layer: _Layer, split: tuple[int, int], regmap) -> None:
    for i in [*layer.idx, layer.csc_bank]:
        if i is None or not cmds[i].name.endswith("D_BANK"):
            continue
        unit = regmap.unit(cmds[i].name.split(".", 1)[0])
        fields = unit.regs["D_BANK"].fields
        value = cmds[i].value & ~(fields["DATA_BANK"].mask | fields["WEIGHT_BANK"].mask)
        value |= ((split[0] - 1) << fields["DATA_BANK"].lo) | ((split[1] - 1) << fields["WEIGHT_BANK"].lo)
        cmds[i] = replace(cmds[i], value=value)
    layer.values["D_BANK"] = next(cmds[i].value for i in layer.idx
                                  if cmds[i].name == "CDMA.D_BANK")


def cdma_ahead(program: RegisterProgram, hw=None) -> tuple[RegisterProgram, int, int]:
    """The program with CDMA layers enabled ahead (see the module doc); returns it, how many
    layers moved and how many could not (same D_BANK split as the previous layer).  With `hw`,
    such layers first get another split where they can."""
    cmds = list(program.commands)
    # Each CDMA layer: the indices of its writes, up to and including its OP_ENABLE.
    layers: list[list[int]] = []
    current: list[int] = []
    for i, cmd in enumerate(cmds):
        if _is_cdma(cmd) and not cmd.name.startswith("CDMA.S_CBUF_FLUSH"):
            current.append(i)
            if _is_enable(cmd):
                layers.append(current)
                current = []
    moved, kept = 0, 0
    moves: dict[int, list[int]] = {}      # insert position -> writes moved there
    taken: set[int] = set()
    if hw is not None:
        _respill_all(cmds, layers, hw)
    bank = [next((cmds[i].value for i in idx if cmds[i].name.startswith("CDMA.D_BANK")), None)
            for idx in layers]
    for n in range(1, len(layers)):
        if bank[n] is None or bank[n] == bank[n - 1]:
            kept += 1
            continue
        prev_enable = layers[n - 1][-1]
        wait = next((j for j in range(prev_enable + 1, layers[n][0])
                     if isinstance(cmds[j], SyncWait)), None)
        if wait is None:                  # nothing waits in between: already ahead
            continue
        moves.setdefault(wait, []).extend(layers[n])
        taken.update(layers[n])
        moved += 1
    out = []
    for i, cmd in enumerate(cmds):
        out.extend(cmds[j] for j in moves.get(i, ()))
        if i not in taken:
            out.append(cmd)
    return RegisterProgram(program.name, out, getattr(program, "source", None)), moved, kept


def _respill_all(cmds: list, layers: list[list[int]], hw) -> None:
    """Give each chain of layers (a layer and those reusing its data or weights) a split other
    than the previous chain's, where one fits."""
    regmap = register_map(hw.nvdla_version)
    parsed = []
    for n, idx in enumerate(layers):
        start = layers[n - 1][-1] if n else -1
        csc = [i for i in range(start + 1, idx[-1]) if isinstance(cmds[i], RegWrite)
               and cmds[i].name == "CSC.D_BANK"]
        parsed.append(_Layer(cmds, idx, csc[-1] if csc else None, regmap))
    chains: list[list[_Layer]] = []
    for layer in parsed:
        if chains and layer.reuses:
            chains[-1].append(layer)
        else:
            chains.append([layer])
    for c in range(1, len(chains)):
        chain, previous = chains[c], chains[c - 1][-1].split
        if chain[0].split is None or previous is None or chain[0].split != previous:
            continue
        if any(x.csc_bank is None or x.split != chain[0].split for x in chain):
            continue
        following = chains[c + 1][0].split if c + 1 < len(chains) else None
        split = _respill(chain, previous, following, hw)
        if split is not None:
            for layer in chain:
                _set_split(cmds, layer, split, regmap)
