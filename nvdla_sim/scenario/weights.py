"""Network weights: seeded random weights for built-in networks, batch-norm folding, .npz files.

Weights are float32 numpy arrays keyed by op name, then by role:

    conv       weight (K, C/groups, R, S), bias (K,)
    fc         weight (K, C*H*W) over the input in C, H, W order, bias (K,)
    prelu      slope (C,)
    batchnorm  scale (C,), bias (C,)        (a per-channel affine y = x*scale + bias)

Random weights follow He initialisation (std sqrt(2/fan_in)) so that activations keep their range
through ReLU layers; a conv marked `batchnorm` gets random batch-norm statistics folded into its
weights and bias, as TensorRT and the NVDLA compiler fold them.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..compiler.network import Network
from ..errors import NvdlaSimError

Weights = dict[str, dict[str, np.ndarray]]

BN_EPSILON = 1e-5


def fold_batchnorm(weight: np.ndarray, bias: np.ndarray, gamma: np.ndarray, beta: np.ndarray,
                   mean: np.ndarray, var: np.ndarray, eps: float = BN_EPSILON
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Conv (weight, bias) followed by batch norm -> one conv: w*g/sqrt(v+eps), (b-m)*g/sqrt(v+eps)+beta."""
    factor = (gamma / np.sqrt(var + eps)).astype(np.float64)
    w = weight.astype(np.float64) * factor.reshape((-1,) + (1,) * (weight.ndim - 1))
    b = (bias.astype(np.float64) - mean) * factor + beta
    return w.astype(np.float32), b.astype(np.float32)


def batchnorm_affine(gamma, beta, mean, var, eps: float = BN_EPSILON) -> tuple[np.ndarray, np.ndarray]:
    """A standalone batch norm as the per-channel affine (scale, bias) the `batchnorm` op applies."""
    scale = np.asarray(gamma, np.float64) / np.sqrt(np.asarray(var, np.float64) + eps)
    bias = np.asarray(beta, np.float64) - np.asarray(mean, np.float64) * scale
    return scale.astype(np.float32), bias.astype(np.float32)


