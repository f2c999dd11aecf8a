"""Build hook: the cffi extension pyggml_cpu._pgc, compiled when the wheel is built (no binaries in the sources).

The extension uses only Python's stable ABI (cffi builds it with Py_LIMITED_API), so the wheel is tagged
cp311-abi3: one wheel for CPython 3.11 and every later 3.x. `make wheels-smoke` makes it manylinux with
`auditwheel repair`. Building from the sdist needs a C compiler and Python's headers; without them the build stops
at once and says which is missing and how to get it.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import sysconfig
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext
from setuptools.command.sdist import sdist
from setuptools.errors import PlatformError

DIST = "pyggml-cpu"
HERE = Path(__file__).resolve().parent
KERNELSRC = HERE.parent.parent / "core" / "pyggml" / "kernelsrc"
"""pyggml's shared C-family source in the checkout (the C of the quantisers, also compiled by OpenCL and CUDA)."""


def toolchain_problems() -> list[str]:
    """What this machine lacks to compile a CPython extension: a C compiler (CC or Python's own) and Python.h."""
    problems = []
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    exe = shlex.split(cc)[0] if cc.strip() else "cc"
    if shutil.which(exe) is None:
        origin = "the CC variable" if os.environ.get("CC") else "Python's build configuration"
        problems.append(f"the C compiler {exe!r} (named by {origin})")
    include = sysconfig.get_path("include")
    if not (Path(include) / "Python.h").is_file():
        problems.append(f"Python's headers ({include}/Python.h)")
    return problems


class BuildExt(build_ext):
    def run(self) -> None:
        problems = toolchain_problems()
        if problems:
            raise PlatformError(
                f"{DIST} compiles a C extension when it is built from source, and this machine lacks "
                f"{' and '.join(problems)}. Install a C compiler and the Python headers (Debian/Ubuntu: apt-get "
                f"install gcc python3-dev; Fedora/RHEL: dnf install gcc python3-devel; Alpine: apk add gcc musl-dev "
                f"python3-dev), or set CC to a compiler, or install a prebuilt wheel (pip install "
                f"--only-binary=:all: {DIST}).")
        if not any((d / "dialect.h").is_file() for d in (HERE / "pyggml_cpu" / "kernelsrc", KERNELSRC)):
            raise PlatformError(
                f"{DIST} compiles pyggml's shared kernel source (dialect.h and the block quantisers), which is in "
                f"neither pyggml_cpu/kernelsrc (an sdist's copy) nor {KERNELSRC} (a checkout): build from the "
                f"repository or from an sdist made there.")
        super().run()


class Sdist(sdist):
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


# abi3 unless this interpreter cannot build for the stable ABI (debug or free-threaded builds: cffi then does not)
ABI3 = not hasattr(sys, "gettotalrefcount") and not sysconfig.get_config_var("Py_GIL_DISABLED")

if __name__ == "__main__":  # as pip, build and setuptools run it; the tests import toolchain_problems
    setup(
        cffi_modules=["pyggml_cpu/_build.py:ffibuilder"],
        cmdclass={"build_ext": BuildExt, "sdist": Sdist},
        options={"bdist_wheel": {"py_limited_api": "cp311"}} if ABI3 else {},
    )
