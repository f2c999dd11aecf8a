"""What the plugins' build hooks (plugins/*/setup.py) share: the setup of a plugin with a cffi extension (cpu, rpc),
the build_py step of a plugin whose kernels its own build module generates at build time (vulkan: SPIR-V, metal:
MSL; the module loaded by path, before the plugin is importable), where those two find the GLSL they build
(`glsl_shaders`: pyggml-glsl's), and an sdist command that carries this file.

A cffi extension uses only Python's stable ABI (cffi builds it with Py_LIMITED_API), so its wheel is tagged
cp311-abi3: one wheel for CPython 3.11 and every later 3.x (`make wheels-smoke` makes it manylinux with `auditwheel
repair`). Building from the sdist needs a C compiler and Python's headers; without them the build stops at once and
says which is missing and how to get it.

setuptools compiles an extension's sources one after another; the build_ext here compiles them a core each
(`compile_in_parallel`): the cpu plugin's 28 sources take 75 s of one core, 36 s of two.

A setup.py puts its own folder (where an sdist's copy of this file lies) and then plugins/ (the checkout's) on
sys.path and imports this module: it needs only the standard library and setuptools, so it works in the isolated
environment a wheel is built in, from a checkout or from an sdist alone.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shlex
import shutil
import sys
import sysconfig
from collections.abc import Callable, Sized
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist
from setuptools.errors import PlatformError, SetupError

Check = Callable[[], str | None]
"""A build precondition: None, or why the sources cannot build here."""

HERE = Path(__file__).resolve()

log = logging.getLogger(__name__)


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


def build_jobs() -> int:
    """How many sources a build compiles at once: the cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def compile_in_parallel(compiler: Any, jobs: int) -> None:
    """Make `compiler` (a setuptools CCompiler) compile the sources of one compile() call `jobs` at a time, each
    through its own compile() in a thread (the compiler processes run at once), the objects returned in the
    sources' order. Only a Unix compiler: MSVC's compile() sets itself up on its first call, which threads would
    race."""
    if compiler.compiler_type != "unix" or jobs < 2:
        return
    one_by_one = compiler.compile

    def compile(sources: list[str], *args: Any, **kwargs: Any) -> list[str]:
        if len(sources) < 2:
            return list(one_by_one(sources, *args, **kwargs))
        with ThreadPoolExecutor(min(jobs, len(sources))) as pool:
            parts = list(pool.map(lambda src: one_by_one([src], *args, **kwargs), sources))
        return [obj for part in parts for obj in part]

    compiler.compile = compile


def checked_build_ext(dist: str, *checks: Check) -> type[build_ext]:
    """build_ext for the distribution `dist` (its sources compiled a core each) that stops at once, before any
    compiler runs, with a message naming what this machine lacks (toolchain_problems) and how to get it, or what one
    of `checks` (each: None, or why the sources cannot build) found missing: instead of a compiler error deep in the
    build log."""

    class BuildExt(build_ext):
        def run(self) -> None:
            problems = toolchain_problems()
            if problems:
                raise PlatformError(
                    f"{dist} compiles a C extension when it is built from source, and this machine lacks "
                    f"{' and '.join(problems)}. Install a C compiler and the Python headers (Debian/Ubuntu: apt-get "
                    f"install gcc python3-dev; Fedora/RHEL: dnf install gcc python3-devel; Alpine: apk add gcc "
                    f"musl-dev python3-dev), or set CC to a compiler, or install a prebuilt wheel (pip install "
                    f"--only-binary=:all: {dist}).")
            for check in checks:
                why = check()
                if why is not None:
                    raise PlatformError(why)
            super().run()

        def build_extensions(self) -> None:
            compile_in_parallel(self.compiler, build_jobs())
            super().build_extensions()

    return BuildExt


def abi3_options() -> dict[str, dict[str, str]]:
    """setup()'s options that tag a cffi extension's wheel cp311-abi3 (one wheel for CPython 3.11 and every later
    3.x; cffi builds with Py_LIMITED_API), unless this interpreter cannot build for the stable ABI (debug or
    free-threaded builds: cffi then does not)."""
    if hasattr(sys, "gettotalrefcount") or sysconfig.get_config_var("Py_GIL_DISABLED"):
        return {}
    return {"bdist_wheel": {"py_limited_api": "cp311"}}


