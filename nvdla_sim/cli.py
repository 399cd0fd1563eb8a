"""The `nvdla-sim` command line."""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from .errors import NvdlaSimError


def _check_writable_dir(path: Path, flag: str) -> Path:
    """Create the output folder now and prove a file can be written in it: a bad folder is a
    one-line error before the simulation starts, not after."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise NvdlaSimError(f"{flag} {path}: exists and is not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".nvdla-sim-probe-"):
            pass
    except OSError as exc:
        raise NvdlaSimError(f"{flag} {path}: cannot write there ({exc.strerror or exc})") from None
    return path


def _check_writable_file(path: Path, flag: str) -> Path:
    """The output file's folder must exist and take a new file; the file must not be a folder."""
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise NvdlaSimError(f"{flag} {path}: is a folder, expected a file name")
    if not parent.is_dir():
        raise NvdlaSimError(f"{flag} {path}: folder {parent} does not exist")
    try:
        with tempfile.NamedTemporaryFile(dir=parent, prefix=".nvdla-sim-probe-"):
            pass
        if path.exists():
            with open(path, "a"):
                pass
    except OSError as exc:
        raise NvdlaSimError(f"{flag} {path}: cannot write there ({exc.strerror or exc})") from None
    return path


def _write_json(path: Path, doc: dict, flag: str = "--json") -> None:
    try:
        Path(path).write_text(json.dumps(doc, indent=1) + "\n")
    except OSError as exc:
        raise NvdlaSimError(f"{flag} {path}: cannot write ({exc.strerror or exc})") from None


def _progress(args, label: str = ""):
    """A progress reporter on stderr when it is a terminal, or with --progress."""
    from .conformance import Progress
    flag = getattr(args, "progress", None)
    if flag is False or (flag is None and not sys.stderr.isatty()):
        return None
    return Progress(label)


def _running(args, label: str):
    """`nvdla-sim run`: the simulated cycle on stderr while the network runs (a terminal, or
    --progress), else nothing."""
    from contextlib import nullcontext
    progress = _progress(args)
    return progress.running(label) if progress is not None else nullcontext()


def _project_hint(args, hw, path: Path, specific_only: bool = False) -> str | None:
    """Why a replay may have failed when the project does not match the test (`specific_only`:
    only when the test's folder or format says so)."""
    from .config.hardware import preset_names
    from .conformance import trace_format
    if getattr(args, "hw_config", None):
        if specific_only:
            return None
        return (f"replayed on --hw-config {args.hw_config}; a test written for another "
                "configuration fails too (the project may not match)")
    try:
        fmt = trace_format(path, args.format)
    except NvdlaSimError:
        fmt = None
    parts = set(path.resolve().parts)
    named = [n for n in preset_names() if n in parts and n != args.project]
    if named and args.project not in parts:
        return (f"the test lies under '{named[0]}' but ran with --project {args.project}: "
                f"the project may not match (try --project {named[0]})")
    if fmt in ("txn", "vp") and hw.nvdla_version != 1:
        return (f"{fmt} traces are NVDLA v1 tests but --project {args.project} is v"
                f"{hw.nvdla_version}: the project may not match (try --project nv_full)")
    if fmt == "cfg" and hw.nvdla_version == 1:
        return (f".cfg tests are NVDLA v2 tests but --project {args.project} is v1: the "
                "project may not match (try --project nv_small or nv_large)")
    if specific_only:
        return None
    return (f"ran with --project {args.project}; a test written for another project fails "
            "too (the project may not match)")


def _hardware(args):
    from .config import load_hardware
    return load_hardware(args.hw_config if getattr(args, "hw_config", None) else args.project)


def _memory(args):
    from .engine.memif import load_memory_profile
    return load_memory_profile(args.memory)


def _host(args):
    """--host: a host profile name or YAML file (validated now: a bad one is a one-line error);
    None when not given."""
    if not getattr(args, "host", None):
        return None
    from .host.profile import load_host_profile
    try:
        return load_host_profile(args.host)
    except NvdlaSimError as exc:
        raise NvdlaSimError(f"--host {args.host}: {exc}") from None


