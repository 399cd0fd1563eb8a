"""What `nvdla-sim lut fit` hands out: the registers (dict and .cfg fragment), a summary and a
plot of f(x), the LUT output and the error."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np

from ..compiler.emit import ProgramBuilder
from ..compiler.lut import write_lut
from ..frontends.cfg_writer import write_cfg
from ..program import RegisterProgram, RegWrite
from ..regs import register_map


def lut_writes(result) -> list[RegWrite]:
    """The SDP LUT register writes (table loads, S_LUT_CFG / INFO / START / END / SLOPE)."""
    b = ProgramBuilder(result.hw, "lut", images=False)
    write_lut(b, result.unit, result.lut)
    return [c for c in b.commands if isinstance(c, RegWrite)]


def _fields(result, writes: list[RegWrite]) -> dict[str, dict[str, int]]:
    """UNIT.REG -> {"word": the 32-bit value written, FIELD: its (unsigned) bits, ...}; the
    table data writes are left out (they are the le_table / lo_table lists)."""
    rmap = register_map(result.hw.nvdla_version)
    out: dict[str, dict[str, int]] = {}
    for w in writes:
        unit, reg = rmap.decode_address(w.addr)
        if reg.name == "S_LUT_ACCESS_DATA":
            continue
        fields = {"word": w.value}
        fields.update({name: (w.value & f.mask) >> f.lo for name, f in reg.fields.items()})
        out[f"{unit.name}.{reg.name}"] = fields
    return out


def registers_dict(result) -> dict:
    """The fit as plain data: LUT registers (field values), tables, converter, scales, errors."""
    lut = result.lut
    cvt = result.output_converter
    return {
        "function": result.function.name, "formula": result.function.formula,
        "range": list(result.x_range), "precision": result.precision.name,
        "hardware": result.hw.name, "unit": result.unit, "design": result.design.description,
        "in_scale": result.in_scale, "out_scale": result.out_scale,
        "output_scale": result.output_scale,
        "registers": _fields(result, lut_writes(result)),
        "le_table": list(lut.le_table), "lo_table": list(lut.lo_table),
        "output_converter": {f"{result.unit}.D_CVT_OFFSET": cvt.offset,
                             f"{result.unit}.D_CVT_SCALE": cvt.scale,
                             f"{result.unit}.D_CVT_SHIFT": cvt.shift},
        "max_error": result.max_error, "rms_error": result.rms_error,
        "relative_max_error": result.relative_max_error,
        "lut_max_error": result.lut_only.max_error, "lut_rms_error": result.lut_only.rms_error,
        "hit_statistics": {k: int(v) for k, v in result.hit_statistics.items()},
    }


def cfg_fragment(result) -> str:
    """The LUT register writes as .cfg trace lines (cfg_trace.parse_cfg reads them back)."""
    program = RegisterProgram(f"lut_{_slug(result.function.name)}", lut_writes(result))
    with tempfile.TemporaryDirectory() as tmp:
        text = write_cfg(program, tmp, "fragment", result.hw.nvdla_version).read_text()
    lines = text.splitlines()[1:]             # the writer's own header line
    cvt = result.output_converter
    head = [f"// SDP LUT for {result.function.formula} on [{result.x_range[0]:g}, "
            f"{result.x_range[1]:g}], {result.precision.name}, {result.hw.name}: "
            f"{result.design.description}",
            f"// LUT input unit {result.in_scale:.9g}, entry unit {result.out_scale:.9g}; the "
            f"layer's output convertor: D_CVT_OFFSET={cvt.offset} D_CVT_SCALE={cvt.scale} "
            f"D_CVT_SHIFT={cvt.shift} (output unit {result.output_scale:.9g})",
            f"// measured on the SDP kernel: max error {result.max_error:.6g}, rms "
            f"{result.rms_error:.6g}"]
    return "\n".join(head + lines) + "\n"


def _slug(name: str) -> str:
    s = "".join(c if c.isalnum() else "_" for c in name).strip("_")
    return s[:40] or "function"


def summary(result) -> str:
    stats = result.hit_statistics
    cvt = result.output_converter
    lines = [
        f"{result.function.name} = {result.function.formula} on [{result.x_range[0]:g}, "
        f"{result.x_range[1]:g}], {result.precision.name} SDP LUT on {result.hw.name}",
        f"design: {result.design.description}  (LUT input unit {result.in_scale:.6g}, entry unit "
        f"{result.out_scale:.6g})",
        f"output convertor: offset {cvt.offset} scale {cvt.scale} shift {cvt.shift} "
        f"(output unit {result.output_scale:.6g})",
        f"inputs measured: {result.output.x.size}",
        f"max error {result.max_error:.6g} = {100 * result.relative_max_error:.3f} % of the output "
        f"range {result.output_range:.6g};  rms error {result.rms_error:.6g}",
        f"LUT alone (before output rounding): max {result.lut_only.max_error:.6g}, rms "
        f"{result.lut_only.rms_error:.6g}",
        "hits: " + ", ".join(f"{k[4:]} {int(v)}" for k, v in stats.items()
                             if k.startswith("lut_")),
    ]
    return "\n".join(lines)


def plot(result, path: Path) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    m = result.output
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6), sharex=True,
                                      gridspec_kw={"height_ratios": [2, 1]})
    top.plot(m.x, m.y - m.error, label=f"f(x) = {result.function.formula}", lw=2)
    top.plot(m.x, m.y, label=f"SDP LUT output ({result.precision.name})", lw=1)
    top.set_ylabel("value")
    top.legend(loc="best", fontsize=8)
    top.set_title(f"{result.function.name} on {result.hw.name}: {result.design.description}",
                  fontsize=9)
    bottom.plot(m.x, m.error, lw=0.8, color="C3")
    bottom.set_ylabel("error")
    bottom.set_xlabel("x")
    bottom.axhline(0, color="grey", lw=0.5)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_outputs(result, folder) -> dict[str, Path]:
    """lut.cfg (fragment), lut.json (registers_dict), lut.png (plot) in `folder`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {"cfg": folder / "lut.cfg", "json": folder / "lut.json", "plot": folder / "lut.png"}
    paths["cfg"].write_text(cfg_fragment(result))
    paths["json"].write_text(json.dumps(registers_dict(result), indent=1,
                                        default=lambda v: v.item()
                                        if isinstance(v, np.generic) else str(v)) + "\n")
    plot(result, paths["plot"])
    return paths
