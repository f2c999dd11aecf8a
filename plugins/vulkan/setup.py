"""Build step: compile pyggml-glsl's shaders (`pyggml_glsl/shaders/*.comp`, found by build_helpers.glsl_shaders) to
SPIR-V (glslangValidator) into the package's spv/ folder.

A wheel always carries its SPIR-V: building one (pip install, python -m build) fails when glslangValidator is missing
or a shader does not compile. Only an editable install (pip install -e) goes on without glslangValidator, with a
warning: there the shaders are compiled at first use into a cache dir (pyggml_vulkan.shaderc.spirv), which is also
what keeps an editable install working after shader edits.
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


def shaders(sc: ModuleType) -> Kernels:
    src = glsl_shaders()
    return Kernels(
        generate=lambda out: sc.compile_all(out, src), error=sc.ShaderBuildError, folder=sc.SPV_DIR,
        ships="pyggml-vulkan ships its shaders as SPIR-V, compiled when the wheel is built",
        at_first_use="shaders will be compiled at first use",
        editable_tolerates=lambda e: "not found" in str(e),  # glslangValidator missing; a shader error always fails
        none_made=f"no shaders (*.comp) in {src}: nothing to compile")


setup(cmdclass={"build_py": kernels_build_py(HERE / "pyggml_vulkan" / "shaderc.py", shaders), "sdist": Sdist})
