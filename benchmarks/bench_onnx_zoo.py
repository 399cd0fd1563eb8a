"""The nine light ONNX model-zoo models end to end: import as shipped, run on the DLA, table.

    python benchmarks/bench_onnx_zoo.py [--hardware nv_large nv_small] [--mode values+timing]
                                        [--models resnet50 ...] [--json FILE]

Each model (read from the installed onnx package) runs through nvdla_sim.run with seeded weights
(seed 1) and a seeded input, every layer the DLA cannot run on the GPU with its reason.  Prints one
row per model and hardware: hardware layers, GPU-fallback layers (and why), cycles, ms, the output's
and the lowest layer's INT8 SQNR, wall time.  The rows of docs/onnx.md come from this script.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

import onnx

import nvdla_sim
from nvdla_sim.errors import NvdlaSimError

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
MODELS = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet",
          "squeezenet", "vgg19", "zfnet512"]


def short_reason(note: str) -> str:
    for key, label in (("softmax", "softmax"), ("shuffle", "channel shuffle"),
                       ("excludes padding", "avg-pool excluding pads"),
                       ("dimension above", "tensor dim > 8192"), ("pooling window", "pool window > 8")):
        if key in note:
            return label
    return note[:40]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hardware", nargs="+", default=["nv_large"])
    ap.add_argument("--mode", default="values+timing")
    ap.add_argument("--precision", default="int8")
    ap.add_argument("--models", nargs="+", default=MODELS)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--out", type=Path, default=Path("out/onnx_zoo"))
    args = ap.parse_args(argv)
    rows = []
    print(f"{'model':<14} {'hardware':<9} {'hw':>4} {'gpu':>4} {'cycles':>10} {'ms':>8} "
          f"{'out dB':>7} {'low dB':>7} {'wall s':>7}  GPU fallback")
    for hw in args.hardware:
        for name in args.models:
            path = LIGHT / f"light_{name}.onnx"
            start = time.perf_counter()
            row = {"model": name, "hardware": hw}
            try:
                r = nvdla_sim.run(path, hardware=hw, precision=args.precision, mode=args.mode,
                                  weights_seed=1, out_dir=args.out / f"{name}_{hw}")
            except NvdlaSimError as exc:
                row["error"] = str(exc)
                rows.append(row)
                print(f"{name:<14} {hw:<9} error: {exc}", flush=True)
                continue
            reasons = Counter(short_reason(n) for n in r.gpu_fallback.values())
            out_db = min(r.output_sqnr.values()) if r.output_sqnr else None
            low = r.lowest_sqnr
            row.update(hardware_layers=r.hardware_layers, gpu_layers=r.gpu_layers,
                       cycles=r.total_cycles, ms=r.ms, output_sqnr_db=out_db,
                       lowest_sqnr=list(low) if low else None, gpu_fallback=dict(reasons),
                       macs=r.total_macs, wall_s=time.perf_counter() - start)
            rows.append(row)
            fmt = lambda v, f: "-" if v is None else format(v, f)   # noqa: E731
            print(f"{name:<14} {hw:<9} {r.hardware_layers:>4} {r.gpu_layers:>4} "
                  f"{fmt(r.total_cycles, '10.0f')} {fmt(r.ms, '8.3f')} {fmt(out_db, '7.1f')} "
                  f"{fmt(low[1] if low else None, '7.1f')} {row['wall_s']:7.1f}  "
                  + ", ".join(f"{n} {k}" for k, n in reasons.items()), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