def cmd_replay(args) -> int:
    from .conformance import run_test
    hw = _hardware(args)
    host = _host(args)
    path = Path(args.path)
    if not path.exists():
        raise NvdlaSimError(f"{path}: no such trace file or folder")
    if args.json:
        _check_writable_file(args.json, "--json")
    if args.timeline:
        _check_writable_dir(args.timeline, "--timeline")
    outcome = run_test(path, hw, _memory(args), args.timeline, args.format,
                       True if args.values else None, _progress(args), args.timeline_detail,
                       host=host if host is not None else "auto")
    for check in outcome.checks:
        print(check.describe())
    for note in outcome.notes:
        print(note)
    if outcome.error:
        hint = _project_hint(args, hw, path, specific_only=True)
        print(f"nvdla-sim: {outcome.status}: {_one_line(outcome.error)}" + (f" ({hint})" if hint else ""),
              file=sys.stderr)
        if args.json:
            _write_json(args.json, outcome.to_json())
        return 1
    for line in _warning_summary(outcome.warnings):
        print(line)
    layers = None
    if outcome.result is not None and outcome.result.untils:
        from .report.vp_layers import format_vp_layers, vp_layers
        layers = vp_layers(outcome.result)
        print(format_vp_layers(layers, outcome.result.engine.clock_mhz,
                               outcome.result.host_reads))
    cycles = f"{outcome.cycles:.0f} cycles" if outcome.cycles is not None else ""
    changeover = None
    if outcome.result is not None and outcome.result.engine.host is not None:
        from .report.changeover import changeover_json, changeover_rows, format_changeover
        rows = changeover_rows(outcome.result)
        if rows and (len(rows) > 1 or host is not None):
            engine = outcome.result.engine
            print(format_changeover(rows, outcome.layer_names, engine.host.name, engine.clock_mhz))
            changeover = changeover_json(rows, outcome.layer_names, engine.host.name)
    print(f"{outcome.name}: {outcome.status.upper()}  {cycles}  ({outcome.wall_s:.2f} s)")
    if outcome.result is not None and not args.quiet:
        from .report.statistics import format_statistics
        from .report.timing_summary import format_summary
        print(format_summary(outcome.result))
        if outcome.statistics:
            print(format_statistics(outcome.statistics))
    if args.json:
        report = outcome.to_json()
        if layers is not None:
            from .report.vp_layers import vp_layers_json
            report["layers"] = vp_layers_json(layers)
        if changeover is not None:
            report["changeover"] = changeover
        _write_json(args.json, report)
    if outcome.status == "fail":
        print(f"nvdla-sim: note: {_project_hint(args, hw, path)}", file=sys.stderr)
    return 0 if outcome.status in ("pass", "done") else 1


def _warning_summary(warnings: list[str], shown: int = 3) -> list[str]:
    """VP read_reg mismatches grouped by register: a count and the first few lines."""
    if not warnings:
        return []
    by_reg: dict[str, list[str]] = {}
    for w in warnings:
        reg = w.split("read_reg ", 1)[1].split()[0] if "read_reg " in w else "?"
        by_reg.setdefault(reg, []).append(w)
    out = [f"warning: {len(warnings)} read_reg values differ from what the VP read (the VP's "
           "values are not the RTL's): " + ", ".join(f"{r} x{len(v)}" for r, v in by_reg.items())]
    out += [f"warning: {w}" for w in warnings[:shown]]
    return out


def cmd_conformance(args) -> int:
    from .conformance import find_tests, run_test, tests_folder
    hw = _hardware(args)
    root = tests_folder(Path(args.nvdla_hw), args.project, hw.nvdla_version)
    tests = find_tests(root, args.filter)
    if not tests:
        raise NvdlaSimError(f"{root}: no test matches '{args.filter}'")
    memory = _memory(args)
    if args.json:
        _check_writable_file(args.json, "--json")
    if args.timeline:
        _check_writable_dir(args.timeline, "--timeline")
    progress = _progress(args)
    outcomes = []
    start = time.perf_counter()
    width = max(len(t.name) for t in tests)
    print(f"{'test':<{width}}  {'status':<11} {'cycles':>10} {'wall_s':>7}")
    for i, test in enumerate(tests, 1):
        o = run_test(test, hw, memory, args.timeline, progress=progress,
                     timeline_detail=args.timeline_detail)
        outcomes.append(o)
        cycles = f"{o.cycles:.0f}" if o.cycles is not None else "-"
        line = f"{o.name:<{width}}  {o.status:<11} {cycles:>10} {o.wall_s:>7.2f}"
        if o.error:
            line += f"  {_one_line(o.error)}"
        print(line, flush=True)
    passed = sum(o.status == "pass" for o in outcomes)
    print(f"{passed}/{len(outcomes)} pass  ({time.perf_counter() - start:.1f} s)")
    if args.json:
        report = {"project": args.project, "total": len(outcomes), "passed": passed,
                  "tests": [o.to_json() for o in outcomes]}
        _write_json(args.json, report)
    return 0 if passed == len(outcomes) else 1


