"""Build step: compile pyggml_vulkan/shaders/*.comp to SPIR-V (glslangValidator) into the package's spv/ folder.

A wheel always carries its SPIR-V: building one (pip install, python -m build) fails when glslangValidator is missing
or a shader does not compile. Only an editable install (pip install -e) goes on without glslangValidator, with a
warning: there the shaders are compiled at first use into a cache dir (pyggml_vulkan.shaderc.spirv), which is also
what keeps an editable install working after shader edits.
"""

from __future__ import annotations

import logging
import shutil
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.errors import SetupError

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # plugins/build_helpers.py in a checkout
sys.path.insert(0, str(Path(__file__).resolve().parent))  # an sdist's copy of it, first
from build_helpers import Sdist, load_by_path

HERE = Path(__file__).resolve().parent


class BuildShaders(build_py):
    def run(self) -> None:
        super().run()
        sc = load_by_path("_pyggml_vulkan_shaderc", HERE / "pyggml_vulkan" / "shaderc.py")
        editable = getattr(self, "editable_mode", False)
        out = sc.SPV_DIR if editable else Path(self.build_lib) / "pyggml_vulkan" / "spv"
        if not editable:  # only what this build compiles, nothing left in build/ by an earlier one
            shutil.rmtree(out, ignore_errors=True)
        try:
            made = sc.compile_all(out)
            logging.getLogger(__name__).info("compiled %d shaders into %s", len(made), out)
        except sc.ShaderBuildError as e:
            if editable and "not found" in str(e):
                self.warn(f"{e}; shaders will be compiled at first use")
                return
            raise SetupError(f"pyggml-vulkan ships its shaders as SPIR-V, compiled when the wheel is built: {e}") from e
        if not made:
            raise SetupError(f"no shaders (*.comp) in {sc.SHADER_DIR}: nothing to compile")


setup(cmdclass={"build_py": BuildShaders, "sdist": Sdist})
