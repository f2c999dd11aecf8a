"""Building pyggml-cpu from source (its sdist) without a C compiler or without Python's headers stops at once with a
message that names what is missing and how to get it, instead of a compiler error deep in the build log."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from pyggml_testing.build import load_setup, source_copy

PROJECT = Path(__file__).resolve().parents[1]


def test_toolchain_present_here() -> None:
    assert load_setup(PROJECT).toolchain_problems() == []


def test_missing_compiler_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CC", "/nonexistent/gcc -pthread")
    problems = load_setup(PROJECT).toolchain_problems()
    assert problems == ["the C compiler '/nonexistent/gcc' (named by the CC variable)"]


def test_missing_headers_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    mod = load_setup(PROJECT)
    monkeypatch.setattr(sysconfig, "get_path", lambda name, *a, **k: str(tmp_path))
    assert mod.toolchain_problems() == [f"Python's headers ({tmp_path}/Python.h)"]


def test_build_ext_stops_with_the_message(tmp_path: Path) -> None:
    """Through setuptools, as pip building the sdist runs it (on a copy: nothing is written into the sources)."""
    src = source_copy(PROJECT, tmp_path / "src")
    env = {**os.environ, "CC": "/nonexistent/gcc"}
    r = subprocess.run([sys.executable, "setup.py", "build_ext", "--build-lib", str(tmp_path / "lib"),
                        "--build-temp", str(tmp_path / "temp")], cwd=src, env=env, capture_output=True, text=True,
                       timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert "pyggml-cpu compiles a C extension when it is built from source, and this machine lacks the C compiler " \
           "'/nonexistent/gcc'" in out, out
    assert "apt-get install gcc python3-dev" in out
    assert not list((tmp_path / "lib").rglob("*.so"))
