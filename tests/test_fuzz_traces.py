"""Seeded fuzzing of trace replays: official v2 `.cfg` tests and v1 trace-player tests, their `.dat`
images and register values, mutated and replayed in-process through the command line.

For every case: no traceback (no exception leaves `nvdla_sim.cli.main`), no signal, a bounded
time (a watchdog) and bounded memory (peak RSS), and a non-zero exit with exactly one
`nvdla-sim: error:` line for invalid input.  For valid-but-changed input, the result differs where
it must (a changed expected CRC fails, changed input data changes the computed CRC) and nowhere
else.  NVDLA_FUZZ_SEED / NVDLA_FUZZ_ROUNDS vary and lengthen the run.
"""
from __future__ import annotations

import contextlib
import io
import os
import random
import re
import resource
import shutil
import signal
import time
from pathlib import Path

import pytest

from nvdla_sim.cli import main
from nvdla_sim.conformance import v1_corpus_root
from tests.conftest import nvdla_hw_root

SEED = int(os.environ.get("NVDLA_FUZZ_SEED", "13"))
ROUNDS = int(os.environ.get("NVDLA_FUZZ_ROUNDS", "1"))
CASE_SECONDS = 10                          # watchdog per case
RSS_GROWTH_BYTES = 2 << 30                 # peak memory the whole suite may add

V2_TESTS = ("pdp_8x8x64_2x2_int8", "cdp_8x8x32_lrn3_int8_0", "dc_6x8x192_3x3x192x32_int8_0")
V1_TESTS = ("pdp_max_pooling_int16", "sdp_relu_int16")
BAD_NUMBERS = ("0x0x0d", "0x", "0xZZ", "-1", "1e3", str(2 ** 39), "0x10000000000000000",
               "0xFFFFFFFFFFFFFFFF")
_NUMBER = re.compile(r"(?<![\w.])(0x[0-9a-fA-F]+|\d+)(?![\w.])")


class Watchdog(BaseException):
    """A case ran past CASE_SECONDS (BaseException: no `except Exception` in the code takes it)."""