def deconv_weight_shape(op, x) -> tuple[int, int, int, int]:
    """A deconvolution's weights: (C, K/groups, R, S), ONNX ConvTranspose's layout."""
    g = op.attrs.get("groups", 1)
    return (x.c, op.attrs["out_channels"] // g) + tuple(op.attrs["kernel"])


def random_weights(network: Network, seed: int) -> Weights:
    """He-initialised weights for every op of `network` that has parameters, from `seed`."""
    rng = np.random.default_rng(seed)
    out: Weights = {}
    for op in network.ops:
        x = network.shapes[op.inputs[0]]
        if op.kind == "conv":
            k = op.attrs["out_channels"]
            cg = x.c // op.attrs["groups"]
            r, s = op.attrs["kernel"]
            fan_in = cg * r * s
            w = rng.standard_normal((k, cg, r, s), dtype=np.float32) * np.float32(np.sqrt(2.0 / fan_in))
            b = rng.normal(0.0, 0.1, k) if op.attrs.get("bias", True) else np.zeros(k)
            if op.attrs.get("batchnorm"):
                gamma = rng.uniform(0.6, 1.0, k)
                beta = rng.normal(0.0, 0.1, k)
                # Statistics a trained net would see: conv outputs centred near b with unit-ish variance.
                mean = b + rng.normal(0.0, 0.1, k)
                var = rng.uniform(0.7, 1.3, k)
                wf, bf = fold_batchnorm(w.astype(np.float32), b.astype(np.float32), gamma, beta, mean, var)
            else:
                wf, bf = w.astype(np.float32), b.astype(np.float32)
            out[op.name] = {"weight": wf, "bias": bf}
        elif op.kind == "fc":
            k = op.attrs["out_features"]
            n = x.elements
            gain = 2.0 if op.attrs.get("relu") else 1.0
            w = rng.standard_normal((k, n), dtype=np.float32) * np.float32(np.sqrt(gain / n))
            b = rng.normal(0.0, 0.1, k) if op.attrs.get("bias", True) else np.zeros(k)
            out[op.name] = {"weight": w.astype(np.float32), "bias": b.astype(np.float32)}
        elif op.kind == "deconv":        # ONNX ConvTranspose layout (C, K/groups, R, S)
            shape = deconv_weight_shape(op, x)
            fan_in = shape[0] * shape[2] * shape[3] // (op.attrs["stride"][0] * op.attrs["stride"][1])
            w = rng.standard_normal(shape, dtype=np.float32) * np.float32(np.sqrt(2.0 / max(fan_in, 1)))
            k = op.attrs["out_channels"]
            b = rng.normal(0.0, 0.1, k) if op.attrs.get("bias", True) else np.zeros(k)
            out[op.name] = {"weight": w, "bias": b.astype(np.float32)}
        elif op.kind == "prelu" and "slope" not in op.attrs:
            out[op.name] = {"slope": rng.uniform(0.05, 0.3, x.c).astype(np.float32)}
        elif op.kind == "batchnorm":
            scale, bias = batchnorm_affine(rng.uniform(0.6, 1.0, x.c), rng.normal(0.0, 0.1, x.c),
                                           rng.normal(0.0, 0.1, x.c), rng.uniform(0.7, 1.3, x.c))
            out[op.name] = {"scale": scale, "bias": bias}
    return out


def expected_shapes(network: Network) -> dict[str, dict[str, tuple]]:
    """The array shape each op's weights must have."""
    shapes: dict[str, dict[str, tuple]] = {}
    for op in network.ops:
        x = network.shapes[op.inputs[0]]
        if op.kind == "conv":
            k = op.attrs["out_channels"]
            shapes[op.name] = {"weight": (k, x.c // op.attrs["groups"]) + tuple(op.attrs["kernel"]),
                               "bias": (k,)}
        elif op.kind == "fc":
            shapes[op.name] = {"weight": (op.attrs["out_features"], x.elements),
                               "bias": (op.attrs["out_features"],)}
        elif op.kind == "deconv":
            shapes[op.name] = {"weight": deconv_weight_shape(op, x), "bias": (op.attrs["out_channels"],)}
        elif op.kind == "prelu" and "slope" not in op.attrs:
            shapes[op.name] = {"slope": (x.c,)}
        elif op.kind == "batchnorm":
            shapes[op.name] = {"scale": (x.c,), "bias": (x.c,)}
    return shapes


def check_weights(network: Network, weights: Weights, where: str = "weights") -> None:
    """Every op that needs parameters has them, with the right shapes."""
    for name, roles in expected_shapes(network).items():
        have = weights.get(name)
        if have is None:
            raise NvdlaSimError(f"{where}: no weights for layer '{name}'")
        for role, shape in roles.items():
            if role not in have:
                raise NvdlaSimError(f"{where}: layer '{name}' has no '{role}'")
            if tuple(have[role].shape) != shape:
                raise NvdlaSimError(f"{where}: layer '{name}' {role} has shape {tuple(have[role].shape)}, "
                                    f"expected {shape}")


def load_npz(path: Path, network: Network) -> Weights:
    """Weights from an .npz whose keys are '<layer>.<role>' (e.g. conv1.weight, conv1.bias)."""
    try:
        data = np.load(path)
    except FileNotFoundError:
        raise NvdlaSimError(f"{path}: file not found") from None
    except (OSError, ValueError) as exc:
        raise NvdlaSimError(f"{path}: not a readable .npz file ({exc})") from None
    out: Weights = {}
    for key in data.files:
        layer, _, role = key.rpartition(".")
        if not layer:
            raise NvdlaSimError(f"{path}: key '{key}' is not '<layer>.<role>'")
        out.setdefault(layer, {})[role] = np.asarray(data[key], np.float32)
    check_weights(network, out, str(path))
    return out


def prune(network: Network, weights: Weights, sparsity: float, pattern: str = "random",
          seed: int = 0) -> Weights:
    """Conv and fc weights with a share `sparsity` set to zero, so pruned networks exist for the
    compressed-weight studies: `random` zeroes each weight with that probability (seeded),
    `2:4` keeps the two largest magnitudes of every four consecutive input channels at each
    kernel position (NVIDIA's structured sparsity; channels beyond a multiple of 4 are kept).
    Biases, batch-norm and other parameters are unchanged."""
    if sparsity <= 0.0:
        return weights
    rng = np.random.default_rng(seed)
    out: Weights = {}
    for op in network.ops:
        if op.name not in weights:
            continue
        roles = dict(weights[op.name])
        if op.kind in ("conv", "fc") and "weight" in roles:
            w = np.array(roles["weight"], np.float32)
            if pattern == "2:4":
                w4 = w if op.kind == "conv" else w.reshape(w.shape[0], -1, 1, 1)
                c4 = w4.shape[1] // 4 * 4
                blocks = w4[:, :c4].reshape(w4.shape[0], c4 // 4, 4, *w4.shape[2:])
                order = np.argsort(np.abs(blocks), axis=2, kind="stable")
                drop = np.zeros(blocks.shape, bool)
                np.put_along_axis(drop, order[:, :, :2], True, axis=2)
                blocks[drop] = 0.0
                w4[:, :c4] = blocks.reshape(w4.shape[0], c4, *w4.shape[2:])
                w = w4.reshape(w.shape)
            else:
                w[rng.random(w.shape) < sparsity] = 0.0
            roles["weight"] = w
        out[op.name] = roles
    return {**weights, **out}


def stand_in_weights(network: Network, seed: int) -> Weights:
    """Timing-only runs: weights of the right shapes without computing ResNet-sized random tensors.

    A conv / fc weight tensor is one random magnitude per kernel broadcast over the kernel (a
    read-only view: no memory, no time); biases, batch-norm scale/bias and PReLU slopes are short
    random vectors (never zero where `random_weights` gives non-zero ones).  The compiler's
    decisions that look at values see generic numbers either way (per-kernel scales that differ,
    non-zero biases), so the register program has the same writes as with `random_weights`; only
    value fields (operand values, shifts) differ, which timing never reads.  The cycles equal
    those of `random_weights` (tests/test_speed_invariants.py holds every shipped scenario's,
    recorded with random weights; tests/test_speed_weights.py compares the programs)."""
    rng = np.random.default_rng(seed)

    def vec(n: int, nonzero: bool = True) -> np.ndarray:
        return rng.uniform(0.05, 0.3, n).astype(np.float32) if nonzero else np.zeros(n, np.float32)

    out: Weights = {}
    for op in network.ops:
        x = network.shapes[op.inputs[0]]
        if op.kind == "conv":
            k = op.attrs["out_channels"]
            r, s = op.attrs["kernel"]
            shape = (k, x.c // op.attrs["groups"], r, s)
            nonzero = op.attrs.get("bias", True) or bool(op.attrs.get("batchnorm"))
            out[op.name] = {"weight": np.broadcast_to(vec(k)[:, None, None, None], shape),
                            "bias": vec(k, nonzero)}
        elif op.kind == "fc":
            k = op.attrs["out_features"]
            out[op.name] = {"weight": np.broadcast_to(vec(k)[:, None], (k, x.elements)),
                            "bias": vec(k, op.attrs.get("bias", True))}
        elif op.kind == "deconv":
            shape = deconv_weight_shape(op, x)
            out[op.name] = {"weight": np.broadcast_to(vec(shape[0])[:, None, None, None], shape),
                            "bias": vec(op.attrs["out_channels"], op.attrs.get("bias", True))}
        elif op.kind == "prelu" and "slope" not in op.attrs:
            out[op.name] = {"slope": vec(x.c)}
        elif op.kind == "batchnorm":
            out[op.name] = {"scale": vec(x.c), "bias": vec(x.c)}
    return out
