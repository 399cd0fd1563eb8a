"""nvdla-sim: build the Cython kernels in nvdla_sim/kernels and install the `nvdla-sim` command."""
from pathlib import Path

import numpy
from Cython.Build import cythonize
from setuptools import Extension, find_packages, setup

HERE = Path(__file__).parent


def _openmp_flags() -> list[str]:
    """-fopenmp when the C compiler takes it (conv.pyx shares FP16 kernels between threads with
    prange); without it prange runs serially, with identical results."""
    import os
    import subprocess
    import sysconfig
    import tempfile
    if os.environ.get("NVDLA_SIM_NO_OPENMP"):
        return []
    cc = (sysconfig.get_config_var("CC") or "cc").split()
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "omp.c"
        src.write_text("#include <omp.h>\nint main(void) { return omp_get_max_threads() < 1; }\n")
        try:
            ok = subprocess.run(cc + ["-fopenmp", str(src), "-o", str(Path(tmp) / "omp")],
                                capture_output=True).returncode == 0
        except OSError:
            ok = False
    return ["-fopenmp"] if ok else []


OPENMP = _openmp_flags()
kernels = sorted((HERE / "nvdla_sim" / "kernels").glob("*.pyx"))
extensions = [
    Extension(f"nvdla_sim.kernels.{p.stem}", [str(p.relative_to(HERE))],
              include_dirs=[numpy.get_include()],
              define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
              extra_compile_args=["-O3"] + OPENMP, extra_link_args=OPENMP)
    for p in kernels
]

setup(
    name="nvdla-sim",
    version="0.1.0",
    description="Bit-exact, cycle-approximate simulator of the NVIDIA Deep Learning Accelerator",
    long_description=(HERE / "README.md").read_text() if (HERE / "README.md").exists() else "",
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(include=["nvdla_sim", "nvdla_sim.*"]),
    package_data={"nvdla_sim": ["config/presets/*.yaml", "regs/*.json", "kernels/*.pxd",
                                "kernels/*.pyx", "memory_profiles/*.yaml",
                                "timing/*.yaml", "energy/*.yaml"]},
    ext_modules=cythonize(extensions, language_level=3,
                          compiler_directives={"boundscheck": False, "wraparound": False,
                                               "cdivision": True, "initializedcheck": False}),
    install_requires=["simpy>=4", "numpy>=1.22", "cython>=3.0", "pyyaml>=5.4", "matplotlib>=3.5",
                      # CACTI 7 for SRAM energy/area (nvdla_sim/energy; needs Python >= 3.11)
                      "zigzag-dse>=3.9; python_version >= '3.11'"],
    extras_require={"test": ["pytest>=7", "onnx>=1.13", "onnxruntime>=1.16", "hypothesis>=6"], "onnx": ["onnx>=1.13"], "ray": ["ray>=2.9"],
                    # the ZigZag cross-check (docs/energy.md); zigzag-dse imports six undeclared
                    "zigzag": ["zigzag-dse>=3.9", "six"]},
    entry_points={"console_scripts": ["nvdla-sim = nvdla_sim.cli:main"]},
)