class Sdist(sdist):
    """An sdist that builds alone: it carries a copy of this file next to setup.py (only in the archive, never in
    the checkout)."""

    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        shutil.copyfile(HERE, Path(base_dir) / HERE.name)


def glsl_shaders() -> Path:
    """The shaders of pyggml-glsl, which the Vulkan and Metal builds compile (their build env need not have
    pyggml-glsl installed): the checkout's `glsl/pyggml_glsl/shaders` beside plugins/ (a wheel or editable build
    from the repository), else those of an importable pyggml_glsl (an sdist built with --no-build-isolation where
    pyggml-glsl is installed); SetupError when neither exists."""
    tree = HERE.parent.parent / "glsl" / "pyggml_glsl" / "shaders"
    if tree.is_dir():
        return tree
    spec = importlib.util.find_spec("pyggml_glsl")
    for loc in (spec.submodule_search_locations or []) if spec is not None else []:
        if (Path(loc) / "shaders").is_dir():
            return Path(loc) / "shaders"
    raise SetupError("the GLSL shaders this plugin builds are pyggml-glsl's, which is neither in this checkout "
                     f"({tree}) nor importable: pip install pyggml-glsl, then build with --no-build-isolation")


def load_by_path(name: str, path: Path) -> ModuleType:
    """The module in `path` imported under `name` (a plugin's build module, at build time, when the plugin's
    package is not importable yet)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the build module {path}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@dataclass(frozen=True)
class Kernels:
    """A plugin's kernels as its build module generates them at build time, and what the build says about them."""

    generate: Callable[[Path], Sized]
    """Writes every kernel into the folder it is given; returns what it made."""
    error: type[Exception]
    """What `generate` raises when a tool is missing or a kernel does not build."""
    folder: Path
    """The kernels' folder in the package's sources: an editable install's kernels go there, a wheel's to the same
    place in the build's lib folder."""
    ships: str
    """What a wheel carries, the start of the error when building one fails."""
    at_first_use: str
    """What the plugin does at run time when an editable install goes on without its kernels."""
    editable_tolerates: Callable[[Exception], bool]
    """Which `error` an editable install goes on after, with a warning."""
    none_made: str
    """The error when `generate` made nothing."""


def kernels_build_py(build_module: Path, kernels: Callable[[ModuleType], Kernels]) -> type[build_py]:
    """build_py that then generates the plugin's kernels: `kernels` describes them from the plugin's build module
    (`build_module`, package/name.py beside setup.py, loaded by path at build time). A wheel always carries them
    (their folder emptied first: only what this build makes, nothing an earlier build left in build/), so building
    one fails when they cannot be made; an editable install writes them into the sources and goes on after an error
    it tolerates, with a warning (the plugin then makes them at first use)."""
    root = build_module.parent.parent

    class BuildKernels(build_py):
        def run(self) -> None:
            super().run()
            k = kernels(load_by_path(f"_{build_module.parent.name}_{build_module.stem}", build_module))
            editable = getattr(self, "editable_mode", False)
            out = k.folder if editable else Path(self.build_lib) / k.folder.relative_to(root)
            if not editable:
                shutil.rmtree(out, ignore_errors=True)
            try:
                made = k.generate(out)
            except k.error as e:
                if editable and k.editable_tolerates(e):
                    self.warn(f"{e}; {k.at_first_use}")
                    return
                raise SetupError(f"{k.ships}: {e}") from e
            log.info("made %d kernels into %s", len(made), out)
            if not made:
                raise SetupError(k.none_made)

    return BuildKernels


def cffi_setup(dist: str, cffi_module: str, *checks: Check, sdist_command: type[sdist] = Sdist) -> None:
    """setup() of a plugin whose wheel carries the cffi extension `cffi_module` ("package/_build.py:ffibuilder"):
    built with the toolchain check and `checks` first, an abi3 wheel where the interpreter allows, an sdist that
    builds alone."""
    setup(
        cffi_modules=[cffi_module],
        cmdclass={"build_ext": checked_build_ext(dist, *checks), "sdist": sdist_command},
        options=abi3_options(),
    )
