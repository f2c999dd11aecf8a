"""Build hook: the cffi extension pyggml_cpu._pgc, compiled when the wheel is built (no binaries in the sources; an
abi3 wheel; without a C compiler or Python's headers the build stops at once naming them: ../build_helpers.py), from
its C sources and pyggml's shared kernel headers (core/pyggml/kernelsrc, which its sdist carries)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from setuptools.errors import PlatformError

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # plugins/build_helpers.py in a checkout
sys.path.insert(0, str(Path(__file__).resolve().parent))  # an sdist's copy of it, first
from build_helpers import Sdist, cffi_setup, compile_in_parallel, toolchain_problems

DIST = "pyggml-cpu"
HERE = Path(__file__).resolve().parent
KERNELSRC = HERE.parent.parent / "core" / "pyggml" / "kernelsrc"
"""pyggml's shared C-family source in the checkout (the C of the quantisers, also compiled by OpenCL and CUDA)."""
__all__ = ["compile_in_parallel", "toolchain_problems"]  # the tests' handles on the build's steps


def kernelsrc_missing() -> str | None:
    """Why the shared kernel source cannot be found (None: it is there)."""
    if any((d / "dialect.h").is_file() for d in (HERE / "pyggml_cpu" / "kernelsrc", KERNELSRC)):
        return None
    return (f"{DIST} compiles pyggml's shared kernel source (dialect.h and the block quantisers), which is in "
            f"neither pyggml_cpu/kernelsrc (an sdist's copy) nor {KERNELSRC} (a checkout): build from the "
            f"repository or from an sdist made there.")


class KernelSdist(Sdist):
    """An sdist builds alone: it carries a copy of pyggml's shared kernel headers as pyggml_cpu/kernelsrc (only in
    the archive, never in the checkout), which _build.py takes before the checkout's core/pyggml/kernelsrc."""

    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        src = KERNELSRC if KERNELSRC.is_dir() else HERE / "pyggml_cpu" / "kernelsrc"  # a checkout, else an sdist
        headers = sorted(src.glob("*.h"))
        if not headers:
            raise PlatformError(f"{DIST}: no shared kernel headers in {src}: make the sdist from a checkout")
        dest = Path(base_dir) / "pyggml_cpu" / "kernelsrc"
        dest.mkdir(parents=True, exist_ok=True)
        for h in headers:
            shutil.copyfile(h, dest / h.name)


if __name__ == "__main__":  # as pip, build and setuptools run it; the tests import toolchain_problems
    cffi_setup(DIST, "pyggml_cpu/_build.py:ffibuilder", kernelsrc_missing, sdist_command=KernelSdist)
