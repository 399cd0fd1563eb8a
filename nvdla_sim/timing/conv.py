"""Convolution timing: CDMA (data and weight channels) -> CBUF -> CSC -> CMAC -> CACC -> SDP.

Processes and tokens (docs/timing-model-notes.md, 3.3):

- CDMA_DAT books one read request (<= `cdma_request_atoms` atoms) at a time into CBUF data
  entries; when the last is booked it tells CSC when the whole input will be in CBUF (CSC starts a
  layer only then: RTL `dat_cbuf_ready`).
- CDMA_WT books weight requests into the weight ring (`weight_bank x depth + 8` entries, the RTL
  overflow check), waiting while it is full, and sends CSC one token per kernel group with the
  cycle its last weight lands.  Both channels share the read port request by request.
- CSC runs kernel group -> stripe -> (channel block, kernel position) packages; a package takes
  max(stripe, CSC_MIN_STRIPE, kernels in group) cycles; a group that waited for its weights pays
  `csc_start_cycles` more.  Before the last package of a stripe it takes as many CACC credits as
  the stripe has atoms; at a group's end it frees the group's ring entries, at the layer's end the
  data entries.
- CACC delivers each stripe at ATOMK / SDP throughput + 1 cycles per atom, from
  `cmac_cacc_cycles` after the stripe's channel-end package issued, and returns one credit per
  atom delivered (`DeliveryCredits`).  When CSC runs a stripe's other packages faster than CACC
  delivers the previous one (few packages per stripe: 1x1 over 64 channels, 3x3 over 3), the
  stripes are paced by this credit loop: channel-end package -> CACC's first read -> the
  stripe's atoms -> credits back, `cmac_cacc_cycles + atoms x delivery + credit_return` cycles
  (182 for a 16-atom stripe on nv_small, as the RTL runs).  SDP (flying) takes the atoms beat
  by beat and writes them out.
- Winograd: stripes of 2x2 output tiles (4 atoms each), one package per super channel of 4
  extended channels (2.25x fewer MAC cycles than direct 3x3).  Batches: stripes hold the same
  atoms of every image, so one weight load serves N images.  Compressed weights: the weight
  port reads WGS + WMB, then the compressed bytes (kernel groups in proportion).
"""
from __future__ import annotations

import os
import weakref
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generator

from ..kernels.cdma_run import RequestLoop
from ..kernels.stripe_run import StripeRun
from .sdp import FlyingWriter
from .tokens import (GRANTED, Ready, Seg, cdma_runs, coarse_stripes, sleep_event, stripe_runs,
                     token_runs, wait_until, waited)

if TYPE_CHECKING:
    import simpy

    from ..config import HardwareConfig
    from ..units.base import Unit
    from .model import TimingModel

CH_DATA = "cdma->csc data"
CH_WEIGHT = "cdma->csc weight"
CH_STRIPE = "csc->cacc"
CH_SDP = "cacc->sdp"
POOL_DATA = "CBUF data entries"
POOL_WEIGHT = "CBUF weight entries"
# Coarse stripes (NVDLA_SIM_COARSE_STRIPES): a token's MACs per package at most one nv_large
# stripe's (2 x 32 output atoms x 32 kernels x 64 channels), so a token count per layer near
# nv_large's on the small arrays and the exact path on nv_large / nv_full.
COARSE_TOKEN_MACS = 64 * 32 * 64
INF = float("inf")


@dataclass(frozen=True)
class CdmaGeometry:
    data_atoms: int                  # atoms read for the input (0 when CBUF still holds it)
    data_entries: int                # CBUF entries the input occupies
    group_atoms: tuple               # weight atoms of each kernel group (last: the remainder)
    data_banks: int
    weight_banks: int
    data_ram_type: int
    weight_ram_type: int
    keep_data: bool = False          # SKIP_DATA_RLS: CSC does not free the input
    keep_weights: bool = False       # SKIP_WEIGHT_RLS: CSC frees no weights
    mask_atoms: int = 0              # compressed weights: WGS + WMB atoms, read before them

    @property
    def weight_atoms(self) -> int:
        return sum(self.group_atoms)


