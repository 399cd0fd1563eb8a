"""Hostile scenarios: hand-written nonsense and seeded mutations of a valid scenario, run through the
command line in-process (no traceback, exactly one `nvdla-sim: error:` line naming the file and the
field path, non-zero exit), the memory check (refused with the size before anything is built),
and the peak memory of timing-only runs measured in a subprocess (a memory bound, not a time).
NVDLA_FUZZ_SEED / NVDLA_FUZZ_ROUNDS vary and lengthen the mutation run."""
from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from nvdla_sim.cli import main
from nvdla_sim.errors import NvdlaSimError
from nvdla_sim.scenario.limits import check_memory, memory_need_bytes, weight_elements
from nvdla_sim.scenario.runner import prepare
from nvdla_sim.scenario.schema import MAX_DIM, parse_scenario

SEED = int(os.environ.get("NVDLA_FUZZ_SEED", "13"))
ROUNDS = int(os.environ.get("NVDLA_FUZZ_ROUNDS", "1"))
ROOT = Path(__file__).resolve().parents[1]

BASE = {
    "name": "fuzz", "hardware": "nv_small", "clock_mhz": 1000, "mode": "timing",
    "memory": {"dram_gbps": 10, "dram_latency_ns": 100},
    "network": {"input": [8, 16, 16], "layers": [
        {"name": "c1", "type": "conv", "out_channels": 16, "kernel": 3, "pad": 1, "relu": True},
        {"name": "p1", "type": "pool", "kernel": 2},
        {"name": "cl", "type": "clip", "min": 0, "max": 6},
        {"name": "l1", "type": "lrn", "size": 5},
        {"name": "fc", "type": "fc", "out_features": 10}]},
    "outputs": {"plots": False, "formats": ["json"]},
}


