"""What a scenario run needs in host memory, checked against what the machine has before anything
is allocated: a network too big for this machine is a one-line error stating the size, not a
process the kernel kills after minutes.

The estimate counts the arrays a run holds at once, in float32 (4 bytes per element):

- the kernels of conv / fully connected layers the DLA runs, when they are arrays (values mode,
  a .npz file, an ONNX model's weights, pruned weights): 16 bytes per weight, what the
  lowering's quantisation holds at its peak (float32 temporaries and the stored copy; measured
  16.5 bytes per weight on a 256x4x4 -> 8192 fully connected layer before stand-ins, and a
  8192x4x4 -> 8192 one peaked at 16.8 GB); timing-only stand-ins are broadcast views
  (compiler/weight_views.py): at most a (kernels x channels) plane per layer where the input
  has holes, counted at 8 bytes per kernel and channel;
- the kernels of layers on the GPU fallback: 8 bytes per weight when they are arrays (values
  mode, or weights from a .npz file; timing-only runs use stand-ins that hold no memory,
  `weights.stand_in_weights`);
- values mode: every tensor's float32 reference, plus the DLA's dequantised output of each,
  plus the input;
- timing mode: the input image when one is read from a .npy file (activations are sized
  tokens, never data; no random image is drawn).

It leaves out the interpreter, engine and report overhead, so it refuses only runs that cannot
fit; what is left over is caught as MemoryError by the CLI and the sweep.
"""
from __future__ import annotations

import os

from ..compiler.network import Network
from ..errors import NvdlaSimError

FLOAT_BYTES = 4


DLA_WEIGHT_BYTES = 16             # per weight of a DLA layer, at the lowering's peak
ARRAY_WEIGHT_BYTES = 8            # per weight held as float32 arrays (the weights and a copy)
PLANE_BYTES = 8                   # per kernel x channel of a stand-in's plane (float32 + codes)


def plane_elements(network: Network, ops: set[str] | None = None) -> int:
    """Kernels x input channels of the conv / fc layers (of `ops`): the largest form a
    timing-only stand-in takes in the plan (a plane broadcast over the kernel's R x S)."""
    return _kernel_elements(network, ops, window=False)


def weight_elements(network: Network, ops: set[str] | None = None) -> int:
    """Elements of the conv / fc kernels of `network` (of the ops named in `ops`, default all),
    without building them."""
    return _kernel_elements(network, ops, window=True)


def _kernel_elements(network: Network, ops: set[str] | None, window: bool) -> int:
    """Kernels x input channels of the conv / fc ops (of `ops`), times each kernel's window
    (R x S for a conv, the input's H x W for an fc) when `window`."""
    total = 0
    for op in network.ops:
        if ops is not None and op.name not in ops:
            continue
        x = network.shapes[op.inputs[0]]
        if op.kind == "conv":
            kh, kw = op.attrs["kernel"] if window else (1, 1)
            total += op.attrs["out_channels"] * (x.c // op.attrs["groups"]) * kh * kw
        elif op.kind == "fc":
            total += op.attrs["out_features"] * (x.elements if window else x.c)
    return total


def memory_need_bytes(network: Network, values: bool, batch: int = 1,
                      input_image: bool = True, weights: bool = True,
                      gpu_ops: set[str] | frozenset = frozenset()) -> dict[str, int]:
    """Bytes a run holds at once, by part ('weights', 'activations'); `input_image`: a timing
    run holds the input (read from a .npy file); `weights`: the weights are arrays (values
    mode, a .npz file, a model's, pruned), not stand-ins; `gpu_ops`: the ops on the GPU
    fallback (the others run on the DLA)."""
    arrays = weights or values
    all_elements = weight_elements(network)
    gpu = weight_elements(network, set(gpu_ops)) if gpu_ops else 0
    if arrays:
        dla = DLA_WEIGHT_BYTES * (all_elements - gpu)
    else:
        dla = PLANE_BYTES * (plane_elements(network) - plane_elements(network, set(gpu_ops)))
    weights = dla + (ARRAY_WEIGHT_BYTES * gpu if arrays else 0)
    if values:
        activations = 2 * FLOAT_BYTES * batch * sum(s.elements for s in network.shapes.values())
    else:
        activations = FLOAT_BYTES * batch * network.input_shape.elements if input_image else 0
    return {"weights": weights, "activations": activations}


def available_memory_bytes() -> int | None:
    """Memory this process may still take: the smaller of the kernel's MemAvailable and the
    address-space limit (ulimit -v) left; None when neither is known."""
    limits = []
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    limits.append(int(line.split()[1]) * 1024)
                    break
    except OSError:
        pass
    try:
        import resource
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            limits.append(max(0, soft - _address_space_bytes()))
    except (ImportError, OSError, ValueError):
        pass
    if not limits:
        try:
            limits.append(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
        except (ValueError, OSError, AttributeError):
            return None
    return min(limits)


def _address_space_bytes() -> int:
    """This process's virtual size (what RLIMIT_AS counts)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**28 else f"{n / 2**20:.0f} MiB"


def check_memory(network: Network, values: bool, batch: int = 1, input_image: bool = True,
                 weights: bool = True, gpu_ops: set[str] | frozenset = frozenset(),
                 available: int | None = None) -> None:
    """Refuse a run whose arrays cannot fit in the memory left (one line, the sizes stated)."""
    need = memory_need_bytes(network, values, batch, input_image, weights, gpu_ops)
    total = sum(need.values())
    available = available_memory_bytes() if available is None else available
    if available is None or total <= available:
        return
    mode = "values+timing" if values else "timing"
    raise NvdlaSimError(
        f"network '{network.name}': a {mode} run needs about {gib(total)} of memory (weights "
        f"{gib(need['weights'])}, {'activations' if values else 'input image'} "
        f"{gib(need['activations'])}) and {gib(available)} are available"
        + ("; mode: timing holds no activations" if values else ""))
