"""Build hook: the cffi extension pyggml_rpc._fnv (the FNV-1a hash), compiled when the wheel is built.

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
from setuptools.errors import PlatformError

DIST = "pyggml-rpc"


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
        super().run()


# abi3 unless this interpreter cannot build for the stable ABI (debug or free-threaded builds: cffi then does not)
ABI3 = not hasattr(sys, "gettotalrefcount") and not sysconfig.get_config_var("Py_GIL_DISABLED")

if __name__ == "__main__":  # as pip, build and setuptools run it; the tests import toolchain_problems
    setup(
        cffi_modules=["pyggml_rpc/_build.py:ffibuilder"],
        cmdclass={"build_ext": BuildExt},
        options={"bdist_wheel": {"py_limited_api": "cp311"}} if ABI3 else {},
    )
