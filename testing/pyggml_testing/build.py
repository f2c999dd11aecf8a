"""For the tests of a plugin's build hooks: its setup.py loaded as a module (the build checks, toolchain_problems
...), and its sources copied where a build may write, as its sdist holds them."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from types import ModuleType


def load_setup(project: Path) -> ModuleType:
    """`project`/setup.py imported under a private name; its setup() call is guarded by __main__, so nothing is
    built."""
    spec = importlib.util.spec_from_file_location(f"_setup_{project.name}", project / "setup.py")
    assert spec is not None and spec.loader is not None, f"no setup.py in {project}"
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def source_copy(project: Path, dest: Path, *ignore: str) -> Path:
    """`project`'s sources copied to `dest` as its sdist holds them (plugins/build_helpers.py beside setup.py),
    without what builds and tests leave there or the `ignore` patterns: a build there writes nothing into the
    checkout."""
    shutil.copytree(project, dest, ignore=shutil.ignore_patterns("build", "tests", "benchmarks", "*.egg-info", "*.so",
                                                                 "__pycache__", *ignore))
    shutil.copyfile(project.parent / "build_helpers.py", dest / "build_helpers.py")
    return dest
