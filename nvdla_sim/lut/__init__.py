"""LUT programming: fit the SDP lookup table to a function, measured on the bit-exact kernel.

    from nvdla_sim import lut
    result = lut.fit("sigmoid", (-8, 8), "int8", "nv_large")
    print(result.summary()); result.write("out/lut_sigmoid")

See nvdla_sim/lut/fit.py for the designs and docs/precision.md for the tool.
"""
from .fit import LutFit, Measurement, fit, slope_fixed
from .functions import NAMED as FUNCTIONS, Function, parse_function

__all__ = ["fit", "LutFit", "Measurement", "slope_fixed", "FUNCTIONS", "Function",
           "parse_function"]
