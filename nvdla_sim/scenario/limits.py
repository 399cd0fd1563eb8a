"""What a scenario run needs in host memory, checked against what the machine has before anything
is allocated: a network too big for this machine is a one-line error stating the size, not a
process the kernel kills after minutes.

The estimate counts the arrays a run holds at once, in float32 (4 bytes per element):

- weights (conv / fully connected kernels) when they are arrays: values mode, or weights read
  from a .npz file (timing-only runs use stand-ins of the right shapes that hold no memory:
  `weights.stand_in_weights`), twice: the float32 array and the copy lowering stores in the
  chosen precision;
- values mode: every tensor's float32 reference, plus the DLA's dequantised output of each,
  plus the input;
- timing mode: the input image when one is read from a .npy file (activations are sized
  tokens, never data; no random image is drawn).

It is a lower bound (no interpreter, engine or report overhead), so it refuses only runs that
certainly cannot fit; what is left over is caught as MemoryError by the CLI and the sweep.
"""
from __future__ import annotations

import os

from ..compiler.network import Network
from ..errors import NvdlaSimError

FLOAT_BYTES = 4


def weight_elements(network: Network) -> int:
    """Elements of every conv / fc kernel of `network` (without building them)."""
    total = 0
    for op in network.ops:
        x = network.shapes[op.inputs[0]]
        if op.kind == "conv":
            kh, kw = op.attrs["kernel"]
            total += op.attrs["out_channels"] * (x.c // op.attrs["groups"]) * kh * kw
        elif op.kind == "fc":
            total += op.attrs["out_features"] * x.elements
    return total


def memory_need_bytes(network: Network, values: bool, batch: int = 1,
                      input_image: bool = True, weights: bool = True) -> dict[str, int]:
    """Bytes a run holds at once, by part ('weights', 'activations'); `input_image`: a timing
    run holds the input (read from a .npy file); `weights`: the weights are arrays."""
    weights = 2 * FLOAT_BYTES * weight_elements(network) if weights or values else 0
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
                 weights: bool = True, available: int | None = None) -> None:
    """Refuse a run whose arrays cannot fit in the memory left (one line, the sizes stated)."""
    need = memory_need_bytes(network, values, batch, input_image, weights)
    total = sum(need.values())
    available = available_memory_bytes() if available is None else available
    if available is None or total <= available:
        return
    mode = "values+timing" if values else "timing"
    raise NvdlaSimError(
        f"network '{network.name}': a {mode} run needs at least {gib(total)} of memory (weights "
        f"{gib(need['weights'])}, {'activations' if values else 'input image'} "
        f"{gib(need['activations'])}) and {gib(available)} are available"
        + ("; mode: timing holds no activations" if values else ""))
