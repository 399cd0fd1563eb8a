"""Emitted .cfg traces follow the grammar of nvdla/hw's own trace parser (issue 16).

The checker below is written from that parser's rules (verif/tools/nvdla_trace_parser.py in
nvdla/hw): sync ids and interrupt ids are word characters only; register names word characters
and dots; file paths word characters, dots and slashes; values a hex number or a word; every
command ends with `;` and an optional `//` comment; comments and empty lines anywhere.  A grouped
convolution's layer names hold a dot (`conv2.g0`), which sync ids used to carry.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

_W = r"[A-Za-z0-9_]+"                         # word characters (ASCII)
_NAME = r"[A-Za-z0-9_.]+"
_PATH = r"[A-Za-z0-9_./]+"
_HEX = r"0x[0-9a-fA-F]+"
_VALUE = rf"(?:{_HEX}|{_W})"
_NUM = rf"(?:{_HEX}|[0-9]+)"
_END = r"\s*\)\s*;\s*(?://.*)?$"
GRAMMAR = [re.compile(p) for p in (
    r"^\s*//.*$",
    r"^\s*$",
    rf"^\s*(?:reg_write|reg_read_check|reg_read|poll_reg_equal)\s*\(\s*{_NAME}\s*,\s*{_VALUE}{_END}",
    rf"^\s*sync_(?:notify|wait)\s*\(\s*{_NAME}\s*,\s*{_VALUE}{_END}",
    rf"^\s*intr_notify\s*\(\s*(?:{_W}\s*,\s*)?{_W}{_END}",
    rf"^\s*(?:check_crc|check_file|check_nothing)\s*\(\s*{_W}"
    rf"(?:\s*,\s*{_W}\s*,\s*{_HEX}\s*,\s*{_NUM}\s*,\s*(?:{_HEX}|\"{_PATH}\"))?{_END}",
    rf"^\s*(?:mem_reserve|mem_load|mem_init|mem_release)\s*\(\s*{_W}\s*,\s*{_HEX}\s*,"
    rf"\s*(?:\"{_PATH}\"|{_NUM}|{_W})\s*(?:,\s*[A-Z_]+\s*)?(?:,\s*{_W}\s*)?\)\s*;\s*(?://.*)?$",
)]


def rejected_lines(cfg: Path) -> list[str]:
    """Lines of `cfg` the official parser's grammar does not accept."""
    return [f"{cfg.name}:{n}: {line}" for n, line in enumerate(cfg.read_text().splitlines(), 1)
            if not any(p.match(line) for p in GRAMMAR)]


def test_checker_rejects_what_the_official_parser_rejects():
    ok = ["intr_notify(SDP_1, conv2_g0_SDP_1);", "sync_wait(NVDLA_CDMA, conv2_g0_SDP_1);",
          "check_crc(c_SDP_0, 1, 0x80000000, 0x10, 0x8291be50);", "check_nothing(x_PDP_0);",
          'mem_load(pri_mem, 0x80000000, "net_0.dat");',
          "mem_init(pri_mem, 0x80000000, 0x1400, ALL_ZERO);",
          "reg_write(NVDLA_CDMA.D_BANK_0, 0x60000);  // note", "// comment", ""]
    bad = ["intr_notify(SDP_1, conv2.g0_SDP_1);", "sync_wait(NVDLA_CDMA, conv2.g0_SDP_1);",
           "check_crc(conv2.g0_SDP_1, 1, 0x80000000, 0x10, 0x8291be50);",
           'mem_load(pri_mem, 0x80000000, "res-net_0.dat");', "reg_write(NVDLA_CDMA.D_BANK_0, 1)",
           "intr_notify(SDP_1, a/b_SDP_1);"]
    assert all(any(p.match(line) for p in GRAMMAR) for line in ok)
    assert not any(any(p.match(line) for p in GRAMMAR) for line in bad)


SHIPPED = sorted((REPO / "traces").rglob("*.cfg"))


@pytest.mark.parametrize("cfg", SHIPPED, ids=lambda p: str(p.relative_to(REPO / "traces")))
def test_shipped_traces_follow_the_official_grammar(cfg):
    assert rejected_lines(cfg) == []


def test_shipped_cfg_traces_exist():
    assert SHIPPED, "traces/ holds .cfg trace tests (tools/make_traces.py)"


def test_grouped_convolution_network_emits_accepted_names(tmp_path):
    """A grouped convolution (AlexNet's conv2 shape, shrunk) compiled with --emit-cfg: its names
    pass the grammar, its sync ids keep the layer's name readable, and the test replays."""
    from nvdla_sim.compiler.lower import emit_trace
    from nvdla_sim.conformance import run_test
    from nvdla_sim.config import load_hardware
    from nvdla_sim.engine.memif import load_memory_profile
    from nvdla_sim.scenario.runner import context, prepare
    from nvdla_sim.scenario.schema import load_scenario
    yaml = tmp_path / "grouped-net.yaml"
    yaml.write_text(
        "name: grouped-net.v1\nhardware: nv_small\nprecision: int8\nmode: values+timing\n"
        "network:\n  name: grouped\n  input: [16, 12, 12]\n  layers:\n"
        "    - {name: conv1, type: conv, out_channels: 16, kernel: 3, pad: 1, relu: true}\n"
        "    - {name: conv2, type: conv, out_channels: 32, kernel: 3, pad: 1, groups: 2}\n")
    scn = load_scenario(yaml)
    prep = prepare(scn)
    path, _ = emit_trace(prep.plan, context(prep), tmp_path / "out", scn.name, scn.memory.dram)
    text = path.read_text()
    assert "intr_notify(SDP_1, conv2_g0_SDP_1);" in text and "conv2_g1_SDP_0" in text
    assert '"grouped_net.v1_0.dat"' in text          # the test's '-' is no path character
    assert rejected_lines(path) == []
    outcome = run_test(path.parent, load_hardware("nv_small"), load_memory_profile("rtl_testbench"))
    assert outcome.status == "pass", outcome.error
