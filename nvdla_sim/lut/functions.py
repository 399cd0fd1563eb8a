"""Functions a LUT can be fitted to: named ones and safe Python expressions of x.

An expression is parsed and checked before it runs: numbers, x, + - * / ** %, comparisons,
calls of numpy ufuncs and of where / clip / sinc / round (by bare name, `exp(x)`, or as
`np.exp(x)` / `numpy.exp(x)`) and numpy
constants (pi, e, inf); no other names, no attribute access except on np, no builtins.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import NvdlaSimError


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))          # = 1 / (1 + e^-x), no overflow


NAMED: dict[str, tuple[Callable[[np.ndarray], np.ndarray], str]] = {
    "sigmoid": (_sigmoid, "1 / (1 + exp(-x))"),
    "tanh": (np.tanh, "tanh(x)"),
    "exp": (np.exp, "exp(x)"),
    "rsqrt": (lambda x: 1.0 / np.sqrt(x), "1 / sqrt(x) (LRN's x^-0.5)"),
}

_ALLOWED_NODES = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Compare, ast.Call, ast.Name,
                  ast.Load, ast.Constant, ast.Attribute, ast.IfExp,
                  ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow, ast.Mod, ast.FloorDiv,
                  ast.USub, ast.UAdd, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq)


# numpy functions that are not ufuncs but only compute on arrays
_ARRAY_FUNCTIONS = {"where", "clip", "sinc", "round"}


def _numpy_member(name: str, expression: str):
    value = getattr(np, name, None) if not name.startswith("_") else None
    if not (isinstance(value, (np.ufunc, float)) or name in _ARRAY_FUNCTIONS):
        raise NvdlaSimError(f"function '{expression}': '{name}' is not a numpy ufunc or constant")
    return value


@dataclass(frozen=True)
class Function:
    name: str                                   # the name or the expression as given
    formula: str
    fn: Callable[[np.ndarray], np.ndarray]

    def __call__(self, x) -> np.ndarray:
        x = np.asarray(x, np.float64)
        with np.errstate(all="ignore"):
            try:
                y = self.fn(x)
            except (ArithmeticError, ValueError, TypeError) as exc:
                raise NvdlaSimError(f"function '{self.name}' fails: {exc}") from None
        y = np.broadcast_to(np.asarray(y, np.float64), x.shape)
        return np.array(y)


def parse_function(text: str) -> Function:
    """A named function (sigmoid, tanh, exp, rsqrt) or a numpy expression of x."""
    text = str(text).strip()
    if text in NAMED:
        fn, formula = NAMED[text]
        return Function(text, formula, fn)
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise NvdlaSimError(f"function '{text}': not a Python expression ({exc.msg})") from None
    names: dict[str, object] = {}
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise NvdlaSimError(f"function '{text}': {type(node).__name__} is not allowed "
                                "(numbers, x, arithmetic and numpy functions only)")
        if isinstance(node, ast.Attribute):
            if not (isinstance(node.value, ast.Name) and node.value.id in ("np", "numpy")):
                raise NvdlaSimError(f"function '{text}': attributes only of np (np.exp, ...)")
            _numpy_member(node.attr, text)
        elif isinstance(node, ast.Name) and node.id not in ("x", "np", "numpy"):
            names[node.id] = _numpy_member(node.id, text)
        elif isinstance(node, ast.Constant) and not isinstance(node.value, (int, float)):
            raise NvdlaSimError(f"function '{text}': only numeric constants are allowed")
    if not any(isinstance(n, ast.Name) and n.id == "x" for n in ast.walk(tree)):
        raise NvdlaSimError(f"function '{text}': the expression does not use x")
    code = compile(tree, "<lut function>", "eval")
    namespace = {"__builtins__": {}, "np": np, "numpy": np, **names}

    def fn(x: np.ndarray) -> np.ndarray:
        return eval(code, namespace, {"x": x})       # checked above: numpy calls only

    return Function(text, text, fn)
