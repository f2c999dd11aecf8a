"""Build step: pyggml-glsl's GLSL shaders (found by build_helpers.glsl_shaders) -> SPIR-V -> MSL (+ a binding layout
per kernel) into the package's msl/ folder (pyggml_metal/mslgen.py).

A wheel always carries its MSL: building one fails when glslangValidator or spirv-cross is missing or a shader does
not translate. An editable install goes on without the tools, with a warning: the MSL is then generated at first use
into the cache dir, which also keeps an editable install current after shader edits.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

from setuptools import setup

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # plugins/build_helpers.py in a checkout
sys.path.insert(0, str(Path(__file__).resolve().parent))  # an sdist's copy of it, first
from build_helpers import Kernels, Sdist, glsl_shaders, kernels_build_py

HERE = Path(__file__).resolve().parent


def msl(gen: ModuleType) -> Kernels:
    src = glsl_shaders()
    return Kernels(
        generate=lambda out: gen.generate_all(out, src), error=gen.MslBuildError, folder=gen.MSL_DIR,
        ships="pyggml-metal ships its kernels as MSL, generated when the wheel is built",
        at_first_use="the MSL will be generated at first use",
        editable_tolerates=lambda e: True,  # any failure: the MSL is generated at first use
        none_made="no shaders found to translate to MSL")


setup(cmdclass={"build_py": kernels_build_py(HERE / "pyggml_metal" / "mslgen.py", msl), "sdist": Sdist})
