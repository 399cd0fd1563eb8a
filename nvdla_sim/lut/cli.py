"""`nvdla-sim lut fit`: program the SDP LUT for a function and report the measured error."""
from __future__ import annotations

import argparse
from pathlib import Path


def add_lut_parser(sub) -> None:
    """Register `lut fit` on the nvdla-sim subcommand parser."""
    lut = sub.add_parser("lut", help="lookup-table tools (lut fit: program the SDP LUT for a "
                                     "function and measure it on the bit-exact kernel)")
    lsub = lut.add_subparsers(dest="lut_command", required=True)
    f = lsub.add_parser("fit", help="fit the SDP LUT to a function over an input range")
    f.add_argument("--function", required=True,
                   help="sigmoid, tanh, exp, rsqrt, or a numpy expression of x (e.g. 'x/(1+abs(x))')")
    f.add_argument("--range", nargs=2, type=float, required=True, metavar=("LOW", "HIGH"),
                   help="input range of x")
    f.add_argument("--project", default="nv_large", help="hardware preset (default nv_large)")
    f.add_argument("--hw-config", help="hardware YAML (a preset plus overrides) instead of --project")
    f.add_argument("--precision", default="int8", choices=("int8", "int16", "fp16"),
                   help="SDP processing / output precision (default int8)")
    f.add_argument("--in-scale", type=float,
                   help="real value of one LUT input unit (INT; default max|range| / 127 or 32767)")
    f.add_argument("--out-scale", type=float,
                   help="real value of one table entry unit (INT; default max|f| / 32767)")
    f.add_argument("--designs", default="auto", choices=("auto", "linear", "exponent"),
                   help="table designs to try (default auto: all, the best measured wins)")
    f.add_argument("--out", type=Path,
                   help="write lut.cfg (register fragment), lut.json and lut.png here")
    f.set_defaults(func=cmd_lut_fit)


def cmd_lut_fit(args: argparse.Namespace) -> int:
    from ..config import load_hardware
    from .fit import fit
    hw = load_hardware(args.hw_config if args.hw_config else args.project)
    result = fit(args.function, tuple(args.range), args.precision, hw, args.in_scale,
                 args.out_scale, args.designs)
    print(result.summary())
    if args.out:
        paths = result.write(args.out)
        print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0
