"""SQNR against float32 vs bit width, per gemmlowp rounding mode (issue 12, docs/precision.md).

    python benchmarks/sqnr_vs_bits.py [--networks lenet5 resnet50] [--bits 8 7 6 5 4 3 2]
                                      [--out out/sqnr_vs_bits] [--plot docs/img/sqnr_vs_bits.png]

For each network (scenarios/<net>_nv_large.yaml: nv_large, values+timing, seeded input and
weights, max calibration, per-kernel weight scales) and each bit width N and rounding mode, two
runs on the engine:
  W    `quantization: {weight_bits: N, rounding: MODE}`: weights requantized to N bits;
  W+A  `quantization: {weight_bits: N, activation_bits: N, rounding: MODE}`: activations too
       (the SDP output converters round to nearest onto the N-bit grid; the mode rounds the
       weights and the network input, which software quantizes).
Printed: the end-to-end SQNR (dB) of the network output, and the lowest per-layer SQNR, per run;
the share of DLA-written activation codes above the N-bit grid (0 since the SDP clamps to the
grid, emit_sdp.grid_clamp); DLA cycles (W: the INT8 register program; W+A adds the clamp's ALU
stages, a few cycles of SDP pipeline depth per layer).
Writes results.json to --out and the plot to --plot; `--from-json FILE` prints and plots a
results.json again without running.  Probabilistic rounding: one seed (quantization.seed 0).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"
MODES = ("nearest", "probabilistic", "addmod97")


def run_point(base: dict, quant: dict) -> dict:
    """One scenario on the engine; SQNRs, off-grid share and cycles."""
    from nvdla_sim.compiler.lower import lower_and_run
    from nvdla_sim.report.tables import build_rows
    from nvdla_sim.scenario.runner import context, dla_tensors, output_sqnr_db, prepare
    from nvdla_sim.scenario.schema import parse_scenario
    scn = parse_scenario({**base, "quantization": {**base.get("quantization", {}), **quant}},
                         SCENARIOS)
    prep = prepare(scn)
    result = lower_and_run(prep.plan, replace(context(prep), timeline=False))
    values = dla_tensors(prep.plan, result.outputs)
    rows = build_rows(prep.plan, scn.clock_mhz, scn.memory.dram_gbps, result, prep.reference,
                      values)
    layer_sqnr = [r.sqnr_db for r in rows if r.sqnr_db is not None]
    cal = prep.calibration
    over = total = 0
    for name, v in values.items():
        if name == prep.network.input_name or cal.grid[name] >= 127:
            continue                # the host's input; INT8 grids (the hardware may write -128)
        codes = np.abs(np.round(v.astype(np.float64) / cal.scales[name]))
        over += int((codes > cal.grid[name]).sum())
        total += codes.size
    return {"output_sqnr_db": output_sqnr_db(prep, values), "lowest_sqnr_db": min(layer_sqnr),
            "off_grid": over / total if total else 0.0, "cycles": result.total_cycles}


def sweep(network: str, bits: list[int]) -> dict:
    import yaml
    base = yaml.safe_load((SCENARIOS / f"{network}_nv_large.yaml").read_text())
    base.pop("outputs", None)
    out = {"W": {}, "W+A": {}}
    for mode in MODES:
        for kind in out:
            out[kind][mode] = {}
            for n in bits:
                quant = {"weight_bits": n, "rounding": mode}
                if kind == "W+A":
                    quant["activation_bits"] = n
                start = time.perf_counter()
                out[kind][mode][n] = run_point(base, quant)
                r = out[kind][mode][n]
                print(f"  {network:9} {kind:4} {mode:13} {n} bits: output {r['output_sqnr_db']:7.2f} dB"
                      f"  lowest layer {r['lowest_sqnr_db']:7.2f} dB  off-grid "
                      f"{100 * r['off_grid']:.3f} %  ({time.perf_counter() - start:.1f} s)",
                      file=sys.stderr)
    return out


OFF_GRID_MARK = 0.01        # a W+A entry with more of its activation codes above the grid: *


def _cell(r: dict, key: str) -> str:
    return f"{r[key]:.1f}" + (" *" if r["off_grid"] > OFF_GRID_MARK else "")


def table(results: dict, bits: list[int], key: str) -> str:
    head = "| bits | " + " | ".join(f"{k} {m}" for k in ("W", "W+A") for m in MODES) + " |"
    lines = [head, "|" + "---|" * (1 + 2 * len(MODES))]
    for n in bits:
        cells = [_cell(results[k][m][n], key) for k in ("W", "W+A") for m in MODES]
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(all_results: dict, bits: list[int], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    nets = list(all_results)
    fig, axes = plt.subplots(1, len(nets), figsize=(5.5 * len(nets), 4), squeeze=False)
    for ax, net in zip(axes[0], nets):
        for kind, style in (("W", "-"), ("W+A", "--")):
            for mode, color in zip(MODES, ("C0", "C1", "C2")):
                rs = [all_results[net][kind][mode][n] for n in bits]
                ax.plot(bits, [r["output_sqnr_db"] for r in rs], style, color=color, marker="o",
                        ms=3, label=f"{'weights' if kind == 'W' else 'weights + activations'}, "
                                   f"{mode}")
                off = [(n, r["output_sqnr_db"]) for n, r in zip(bits, rs)
                       if r["off_grid"] > OFF_GRID_MARK]
                if off:
                    ax.plot(*zip(*off), "x", color=color, ms=8)
        ax.set_title(f"{net}, nv_large INT8 container (x: > 1 % of codes above the grid)",
                     fontsize=9)
        ax.set_xlabel("bits")
        ax.set_ylabel("output SQNR vs float32 (dB)")
        ax.invert_xaxis()
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--networks", nargs="+", default=["lenet5", "resnet50"])
    p.add_argument("--bits", nargs="+", type=int, default=[8, 7, 6, 5, 4, 3, 2])
    p.add_argument("--out", type=Path, default=ROOT / "out" / "sqnr_vs_bits")
    p.add_argument("--plot", type=Path, default=ROOT / "docs" / "img" / "sqnr_vs_bits.png")
    p.add_argument("--from-json", type=Path, help="print and plot a results.json again, no runs")
    a = p.parse_args()
    start = time.perf_counter()
    if a.from_json:
        results = {net: {k: {m: {int(n): r for n, r in ns.items()} for m, ns in ms.items()}
                         for k, ms in res.items()}
                   for net, res in json.loads(a.from_json.read_text()).items()}
        a.networks = list(results)
    else:
        results = {net: sweep(net, a.bits) for net in a.networks}
    for net, res in results.items():
        cycles = {r["cycles"] for k in res.values() for m in k.values() for r in m.values()}
        off = max(r["off_grid"] for m in res["W+A"].values() for r in m.values())
        print(f"\n{net} (nv_large, values+timing): output SQNR vs float32, dB "
              "(W: weights only; W+A: weights and activations)\n")
        print(table(res, a.bits, "output_sqnr_db"))
        print(f"\n{net}: lowest per-layer SQNR, dB\n")
        print(table(res, a.bits, "lowest_sqnr_db"))
        print(f"\n{net}: DLA cycles at every point: {sorted(cycles)}; activation codes above the "
              f"N-bit grid: at most {100 * off:.3f} % of the DLA-written elements (* : over "
              f"{100 * OFF_GRID_MARK:g} %)")
        print(f"\n{net}: W+A activation codes above the N-bit grid, % of the DLA-written elements\n")
        print("| bits | " + " | ".join(MODES) + " |\n|" + "---|" * (1 + len(MODES)))
        for n in a.bits:
            print(f"| {n} | " + " | ".join(f"{100 * res['W+A'][m][n]['off_grid']:.3f}"
                                           for m in MODES) + " |")
    if not a.from_json:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    plot(results, a.bits, a.plot)
    print(f"\nwrote {a.out / 'results.json'} and {a.plot} ({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
