"""Build step: the Vulkan plugin's GLSL shaders -> SPIR-V -> MSL (+ a binding layout per kernel) into the package's
msl/ folder (pyggml_metal/mslgen.py).

A wheel always carries its MSL: building one fails when glslangValidator or spirv-cross is missing or a shader does
not translate. An editable install goes on without the tools, with a warning: the MSL is then generated at first use
into the cache dir, which also keeps an editable install current after shader edits.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.errors import SetupError

HERE = Path(__file__).resolve().parent


def _mslgen():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("_pyggml_metal_mslgen", HERE / "pyggml_metal" / "mslgen.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class BuildMsl(build_py):
    def run(self) -> None:
        super().run()
        gen = _mslgen()
        editable = getattr(self, "editable_mode", False)
        out = gen.MSL_DIR if editable else Path(self.build_lib) / "pyggml_metal" / "msl"
        if not editable:
            shutil.rmtree(out, ignore_errors=True)
        try:
            made = gen.generate_all(out)
        except gen.MslBuildError as e:
            if editable:
                self.warn(f"{e}; the MSL will be generated at first use")
                return
            raise SetupError(f"pyggml-metal ships its kernels as MSL, generated when the wheel is built: {e}") from e
        if not made:
            raise SetupError("no shaders found to translate to MSL")


setup(cmdclass={"build_py": BuildMsl})
