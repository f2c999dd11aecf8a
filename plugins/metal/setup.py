"""Build step: the Vulkan plugin's GLSL shaders -> SPIR-V -> MSL (+ a binding layout per kernel) into the package's
msl/ folder (pyggml_metal/mslgen.py).

A wheel always carries its MSL: building one fails when glslangValidator or spirv-cross is missing or a shader does
not translate. An editable install goes on without the tools, with a warning: the MSL is then generated at first use
into the cache dir, which also keeps an editable install current after shader edits.
"""

from __future__ import annotations

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


class BuildMsl(build_py):
    def run(self) -> None:
        super().run()
        gen = load_by_path("_pyggml_metal_mslgen", HERE / "pyggml_metal" / "mslgen.py")
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


setup(cmdclass={"build_py": BuildMsl, "sdist": Sdist})
