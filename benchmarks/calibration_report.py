"""Per-test cycle error of the timing model against the RTL cycle counts (calibration CSV).

    python benchmarks/calibration_report.py [--csv FILE] [--nvdla-hw DIR] [--memory PROFILE]
                                            [--write docs/timing.md]

Prints a markdown table (test, RTL cycles, model cycles, error) with the median and worst error,
overall and per family.  `--write FILE` replaces the part of FILE between the markers
`<!-- calibration:begin -->` and `<!-- calibration:end -->` with the table.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from nvdla_sim.config import load_hardware
from nvdla_sim.timing.calibration import calibrate, markdown_table, summary

BEGIN, END = "<!-- calibration:begin -->", "<!-- calibration:end -->"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = Path(__file__).resolve().parent.parent
    p.add_argument("--csv", default=str(here.parent / "shared" / "calibration" / "rtl_cycles_nv_small.csv"))
    p.add_argument("--nvdla-hw", default=os.environ.get("NVDLA_HW", str(here.parent / "shared" / "nvdla-hw")))
    p.add_argument("--project", default="nv_small")
    p.add_argument("--memory", default="rtl_testbench")
    p.add_argument("--write", help="markdown file whose calibration section to replace")
    args = p.parse_args()
    csv_path = Path(args.csv)
    root = Path(args.nvdla_hw) / "verif" / "tests" / "trace_tests" / args.project
    if not csv_path.is_file() or not root.is_dir():
        print(f"calibration: skipped ({csv_path} or {root} missing)")
        return 0
    start = time.perf_counter()
    rows = calibrate(csv_path, root, load_hardware(args.project), args.memory)
    table = markdown_table(rows)
    print(table)
    s = summary(rows)
    print(f"\nmedian {100 * s['median']:.3f} %  worst {100 * s['worst']:.2f} % ({s['worst_test']})  "
          f"[{time.perf_counter() - start:.1f} s]", file=sys.stderr)
    if args.write:
        doc = Path(args.write)
        text = doc.read_text()
        if BEGIN not in text or END not in text:
            print(f"{doc}: no {BEGIN} ... {END} section", file=sys.stderr)
            return 1
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        doc.write_text(f"{head}{BEGIN}\n{table}\n{END}{tail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