def cmd_run(args) -> int:
    overrides = (args.hardware, args.precision, args.mode, args.gpu_fallback, args.input,
                 args.weights_seed, args.save_outputs, args.save_scenario, args.batch)
    if not str(args.scenario).lower().endswith(".onnx") and all(v is None for v in overrides):
        from .scenario.runner import execute, prepare
        from .scenario.schema import load_scenario
        scn = load_scenario(args.scenario)
        if args.host:
            scn.host = _host(args)      # the end-to-end time's host (scenario field host)
        if args.plots is not None:
            scn.outputs.plots = args.plots
        _check_writable_dir(args.out or Path(scn.outputs.directory),
                            "--out" if args.out else "outputs.directory")
        from .report.plot_worker import draws_figures, start_plotter
        plotter = start_plotter(draws_figures(scn))     # forked while the process is small
        prep = prepare(scn)
        try:
            with _running(args, scn.name):
                report = execute(prep, args.out, plotter)
        except NvdlaSimError as exc:       # lowering's refusals name the scenario too
            raise type(exc)(f"{scn.path}: {exc}") from None
        return 0 if report.total_cycles is not None else 1
    # A model (or a scenario with flags): through the public API, flags = scenario fields.
    if args.host:
        raise NvdlaSimError("--host goes with a scenario run without other flags (or set the "
                            "scenario field host)")
    from .api import run, save_scenario
    if args.out:
        _check_writable_dir(args.out, "--out")
    if args.save_outputs:
        _check_writable_dir(args.save_outputs, "--save-outputs")
    if args.save_scenario:
        _check_writable_file(args.save_scenario, "--save-scenario")
    with _running(args, Path(str(args.scenario)).stem):
        result = run(args.scenario, hardware=args.hardware, precision=args.precision,
                     mode=args.mode, gpu_fallback=args.gpu_fallback, input=args.input,
                     weights_seed=args.weights_seed, batch=args.batch, out_dir=args.out,
                     quiet=False, plots=args.plots)
    if args.save_scenario:
        save_scenario(result.scenario, args.save_scenario)
        print(f"scenario written to {args.save_scenario}")
    if args.save_outputs:
        files = result.save_outputs(args.save_outputs)
        print(f"{len(files)} output arrays written to {args.save_outputs}")
    return 0 if result.total_cycles is not None else 1


def cmd_compile(args) -> int:
    from .config import replay_options
    from .report.tables import build_report, format_console
    from .scenario.runner import context, prepare
    from .scenario.schema import load_scenario
    scn = load_scenario(args.scenario)
    if args.emit_cfg:
        _check_writable_dir(args.emit_cfg, "--emit-cfg")
    vp = args.emit_format == "vp"
    if args.emit_format and not args.emit_cfg:
        raise NvdlaSimError("--emit-format needs --emit-cfg DIR (where to write the trace)")
    if args.emit_cfg and not vp:
        scn.mode = "values+timing"      # memory images and CRCs need the INT8 values
    prep = prepare(scn)
    if not args.emit_cfg:          # (emitting lowers: the same checks)
        _check_as_run(prep, scn)
    print(prep.plan.describe())
    gating = _clock_gating_note(prep.plan, scn.hardware, bool(args.emit_cfg))
    if gating:
        print(gating, file=sys.stderr)
    print(format_console(build_report(prep, None)))
    if args.emit_cfg and vp:
        path = _emit_vp(prep, args.emit_cfg / scn.name, scn.name)
        print(f"{path}: VP capture form, no data (replay: nvdla-sim replay {path.parent} "
              f"{replay_options(scn.hardware, path.parent)})")
    elif args.emit_cfg:
        from .compiler.lower import emit_summary, emit_trace
        path, result = emit_trace(prep.plan, context(prep), args.emit_cfg, scn.name,
                                  scn.memory.dram, args.emit_format)
        print(emit_summary(path, result, replay_options(scn.hardware, Path(path).parent)))
    return 0


