"""Start fast (issue 20): the command line imports what a command uses, when it uses it.

Each check runs in a fresh interpreter (imports are per process) and looks at sys.modules."""
from __future__ import annotations

import subprocess
import sys


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys\nprint(' '.join(sys.modules))"],
                         capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_the_parser_loads_no_numpy_simulator_or_lut_fitter():
    loaded = _modules_after("from nvdla_sim.cli import build_parser\nbuild_parser()")
    for heavy in ("numpy", "simpy", "matplotlib", "nvdla_sim.lut.fit", "nvdla_sim.engine"):
        assert heavy not in loaded, heavy


def test_lut_names_load_on_first_use_and_fit_stays_the_function():
    loaded = _modules_after("import nvdla_sim.lut")
    assert "nvdla_sim.lut.fit" not in loaded
    code = ("import nvdla_sim.lut.fit\n"            # the submodule first (as compiler/lut.py does)
            "from nvdla_sim import lut\n"
            "import sys, types\n"
            "module = sys.modules['nvdla_sim.lut.fit']\n"
            "assert callable(lut.fit) and not isinstance(lut.fit, types.ModuleType)\n"
            "assert lut.fit is module.fit and lut.LutFit is module.LutFit\n"
            "assert 'sigmoid' in lut.FUNCTIONS\n")
    assert "nvdla_sim.lut.fit" in _modules_after(code)
