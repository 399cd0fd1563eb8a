"""LUT programming: fit the SDP lookup table to a function, measured on the bit-exact kernel.

    from nvdla_sim import lut
    result = lut.fit("sigmoid", (-8, 8), "int8", "nv_large")
    print(result.summary()); result.write("out/lut_sigmoid")

See nvdla_sim/lut/fit.py for the designs and docs/precision.md for the tool.

The names below load on first use (`nvdla-sim run` imports `nvdla_sim.lut.cli` for its parser and
never fits a LUT: the fitting code and its imports cost about 0.2 s).  `lut.fit` is the function,
as before, even after the submodule `nvdla_sim.lut.fit` has been imported (which would otherwise
bind the package attribute `fit` to the module).
"""
from __future__ import annotations

import importlib
import sys
import types

__all__ = ["fit", "LutFit", "Measurement", "slope_fixed", "FUNCTIONS", "Function",
           "parse_function"]

_FROM_FIT = ("fit", "LutFit", "Measurement", "slope_fixed")
_FROM_FUNCTIONS = {"FUNCTIONS": "NAMED", "Function": "Function", "parse_function": "parse_function"}


def __getattr__(name: str):
    if name in _FROM_FIT:
        value = getattr(importlib.import_module(f"{__name__}.fit"), name)
    elif name in _FROM_FUNCTIONS:
        value = getattr(importlib.import_module(f"{__name__}.functions"), _FROM_FUNCTIONS[name])
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    object.__setattr__(sys.modules[__name__], name, value)     # cached: no second lookup
    return value


class _LutPackage(types.ModuleType):
    """Keeps `nvdla_sim.lut.fit` the function: importing the submodule sets the package attribute
    `fit` to the module, which is dropped here; the function then loads through __getattr__."""

    def __setattr__(self, name: str, value) -> None:
        if name == "fit" and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _LutPackage
