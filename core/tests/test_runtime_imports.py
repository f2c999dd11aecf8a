"""Test tooling stays out of what users install (issue 34): no runtime package (the core, the shared kernel packages,
every plugin, the examples' packages) imports a testing package (pyggml-testing, a plugin's own test support beside
its tests, the Metal emulator, the conformance suite) or depends on one; and importing the Metal plugin, its registry
enumerating included, loads no emulator."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

TOOLING_ROOTS = ["testing", "conformance", "plugins/*/testing", "plugins/*/sim"]
"""Where test tooling lives: each folder holds one distribution (pyproject.toml) and its package(s) pyggml_*."""
RUNTIME_ROOTS = ["*", "plugins/*", "examples/*"]
"""Where runtime distributions live besides the core's (the repository's root): those of TOOLING_ROOTS excepted."""
TEST_EXTRAS = ("dev", "test")
"""Optional dependencies that are for a project's own tests, where the conformance suite may appear."""


def _projects(patterns: list[str]) -> list[Path]:
    return sorted({p.parent for pat in patterns for p in REPO.glob(f"{pat}/pyproject.toml")})


def _tooling() -> tuple[set[str], set[str]]:
    """The test tooling's import names and distribution names."""
    modules, dists = set(), set()
    for proj in _projects(TOOLING_ROOTS):
        modules |= {p.name for p in proj.glob("pyggml*") if p.is_dir() and not p.name.endswith(".egg-info")}
        dists.add(tomllib.loads((proj / "pyproject.toml").read_text())["project"]["name"])
    return modules, dists


def _runtime() -> list[Path]:
    tooling = set(_projects(TOOLING_ROOTS))
    return [REPO, *(p for p in _projects(RUNTIME_ROOTS) if p not in tooling)]


def _packages(proj: Path) -> list[Path]:
    """The package folders of a runtime project (the core's is core/pyggml)."""
    if proj == REPO:
        return [REPO / "core" / "pyggml"]
    return sorted(p for p in proj.glob("pyggml*") if p.is_dir() and not p.name.endswith(".egg-info"))


def _imports(path: Path) -> set[str]:
    """Top-level names of every module `path` imports, at module level or inside functions."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_the_tooling_and_runtime_lists_are_what_the_repository_holds() -> None:
    modules, dists = _tooling()
    assert {"pyggml_testing", "pyggml_conformance", "pyggml_metal_sim", "pyggml_cuda_testing",
            "pyggml_rpc_testing"} <= modules
    assert {"pyggml-testing", "pyggml-metal-sim"} <= dists
    runtime = {p.relative_to(REPO).as_posix() for p in _runtime()}
    assert {".", "dialect", "glsl", "plugins/cpu", "plugins/metal", "plugins/cuda", "plugins/rpc",
            "examples/llama"} <= runtime


def test_no_runtime_package_imports_test_tooling() -> None:
    tooling, _ = _tooling()
    found = []
    for proj in _runtime():
        for pkg in _packages(proj):
            for src in sorted(pkg.rglob("*.py")):
                bad = _imports(src) & tooling
                if bad:
                    found.append(f"{src.relative_to(REPO)}: {', '.join(sorted(bad))}")
    assert not found, "runtime modules import test tooling:\n" + "\n".join(found)


def test_no_runtime_distribution_depends_on_test_tooling() -> None:
    _, tooling = _tooling()
    found = []
    for proj in _runtime():
        project = tomllib.loads((proj / "pyproject.toml").read_text())["project"]
        deps = list(project.get("dependencies", []))
        for extra, reqs in project.get("optional-dependencies", {}).items():
            if extra not in TEST_EXTRAS:
                deps += reqs
        for d in deps:
            name = d.split(";")[0].split("[")[0].split("~")[0].split(">")[0].split("=")[0].split("<")[0].strip()
            if name in tooling:
                found.append(f"{proj.relative_to(REPO)}: {d}")
    assert not found, "runtime distributions depend on test tooling:\n" + "\n".join(found)


def test_importing_the_metal_plugin_loads_no_emulator() -> None:
    """Every module of pyggml_metal imported and its registry enumerated with PYGGML_METAL_SIM=1 (MetalSim0 is the
    emulator's own registry now): pyggml_metal_sim stays unimported, so a user's pyggml-metal needs none."""
    pytest.importorskip("pyggml_metal")
    code = ("import importlib, os, pkgutil, sys\n"
            "import pyggml_metal\n"
            "for m in pkgutil.iter_modules(pyggml_metal.__path__):\n"
            "    if m.name != 'objc_driver':\n"  # PyObjC, macOS only
            "        importlib.import_module(f'pyggml_metal.{m.name}')\n"
            "from pyggml_metal.registry import MetalRegistry\n"
            "os.environ['PYGGML_METAL_SIM'] = '1'\n"
            "names = [d.name for d in MetalRegistry().devices()]\n"
            "assert not any(n.startswith('MetalSim') for n in names), names\n"
            "loaded = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('pyggml_metal_sim', 'pyggml_testing', 'pyggml_conformance'))\n"
            "assert not loaded, loaded\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