def run_cli(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(args)
    return rc, out.getvalue(), err.getvalue()


def assert_one_line_error(rc: int, err: str, *needles: str) -> None:
    assert rc == 2, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("nvdla-sim: error: "), err
    assert "Traceback" not in err
    for n in needles:
        assert n in err, f"{n!r} not in {err!r}"


def scenario_file(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "s.yaml"
    p.write_text(textwrap.dedent(text))
    return p


LAYERS = "network: {input: [8, 8, 8], layers: [%s]}\n"
HOSTILE = [
    # (scenario text after `hardware: nv_small`, the field path or words the error must name)
    ((LAYERS % "{name: c, type: conv, out_channels: 8, kernel: 3}").replace(
        "[8, 8, 8]", "[3, 100000, 100000]"), ["network.input", "8192"]),
    (LAYERS % "{name: c, type: conv, out_channels: 10000000, kernel: 3}",
     ["network.layers[0].out_channels", "8192"]),
    (LAYERS % "{name: f, type: fc, out_features: 100000}", ["network.layers[0].out_features"]),
    ("clock_mhz: .inf\nnetwork: lenet5\n", ["clock_mhz", "finite"]),
    ("clock_mhz: .nan\nnetwork: lenet5\n", ["clock_mhz", "finite"]),
    ("clock_mhz: 1.0e+9\nnetwork: lenet5\n", ["clock_mhz", "<="]),
    ("memory: {dram_latency_ns: .nan}\nnetwork: lenet5\n", ["memory.dram_latency_ns"]),
    ("memory: {dram_gbps: .inf}\nnetwork: lenet5\n", ["memory.dram_gbps", "finite"]),
    ("memory: {dram_gbps: -.inf}\nnetwork: lenet5\n", ["memory.dram_gbps"]),
    ("memory: {cvsram_bytes: 1e30}\nnetwork: lenet5\n", ["memory.cvsram_bytes"]),
    ("memory: {cvsram_bytes: 1.0e+30}\nnetwork: lenet5\n", ["memory.cvsram_bytes"]),
    ("memory: {cvsram_bytes: 100000000000000000000000}\nnetwork: lenet5\n",
     ["memory.cvsram_bytes"]),
    (LAYERS % "{name: l, type: lrn, alpha: .nan}", ["network.layers[0].alpha", "finite"]),
    (LAYERS % "{name: l, type: lrn, beta: .inf}", ["network.layers[0].beta", "finite"]),
    (LAYERS % "{name: l, type: prelu, slope: .inf}", ["network.layers[0].slope", "finite"]),
    (LAYERS % "{name: l, type: leaky_relu, alpha: -.inf}", ["network.layers[0].alpha"]),
    (LAYERS % "{name: l, type: clip, min: .nan, max: 1}", ["network.layers[0].min", "finite"]),
    (LAYERS % "{name: l, type: clip, min: 5, max: 1}", ["network.layers[0].min", "max"]),
    (LAYERS % "{name: p, type: pool, kernel: 9}", ["network.layers[0]", "empty"]),
    (LAYERS % "{name: p, type: pool, kernel: 2, stride: 0}", ["network.layers[0].stride"]),
    (LAYERS % "{name: c, type: conv, out_channels: 4, kernel: 3, pad: -1}",
     ["network.layers[0].pad"]),
    (LAYERS % "{name: c, type: conv, out_channels: 4, kernel: 3, pad: 9000}",
     ["network.layers[0].pad"]),
    (LAYERS % "{name: c, type: concat, input: []}", ["network.layers[0].input", "at least one"]),
    (LAYERS % "{name: c, type: conv, out_channels: 4, kernel: 3, relu: 'yes'}",
     ["network.layers[0].relu", "true or false"]),
    ("gpu_fallback: 'false'\nnetwork: lenet5\n", ["gpu_fallback", "true or false"]),
    ("outputs: {plots: 'no'}\nnetwork: lenet5\n", ["outputs.plots"]),
    ("network: lenet5\nnetwork: alexnet\n", [":3:", "duplicate key 'network'", "line 2"]),
    ("memory: {dram_gbps: 5, dram_gbps: 6}\nnetwork: lenet5\n", ["duplicate key 'dram_gbps'"]),
    ("name: ../../etc/evil\nnetwork: lenet5\n", ["name:", "safe file name"]),
    ("name: /tmp/abs\nnetwork: lenet5\n", ["name:", "safe file name"]),
    ('name: "a\\0b"\nnetwork: lenet5\n', ["name:", "safe file name"]),
    ("name: ..\nnetwork: lenet5\n", ["name:"]),
    ("name: ''\nnetwork: lenet5\n", ["name:"]),
    ("network: " + "[" * 1500 + "]" * 1500 + "\n", ["nested deeper than 100 levels"]),
    ("network:\n" + "".join("  " * i + "- \n" for i in range(1, 300)), [":102:", "nested deeper"]),
    ("network: {input: [8, 8, 8], layers: [{name: a, type: relu}, {name: a, type: relu}]}\n",
     ["network.layers[1]", "twice"]),
    ("precision: int8\nmode: fast\nnetwork: lenet5\n", ["mode"]),
    ("quantization: {percentile: .nan}\nnetwork: lenet5\n", ["quantization.percentile"]),
    ("input: {seed: -1}\nnetwork: lenet5\n", ["input.seed"]),
    ("input: {seed: 1.5}\nnetwork: lenet5\n", ["input.seed"]),
    ("hardware: {preset: nv_small, pdp_throughput: 1000000000000}\nnetwork: lenet5\n",
     ["hardware.pdp_throughput", "<="]),
    ("hardware: {preset: nv_small, primary_memif: {width_bits: 1099511627776}}\n"
     "network: lenet5\n", ["hardware.primary_memif.width_bits"]),
    ("hardware: {preset: nv_small, cbuf: {bank_depth: 1073741824}}\nnetwork: lenet5\n",
     ["hardware.cbuf.bank_depth"]),
    ("hardware: {preset: nv_small, sdp: {bs_throughput: .nan}}\nnetwork: lenet5\n",
     ["hardware.sdp.bs_throughput"]),
]


@pytest.mark.parametrize("text, needles", HOSTILE, ids=[f"case{i}" for i in range(len(HOSTILE))])
def test_hostile_scenario_is_one_line(tmp_path, text, needles):
    head = "" if text.startswith("hardware:") else "hardware: nv_small\n"
    path = scenario_file(tmp_path, head + text)
    rc, out, err = run_cli(["run", str(path), "--out", str(tmp_path / "out")])
    assert_one_line_error(rc, err, str(path), *needles)
    rc, out, err = run_cli(["compile", str(path)])       # compile rejects what run rejects
    assert_one_line_error(rc, err, str(path))


# -- seeded mutations --------------------------------------------------------------------------

HOSTILE_VALUES = [None, True, False, 0, -1, 1, 2, 7, 2 ** 31, 2 ** 64, 10 ** 30, -0.5, 0.5, 1e308,
                  float("inf"), -float("inf"), float("nan"), "", "x", "1", "true", "../x", "a\0b",
                  [], [0], [1, 2], [1, 2, 3, 4, 5], {}, {"a": 1}, MAX_DIM, MAX_DIM + 1]


def _paths(node, prefix=()):
    """Every (path, value) inside a nested mapping/list."""
    yield prefix, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, prefix + (i,))


def _mutate(rng: random.Random, mode: str = "timing", most: int = 3) -> dict:
    scn = copy.deepcopy(BASE)
    scn["mode"] = mode
    for _ in range(rng.randint(1, most)):
        paths = [p for p, _ in _paths(scn) if p]
        path = rng.choice(paths)
        node = scn
        for k in path[:-1]:
            node = node[k]
        if rng.random() < 0.1 and isinstance(node, dict):
            node["bogus_field"] = 1               # an unknown field
        else:
            node[path[-1]] = copy.deepcopy(rng.choice(HOSTILE_VALUES))
    return scn


@pytest.mark.parametrize("mode, count", [("timing", 150), ("values+timing", 60)])
def test_mutated_scenarios_fail_cleanly_or_run(tmp_path, mode, count):
    """Each mutation parses and compiles (values mode: with its float reference and
    calibration), or fails with a one-line NvdlaSimError; nothing else escapes.  Those that
    compile are checked for what the schema promises: finite numbers, dimensions within NVDLA's
    limits."""
    rng = random.Random(SEED)
    accepted = refused = 0
    for i in range(count * ROUNDS):
        scn = _mutate(rng, mode, 3 if mode == "timing" else 1)
        try:
            parsed = parse_scenario(scn, tmp_path)
            prep = prepare(parsed)
        except NvdlaSimError as exc:
            msg = str(exc)
            assert msg and "\n" not in msg and "Traceback" not in msg, (i, scn, msg)
            refused += 1
            continue
        accepted += 1
        assert math.isfinite(parsed.clock_mhz) and parsed.clock_mhz > 0
        assert math.isfinite(parsed.memory.dram_gbps) and parsed.memory.dram_gbps > 0
        for s in prep.network.shapes.values():
            assert 1 <= s.h <= MAX_DIM and 1 <= s.w <= MAX_DIM and s.c >= 1, (i, scn)
        assert "/" not in parsed.name and "\0" not in parsed.name
    assert accepted and refused


def test_mutated_scenario_files_through_the_cli(tmp_path):
    """A sample of the mutations written as YAML and run by `nvdla-sim run` (timing): exit 0 with
    a report, or exit 2 with one line."""
    rng = random.Random(SEED + 1)
    for i in range(12 * ROUNDS):
        scn = _mutate(rng)
        path = tmp_path / f"m{i}.yaml"
        try:
            path.write_text(yaml.safe_dump(scn))
        except yaml.YAMLError:
            continue
        rc, out, err = run_cli(["run", str(path), "--out", str(tmp_path / f"out{i}")])
        assert rc in (0, 2), (scn, err)
        if rc == 2:
            assert_one_line_error(rc, err, str(path))
        else:
            assert (tmp_path / f"out{i}" / "report.json").is_file()


# -- valid but changed: the result moves where it must -----------------------------------------

def _cycles(tmp_path: Path, change: dict, tag: str) -> int:
    scn = copy.deepcopy(BASE)
    for path, value in change.items():
        node = scn
        keys = path.split(".")
        for k in keys[:-1]:
            node = node[int(k)] if isinstance(node, list) else node[k]
        node[int(keys[-1]) if isinstance(node, list) else keys[-1]] = value
    p = tmp_path / f"{tag}.yaml"
    p.write_text(yaml.safe_dump(scn))
    rc, out, err = run_cli(["run", str(p), "--out", str(tmp_path / tag)])
    assert rc == 0, err
    report = json.loads((tmp_path / tag / "report.json").read_text())
    return report["total_cycles"]


def test_changed_fields_change_the_result(tmp_path):
    base = _cycles(tmp_path, {}, "base")
    assert _cycles(tmp_path, {"network.layers.0.out_channels": 64}, "wide") > base
    assert _cycles(tmp_path, {"memory.dram_gbps": 0.5}, "slow") > base
    assert _cycles(tmp_path, {"memory.dram_latency_ns": 100}, "same") == base


# -- memory: refused before anything is built, with the size -----------------------------------

def test_memory_estimate_counts_weights_from_shapes():
    scn = parse_scenario(copy.deepcopy(BASE), ROOT)
    net = scn.network.network
    # conv 16 x 8 x 3 x 3, fc 10 x (16 x 8 x 8): counted from the shapes, nothing built
    assert weight_elements(net) == 16 * 8 * 9 + 10 * 16 * 8 * 8
    # on the DLA: 16 bytes per weight when they are arrays (the lowering's quantisation peak);
    # timing-only stand-ins: at most a kernels x channels plane (8 B each), no R x S
    need = memory_need_bytes(net, values=False, input_image=False, weights=True)
    assert need == {"weights": 16 * weight_elements(net), "activations": 0}   # no image drawn
    need = memory_need_bytes(net, values=False, input_image=False, weights=False)
    assert need == {"weights": 8 * (16 * 8 + 10 * 16), "activations": 0}
    # the fc on the GPU fallback: stand-ins in timing, float32 arrays (8 B) in values mode
    need = memory_need_bytes(net, values=False, input_image=True, weights=False, gpu_ops={"fc"})
    assert need == {"weights": 8 * 16 * 8, "activations": 4 * 8 * 16 * 16}
    values = memory_need_bytes(net, values=True, gpu_ops={"fc"})
    assert values["weights"] == 16 * 16 * 8 * 9 + 8 * 10 * 16 * 8 * 8
    assert values["activations"] == 8 * sum(s.elements for s in net.shapes.values())


def test_memory_check_refuses_with_the_size():
    big = copy.deepcopy(BASE)
    big["network"] = {"input": [3, 8192, 8192], "layers": [
        {"name": "fc", "type": "fc", "out_features": 1000}]}
    net = parse_scenario(big, ROOT).network.network
    # the fc's 8192 x 8192 kernel is above the DLA's 32: on the GPU, stand-ins when timing
    check_memory(net, values=False, input_image=False, weights=False, gpu_ops={"fc"},
                 available=1 << 30)
    with pytest.raises(NvdlaSimError) as exc:
        check_memory(net, values=True, gpu_ops={"fc"}, available=16 << 30)
    msg = str(exc.value)
    # 1000 x 3 x 8192 x 8192 float32 weights, twice: 1500 GiB
    assert "weights 1500.0 GiB" in msg and "16.0 GiB are available" in msg and "\n" not in msg
    with pytest.raises(NvdlaSimError, match="weights 3000.0 GiB"):    # were it on the DLA, arrays
        check_memory(net, values=False, input_image=False, weights=True, available=16 << 30)
    # ... and as timing-only stand-ins: 1000 x 3 planes
    check_memory(net, values=False, input_image=False, weights=False, available=1 << 20)
    check_memory(parse_scenario(copy.deepcopy(BASE), ROOT).network.network, values=True,
                 available=16 << 30)


def _child(code: str, limit_bytes: int | None = None) -> subprocess.CompletedProcess:
    """Python `code` in a fresh interpreter (optionally under an address-space limit)."""
    pre = ""
    if limit_bytes:
        pre = ("import resource; resource.setrlimit(resource.RLIMIT_AS, "
               f"({limit_bytes}, {limit_bytes}))\n")
    return subprocess.run([sys.executable, "-c", pre + textwrap.dedent(code)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_too_big_for_this_process_is_one_line(tmp_path):
    """Under a 3 GiB address-space limit, an 8192 x 8192 input with a fully connected layer (legal
    sizes) is refused before any array is built, stating the size (values mode: its weights are
    75 GiB; in timing mode it runs, test_timing_only_peak_memory)."""
    path = scenario_file(tmp_path, """\
        hardware: nv_small
        mode: values+timing
        network: {input: [3, 8192, 8192], layers: [{name: fc, type: fc, out_features: 100}]}
        """)
    r = _child(f"""
        import sys
        from nvdla_sim.cli import main
        sys.exit(main(["run", {str(path)!r}, "--out", {str(tmp_path / 'o')!r}]))
        """, 3 << 30)
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.splitlines()) == 1 and "needs about" in r.stderr and "GiB" in r.stderr


PEAK_BOUND_BYTES = 1 << 30          # timing-only runs below stay under 1 GiB of peak RSS


@pytest.mark.parametrize("scenario", [
    "scenarios/resnet50_nv_large.yaml",
    # an 8192-wide input: no image or activation is materialised in timing mode
    {"name": "wide", "hardware": "nv_large", "mode": "timing",
     "network": {"input": [3, 32, 8192], "layers": [
         {"name": "c1", "type": "conv", "out_channels": 16, "kernel": 3, "stride": 2, "pad": 1},
         {"name": "p1", "type": "pool", "kernel": 2},
         {"name": "fc", "type": "fc", "out_features": 10}]}},
], ids=["resnet50", "wide8192"])
def test_timing_only_peak_memory(tmp_path, scenario):
    if isinstance(scenario, dict):
        path = tmp_path / "wide.yaml"
        path.write_text(yaml.safe_dump(scenario))
    else:
        path = ROOT / scenario
    r = _child(f"""
        import resource
        from nvdla_sim.scenario.runner import execute, prepare
        from nvdla_sim.scenario.schema import load_scenario
        scn = load_scenario({str(path)!r})
        scn.mode = "timing"
        scn.outputs.plots = False
        report = execute(prepare(scn), {str(tmp_path / 'out')!r})
        assert report.total_cycles > 0
        print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
        """)
    assert r.returncode == 0, r.stderr[-2000:]
    peak = int(r.stdout.strip().splitlines()[-1])
    assert peak < PEAK_BOUND_BYTES, f"peak RSS {peak / 2**20:.0f} MiB"


def test_run_progress_follows_the_engine(tmp_path):
    """`nvdla-sim run --progress`: the reporter follows the engine compiler.lower creates."""
    from nvdla_sim.conformance import Progress
    from nvdla_sim.scenario.runner import execute
    stream = io.StringIO()
    progress = Progress("lenet", stream=stream, interval_s=0.001, delay_s=0.0)
    scn = parse_scenario({**copy.deepcopy(BASE), "network": "lenet5"}, tmp_path)
    with progress.running():
        report = execute(prepare(scn), tmp_path / "out")
    lines = [line for line in stream.getvalue().splitlines() if line]
    assert lines and all(line.startswith("lenet: cycle ") for line in lines)
    last = int(lines[-1].split("cycle ")[1].split()[0].replace(",", ""))
    assert 0 < last <= report.total_cycles


@pytest.mark.parametrize("argv", [
    ["run"], ["bogus"], ["run", "s.yaml", "--mode", "fast"], ["run", "s.yaml", "--batch", "0"],
    ["run", "s.yaml", "--batch", "x"], ["sweep", "w.yaml", "--jobs", "0"],
    ["sweep", "w.yaml", "--jobs", "-3"], ["replay"], ["compile", "s.yaml", "--emit-format", "pdf"],
    ["run", "s.yaml", "--progress", "--no-progress"],
])
def test_bad_flags_are_one_line(argv):
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        with pytest.raises(SystemExit) as exc:
            main(argv)
    lines = err.getvalue().splitlines()
    assert exc.value.code == 2 and len(lines) == 1, err.getvalue()
    assert lines[0].startswith("nvdla-sim") and ": error: " in lines[0]
