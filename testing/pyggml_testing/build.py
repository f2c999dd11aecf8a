"""For the tests of a plugin's build hooks: its setup.py loaded as a module (the build checks, toolchain_problems
...), and its sources copied where a build may write, as its sdist holds them."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType


def load_setup(project: Path) -> ModuleType:
    """`project`/setup.py imported under a private name; its setup() call is guarded by __main__, so nothing is
    built. A setup.py puts its folder and plugins/ first on sys.path to find build_helpers: both are undone after,
    so that the rest of the run keeps importing the installed plugins, not their source folders."""
    spec = importlib.util.spec_from_file_location(f"_setup_{project.name}", project / "setup.py")
    assert spec is not None and spec.loader is not None, f"no setup.py in {project}"
    mod = importlib.util.module_from_spec(spec)
    saved = list(sys.path)
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path[:] = saved
        sys.modules.pop("build_helpers", None)
    return mod


def source_copy(project: Path, dest: Path, *ignore: str) -> Path:
    """`project`'s sources copied to `dest` as its sdist holds them (plugins/build_helpers.py beside setup.py),
    without what builds and tests leave there or the `ignore` patterns: a build there writes nothing into the
    checkout."""
    shutil.copytree(project, dest, ignore=shutil.ignore_patterns("build", "tests", "benchmarks", "*.egg-info", "*.so",
                                                                 "__pycache__", *ignore))
    shutil.copyfile(project.parent / "build_helpers.py", dest / "build_helpers.py")
    return dest