@contextlib.contextmanager
def watchdog(seconds: float):
    def fire(signum, frame):
        raise Watchdog()
    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def replay(folder: Path, project: str) -> tuple[int | None, str, str]:
    """(exit status or None on the watchdog, stdout, stderr) of `nvdla-sim replay` in-process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            with watchdog(CASE_SECONDS):
                rc = main(["replay", str(folder), "--project", project, "--quiet", "--no-progress"])
        except Watchdog:
            rc = None
    return rc, out.getvalue(), err.getvalue()


def assert_clean(rc, out: str, err: str, case: str, invalid: bool) -> None:
    assert rc in (0, 1, 2, None), f"{case}: exit {rc}\n{err}"
    if rc is None:
        return
    errors = [line for line in err.splitlines() if line.startswith("nvdla-sim: error")]
    if invalid:
        assert rc != 0, f"{case}: invalid input accepted\n{out}"
        assert len(errors) == 1 and len(err.splitlines()) == 1, f"{case}: {err!r}"
    if errors:
        assert len(err.splitlines()) == 1, f"{case}: more than one line on stderr: {err!r}"
        assert "Traceback" not in err


def _v2_root() -> Path:
    root = nvdla_hw_root()
    if root is None:
        pytest.skip("official v2 trace tests absent ($NVDLA_HW or ../shared/nvdla-hw)")
    return root / "verif" / "tests" / "trace_tests" / "nv_small"


def _v1_root() -> Path:
    root = v1_corpus_root()
    if root is None:
        pytest.skip("official v1 trace-player tests absent ($NVDLA_HW_V1 or ../shared/nvdla-hw-v1)")
    return root / "verif" / "traces" / "traceplayer"


def _copy(src: Path, dst: Path) -> Path:
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    return dst


def _cfg(folder: Path) -> Path:
    return next(folder.glob("*.cfg"))


def _mutate_number(text: str, rng: random.Random, lines_with: str = "") -> str | None:
    """Replace one number (on a line containing `lines_with`) by a bad token."""
    lines = text.splitlines(keepends=True)
    spots = [(i, m) for i, line in enumerate(lines) if lines_with in line
             and not line.lstrip().startswith(("//", "#")) for m in _NUMBER.finditer(line)]
    if not spots:
        return None
    i, m = rng.choice(spots)
    lines[i] = lines[i][:m.start()] + rng.choice(BAD_NUMBERS) + lines[i][m.end():]
    return "".join(lines)


@pytest.fixture(scope="module")
def rss_guard():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    yield
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    assert after - before < RSS_GROWTH_BYTES, f"peak RSS grew by {(after - before) >> 20} MiB"


@pytest.mark.parametrize("test", V2_TESTS)
def test_fuzz_cfg_traces(tmp_path, test, rss_guard):
    src = _v2_root() / test
    if not src.is_dir():
        pytest.skip(f"{src} absent")
    rng = random.Random(f"{SEED}-{test}")
    rc, out, err = replay(src, "nv_small")
    assert rc == 0, err
    baseline = re.findall(r"actual (0x[0-9a-f]+)", out)
    start = time.perf_counter()
    for case in range(12 * ROUNDS):
        folder = _copy(src, tmp_path / f"c{case}")
        cfg = _cfg(folder)
        text = cfg.read_text()
        kind = rng.choice(["number", "number", "drop", "dup", "truncate", "garbage"])
        invalid = False
        if kind == "number":
            mutated = _mutate_number(text, rng, rng.choice(["mem_load", "mem_init", "check_crc",
                                                            "reg_write", "poll_reg_equal"]))
            invalid = mutated is not None
            text = mutated or text
        elif kind in ("drop", "dup"):
            lines = text.splitlines(keepends=True)
            i = rng.randrange(len(lines))
            lines[i:i + 1] = [] if kind == "drop" else [lines[i], lines[i]]
            text = "".join(lines)
        elif kind == "truncate":
            text = text[:rng.randrange(len(text))]
        else:
            pos = rng.randrange(len(text))
            text = text[:pos] + "".join(rng.choice("(){};,0x\x00\u00e9 \n") for _ in range(5)) + text[pos:]
        cfg.write_text(text)
        rc, out, err = replay(folder, "nv_small")
        assert_clean(rc, out, err, f"{test} case {case} ({kind})", invalid)
    # Valid but changed: a wrong expected CRC fails with the same computed CRC.
    folder = _copy(src, tmp_path / "crc")
    cfg = _cfg(folder)
    cfg.write_text(re.sub(r"(check_crc\([^;]*,\s*)0x([0-9a-fA-F]{8})\)",
                          lambda m: f"{m.group(1)}0x{int(m.group(2), 16) ^ 1:08x})",
                          cfg.read_text(), count=1))
    rc, out, err = replay(folder, "nv_small")
    assert rc == 1 and "FAIL" in out
    assert re.findall(r"actual (0x[0-9a-f]+)", out) == baseline
    assert time.perf_counter() - start < 40 * ROUNDS


@pytest.mark.parametrize("test", V2_TESTS[:2])
def test_fuzz_dat_images(tmp_path, test, rss_guard):
    src = _v2_root() / test
    if not src.is_dir():
        pytest.skip(f"{src} absent")
    rng = random.Random(f"{SEED}-dat-{test}")
    rc, out, err = replay(src, "nv_small")
    baseline = re.findall(r"actual (0x[0-9a-f]+)", out)
    loaded = re.findall(r'mem_load\([^,]+,[^,]+,\s*"?([^")]+)"?\)', _cfg(src).read_text())
    assert loaded
    mutations = ["offset", "offset", "token", "size", "directory", "binary"]
    for case in range(10 * ROUNDS):
        folder = _copy(src, tmp_path / f"d{case}")
        dat = folder / rng.choice(loaded).strip()
        text = dat.read_text()
        kind = rng.choice(mutations)
        if kind == "offset":
            text = re.sub(r"offset:\s*(0x[0-9a-fA-F]+|\d+)",
                          f"offset:{rng.choice([hex(2 ** 39), hex(2 ** 64 - 32), hex(2 ** 32 - 1)])}",
                          text, count=1)
        elif kind == "token":
            text = re.sub(r"0x[0-9a-fA-F]{2}\b", rng.choice(["0x0x0d", "0xZZ", "0x123", "0x"]),
                          text, count=1)
        elif kind == "size":
            text = re.sub(r"size:\s*(\d+)", lambda m: f"size:{int(m.group(1)) + 1}", text, count=1)
        if kind == "directory":
            dat.unlink()
            dat.mkdir()
        elif kind == "binary":
            dat.write_bytes(bytes(rng.randrange(256) for _ in range(64)))
        else:
            dat.write_text(text)
        rc, out, err = replay(folder, "nv_small")
        assert_clean(rc, out, err, f"{test} .dat case {case} ({kind})", invalid=True)
    # Valid but changed: every input byte set to 0x11 changes what the unit computes.
    folder = _copy(src, tmp_path / "data")
    for name in loaded:
        dat = folder / name.strip()
        dat.write_text(re.sub(r"(payload:[^}]*)", lambda m: re.sub(r"0x[0-9a-fA-F]{2}\b", "0x11",
                                                                   m.group(1)), dat.read_text()))
    rc, out, err = replay(folder, "nv_small")
    assert rc == 1 and re.findall(r"actual (0x[0-9a-f]+)", out) != baseline, err


@pytest.mark.parametrize("test", V1_TESTS)
def test_fuzz_txn_traces(tmp_path, test, rss_guard):
    src = _v1_root() / test
    if not src.is_dir():
        pytest.skip(f"{src} absent")
    rng = random.Random(f"{SEED}-txn-{test}")
    rc, out, err = replay(src, "nv_full")
    assert rc == 0, err
    for case in range(10 * ROUNDS):
        folder = _copy(src, tmp_path / f"t{case}")
        txn = folder / "input.txn"
        lines = txn.read_text().splitlines(keepends=True)
        loads = [i for i, line in enumerate(lines) if line.startswith(("load_mem", "dump_mem"))]
        i = rng.choice(loads)
        fields = lines[i].split()
        kind = rng.choice(["size", "address", "token", "directory", "payload"])
        if kind == "size":
            fields[2] = rng.choice(["0xffffffe0", "0x10000000000", "0x0x0d"])
        elif kind == "address":
            fields[1] = rng.choice(["0xffffffff", "0x0x0d", "0x1" + "0" * 16])
        elif kind == "token":
            fields[rng.randrange(1, 3)] = rng.choice(["0x0x0d", "zz", "-5"])
        elif kind == "directory":
            (folder / fields[3]).unlink()
            (folder / fields[3]).mkdir()
        else:
            dat = folder / fields[3]
            # A byte of the first data line (header lines such as `W=0x8` are not data).
            dat.write_text(re.sub(r"^( ?)0x[0-9a-fA-F]{2}\b", r"\g<1>0x0x0d", dat.read_text(),
                                  count=1, flags=re.M))
        lines[i] = " ".join(fields) + "\n"
        txn.write_text("".join(lines))
        rc, out, err = replay(folder, "nv_full")
        assert_clean(rc, out, err, f"{test} case {case} ({kind})", invalid=True)


@pytest.mark.parametrize("version", (2, 1))
def test_fuzz_register_values(tmp_path, version, rss_guard):
    """Random register values on real programs: any outcome, but never a traceback or a hang."""
    if version == 2:
        src, project, pattern = _v2_root() / V2_TESTS[0], "nv_small", r"reg_write\([^,]+,\s*(0x[0-9a-fA-F]+|\d+)\)"
    else:
        src, project, pattern = _v1_root() / V1_TESTS[0], "nv_full", r"^write_reg\s+\S+\s+(\S+)"
    if not src.is_dir():
        pytest.skip(f"{src} absent")
    rng = random.Random(f"{SEED}-regs-{version}")
    timeouts = 0
    for case in range(15 * ROUNDS):
        folder = _copy(src, tmp_path / f"r{case}")
        trace = _cfg(folder) if version == 2 else folder / "input.txn"
        text = trace.read_text()
        spots = list(re.finditer(pattern, text, re.M))
        for m in rng.sample(spots, k=min(len(spots), rng.choice([1, 1, 3]))):
            old = int(m.group(1), 16 if version == 1 else 0)
            new = rng.choice([0, 0xFFFFFFFF, rng.getrandbits(32), old ^ (1 << rng.randrange(32)),
                              old ^ (1 << rng.randrange(8))])
            value = f"0x{new:x}"
            text = text[:m.start(1)] + value.ljust(len(m.group(1))) + text[m.end(1):] \
                if len(value) <= len(m.group(1)) else text
        trace.write_text(text)
        rc, out, err = replay(folder, project)
        assert_clean(rc, out, err, f"v{version} register case {case}", invalid=False)
        timeouts += rc is None
    assert timeouts <= 2 * ROUNDS, f"{timeouts} cases ran past {CASE_SECONDS} s"


# -------------------------------------------------------------------------------------------------
# Deterministic hostile inputs (no corpus needed)

def _cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:            # argparse: --version, --help, usage errors
            rc = exc.code
    return rc, out.getvalue(), err.getvalue()


def _cfg_test(folder: Path, dat: str, extra: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "t.dat").write_text(dat)
    (folder / "t.cfg").write_text('mem_load(pri_mem, 0x80000000, "t.dat");\n' + extra)
    return folder


@pytest.mark.parametrize("dat, message", [
    ("{offset:0x8000000000, size:1, payload:0x01},", "beyond the 4 GiB address map"),
    ("{offset:0xffffffffffffffe0, size:1, payload:0x01},", "beyond the 4 GiB address map"),
    ("{offset:0x0, size:1, payload:0x0x0d},", "'0x0x0d' is not a byte"),
    ("{offset:0x0, size:2, payload:0x01},", "declares size 2 but its payload is 1 bytes"),
    ("{offset:0x0, size:1, payload:0x1\x00},", "is not a byte"),
])
def test_bad_dat_records_are_one_line(tmp_path, dat, message):
    rc, out, err = _cli(["replay", str(_cfg_test(tmp_path / "t", dat)), "--no-progress"])
    assert rc != 0 and message in err and len(err.splitlines()) == 1, err


def test_dat_offsets_stay_sparse(tmp_path):
    """Records 1 GiB apart load as two small segments (no 1 GiB image), and the gap reads 0."""
    from nvdla_sim.frontends.cfg_trace import parse_cfg
    from nvdla_sim.program import MemFill, MemLoad
    folder = _cfg_test(tmp_path / "t", "{offset:0x10, size:2, payload:0x01 0x02},\n"
                                       "{offset:0x40000000, size:1, payload:0x03},")
    program = parse_cfg(folder)
    loads = [c for c in program.commands if isinstance(c, MemLoad)]
    assert [(c.addr, c.data.tolist()) for c in loads] == [(0x80000010, [1, 2]), (0xC0000000, [3])]
    fills = [c for c in program.commands if isinstance(c, MemFill)]
    assert [(f.addr, f.nbytes, f.value) for f in fills] == [(0x80000000, 0x40000001, 0)]
    from nvdla_sim.memory import MemorySystem
    mem = MemorySystem()
    for c in program.commands:
        space = mem.space_for_address(c.addr)
        space.fill(c.addr, c.nbytes, c.value) if isinstance(c, MemFill) else space.write(c.addr, c.data)
    assert mem.budget.pages == 2
    assert mem.primary.read(0x8000000e, 4).tolist() == [0, 0, 1, 2]


def test_memory_limit_refuses_before_allocating(monkeypatch):
    from nvdla_sim.memory import MemoryAccessError, MemorySystem
    mem = MemorySystem(limit_bytes=1 << 20)
    mem.primary.fill(0x80000000, 1 << 30, 0)           # zero fill: nothing allocated
    mem.primary.write(0x80000000, bytes(1 << 19))
    with pytest.raises(MemoryAccessError, match=r"fill of 1073741824 bytes .* past the 1 MiB limit"):
        mem.primary.fill(0x80000000, 1 << 30, 0xFF)
    assert mem.budget.pages == 8
    monkeypatch.setenv("NVDLA_SIM_MEMORY_LIMIT_MB", "lots")
    with pytest.raises(Exception, match="NVDLA_SIM_MEMORY_LIMIT_MB"):
        MemorySystem()


def test_txn_huge_size_allocates_nothing(tmp_path):
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "in.dat").write_text(" ".join(["0x01"] * 32) + "\n")
    (folder / "input.txn").write_text("load_mem 0x80000000 0xffffffe0 in.dat\n")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rc, out, err = _cli(["replay", str(folder), "--project", "nv_full", "--no-progress"])
    assert rc != 0 and "holds 32 bytes, the command needs 4294967264" in err
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024 < 256 << 20


def test_output_folders_are_checked_before_the_run(tmp_path):
    folder = _cfg_test(tmp_path / "t", "{offset:0x0, size:1, payload:0x01},")
    blocker = tmp_path / "file"
    blocker.write_text("")
    for argv, message in [
            (["--json", str(tmp_path / "missing" / "r.json")], "does not exist"),
            (["--json", str(tmp_path)], "is a folder"),
            (["--timeline", str(blocker / "x")], "cannot write there"),
            (["--timeline", str(blocker)], "is not a folder")]:
        rc, out, err = _cli(["replay", str(folder), "--no-progress"] + argv)
        assert rc == 2 and message in err and len(err.splitlines()) == 1, err
        assert out == ""                                   # nothing ran


def test_version_and_help_for_every_argument():
    rc, out, err = _cli(["--version"])
    from nvdla_sim import __version__
    assert rc == 0 and out.strip() == f"nvdla-sim {__version__}"
    from nvdla_sim.cli import build_parser
    parser = build_parser()
    stack = [parser]
    seen = 0
    while stack:
        p = stack.pop()
        for action in p._actions:
            if action.__class__.__name__ == "_SubParsersAction":
                stack += list(action.choices.values())
            elif action.dest != "help":
                assert action.help, f"{p.prog}: {action.option_strings or action.dest} has no help"
                seen += 1
    assert seen > 30


def test_wrong_project_is_hinted(tmp_path):
    root = nvdla_hw_root()
    if root is None:
        pytest.skip("official v2 trace tests absent")
    test = root / "verif" / "tests" / "trace_tests" / "nv_small" / "pdp_8x8x64_2x2_int8"
    rc, out, err = _cli(["replay", str(test), "--project", "nv_large", "--quiet", "--no-progress"])
    assert rc == 1 and "FAIL" in out
    assert "project may not match (try --project nv_small)" in err


def test_progress_reports_cycles_of_a_long_run():
    from nvdla_sim.conformance import Progress

    class Env:
        now = 0.0

    class Engine:
        env = Env()
    stream = io.StringIO()
    progress = Progress("t", stream, interval_s=0.02, delay_s=0.01)
    with progress.watch(Engine()):
        for i in range(10):
            Engine.env.now = 1e6 * (i + 1)
            time.sleep(0.01)
    assert progress.lines >= 2 and "t: cycle " in stream.getvalue()
    quiet = Progress("t", io.StringIO(), delay_s=5)
    with quiet.watch(Engine()):
        pass                                              # a short run prints nothing
    assert quiet.lines == 0
