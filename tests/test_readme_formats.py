"""The README's `In-memory formats` example runs as shown: it packs a cube with nvdla_sim.formats,
runs a register program on the engine, unpacks the output and asserts it against numpy."""
from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def formats_snippet() -> str:
    text = README.read_text()
    assert "## In-memory formats" in text, "README lost its formats section"
    section = text.split("## In-memory formats", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1, "the formats section should hold one python example"
    return blocks[0]


def test_readme_formats_example_runs_as_shown():
    code = formats_snippet()
    # pack, run, unpack, check: the example is the round trip the section promises
    for needed in ("formats.pack_feature", "formats.unpack_feature", ".run(", "assert "):
        assert needed in code, needed
    scope: dict = {}
    exec(compile(code, str(README), "exec"), scope)     # its own assert compares with numpy
    assert scope["y"].shape == (20, 4, 4)
