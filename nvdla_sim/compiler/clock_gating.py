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
"""
from __future__ import annotations

from ..program import RegisterProgram, RegWrite, SyncWait


def _is_cdma(cmd) -> bool:
    return isinstance(cmd, RegWrite) and cmd.name.startswith("CDMA.")


def _is_enable(cmd) -> bool:
    return isinstance(cmd, RegWrite) and cmd.name.endswith("D_OP_ENABLE") and bool(cmd.value & 1)


def cdma_ahead(program: RegisterProgram) -> tuple[RegisterProgram, int, int]:
    """The program with CDMA layers enabled ahead (see the module doc); returns it, how many
    layers moved and how many could not (same D_BANK split as the previous layer)."""
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
