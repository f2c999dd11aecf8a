"""Loading a plugin project's setup.py as a module, for the tests of its build checks (toolchain_problems ...)."""

from __future__ import annotations

import importlib.util
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
