"""Build step: compile pyggml_vulkan/shaders/*.comp to SPIR-V (glslangValidator) into the package's spv/ folder.

Without glslangValidator the build still succeeds; the shaders are then compiled at first use into a cache dir
(pyggml_vulkan.shaderc.spirv), which is also what keeps an editable install working after shader edits.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


def _shaderc():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("_pyggml_vulkan_shaderc", HERE / "pyggml_vulkan" / "shaderc.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class BuildShaders(build_py):
    def run(self) -> None:
        super().run()
        sc = _shaderc()
        editable = getattr(self, "editable_mode", False)
        out = sc.SPV_DIR if editable else Path(self.build_lib) / "pyggml_vulkan" / "spv"
        try:
            made = sc.compile_all(out)
            logging.getLogger(__name__).info("compiled %d shaders into %s", len(made), out)
        except sc.ShaderBuildError as e:
            if "not found" not in str(e):
                raise
            self.warn(f"{e}; shaders will be compiled at first use")


setup(cmdclass={"build_py": BuildShaders})
