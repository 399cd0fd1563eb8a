"""Generate nvdla_sim/regs/nvdla_registers.json from the decoded .rdl listing.

The input is `../shared/docs/nvdla-v2-registers.json` (every v2 unit, register and field as
declared in nvdla/hw master `spec/manual/*.rdl`).  The output is the project's own compact table:
per unit its v2 and v1 CSB base, per register its offset and fields as [lo, hi, access, reset]
plus enum names.  Re-run this script whenever the source listing changes; the engine only reads
the generated file.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

# Unit bases of NVDLA v1 (nvdlav1 cmod/include/arnvdla.h); offsets inside a unit are the same.
V1_BASES = {
    "GLB": 0x0000, "MCIF": 0x2000, "CVIF": 0x3000, "BDMA": 0x4000, "CDMA": 0x5000,
    "CSC": 0x6000, "CMAC_A": 0x7000, "CMAC_B": 0x8000, "CACC": 0x9000, "SDP_RDMA": 0xA000,
    "SDP": 0xB000, "PDP_RDMA": 0xC000, "PDP": 0xD000, "CDP_RDMA": 0xE000, "CDP": 0xF000,
    "RBK": 0x10000, "GEC": 0x1000,
}


def main(src: Path, dst: Path) -> None:
    rdl = json.loads(src.read_text())
    units = {}
    for full_name, unit in sorted(rdl.items()):
        name = full_name.removeprefix("NVDLA_")
        regs = {}
        for reg_name, reg in sorted(unit["regs"].items(), key=lambda kv: kv[1]["offset"]):
            fields = {}
            for f_name, f in reg["fields"].items():
                fields[f_name] = [f["lo"], f["hi"], f["sw"], f["reset"]]
                if f.get("enum"):
                    fields[f_name].append(f["enum"])
            regs[reg_name] = {"offset": reg["offset"], "fields": fields}
        units[name] = {"base_v2": unit["base"], "base_v1": V1_BASES.get(name), "regs": regs}
    dst.write_text(json.dumps(units, indent=1, sort_keys=True) + "\n")
    print(f"wrote {dst} ({len(units)} units, {sum(len(u['regs']) for u in units.values())} registers)")


if __name__ == "__main__":
    here = Path(__file__).resolve().parent.parent
    src = Path(sys.argv[1]) if len(sys.argv) > 1 else here.parent / "shared/docs/nvdla-v2-registers.json"
    main(src, here / "nvdla_sim/regs/nvdla_registers.json")
