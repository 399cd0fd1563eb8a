"""Layer-by-layer comparison with the NVDLA performance estimator (docs/network-timing.md).

    python benchmarks/compare_estimator.py resnet50|googlenet|alexnet [--estimator DIR]

Runs scenarios/<network>_nv_large.yaml in timing-only mode and prints a markdown table: each
estimator row (its DRAM-only cycles, DRAM traffic and long pole) beside the simulator's rows it
covers (cycles, DRAM bytes, bound), then the simulator's rows the estimator has no row for.
Row mapping: ResNet-50 by layer name; GoogLeNet's "(combined)" 1x1 rows are the three 1x1
convolutions reading the same input (the estimator counts the combined row only), its pool
projection rows include the 3x3 max pooling before them; AlexNet's numbered rows are conv1..5
(grouped layers: one row per group) and fc1..3 are fc6..8.
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import io
import re
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def estimator_rows(path: Path) -> list[dict]:
    rows = list(csv.reader(path.open()))
    out = []
    for r in rows[1:]:
        if not r[-2]:
            continue                  # GoogLeNet's separate 1x1 rows: counted in "(combined)"
        out.append({"name": r[1], "cycles": float(r[-2]), "dram_kb": float(r[-5]),
                    "mac": float(r[-3]), "pole": r[-1]})
    return out


def our_rows_for(net: str, est_name: str) -> list[str]:
    n = est_name.lower()
    if net == "resnet50":
        return [n.split()[0]]
    if net == "alexnet":
        fc = {"fc1": "fc6", "fc2": "fc7", "fc3": "fc8"}
        return [fc[n]] if n in fc else [f"conv{n}"]
    if n in ("conv1", "conv2"):
        return [n]
    if n == "fc":
        return ["loss3_classifier"]
    m = re.match(r"inception (\w+) (.*)", n)
    block, what = m.group(1), m.group(2)
    base = f"inception_{block}_"
    if what.startswith("1x1 (combined)"):
        return [base + "1x1", base + "3x3_reduce", base + "5x5_reduce"]
    if what == "pool proj":
        return [base + "pool", base + "pool_proj"]
    return [base + what.replace(" ", "_")]


def compare(net: str, estimator_dir: Path) -> str:
    from nvdla_sim.scenario.runner import execute, prepare
    from nvdla_sim.scenario.schema import load_scenario
    scn = load_scenario(ROOT / "scenarios" / f"{net}_nv_large.yaml")
    scn.mode = "timing"
    scn.outputs.formats, scn.outputs.plots = (), False
    with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(io.StringIO()):
        report = execute(prepare(scn), Path(tmp))
    ours = {r.layer: r for r in report.rows}
    est_rows = estimator_rows(estimator_dir / f"{net}_layers.csv")
    # AlexNet's grouped layers: two estimator rows, one simulator row with both groups.
    covering = Counter(tuple(our_rows_for(net, e["name"])) for e in est_rows)
    lines = ["| estimator row | est. cycles | est. DRAM KB | est. pole | nvdla-sim rows | cycles "
             "| DRAM KB | bound |", "|---|---:|---:|---|---|---:|---:|---|"]
    est_total = sim_total = 0.0
    used = set()
    for e in est_rows:
        names = our_rows_for(net, e["name"])
        rows = [ours[n] for n in names if n in ours]
        share = 1.0 / covering[tuple(names)] if net == "alexnet" else 1.0
        cycles = sum(r.cycles for r in rows) * share
        dram = sum(r.dram_bytes for r in rows) / 1024 * share
        bound = "/".join(sorted({r.bound for r in rows}))
        used.update(names)
        est_total += e["cycles"]
        sim_total += cycles
        label = " + ".join(names) + (f" (1/{round(1 / share)})" if share != 1.0 else "")
        lines.append(f"| {e['name']} | {e['cycles']:,.0f} | {e['dram_kb']:,.0f} | {e['pole']} | "
                     f"{label} | {cycles:,.0f} | {dram:,.0f} | {bound} |")
    extra = [r for r in report.rows if r.layer not in used]
    for r in extra:
        lines.append(f"| (none) | | | | {r.layer} ({r.kinds}) | {r.cycles:,.0f} | "
                     f"{r.dram_bytes / 1024:,.0f} | {r.bound} |")
        sim_total += r.cycles
    lines.append(f"| **total** | **{est_total:,.0f}** | | | | **{sim_total:,.0f}** | | |")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("network", choices=("resnet50", "googlenet", "alexnet"))
    p.add_argument("--estimator", type=Path, default=ROOT.parent / "shared" / "perf-estimator")
    args = p.parse_args()
    print(compare(args.network, args.estimator))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
