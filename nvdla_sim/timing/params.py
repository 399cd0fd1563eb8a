"""Timing parameters: fixed pipeline depths from params.yaml, rates derived from the hardware.

Nothing here is fitted per test.  The YAML holds latencies and buffer rules taken from (or fitted
across a whole family of) RTL measurements; everything that scales with the configuration — atom
size, ATOMIC_C/K, unit throughputs, CBUF banks, memory-interface latency — is computed from the
HardwareConfig so that nv_large and friends get sensible numbers.  docs/timing.md lists every
parameter with its source.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import yaml

from ..config import HardwareConfig
from ..errors import NvdlaSimError

PARAMS_FILE = Path(__file__).with_name("params.yaml")
_DEFAULTS: dict | None = None


def _defaults() -> dict:
    global _DEFAULTS
    if _DEFAULTS is None:
        _DEFAULTS = yaml.safe_load(PARAMS_FILE.read_text())
    return _DEFAULTS


def _merge(base: dict, over: dict, where: str) -> dict:
    out = copy.deepcopy(base)
    for key, value in over.items():
        if key not in base:
            raise NvdlaSimError(f"timing{where}: unknown parameter '{key}' "
                                f"(known: {', '.join(sorted(base))})")
        if isinstance(base[key], dict):
            if not isinstance(value, dict):
                raise NvdlaSimError(f"timing{where}.{key}: expected a mapping")
            out[key] = _merge(base[key], value, f"{where}.{key}")
        else:
            out[key] = value
    return out


@dataclass(frozen=True)
class Rates:
    """Per-configuration rates and sizes derived from the HardwareConfig."""
    atom_bytes: int                 # one feature atom in memory (= one memory beat on nv_small)
    sdp_cycles_per_atom: float      # SDP core: atom / elements per cycle
    pdp_cycles_per_atom: float
    cdp_cycles_per_atom: float
    cacc_cycles_per_atom: float     # CACC delivery: ATOMK elements at the SDP input rate + RAM read
    cacc_credits: int               # delivery-buffer credits, in output atoms
    stripe_atoms: int               # CSC stripe: 2 x ATOMK output atoms while enough remain
    half_stripe_atoms: int          # then ATOMK
    macs_per_cycle: int             # ATOMIC_C x ATOMIC_K
    cbuf_bank_entries: int
    cbuf_entry_bytes: int
    cbuf_banks: int
    latency_fifo_atoms: int         # RDMA latency FIFO
    stream_buffer_atoms: int        # core output buffers: a latency FIFO, at least a stripe
    max_burst_beats: int            # the DLA's own AXI burst limit


class TimingParams:
    """`params.<section>.<name>` from params.yaml (with overrides) plus `params.rates`."""

    def __init__(self, hw: HardwareConfig, overrides: dict | None = None):
        data = _defaults()
        if overrides:
            data = _merge(data, overrides, "")
        self.raw = data
        for section, values in data.items():
            setattr(self, section, SimpleNamespace(**values))
        self.hw = hw
        self.rates = derive_rates(hw, self)

    def slow_csb_block(self, block: str) -> bool:
        return block in self.csb.slow_blocks


def derive_rates(hw: HardwareConfig, p: TimingParams) -> Rates:
    atom = hw.memory_atomic_bytes
    sdp_rate = max(1, hw.sdp.bs_throughput)
    fifo = max(8, int(hw.primary_memif.latency_cycles * p.dma.latency_fifo_per_latency_cycle))
    return Rates(
        atom_bytes=atom,
        sdp_cycles_per_atom=atom / sdp_rate,
        pdp_cycles_per_atom=atom / max(1, hw.pdp_throughput),
        cdp_cycles_per_atom=atom / max(1, hw.cdp_throughput),
        cacc_cycles_per_atom=hw.atomic_k / sdp_rate + p.conv.cacc_ram_read_cycles,
        cacc_credits=p.conv.cacc_credit_atoms_per_atomk * hw.atomic_k,
        stripe_atoms=2 * hw.atomic_k,
        half_stripe_atoms=hw.atomic_k,
        macs_per_cycle=hw.atomic_c * hw.atomic_k,
        cbuf_bank_entries=hw.cbuf.bank_depth,
        cbuf_entry_bytes=hw.cbuf.bank_width_bytes,
        cbuf_banks=hw.cbuf.banks,
        latency_fifo_atoms=fifo,
        max_burst_beats=hw.primary_memif.max_burst,
        # a stripe is 2*ATOMIC_K output positions; a kernel group wider than the memory atom
        # completes several atoms per position (CACC hands SDP whole atoms)
        stream_buffer_atoms=max(fifo, 2 * hw.atomic_k * -(-hw.atomic_k // atom)),
    )
