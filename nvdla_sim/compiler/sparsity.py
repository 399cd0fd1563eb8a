"""Structured sparsity (2:4 along C) on an Orin-class DLA: which convolutions benefit, and the
MAC-cycle model for them (TensorRT "Working with DLA", Sparsity on DLA).

The document's requirements and limitations, each a named rule:

  sparsity.orin_only    the preset is an Orin-class DLA (`orin_dla`): Xavier has no SS
  sparsity.conv         a convolution (a fully connected layer run as one is not listed)
  sparsity.int8         INT8 convolution
  sparsity.not_nhwc     "formats other than NHWC": not a convolution reading a pixel image
                        (kDLA_HWC4 / the compiler's image input)
  sparsity.channels     C > 64
  sparsity.weight_bytes quantised INT8 weights at most 256 K (262,144 bytes)
  sparsity.kernels      K % 64 in {0, 1, 2, 4, 8, 16, 32}
  sparsity.winograd     (model assumption) not lowered to Winograd: G g G^T mixes a kernel's
                        positions, so the transformed weights keep a zero only where the whole
                        R x S kernel of that channel is zero, not the 2:4 pattern
  sparsity.pattern      the weights hold the pattern: in every block of four consecutive input
                        channels (at each kernel position of each kernel), at least two are zero

MAC-cycle model (a model assumption; docs/dla-deployment.md): NVDLA's direct convolution spends
one cycle per atomic operation, ceil(C / ATOMIC_C) x ceil(K / ATOMIC_K) x R x S x out_H x out_W
of them (a kernel group per ATOMIC_K kernels, a channel atom per ATOMIC_C channels).  A sparse
Orin MAC is assumed to skip the zero half of each 2:4 block, so one atomic operation covers
2 x ATOMIC_C channels of the dense weights: ceil(C / (2 ATOMIC_C)) channel steps.  Only the
MAC part of a layer's time shrinks; the engine's cycles are the dense program's (the simulated
hardware has no sparse MAC), and the report says per layer what the model expects.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..config import HardwareConfig
from ..datatype import INT8
from ..errors import NvdlaSimError

SPARSE_K_MOD64 = (0, 1, 2, 4, 8, 16, 32)
MIN_CHANNELS_EXCLUSIVE = 64
MAX_WEIGHT_BYTES = 256 * 1024
SPARSE_PRESETS = ("orin_dla",)


@dataclass(frozen=True)
class SparseVerdict:
    """One convolution: whether structured sparsity applies, why not, and the MAC model."""
    layer: str
    benefits: bool
    reason: str                 # "" when it benefits; else "<text> [rule sparsity.NAME]"
    dense_mac_cycles: int
    sparse_mac_cycles: int      # == dense when it does not benefit

    def note(self) -> str:
        if self.benefits:
            return (f"structured sparsity 2:4: MAC cycles {self.dense_mac_cycles} -> "
                    f"{self.sparse_mac_cycles} (model)")
        return f"structured sparsity: no benefit, {self.reason}"


def check_preset(hw: HardwareConfig) -> None:
    """`sparse_weights: true` needs an Orin-class preset."""
    if hw.name not in SPARSE_PRESETS:
        raise NvdlaSimError(f"sparse_weights: structured sparsity is an Orin DLA feature, the "
                            f"preset is {hw.name} (use orin_dla) [rule sparsity.orin_only]")


def two_four(weight: np.ndarray) -> bool:
    """Whether (K, C, R, S) weights have at least two zeros in every block of four consecutive
    input channels at each kernel position (C padded with zeros to a multiple of 4)."""
    k, c = weight.shape[:2]
    padded = np.zeros((k, -(-c // 4) * 4) + weight.shape[2:], weight.dtype)
    padded[:, :c] = weight
    blocks = padded.reshape(k, -1, 4, *weight.shape[2:]) != 0
    return bool((blocks.sum(axis=2) <= 2).all())


def mac_cycles(hw: HardwareConfig, channels: int, kernels: int, kernel: tuple[int, int],
               out_h: int, out_w: int, sparse: bool = False) -> int:
    """Atomic operations of a direct convolution (one per cycle); `sparse`: the model's 2:4."""
    c_per_step = hw.atomic_c * (2 if sparse else 1)
    return (-(-channels // c_per_step) * -(-kernels // hw.atomic_k) * kernel[0] * kernel[1]
            * out_h * out_w)


def _why_not(layer, dtype, image: bool, weight: np.ndarray) -> str:
    """The first rule the convolution breaks ("" if none), in the module doc's order."""
    c = layer.conv
    k, ch = weight.shape[:2]
    if c.fc:
        return "a fully connected layer, not a convolution [rule sparsity.conv]"
    if dtype != INT8:
        return f"{dtype.name}, not INT8 [rule sparsity.int8]"
    if image:
        return "reads a pixel (NHWC-like) image input [rule sparsity.not_nhwc]"
    if ch <= MIN_CHANNELS_EXCLUSIVE:
        return f"C={ch}, needs C > 64 [rule sparsity.channels]"
    if weight.size > MAX_WEIGHT_BYTES:
        return (f"{weight.size} bytes of INT8 weights, above 256 K "
                "[rule sparsity.weight_bytes]")
    if k % 64 not in SPARSE_K_MOD64:
        return f"K={k}, K % 64 = {k % 64} not in {{0, 1, 2, 4, 8, 16, 32}} [rule sparsity.kernels]"
    if layer.lowering.get("winograd") is not None:
        return "lowered to Winograd (transformed weights lose the pattern: model) " \
               "[rule sparsity.winograd]"
    if not two_four(weight):
        return "weights not 2:4 along C [rule sparsity.pattern]"
    return ""


def sparsity_verdicts(plan, hw: HardwareConfig, image_root: str | None) -> list[SparseVerdict]:
    """Every DLA convolution of `plan`: does 2:4 structured sparsity apply (the quantised weights
    when the plan has them, else the float ones), and its dense / sparse MAC cycles.
    `image_root`: the buffer read as a pixel image (None: none)."""
    check_preset(hw)
    out = []
    for layer in plan.layers:
        if layer.kind != "conv" or layer.conv is None:
            continue
        c = layer.conv
        q = layer.quant
        weight = np.asarray(q.weight if q is not None and getattr(q, "weight", None) is not None
                            else c.weight)
        image = image_root is not None and layer.inputs[0].tensor == image_root
        why = _why_not(layer, plan.layer_dtype(layer), image, weight)
        dense = mac_cycles(hw, c.in_channels, c.out_channels, c.kernel, c.out_h, c.out_w)
        sparse = dense if why else mac_cycles(hw, c.in_channels, c.out_channels, c.kernel,
                                              c.out_h, c.out_w, sparse=True)
        out.append(SparseVerdict(layer.name, not why, why, dense, sparse))
    return out


def sparse_cycles(verdicts: list[SparseVerdict], result) -> dict[str, tuple[float, float]]:
    """Layer -> (engine cycles, the model's cycles with 2:4 weights) for every convolution of a
    run (`result`: a PlanResult).  Model: a MAC-bound layer loses the MAC cycles sparsity saves,
    but no less than its sparse MAC cycles remain; memory- or CBUF-bound layers keep theirs."""
    timing = {t.name: t for t in result.layers}
    out = {}
    for v in verdicts:
        t = timing.get(v.layer)
        if t is None:
            continue
        cycles = t.end_cycle - t.start_cycle
        saved = v.dense_mac_cycles - v.sparse_mac_cycles
        est = max(cycles - saved, v.sparse_mac_cycles) if v.benefits and t.bound == "MAC" \
            else cycles
        out[v.layer] = (cycles, est)
    return out


BENEFIT_MARK = "structured sparsity 2:4:"


def attach_sparse_cycles(rep, plan, result) -> None:
    """The report's rows get the model's cycles with 2:4 weights (`LayerRow.sparse_cycles`) where
    a convolution of theirs benefits (the lowering's note says so), and the report the model's
    total latency (`Report.sparse_total_cycles`): the run's total minus the cycles the
    benefiting layers save (sparse_cycles; the layers run one after another)."""
    marked = {layer.name for layer in plan.layers
              if any(n.startswith(BENEFIT_MARK) for n in layer.notes)}
    verdicts = [v for v in sparsity_verdicts(plan, plan.hw, None) if v.layer in marked]
    model = sparse_cycles(verdicts, result)
    saved_total = 0.0
    for r in rep.rows:
        saved = sum(model[h][0] - model[h][1] for h in r.hw_layers if h in model)
        if any(h in model for h in r.hw_layers) and r.cycles is not None:
            r.sparse_cycles = r.cycles - saved
            r.note = "; ".join(n for n in (f"2:4 model: {r.sparse_cycles:.0f} cycles", r.note) if n)
            saved_total += saved
    if rep.total_cycles is not None:
        rep.sparse_total_cycles = rep.total_cycles - saved_total


def console_line(rep) -> list[str]:
    """The report's summary line of the structured-sparsity model (none without it)."""
    total = getattr(rep, "sparse_total_cycles", None)
    if total is None or not rep.total_cycles:
        return []
    rows = [r for r in rep.rows if getattr(r, "sparse_cycles", None) is not None]
    return [f"structured sparsity 2:4 (model, docs/dla-deployment.md): {len(rows)} rows benefit; "
            f"{rep.total_cycles:.0f} -> {total:.0f} cycles ({100 * (total / rep.total_cycles - 1):+.1f} %)"]