def cdma_geometry(hw: "HardwareConfig", data_bytes: int, data_entries: int, weight_bytes: int,
                  byte_per_kernel: int, kernels: int, data_banks: int, weight_banks: int,
                  data_ram_type: int = 1, weight_ram_type: int = 1, keep_data: bool = False,
                  keep_weights: bool = False, kernel_group: int = 0, compressed: bool = False,
                  mask_bytes: int = 0) -> CdmaGeometry:
    """Kernel groups are BYTE_PER_KERNEL x `kernel_group` bytes (ATOMIC_K kernels in INT8, half
    that in INT16/FP16), the last one the remainder (the CDMA reports weights to CSC a group at a
    time).  16-bit layers move twice the bytes: BYTE_PER_KERNEL and the input size say so.
    Compressed weights: WEIGHT_BYTES (the non-zero elements) shared among the groups in
    proportion to their kernels (the same in timing-only runs, which do not read the WGS), after
    `mask_bytes` of WGS and WMB on the same port."""
    atom = hw.memory_atomic_bytes
    group = kernel_group or hw.atomic_k
    n_groups = -(-kernels // group)
    groups, left = [], weight_bytes
    if compressed:                         # one stream: group ends in proportion, whole atoms
        ends = [-(-min(weight_bytes, -(-weight_bytes * min(kernels, (g + 1) * group) // kernels))
                  // atom) for g in range(n_groups)]
        groups = [e - b for b, e in zip([0] + ends[:-1], ends)]
    for g in range(0 if compressed else n_groups):
        b = left if g == n_groups - 1 else min(left, byte_per_kernel * group)
        groups.append(-(-b // atom))
        left -= b
    return CdmaGeometry(-(-data_bytes // atom), data_entries, tuple(groups), data_banks,
                        weight_banks, data_ram_type, weight_ram_type, keep_data, keep_weights,
                        -(-mask_bytes // atom))


def stripes(total: int, full: int, half: int) -> list[int]:
    """CSC stripe lengths: `full` atoms while at least 2*full remain, `half` while more than
    `full` remain, then the rest (RTL sg.v)."""
    out, done = [], 0
    while done < total:
        left = total - done
        s = full if left >= 2 * full else (half if left > full else left)
        out.append(s)
        done += s
    return out


# Output atoms per image in a batched stripe, by batch count (C model csc).
BATCH_STRIPE_ATOMS = (0, 16, 8, 8, 4, 4, 4, 4) + (2,) * 8 + (1,) * 17


def winograd_stripes(tiles: int, full: int) -> list[int]:
    """Stripes of `tiles` slots (Winograd 2x2 output tiles, batched output atoms): `full` while
    more than 2*full remain, then the rest (at most 2*full) as one stripe (C model csc)."""
    out, left = [], tiles
    while left > 2 * full:
        out.append(full)
        left -= full
    if left:
        out.append(left)
    return out


@dataclass(frozen=True)
class CscGeometry:
    stripes: tuple                   # issue slots of each stripe of one kernel group (atoms;
                                     # Winograd: 2x2 output tiles)
    packages: int                    # packages per stripe: kernel positions x channel blocks
    group_kernels: tuple             # kernels in each group
    atoms_per_slot: int = 1          # output atoms per stripe slot (Winograd: 4)
    load_cycles_per_kernel: float = 1.0   # weight-load cycles of one kernel, relative to direct
    group_atoms: tuple = ()          # memory atoms each group completes per output position
                                     # (the SDP's unit; empty: one per group, ATOMIC_K = atom)

    @property
    def mac_cycles(self) -> int:
        """Cycles of atomic operations if nothing ever waits (one per cycle)."""
        return self.packages * sum(self.stripes) * len(self.group_kernels)


def csc_geometry(hw: "HardwareConfig", image: bool, out_w: int, out_h: int, kernel_h: int,
                 kernel_w: int, kernel_c: int, kernels: int, kernel_group: int = 0,
                 winograd: bool = False, elem_bytes: int = 1, batches: int = 1) -> CscGeometry:
    """Stripes of 2*ATOMIC_K output atoms (image input: per output row); a package is one kernel
    position and one block of ATOMIC_C channels (image input folds the kernel width into the
    channels, so only kernel rows count as positions).  Kernel groups hold `kernel_group` kernels
    (ATOMIC_K; INT16/FP16: ATOMIC_K / 2, so a 16-bit layer issues twice the groups: half the MACs
    per cycle).  Winograd: a slot is one 2x2 output tile (4 atoms), stripes of ATOMIC_C / 4
    tiles, a package one super channel of 4 (extended) channels: each cycle computes 4 outputs
    of 4 channels x 9 taps, 2.25x the direct convolution's 64 channels of one tap; a package
    loads each kernel's 4x4x4 weights (64 elements), two INT8 kernels per 128-byte cell payload
    (`elem_bytes` / 2 of a direct kernel's load cycle).  Batches: a stripe holds the same
    output atoms of every image (BATCH_STRIPE_ATOMS[N] per image), so each weight load serves N
    images."""
    full, half = 2 * hw.atomic_k, hw.atomic_k
    group = kernel_group or hw.atomic_k
    blocks = -(-kernel_c // hw.atomic_c)
    groups = tuple(min(group, kernels - g) for g in range(0, kernels, group))
    # A memory atom holds atom_ch elements: a kernel group narrower than it completes an atom
    # every few groups, a wider one several atoms (CACC hands SDP whole atoms).
    atom_ch = max(1, hw.memory_atomic_bytes // elem_bytes)
    done = [-(-min(k + group, kernels) // atom_ch) - -(-k // atom_ch) for k in range(0, kernels, group)]
    group_atoms = () if all(a == 1 for a in done) else tuple(done)
    if winograd:
        tiles = (out_w // 2) * (out_h // 2)
        return CscGeometry(tuple(winograd_stripes(tiles, hw.atomic_c // 4)), kernel_c // 4,
                           groups, atoms_per_slot=4, load_cycles_per_kernel=elem_bytes / 2,
                           group_atoms=group_atoms)
    if batches > 1:
        per_image = winograd_stripes(out_w * out_h, BATCH_STRIPE_ATOMS[min(batches, 32)])
        return CscGeometry(tuple(s * batches for s in per_image),
                           kernel_h * kernel_w * blocks, groups, group_atoms=group_atoms)
    if image:
        row = [min(full, out_w - x) for x in range(0, out_w, full)]
        st, packages = row * out_h, kernel_h * blocks
    else:
        st, packages = stripes(out_w * out_h, full, half), kernel_h * kernel_w * blocks
    groups = tuple(min(group, kernels - g) for g in range(0, kernels, group))
    return CscGeometry(tuple(st), packages, groups, group_atoms=group_atoms)


# -- CDMA ----------------------------------------------------------------------------------------
def cdma(unit: "Unit", geom: CdmaGeometry, on_data_done=None, on_weight_done=None) -> Generator:
    """CDMA's layer: the data and weight channels, until both have fetched everything.
    `on_data_done` / `on_weight_done` are called the cycle each channel finishes (the hardware
    raises CDMA_DAT and CDMA_WT separately: a trace may wait for them one after the other)."""
    tm: TimingModel = unit.engine.timing
    env, p = tm.env, tm.params
    r = p.rates
    depth = r.cbuf_bank_entries
    data_pool = tm.pool(POOL_DATA, geom.data_banks * depth)
    weight_pool = tm.pool(POOL_WEIGHT, geom.weight_banks * depth + p.conv.weight_ring_extra_entries)
    data_pool.resize(geom.data_banks * depth)
    weight_pool.resize(geom.weight_banks * depth + p.conv.weight_ring_extra_entries)
    if geom.data_entries > data_pool.capacity:
        raise unit.unsupported(
            f"the input needs {geom.data_entries} CBUF entries but D_BANK gives data "
            f"{geom.data_banks} banks ({int(data_pool.capacity)} entries): CSC waits for the whole "
            "input, so the layer never starts (the hardware needs it split)")
    entries_per_atom = r.atom_bytes / r.cbuf_entry_bytes
    for g, g_atoms in enumerate(geom.group_atoms):
        if g_atoms * entries_per_atom > weight_pool.capacity:
            raise unit.unsupported(
                f"kernel group {g} needs {g_atoms * entries_per_atom:g} CBUF weight entries but "
                f"D_BANK gives the weights {int(weight_pool.capacity)}: CSC waits for a whole "
                "group, so the layer never finishes")
    # Entries an earlier layer kept (SKIP_*_RLS) are dropped when this layer fetches anew.
    if geom.data_atoms and tm.retained["data"]:
        data_pool.release(tm.retained["data"])
        tm.retained["data"] = 0
    if geom.weight_atoms and tm.retained["weight"]:
        weight_pool.release(tm.retained["weight"])
        tm.retained["weight"] = 0
    yield from wait_until(env, env.now + p.conv.cdma_request_cycles)
    dat = env.process(_cdma_data(tm, geom, data_pool))
    wt = env.process(_cdma_weight(tm, geom, weight_pool))
    for proc, callback in ((dat, on_data_done), (wt, on_weight_done)):
        if callback is not None:
            proc.callbacks.append(lambda _event, cb=callback: cb())
    result = yield dat & wt
    return result[dat], result[wt]


def _cdma_data(tm: "TimingModel", geom: CdmaGeometry, pool) -> Generator:
    env, p = tm.env, tm.params
    memif = tm.engine.memif(geom.data_ram_type)
    tracker = tm.tracker("CDMA_DAT")
    atom = p.rates.atom_bytes
    entries_per_atom = geom.data_entries / max(1, geom.data_atoms)
    out = tm.channel(CH_DATA)
    if not geom.data_atoms:           # DATA_REUSE: the input is already in CBUF
        out.put(Seg(0, env.now, env.now, tag=geom.keep_data, end=True))
        return env.now
    first = None
    left = geom.data_atoms
    ready = env.now
    per_request = p.conv.cdma_request_atoms
    runs = token_runs()
    if cdma_runs():          # the loop below as callbacks in C (kernels/cdma_run.pyx)
        loop = RequestLoop(env, tm, pool, memif, tracker, out, Seg, GRANTED, True, left,
                           per_request, atom, entries_per_atom, p.conv.cbuf_write_cycles,
                           geom.keep_data, ready, data_entries=geom.data_entries, runs=runs)
        yield from _request_loop(env, loop)
        left, ready = 0, loop.ready
    while left > 0:
        n = min(per_request, left)
        # waits as in _cdma_weight (event-free paths of tokens.py, same cycles)
        grant = pool.acquire(n * entries_per_atom)
        if grant is not GRANTED:
            yield from waited(env, grant, tracker, "CBUF data full")
        tm.note_cbuf()
        tr = memif.reserve("CDMA_DAT", "read", n * atom)
        first = tr.first if first is None else first
        tracker.busy(tr.port_free - tr.port_cycles, tr.port_free, "read")
        left -= n
        if left == 0:
            ready = tr.last + p.conv.cbuf_write_cycles
            out.put(Seg(geom.data_entries, first + p.conv.cbuf_write_cycles, ready,
                        tag=geom.keep_data, end=True))
        port_free = tr.port_free
        if runs and left > per_request:
            # full requests but the last, in one call while nothing else happens (exact)
            booked, port_free = memif.read_run(
                "CDMA_DAT", per_request * atom, (left - 1) // per_request, port_free, pool,
                per_request * entries_per_atom, tracker, "read")
            if booked:
                left -= booked * per_request
                tm.note_cbuf()
        sleep = sleep_event(env, port_free)
        if sleep is not None:
            yield sleep
    tracker.flush()
    yield from wait_until(env, ready)
    return ready


def _request_loop(env, loop: RequestLoop) -> Generator:
    """Run a CDMA request loop in C: it goes on by itself from SimPy's queue; the process
    waits until it ends (resumed from within its last step, as after the loop's last sleep)."""
    done = env.event()
    loop.start(done)
    if not loop.finished:
        yield done


def _cdma_weight(tm: "TimingModel", geom: CdmaGeometry, pool) -> Generator:
    env, p = tm.env, tm.params
    memif = tm.engine.memif(geom.weight_ram_type)
    tracker = tm.tracker("CDMA_WT")
    atom = p.rates.atom_bytes
    entries_per_atom = atom / p.rates.cbuf_entry_bytes
    out = tm.channel(CH_WEIGHT)
    bounds, acc = [], 0
    for g in geom.group_atoms:
        acc += g
        bounds.append(acc)
    issued, group = 0, 0
    total = geom.weight_atoms
    ready = env.now
    masks = geom.mask_atoms               # WGS and WMB: their own CBUF space, no ring entries
    while masks > 0:
        n = min(p.conv.cdma_request_atoms, masks)
        tr = memif.reserve("CDMA_WT", "read", n * atom)
        tracker.busy(tr.port_free - tr.port_cycles, tr.port_free, "read masks")
        masks -= n
        yield from wait_until(env, tr.port_free)
    per_request = p.conv.cdma_request_atoms
    n_bounds = len(bounds)
    runs = token_runs()
    if cdma_runs():          # the loop below as callbacks in C (kernels/cdma_run.pyx)
        loop = RequestLoop(env, tm, pool, memif, tracker, out, Seg, GRANTED, False, total,
                           per_request, atom, entries_per_atom, p.conv.cbuf_write_cycles,
                           geom.keep_weights, ready, bounds, geom.group_atoms, runs=runs)
        yield from _request_loop(env, loop)
        issued, group, ready = total, loop.group, loop.ready
    while issued < total:
        n = min(per_request, total - issued)
        # The hot loop of a convolution (one pass per CDMA request): `waited` only when the
        # grant must wait, the sleep without a generator (tokens.sleep_event), same cycles.
        grant = pool.acquire(n * entries_per_atom)
        if grant is not GRANTED:
            yield from waited(env, grant, tracker, "weight ring full")
        tm.note_cbuf()
        tr = memif.reserve("CDMA_WT", "read", n * atom)
        tracker.busy(tr.port_free - tr.port_cycles, tr.port_free, "read")
        # Kernel groups whose last atom is in this request.
        while group < n_bounds and bounds[group] <= issued + n:
            k = bounds[group] - issued - 1
            ready = tr.beat(k) + p.conv.cbuf_write_cycles
            out.put(Seg(geom.group_atoms[group] * entries_per_atom, tr.first, ready,
                        tag=geom.keep_weights, end=group == n_bounds - 1))
            group += 1
        issued += n
        port_free = tr.port_free
        if runs and group < n_bounds and n == per_request:
            # The full requests before the one that ends the next kernel group, in one call
            # while nothing else happens (memif.read_run: the same bookings, exact).
            booked, port_free = memif.read_run(
                "CDMA_WT", n * atom, (bounds[group] - 1 - issued) // n, port_free, pool,
                n * entries_per_atom, tracker, "read")
            if booked:
                issued += booked * n
                tm.note_cbuf()
        sleep = sleep_event(env, port_free)
        if sleep is not None:
            yield sleep
    while group < len(bounds):             # WEIGHT_REUSE: the groups are already in CBUF
        out.put(Seg(0, env.now, env.now, tag=geom.keep_weights, end=group == len(bounds) - 1))
        group += 1
    tracker.flush()
    yield from wait_until(env, ready)
    return ready


# -- CSC (with CMAC, which executes its packages) -------------------------------------------------
def csc(unit: "Unit", geom: CscGeometry, layer: dict) -> Generator:
    tm: TimingModel = unit.engine.timing
    env, p = tm.env, tm.params
    tracker = tm.tracker("CSC")
    credits = delivery_credits(tm)
    out = tm.channel(CH_STRIPE)
    data = yield from waited(env, tm.channel(CH_DATA).get(), tracker, "input not in CBUF")
    weight_pool = tm.pool(POOL_WEIGHT, 1)
    cdma_clock = unit.engine.units["CDMA"].weight_clock     # units/cdma_gating.py
    index = getattr(unit, "stats", {}).get("layers", 0)     # CSC's layer, for its report
    free = env.now
    n_groups = len(geom.group_kernels)
    mac_busy = []
    direct = token_runs()
    # Coarse stripes (issue 20): how many stripes of a group may go to SDP as one token
    # (compiled networks only, run step by step: official traces keep the exact path)
    coarse = coarse_stripes() if direct and getattr(unit.engine, "network_steps", False) else 0
    if coarse > 1:       # a token of at most one nv_large stripe's MACs: nv_large itself stays exact
        stripe_macs = max(geom.stripes) * geom.atoms_per_slot * unit.hw.atomic_k * unit.hw.atomic_c
        coarse = min(coarse, COARSE_TOKEN_MACS // stripe_macs)
    # Not while SDP reads per-element operands beside CACC's output (a fused element-wise
    # layer; sdp.core sets tm.flying_operands): one write per coarse token moves those layers by
    # up to 3.5 % on 512/1024-MAC arrays; NVDLA_SIM_COARSE_OPERANDS=1 allows them.
    coarse_operands = os.environ.get("NVDLA_SIM_COARSE_OPERANDS") == "1"
    wt_channel = tm.channel(CH_WEIGHT)
    # whole stripes in C while CSC's process has nothing to wait for (kernels/stripe_run.pyx)
    fast = None
    if direct and coarse <= 1 and stripe_runs():
        fast = StripeRun(env, tracker, credits, out, weight_pool, geom,
                         p.conv.csc_min_stripe_atoms, p.conv.cmac_cacc_cycles, Seg, FlyingWriter)
    for g, kernels in enumerate(geom.group_kernels):
        wt = yield from waited(env, wt_channel.get(), tracker, "weights not in CBUF")
        ready = max(data.last, wt.last)
        start = ready + p.conv.csc_start_cycles if (g == 0 or ready > free) else free
        start = max(start, env.now)
        tracker.stall(env.now, start, "waiting for weights" if g else "waiting for input")
        t = start
        load = kernels * geom.load_cycles_per_kernel / p.conv.weight_load_kernels_per_cycle
        n_stripes = len(geom.stripes)
        # stripes a coarse token may take: not the layer's last (it ends CACC's process)
        stop = n_stripes - 1 if g == n_groups - 1 else n_stripes
        i = 0
        stripes_, packages = geom.stripes, geom.packages     # the hot loop's constants
        min_stripe, cmac_cacc = p.conv.csc_min_stripe_atoms, p.conv.cmac_cacc_cycles
        delivery = None
        phase = 0                # how far stripe i has gone (StripeRun.run's phases)
        while i < n_stripes:
            if fast is not None and i < stop:
                # stripes in C while CSC's process has nothing to wait for but its own sleeps
                if delivery is None or not delivery.active:
                    delivery = _CACC.get(tm)
                if delivery is not None:
                    i, t, after, phase = fast.run(g, i, t, load, stop, delivery, phase)
                    if after is not None:
                        yield after                 # a sleep the C run put on the queue
                        continue
                    if i >= n_stripes:
                        break
            s = stripes_[i]
            pkg = max(s, min_stripe, load)
            last_pkg = t + (packages - 1) * pkg
            if phase == 0:
                sleep = sleep_event(env, last_pkg)      # wait_until without a generator
                if sleep is not None:
                    yield sleep
                    if fast is not None and i < stop:
                        phase = 1                       # the rest of it in C, as above
                        continue
            # The stripe's last package may go only when CACC can take the whole stripe.
            atoms = s * geom.atoms_per_slot
            take = min(atoms, credits.capacity)
            if phase < 2:
                tracker.busy(t, last_pkg)
                ready_at = credits.ready(take, env.now)
                while ready_at is None:          # CACC has not taken the stripes yet
                    waiting = env.now
                    yield credits.booked(env)
                    tracker.stall(waiting, env.now, "no CACC credits")
                    ready_at = credits.ready(take, env.now)
                if ready_at > env.now:
                    tracker.stall(env.now, ready_at, "no CACC credits")
                    sleep = sleep_event(env, ready_at)
                    if sleep is not None:
                        yield sleep
                        if fast is not None and i < stop:
                            phase = 2
                            continue
            phase = 0
            credits.take(take)
            last_pkg = env.now
            end_layer = g == n_groups - 1 and i == n_stripes - 1
            first = last_pkg + cmac_cacc
            # tag: the memory atoms the stripe completes, when not one per slot
            done = atoms * geom.group_atoms[g] if geom.group_atoms else None
            stripe = Seg(atoms, first, first + s - 1, tag=done, end=end_layer)
            # this layer's CACC (registered when its process starts; kept while it runs)
            if direct and (delivery is None or not delivery.active):
                delivery = _CACC.get(tm)
            if direct and not end_layer and delivery is not None and delivery.active \
                    and len(out._getters) == 1 \
                    and not out._items and (not env._queue or env._queue[0][0] > env._now):
                if coarse > 1 and i + 1 < stop and (coarse_operands or
                                                     not getattr(tm, "flying_operands", False)):
                    t, i = _coarse_run(p, geom, g, i, min(stop, i + coarse), load, stripe,
                                       last_pkg, pkg, delivery, credits, tracker)
                    continue
                # CACC waits and nothing else is due: CaccDelivery; SDP may take the stripe
                # without events (sdp.FlyingWriter) if its write is booked before CSC next
                # does something another process sees: freeing the group's weights for a
                # waiting CDMA (no sooner than its remaining packages) or the layer's end
                if not weight_pool._waiters:
                    limit = INF
                else:
                    limit = last_pkg + pkg
                    for nxt in stripes_[i + 1:i + 3]:         # a bound: two more stripes
                        limit += packages * max(nxt, min_stripe, load)
                delivery.step(stripe, limit)
            else:
                out.put(stripe)
            tracker.busy(last_pkg, last_pkg + pkg)
            t = last_pkg + pkg
            i += 1
        mac_busy.append((start, t))
        yield from wait_until(env, t)
        if wt.tag:                           # SKIP_WEIGHT_RLS: the next layer may reuse them
            tm.retained["weight"] += wt.n
        elif wt.n:      # the group's ring entries (clock gating: lost while CDMA's clock is off)
            cdma_clock.release(weight_pool, wt.n, env.now, index)
        elif tm.retained["weight"]:          # WEIGHT_REUSE without SKIP_WEIGHT_RLS: CSC frees
            cdma_clock.release(weight_pool, tm.retained["weight"], env.now, index)  # kept
            tm.retained["weight"] = 0
        free = t
    if data.tag:                             # SKIP_DATA_RLS
        tm.retained["data"] += data.n
    else:
        tm.pool(POOL_DATA, 1).release(data.n)
    tracker.flush()
    layer["mac_busy"] = mac_busy
    layer["done"].succeed(env.now)


def _coarse_run(p, geom: CscGeometry, g: int, i: int, stop: int, load: float, stripe: Seg,
                now: float, pkg: float, delivery: "CaccDelivery", credits: "DeliveryCredits",
                tracker) -> tuple[float, int]:
    """Stripes i..stop-1 of group g as one token to SDP (NVDLA_SIM_COARSE_STRIPES; issue 20).

    Stripe i's credits are taken at `now` (its hand-over).  CSC's packages, its CACC credits and
    CACC's delivery of each following stripe are computed here with the token path's per-stripe
    arithmetic, without sleeping: within a group they depend only on CSC's own stripes and
    CACC's own deliveries.  SDP gets one token spanning their output (first atom of the first,
    last atom of the last), so SDP and the write DMA book once where they booked per stripe: the
    write's requests spread evenly over the token rather than stripe by stripe, the one
    approximation (not exact; docs/performance.md gives the measured deviation).
    Returns (CSC's next package cycle, the next stripe's index)."""
    conv = p.conv
    out = [delivery.book(stripe, now)]
    tracker.busy(now, now + pkg)
    t = now + pkg
    j = i + 1
    while j < stop:
        s = geom.stripes[j]
        pkg = max(s, conv.csc_min_stripe_atoms, load)
        last_pkg = t + (geom.packages - 1) * pkg
        atoms = s * geom.atoms_per_slot
        take = min(atoms, credits.capacity)
        ready_at = credits.ready(take, last_pkg)
        if ready_at is None:                 # not booked (cannot happen: each one is booked)
            break
        tracker.busy(t, last_pkg)
        if ready_at > last_pkg:
            tracker.stall(last_pkg, ready_at, "no CACC credits")
        now = ready_at
        credits.take(take)
        first = now + conv.cmac_cacc_cycles
        done = atoms * geom.group_atoms[g] if geom.group_atoms else None
        out.append(delivery.book(Seg(atoms, first, first + s - 1, tag=done), now))
        tracker.busy(now, now + pkg)
        t = now + pkg
        j += 1
    delivery.out.put(Seg(sum(o.n for o in out), out[0].first, out[-1].last))
    return t, j


def cmac(unit: "Unit", layer: dict) -> Generator:
    """CMAC_A/B execute CSC's packages: busy exactly when CSC issues them."""
    if not layer["done"].triggered:
        yield layer["done"]
    tracker = unit.engine.timing.tracker(unit.block)
    for start, end in layer.get("mac_busy", ()):
        tracker.busy(start, end, "packages")
    tracker.flush()


# -- CACC ------------------------------------------------------------------------------------------
class DeliveryCredits:
    """CACC delivery-buffer credits as CSC counts them (RTL `sg.v` `credit_cnt`).

    CSC takes a stripe's atoms when it issues the stripe's channel-end package; CACC returns one
    credit per output atom when the atom's last beat has left for SDP
    (`NV_NVDLA_CACC_delivery_buffer.v` `accu2sc_credit_vld`), and CSC sees it
    `cacc_credit_return_cycles` later.  CACC books each stripe's delivery here as it takes the
    stripe, so CSC computes the cycle its next stripe's credits are back without an event per
    atom: a short stripe may go after part of the previous one has left."""

    def __init__(self, capacity: int, return_cycles: float):
        self.capacity = capacity
        self.return_cycles = return_cycles
        self.outstanding = 0                 # taken by CSC, not yet back
        self._deliveries: deque = deque()    # (start, cycles per atom, atoms) in delivery order
        self._booked = None                  # event for a CSC waiting for CACC to book

    def take(self, n: int) -> None:
        self.outstanding += n

    def deliver(self, start: float, cycles_per_atom: float, n: int) -> None:
        """CACC delivers `n` of the taken atoms from `start`, one every `cycles_per_atom`."""
        self._deliveries.append((start, cycles_per_atom, n))
        if self._booked is not None:
            self._booked.succeed()
            self._booked = None

    def booked(self, env) -> "simpy.Event":
        """An event CACC triggers when it books its next delivery."""
        if self._booked is None:
            self._booked = env.event()
        return self._booked

    def ready(self, n: int, now: float) -> float | None:
        """The first cycle >= `now` at which `n` credits are free; None while they depend on a
        stripe CACC has not taken yet (it takes each within the cycle CSC hands it over, once
        its layer runs)."""
        while self._deliveries:              # drop deliveries whose credits are all back
            start, c, k = self._deliveries[0]
            if start + k * c + self.return_cycles > now:
                break
            self._deliveries.popleft()
            self.outstanding -= k
        need = n - (self.capacity - self.outstanding)
        for start, c, k in self._deliveries:
            if need <= 0:
                break
            if need <= k:
                return max(now, start + need * c + self.return_cycles)
            need -= k
        return None if need > 0 else now


_CREDITS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def delivery_credits(tm: "TimingModel") -> DeliveryCredits:
    """The engine's CACC credit counter (one per timing model, across layers)."""
    credits = _CREDITS.get(tm)
    if credits is None:
        credits = _CREDITS[tm] = DeliveryCredits(tm.params.rates.cacc_credits,
                                                  tm.params.conv.cacc_credit_return_cycles)
    return credits


class CaccDelivery:
    """CACC's delivery of the stripes of one layer: what `cacc` does with each stripe it takes.

    CSC may hand a stripe straight to `step` instead of through the channel (issue 20) when CACC
    waits for it and no other event is due this cycle: the relay would be the next event
    processed and CACC's step would run then, at the same cycle, before anything else; CSC's
    code after the hand-over until it sleeps touches nothing CACC reads and schedules nothing
    this cycle (its next package is later), so the order of every booking is the same."""
    __slots__ = ("env", "tracker", "credits", "out", "c", "read", "to_sdp", "free", "waiting",
                 "active")

    def __init__(self, env, tracker, credits, out, c: float, read: float, to_sdp: float):
        self.env, self.tracker, self.credits, self.out = env, tracker, credits, out
        self.c, self.read, self.to_sdp = c, read, to_sdp
        self.free = self.waiting = env.now      # waiting: when CACC last asked for a stripe
        self.active = True                      # its layer's loop runs (CSC may call `step`)

    def step(self, seg: Seg, limit: float = float("-inf")) -> None:
        """Book the stripe's delivery after the previous one (the credit counter needs it at
        once) and hand SDP its atoms: to its `follower` without events when it is idle again
        before cycle `limit` (CSC's next hand-over), else through the channel."""
        token = self.book(seg, self.env._now)
        out = self.out
        if out.follower is None or not out.follower.take(token, limit):
            out.put(token)

    def book(self, seg: Seg, now: float) -> Seg:
        """`step` without the hand-over: books the delivery as CACC would take the stripe at
        `now` and returns SDP's token."""
        c, free, credits = self.c, self.free, self.credits
        start = max(free, seg.first, now)
        end = max(start + seg.n * c, seg.last + c)
        credits.deliver(end - seg.n * c, c, min(seg.n, credits.capacity))
        read, to_sdp = self.read, self.to_sdp
        token = Seg(seg.n if seg.tag is None else seg.tag, start + read + to_sdp,
                    end - c + read + to_sdp, end=seg.end)
        self.tracker.stall(max(free, self.waiting), start, "no stripe")  # idle after the last
        self.tracker.busy(start, end, "delivery")
        self.free = end
        self.waiting = now
        return token


_CACC: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def cacc(unit: "Unit", kernel_group: int = 0) -> Generator:
    """Delivery of each output atom: the kernel group's channels at the SDP input rate (INT16/FP16
    groups hold half the kernels, so an atom of them takes half the cycles) after one delivery
    buffer read.  SDP takes the elements beat by beat as they leave (its core consumes one beat a
    cycle, the rate CACC sends them), so the token handed to SDP starts at the first atom's first
    beat and its last atom ends with CACC's last beat."""
    tm: TimingModel = unit.engine.timing
    env, p = tm.env, tm.params
    r = p.rates
    inp = tm.channel(CH_STRIPE)
    c = r.cacc_cycles_per_atom
    if kernel_group and kernel_group != unit.hw.atomic_k:
        c = kernel_group / max(1, unit.hw.sdp.bs_throughput) + p.conv.cacc_ram_read_cycles
    state = CaccDelivery(env, tm.tracker("CACC"), delivery_credits(tm), tm.channel(CH_SDP), c,
                         p.conv.cacc_ram_read_cycles, p.conv.cacc_pipeline_cycles)
    _CACC[tm] = state
    while True:
        # Take each stripe as CSC hands it over (CACC's assembly buffer holds it).
        got = inp.get()
        seg = got.value if type(got) is Ready else (yield got)
        state.step(seg)
        if seg.end:
            break
    state.active = False
    yield from wait_until(env, state.free)
    state.tracker.flush()
