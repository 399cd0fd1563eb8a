"""Helpers for tests that program the convolution pipeline (CDMA, CSC, CMAC, CACC) by hand on
nv_full: register dictionaries per unit and the program that loads, arms and enables them."""
from __future__ import annotations

import numpy as np

from nvdla_sim.datatype import DataType
from nvdla_sim.program import IntrNotify, MemLoad, RegisterProgram

from program_helpers import reg_writes

SRC, WT = 0x8000_0000, 0x8100_0000          # feature data and weights in DBB
CONV_UNITS = ("CACC", "CMAC_A", "CMAC_B", "CSC", "CDMA")


def conv_registers(cdma: dict, csc: dict, proc: DataType, out_w: int, out_h: int, kernels: int,
                   conv_mode: int | None = None, clip: int | None = None,
                   overrides: dict | None = None) -> dict[str, dict[str, int]]:
    """{"UNIT.REG": fields}: every unit's S_POINTER, the CDMA and CSC registers given, CMAC_A/B
    and CACC at `proc` precision with the output size; `overrides` ("UNIT.REG": fields) merge
    field by field.  CONV_MODE / CLIP_TRUNCATE are written only when given."""
    mac = {"D_MISC_CFG": {"PROC_PRECISION": proc.code} if conv_mode is None else
           {"CONV_MODE": conv_mode, "PROC_PRECISION": proc.code}}
    cacc = {**mac, "D_DATAOUT_SIZE_0": {"DATAOUT_WIDTH": out_w - 1, "DATAOUT_HEIGHT": out_h - 1},
            "D_DATAOUT_SIZE_1": {"DATAOUT_CHANNEL": kernels - 1}}
    if clip is not None:
        cacc["D_CLIP_CFG"] = {"CLIP_TRUNCATE": clip}
    regs = {f"{u}.S_POINTER": {"PRODUCER": 0} for u in CONV_UNITS}
    for unit, fields in (("CDMA", cdma), ("CSC", csc), ("CMAC_A", mac), ("CMAC_B", mac),
                         ("CACC", cacc)):
        for reg, f in fields.items():
            regs[f"{unit}.{reg}"] = f
    # The CSC reads CBUF with its own slice size, weight bytes and atomic-operation count
    # (units/checks.py): a program the hardware runs gives it the CDMA's values.
    for reg in ("D_ENTRY_PER_SLICE", "D_WEIGHT_BYTES"):
        if f"CDMA.{reg}" in regs:
            regs.setdefault(f"CSC.{reg}", regs[f"CDMA.{reg}"])
    regs.setdefault("CSC.D_ATOMICS", {"ATOMICS": out_w * out_h - 1})
    for name, f in (overrides or {}).items():
        regs[name] = {**regs.get(name, {}), **f}
    return regs


def conv_program(name: str, regs: dict, feature: np.ndarray, weights: np.ndarray,
                 cdma_interrupts: bool = False) -> RegisterProgram:
    """Load the feature image at SRC and the weights at WT, arm CACC's interrupt (and CDMA_DAT /
    CDMA_WT's), write `regs`, then OP_EN of every convolution unit (the last writes)."""
    notify = [IntrNotify("CACC", 0, "cacc")]
    if cdma_interrupts:
        notify += [IntrNotify("CDMA_DAT", 0, "dat"), IntrNotify("CDMA_WT", 0, "wt")]
    return RegisterProgram(name, [
        MemLoad("pri_mem", SRC, feature), MemLoad("pri_mem", WT, weights), *notify,
        *reg_writes(regs, version=1),
        *reg_writes({f"{u}.D_OP_ENABLE": {"OP_EN": 1} for u in CONV_UNITS}, version=1)])


def image_cdma_registers(misc: dict, pixel_format: int, width: int, height: int, channels: int,
                         line_stride: int, byte_per_kernel: int, kernels: int, weight_bytes: int,
                         **format_fields: int) -> dict[str, dict[str, int]]:
    """CDMA's registers for pitch-linear image input at SRC and weights at WT (one CBUF entry
    per slice); callers add converter, mean, padding and bank registers.  `format_fields` go to
    D_DATAIN_FORMAT beside PIXEL_FORMAT (e.g. PIXEL_SIGN_OVERRIDE)."""
    return {
        "D_MISC_CFG": misc,
        "D_DATAIN_FORMAT": {"DATAIN_FORMAT": 1, "PIXEL_FORMAT": pixel_format, **format_fields},
        "D_DATAIN_SIZE_0": {"DATAIN_WIDTH": width - 1, "DATAIN_HEIGHT": height - 1},
        "D_DATAIN_SIZE_1": {"DATAIN_CHANNEL": channels - 1},
        "D_DAIN_RAM_TYPE": {"DATAIN_RAM_TYPE": 1},
        "D_DAIN_ADDR_LOW_0": {"DATAIN_ADDR_LOW_0": SRC},
        "D_LINE_STRIDE": {"LINE_STRIDE": line_stride}, "D_ENTRY_PER_SLICE": {"ENTRIES": 0},
        "D_WEIGHT_SIZE_0": {"BYTE_PER_KERNEL": byte_per_kernel - 1},
        "D_WEIGHT_SIZE_1": {"WEIGHT_KERNEL": kernels - 1},
        "D_WEIGHT_RAM_TYPE": {"WEIGHT_RAM_TYPE": 1},
        "D_WEIGHT_ADDR_LOW": {"WEIGHT_ADDR_LOW": WT},
        "D_WEIGHT_BYTES": {"WEIGHT_BYTES": weight_bytes}}
