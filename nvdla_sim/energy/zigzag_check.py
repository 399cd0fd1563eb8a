"""Cross-check against ZigZag (KU Leuven's accelerator design-space explorer, `zigzag-dse`).

`python -m nvdla_sim.energy.zigzag_check [--layers N] [--out DIR]` describes nv_large to ZigZag
(a 32 x 64 MAC array: K over D1, C over D2; a weight register per MAC cell, an accumulator per
kernel lane shared by the C adder tree; the CBUF holding inputs and weights; DRAM for everything),
with the same per-access energies this simulator charges (CACTI CBUF array, INT8 MAC, DDR4 pJ/bit,
the CACC assembly buffer per kernel lane), runs some ResNet-50 convolutions through ZigZag's cost
model (its own temporal-mapping search, minimal energy) and prints, per layer, the simulator's and
ZigZag's MACs, CBUF bits read/written, DRAM bits and energy by level.  docs/energy.md has the
table and why they differ.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import logging
import tempfile
from dataclasses import replace
from pathlib import Path

import yaml

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "resnet50_nv_large.yaml"
DEFAULT_LAYERS = ("res2a_branch2a", "res3b_branch2b", "res4b_branch2b", "res5b_branch2a")


def accelerator(hw, pj: dict, name: str = "nv_large") -> dict:
    entry_bits = hw.cbuf.bank_width_bytes * 8
    dram_bits = hw.primary_memif.width_bits
    acc_pj = pj["cacc_abuf_read.INT8"] * 2 / hw.atomic_k        # two halves per 32 kernels

    def port(name, kind, bw, alloc):
        return {"name": name, "type": kind, "bandwidth_min": bw, "bandwidth_max": bw,
                "allocation": alloc}
    return {
        "name": name,
        "memories": {
            "w_reg": {"size": 8, "r_cost": 0.0, "w_cost": 0.0, "area": 0.0, "latency": 1,
                      "operands": ["I2"], "served_dimensions": [],
                      "ports": [port("r_port_1", "read", 8, ["I2, tl"]),
                                port("w_port_1", "write", 8, ["I2, fh"])]},
            # one stripe (at most 2 x ATOMIC_K output atoms) of 34-bit partial sums per kernel
            # lane: CSC keeps a package's weights for the whole stripe
            "cacc": {"size": 34 * 2 * hw.atomic_k, "r_cost": acc_pj, "w_cost": acc_pj, "area": 0.0, "latency": 1,
                     "operands": ["O"], "served_dimensions": ["D2"],
                     "ports": [port("r_port_1", "read", 34, ["O, tl", "O, th"]),
                               port("w_port_1", "write", 34, ["O, fh", "O, fl"])]},
            "cbuf": {"size": hw.cbuf.total_bytes * 8, "r_cost": pj["cbuf_read"],
                     "w_cost": pj["cbuf_write"], "area": 0.0, "latency": 1,
                     "operands": ["I1", "I2"], "served_dimensions": ["D1", "D2"],
                     "ports": [port("r_port_1", "read", entry_bits, ["I1, tl", "I2, tl"]),
                               port("w_port_1", "write", entry_bits, ["I1, fh", "I2, fh"])]},
            "dram": {"size": 10 ** 10, "r_cost": pj["dram_bit"] * dram_bits,
                     "w_cost": pj["dram_bit"] * dram_bits, "area": 0.0, "latency": 1,
                     "operands": ["I1", "I2", "O"], "served_dimensions": ["D1", "D2"],
                     "ports": [port("rw_port_1", "read_write", dram_bits,
                                    ["I1, fh", "I1, tl", "I2, fh", "I2, tl", "O, fh", "O, tl",
                                     "O, fl", "O, th"])]},
        },
        "operational_array": {"unit_energy": pj["mac.INT8"], "unit_area": 1.0,
                              "dimensions": ["D1", "D2"], "sizes": [hw.atomic_k, hw.atomic_c]},
    }


def mapping(hw) -> list:
    return [{"name": "default", "spatial_mapping": {"D1": [f"K, {hw.atomic_k}"],
                                                    "D2": [f"C, {hw.atomic_c}"]},
             "memory_operand_links": {"O": "O", "W": "I2", "I": "I1"}}]


def workload(layer, i: int) -> dict:
    c = layer.conv
    (r, s), (sh, sw) = c.kernel, c.stride
    return {"id": i, "name": layer.name, "operator_type": "Conv",
            "equation": "O[b][k][oy][ox]+=W[k][c][fy][fx]*I[b][c][iy][ix]",
            "dimension_relations": [f"ix={sw}*ox+1*fx", f"iy={sh}*oy+1*fy"],
            "loop_dims": ["B", "K", "C", "OY", "OX", "FY", "FX"],
            "loop_sizes": [1, c.out_channels, c.in_channels, c.out_h, c.out_w, r, s],
            "operand_precision": {"W": 8, "I": 8, "O": 34, "O_final": 8},
            "operand_source": {"I": i}}


def run(layers=DEFAULT_LAYERS, out: Path | None = None, prep=None, report=None) -> list[dict]:
    """Compare `layers` of a ResNet-50 nv_large run (`prep` + its `report`, or a fresh
    timing-only run of scenarios/resnet50_nv_large.yaml)."""
    from zigzag.api import get_hardware_performance_zigzag
    if prep is None or report is None:
        from ..compiler.lower import lower_and_run
        from ..report.tables import build_report
        from ..scenario import runner
        from ..scenario.schema import load_scenario
        prep = runner.prepare(replace(load_scenario(SCENARIO), mode="timing"))
        result = lower_and_run(prep.plan, runner.context(prep))
        report = build_report(prep, result)
    scn = prep.scenario
    energy = report.energy
    pj = energy["pj_per_event"]
    hw = scn.hardware
    rows = {r.layer: r for r in report.rows}
    out_rows = []
    folder = Path(out) if out else Path(tempfile.mkdtemp(prefix="zigzag-nvdla-"))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "accelerator.yaml").write_text(yaml.safe_dump(accelerator(hw, pj), sort_keys=False))
    (folder / "mapping.yaml").write_text(yaml.safe_dump(mapping(hw), sort_keys=False))
    logging.disable(logging.CRITICAL)
    for name in layers:
        hwl = [lay for lay in prep.plan.layers if lay.row == name and lay.conv is not None][0]
        wl = folder / f"{name}.yaml"
        wl.write_text(yaml.safe_dump([workload(hwl, 0)], sort_keys=False))
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            e_total, lat, cmes = get_hardware_performance_zigzag(
                str(wl), str(folder / "accelerator.yaml"), str(folder / "mapping.yaml"),
                opt="energy", dump_folder=str(folder / name), loma_show_progress_bar=False)
        cme = cmes[0][1][0][0] if isinstance(cmes[0][1], list) else cmes[0][0]
        out_rows.append(compare(name, rows[name], cme, hw))
    return out_rows


def _levels(cme) -> dict:
    """Per memory level of a ZigZag cost-model evaluation: word accesses (one word = the port
    width) read and written, all operands, and energy (pJ)."""
    words: dict[str, list] = {}
    pj: dict[str, float] = {}
    hier = cme.accelerator.memory_hierarchy
    for op, levels in cme.memory_word_access.items():
        mem_op = cme.layer.memory_operand_links.layer_to_mem_op(op)
        names = [lv.memory_instance.name for lv in hier.get_memory_levels(mem_op)]
        for lv_name, acc in zip(names, levels):
            rw = words.setdefault(lv_name, [0, 0])
            for direction, n in acc.data.items():
                rw[0 if "rd" in str(direction).lower() else 1] += int(n)
    for op, energies in cme.mem_energy_breakdown.items():
        mem_op = cme.layer.memory_operand_links.layer_to_mem_op(op)
        names = [lv.memory_instance.name for lv in hier.get_memory_levels(mem_op)]
        for lv_name, e in zip(names, energies):
            pj[lv_name] = pj.get(lv_name, 0.0) + float(e)
    return {"words": words, "pj": pj}


def compare(name: str, row, cme, hw) -> dict:
    lv = _levels(cme)
    c = row.energy["counts"]
    s = row.energy["split_uj"]
    return {"layer": name, "macs": row.macs, "zz_macs": int(cme.layer.total_mac_count),
            "sim_cbuf_reads": c.get("cbuf_read", 0), "sim_cbuf_writes": c.get("cbuf_write", 0),
            "sim_dram_bits": c.get("dram_bit", 0),
            "sim_uj": {k: round(v, 2) for k, v in s.items()},
            "zz_reads_writes": lv["words"],
            "zz_uj": {k: round(v * 1e-6, 2) for k, v in lv["pj"].items()},
            "zz_mac_uj": round(float(cme.mac_energy) * 1e-6, 2),
            "zz_total_uj": round(float(cme.energy_total) * 1e-6, 2),
            "sim_total_uj": round(row.energy_uj, 2)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", nargs="*", default=list(DEFAULT_LAYERS))
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    for r in run(args.layers, args.out):
        print(r)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