def _check_as_run(prep, scn) -> None:
    """What `run` refuses after prepare, refused by `compile` too: tensor placement (I/O format
    rules, buffers that do not fit; a lowering without images of a copy of the plan, so its
    notes stay out of the printed plan) and the second core's network."""
    import copy
    from .compiler.lower import lower
    from .compiler.multicore import prepare_second
    from .scenario.runner import context
    try:
        lower(copy.deepcopy(prep.plan), context(prep), images=False)
        if scn.second_network is not None:
            prepare_second(prep)
    except NvdlaSimError as exc:
        raise type(exc)(f"{scn.path}: {exc}") from None


def _clock_gating_note(plan, hw, emitting: bool) -> str | None:
    """What `clock_gating: true` means for this network (docs/network-timing.md)."""
    convs = sum(1 for layer in plan.layers if layer.kind == "conv")
    if not hw.clock_gating or convs < 2:
        return None
    if emitting:
        return ("note: clock_gating: true: the trace enables each convolution layer's CDMA ahead "
                "(compiler/clock_gating.py), so CDMA's gated clock loses no weight releases but "
                "the last layer's; a layer with the previous layer's D_BANK split gets another where "
                "one fits, else it still loses them (docs/network-timing.md)")
    return ("warning: clock_gating: true: run layer after layer (nvdla-sim run, or a trace without "
            "the workaround) a network whose layers load different weights hangs, as on the RTL; "
            "compile --emit-cfg emits the workaround, else set clock_gating: false "
            "(docs/network-timing.md)")


def _emit_vp(prep, folder: Path, name: str) -> Path:
    """The scenario's DLA layers as one register program, written in VP capture form."""
    from dataclasses import replace
    from .compiler.lower import lower
    from .frontends.vp_writer import write_vp_trace
    from .scenario.runner import context
    plan = prep.plan
    dla = [layer for layer in plan.layers if layer.kind != "gpu"]
    inner_gpu = [layer for layer in plan.layers[:plan.layers.index(dla[-1])]
                 if layer.kind == "gpu"] if dla else []
    if inner_gpu:
        raise NvdlaSimError(f"layer '{inner_gpu[0].name}' runs on the GPU between DLA layers: a "
                            "VP trace cannot hold it")
    ctx = context(prep)
    lowered = lower(replace(plan, layers=dla), ctx, name=name)
    return write_vp_trace(lowered.program, ctx.hw, folder, name) / "input.txn"


def _validation_progress():
    """On a terminal, 'checking i/n' every second while a sweep is validated (a grid: each axis
    value once; an explicit list: each point)."""
    if not sys.stderr.isatty():
        return None
    last = [time.monotonic()]

    def show(i: int, n: int) -> None:
        now = time.monotonic()
        if now - last[0] >= 1.0 or i == n - 1:
            last[0] = now
            sys.stderr.write(f"\rchecking {i + 1:,}/{n:,}" + ("\n" if i == n - 1 else ""))
            sys.stderr.flush()
    return show


