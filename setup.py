"""nvdla-sim: build the Cython kernels in nvdla_sim/kernels and install the `nvdla-sim` command."""
from pathlib import Path

import numpy
from Cython.Build import cythonize
from setuptools import Extension, find_packages, setup

HERE = Path(__file__).parent
kernels = sorted((HERE / "nvdla_sim" / "kernels").glob("*.pyx"))
extensions = [
    Extension(f"nvdla_sim.kernels.{p.stem}", [str(p.relative_to(HERE))],
              include_dirs=[numpy.get_include()],
              define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
              extra_compile_args=["-O3"])
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
    extras_require={"test": ["pytest>=7", "onnx>=1.13", "hypothesis>=6"], "onnx": ["onnx>=1.13"], "ray": ["ray>=2.9"],
                    # the ZigZag cross-check (docs/energy.md); zigzag-dse imports six undeclared
                    "zigzag": ["zigzag-dse>=3.9", "six"]},
    entry_points={"console_scripts": ["nvdla-sim = nvdla_sim.cli:main"]},
)
