"""CDMA's weight-entry counter under clock gating (hardware config `clock_gating: true`).

What the RTL does (nvdla/hw master, vmod/nvdla/cdma):
- NV_NVDLA_CDMA_wt.v counts the weight entries it has written into CBUF and CSC has not released
  yet in `wt_wr_dmatx_cnt`: +1 per CBUF write, minus `sc_wt_entries` in the cycle `sc_wt_updt`
  is high.  A DMA response is taken only while the counter is below WEIGHT_BANK x bank depth
  (`dma_rd_rsp_rdy`), so the counter is the weight fetch's flow control.  Only reset clears it.
- The counter is clocked by CDMA's gated weight clock (`nvdla_op_gated_clk_wt`, NV_NVDLA_cdma.v:
  u_slcg_wt enabled by `slcg_op_en[0]`), while the release (`sc_wt_updt`, `sc_wt_entries`) is
  flopped on the ungated clock: a one-cycle pulse.
- `slcg_op_en` is CDMA's OP_EN of its consumer register group delayed by three flops
  (NV_NVDLA_CDMA_regfile.v); OP_EN clears when CDMA's layer is done (NV_NVDLA_CDMA_status.v:
  weights and data fetched), not when CSC is.
- CSC releases a kernel group's entries when it has issued the group's last stripe
  (NV_NVDLA_CSC_sg.v `wt_release`, NV_NVDLA_CSC_wl.v `sub_rls`), and a SKIP_WEIGHT_RLS layer's
  entries when the next layer that does not reuse them starts (`wt_reuse_release`).

So with gating on, every release that reaches CDMA while its consumer group is not enabled is
lost: the counter stays that many entries above what CBUF holds, for good.  A later layer whose
weight fetch needs more entries than WEIGHT_BANK x depth minus the lost ones never completes (a
kernel group never lands whole, CSC never starts it, nothing is ever released again).

Modelled here: the window in which CDMA's gated clock runs (from its layer start to its end,
each edge `SLCG_DELAY_CYCLES` late) and the releases outside it, which stay in the CBUF weight
pool (timing/conv.py) instead of returning to it.  Inferred rather than read: the release cycle
is the model's kernel-group end (the RTL's pulse leaves a few cycles after the group's last
stripe issues), which matters only when CDMA's layer ends within those cycles.
"""
from __future__ import annotations

from dataclasses import dataclass, field

SLCG_DELAY_CYCLES = 3         # slcg_op_en_d1..d3: OP_EN -> the gated clock, both edges


@dataclass
class LostRelease:
    cycle: float
    entries: float
    layer: int                # CSC's hardware layer (0-based, the run's order) that released


@dataclass
class WeightClock:
    """CDMA's gated weight clock and the weight-entry releases it missed."""
    enabled: bool
    running: bool = False
    on_at: float = 0.0                    # the clock ticks from here while running
    off_at: float = float("-inf")         # ... and until here after the layer ended
    layers: int = 0                       # CDMA layers started
    lost: list[LostRelease] = field(default_factory=list)
    fetch: dict | None = None             # the running layer's weight fetch, for the hang report
    pool: object = None                   # the CBUF weight pool (timing/conv.py) of that fetch

    def start(self, now: float) -> None:
        self.running = True
        self.on_at = now + SLCG_DELAY_CYCLES
        self.layers += 1

    def stop(self, now: float) -> None:
        self.running = False
        self.off_at = now + SLCG_DELAY_CYCLES
        self.fetch = None

    def ticking(self, now: float) -> bool:
        return now < self.off_at or (self.running and now >= self.on_at)

    @property
    def lost_entries(self) -> float:
        return sum(x.entries for x in self.lost)

    def release(self, pool, entries: float, now: float, layer: int) -> None:
        """CSC releases `entries` weight entries at `now`: back to the pool, unless the gated
        counter does not see the pulse."""
        if not self.enabled or self.ticking(now):
            pool.release(entries)
            self.counted(entries, layer)
        elif entries:
            self.lost.append(LostRelease(now, entries, layer))

    def begin_fetch(self, layer: int, group_entries: list[float]) -> None:
        """The running CDMA layer fetches these kernel groups (entries each), for the report."""
        ends, acc = [], 0.0
        for n in group_entries:
            acc += n
            ends.append(acc)
        self.fetch = {"layer": layer, "ends": ends, "released": 0.0}

    def counted(self, entries: float, layer: int) -> None:
        if self.fetch is not None and layer == self.fetch["layer"]:
            self.fetch["released"] += entries

    def describe_hang(self, pool) -> str | None:
        """The deadlock as the RTL has it, when lost releases keep the weight fetch waiting."""
        if not self.enabled or not self.lost or self.fetch is None or pool is None:
            return None
        used = pool.capacity - pool.free
        lost = self.lost_entries
        written = used - lost + self.fetch["released"]     # this layer's entries so far
        ends = self.fetch["ends"]
        group = next((g for g, e in enumerate(ends) if e > written + 1e-6), None)
        if group is None:
            return None
        missing = used + ends[group] - written - pool.capacity
        if missing <= 0:
            return None
        per_layer: dict[int, float] = {}
        for x in self.lost:
            per_layer[x.layer] = per_layer.get(x.layer, 0.0) + x.entries
        detail = ", ".join(f"convolution layer {k}: {v:g}" for k, v in sorted(per_layer.items()))
        need = ends[group] - (ends[group - 1] if group else 0.0)
        return (f"CDMA's weight fetch of convolution layer {self.fetch['layer']} hangs "
                f"(clock_gating: true): wt_wr_dmatx_cnt counts {used:g} weight entries and takes "
                f"responses only below {pool.capacity:g} (the weight banks' entries), so kernel group "
                f"{group} ({need:g} entries) never lands whole: {missing:g} entries missing, "
                f"because {lost:g} entries CSC released while CDMA's gated clock was off were "
                f"never subtracted ({detail}); clock_gating: false completes, so does the "
                f"workaround compile --emit-cfg emits (docs/network-timing.md)")