def cmd_sweep(args) -> int:
    from .sweep.backends import make_backend
    from .sweep.driver import run_sweep, runner_by_name
    from .sweep.spec import load_sweep
    spec = load_sweep(args.sweep, _validation_progress())
    _check_writable_dir(args.out or Path(spec.out_dir), "--out" if args.out else "the sweep's outputs")
    backend = make_backend(args.backend, args.jobs, args.ray_address)
    print(f"{spec.name}: {len(spec.points)} points, backend {args.backend}"
          + (f", {backend.jobs} jobs" if backend.jobs else ""), flush=True)
    try:
        summary = run_sweep(spec, backend, runner_by_name(args.runner), args.out,
                            plots=False if args.no_plots else None)
    except KeyboardInterrupt:
        print(f"finished points are saved in {args.out or spec.out_dir}; the same command "
              "continues the sweep", file=sys.stderr)
        raise
    print(summary.text())
    return 1 if summary.errors else 0


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line usage error (the subcommands' parsers are of this class too)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {_one_line(message)} (see {self.prog} --help)\n")


def _positive_int(text: str) -> int:
    """argparse type of a count (--jobs, --batch): an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    from . import __version__
    p = _Parser(prog="nvdla-sim", description="A bit-exact, cycle-approximate "
                                "simulator of the NVIDIA Deep Learning Accelerator.")
    p.add_argument("--version", action="version", version=f"nvdla-sim {__version__}",
                   help="print the version and exit")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND",
                           help="replay, conformance, run, compile, sweep, lut")

    r = sub.add_parser("replay", help="run one trace test (a .cfg test, a v1 input.txn folder or "
                                      "a virtual-platform capture) and check its CRCs / register "
                                      "reads / memory dumps; a VP capture is timed per layer")
    r.add_argument("path", help="test folder (a .cfg test, an input.txn trace-player test or a "
                                "VP capture) or the trace file itself")
    r.add_argument("--project", default="nv_small", help="hardware preset the test was written for "
                   "(default nv_small; v1 trace-player tests: nv_full)")
    r.add_argument("--hw-config", help="hardware YAML (a preset plus overrides) instead of --project")
    r.add_argument("--memory", default="rtl_testbench",
                   help="memory profile name or YAML (default rtl_testbench)")
    r.add_argument("--host", metavar="PROFILE",
                   help="host profile (a name in nvdla_sim/host/profiles or a YAML file) timing the "
                        "layer changeovers; default: the one the --memory profile names "
                        "(rtl_testbench: the Verilator testbench).  Prints each layer's compute "
                        "and changeover cycles, hardware and end-to-end time")
    r.add_argument("--timeline", type=Path, help="write <test>.trace.json and <test>.png here")
    r.add_argument("--quiet", action="store_true", help="omit the per-unit timing summary")
    r.add_argument("--format", choices=("cfg", "txn", "vp"),
                   help="trace format (default: vp for a virtual-platform capture -- "
                        "rd_only_var_log beside input.txn, or `until` and no memory images --, "
                        "txn for another folder with input.txn, else cfg)")
    r.add_argument("--values", action="store_true",
                   help="VP traces: compute values too (on all-zero memory; default timing only)")
    r.add_argument("--json", type=Path,
                   help="write the outcome (and a VP trace's layers) here as JSON")
    _add_run_options(r)
    r.set_defaults(func=cmd_replay)

    c = sub.add_parser("conformance", help="run every trace test of a project (v2: "
                       "verif/tests/trace_tests/<project>/, v1: verif/traces/traceplayer/)")
    c.add_argument("--nvdla-hw", default=os.environ.get("NVDLA_HW", "../shared/nvdla-hw"),
                   help="nvdla/hw checkout (default $NVDLA_HW or ../shared/nvdla-hw; for a v1 "
                        "project such as nv_full, an nvdlav1 checkout like ../shared/nvdla-hw-v1)")
    c.add_argument("--project", default="nv_small",
                   help="hardware preset whose tests to run (default nv_small)")
    c.add_argument("--hw-config", help="hardware YAML instead of the --project preset")
    c.add_argument("--filter", default="*", help="glob on test names")
    c.add_argument("--json", type=Path, help="write a JSON report here")
    c.add_argument("--memory", default="rtl_testbench",
                   help="memory profile name or YAML (default rtl_testbench)")
    c.add_argument("--timeline", type=Path, help="write each test's trace events and plot here")
    _add_run_options(c)
    c.set_defaults(func=cmd_conformance)

    s = sub.add_parser("run", help="run a scenario YAML or an ONNX model and report per layer")
    s.add_argument("scenario", help="scenario YAML (see docs/scenarios.md) or MODEL.onnx (docs/onnx.md)")
    s.add_argument("--out", type=Path, help="report folder (default: the scenario's outputs.directory)")
    s.add_argument("--hardware", help="hardware preset (scenario field hardware; default nv_large "
                                      "for a model)")
    prec = s.add_mutually_exclusive_group()
    for flag in ("int8", "int16", "fp16"):
        prec.add_argument(f"--{flag}", dest="precision", action="store_const", const=flag,
                       help=f"run every DLA layer in {flag.upper()} (field precision)")
    fallback = s.add_mutually_exclusive_group()
    fallback.add_argument("--gpu-fallback", dest="gpu_fallback", action="store_const", const=True,
                   help="layers the DLA cannot run go to the GPU (field gpu_fallback; the default)")
    fallback.add_argument("--no-gpu-fallback", dest="gpu_fallback", action="store_const", const=False,
                   help="stop with an error at the first layer the DLA cannot run")
    s.add_argument("--mode", choices=("values+timing", "timing", "timing-only"),
                   help="field mode (default values+timing)")
    s.add_argument("--input", type=Path, help="input image as .npy, (C, H, W) or (1, C, H, W) "
                                              "(field input.npy; default a seeded random image)")
    s.add_argument("--weights-seed", type=int, help="seeded random weights instead of the model's "
                                                    "(field weights.seed)")
    s.add_argument("--batch", type=_positive_int, metavar="N",
                   help="N images through one register program (field batch; 1..32 on hardware "
                        "with the batch feature, e.g. nv_full); --input then holds (N, C, H, W)")
    s.add_argument("--host", metavar="PROFILE",
                   help="host profile (name or YAML file; scenario field host) of the end-to-end "
                        "time printed beside the hardware time")
    s.add_argument("--save-outputs", type=Path, metavar="DIR",
                   help="write each network output as NAME.reference.npy and NAME.dla.npy")
    s.add_argument("--save-scenario", type=Path, metavar="FILE",
                   help="write the scenario YAML that was run")
    plots = s.add_mutually_exclusive_group()
    plots.add_argument("--plots", dest="plots", action="store_const", const=True,
                       help="write layer_cycles.png (and energy, statistics) (field outputs.plots; "
                            "default: as the scenario says, else only in values+timing mode)")
    plots.add_argument("--no-plots", dest="plots", action="store_const", const=False,
                       help="write no plots (the timing-only default)")
    _add_progress_options(s)
    s.set_defaults(func=cmd_run)

    m = sub.add_parser("compile", help="compile a scenario to hardware layers and list them")
    m.add_argument("scenario", help="scenario YAML (see docs/scenarios.md)")
    m.add_argument("--emit-cfg", type=Path, help="write the program as .cfg trace tests here")
    m.add_argument("--emit-format", choices=("cfg", "txn", "vp"),
                   help="trace form for --emit-cfg: cfg (v2 trace test), txn (v1 trace player), "
                        "vp (the virtual platform's capture form: registers only, no data); "
                        "default cfg on NVDLA v2, txn on v1")
    m.set_defaults(func=cmd_compile)

    w = sub.add_parser("sweep", help="run a design-space sweep (SWEEP.yaml: a base scenario plus axes)")
    w.add_argument("sweep", help="sweep YAML (see docs/sweeps.md)")
    w.add_argument("--jobs", type=_positive_int,
                   help="points run at once (default: every core)")
    w.add_argument("--backend", choices=("local", "ray"), default="local",
                   help="local process pool (default) or Ray (pip install 'nvdla-sim[ray]')")
    w.add_argument("--ray-address", help="Ray cluster to use (default $RAY_ADDRESS, else a local "
                                         "Ray instance of --jobs CPUs)")
    w.add_argument("--out", type=Path, help="results folder (default: the sweep's outputs.directory)")
    w.add_argument("--runner", choices=("scenario", "conv-chain"), default="scenario",
                   help="scenario: the full scenario run (default); conv-chain: convolutions only")
    w.add_argument("--no-plots", action="store_true", help="write no plots")
    w.set_defaults(func=cmd_sweep)

    from .lut.cli import add_lut_parser
    add_lut_parser(sub)                 # nvdla-sim lut fit (nvdla_sim/lut/cli.py)
    return p


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--timeline-detail", choices=("auto", "full", "summary"), default="auto",
                   help="--timeline trace: every span and memory request (full), spans merged "
                        "to the trace's resolution and memory as counters (summary), or full "
                        "unless the run is long (auto, default); docs/timeline.md")
    _add_progress_options(p)


def _add_progress_options(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--progress", action="store_true", default=None,
                   help="print the simulated cycle on stderr every second of a long run "
                        "(default: when stderr is a terminal)")
    g.add_argument("--no-progress", dest="progress", action="store_false",
                   help="never print progress")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except NvdlaSimError as exc:
        print(f"nvdla-sim: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except MemoryError:
        print("nvdla-sim: error: out of memory (the input asks for more than this machine has)",
              file=sys.stderr)
        return 2
    except RecursionError:
        print("nvdla-sim: error: input nested too deeply", file=sys.stderr)
        return 2
    except BrokenPipeError:          # output piped into `head` and the like
        sys.stderr.close()
        return 1
    except OSError as exc:           # a file the input names: unreadable, a folder, disk full
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        print(f"nvdla-sim: error: {where}{exc.strerror or _one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("nvdla-sim: interrupted", file=sys.stderr)
        return 130


def _one_line(exc: BaseException | str) -> str:
    """A message on one line, with whatever a user's file put in it made printable."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


if __name__ == "__main__":
    sys.exit(main())
