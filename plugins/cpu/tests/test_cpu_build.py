"""Building pyggml-cpu from source (its sdist) without a C compiler or without Python's headers stops at once with a
message that names what is missing and how to get it, instead of a compiler error deep in the build log."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import threading
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


class _Compiler:
    """A setuptools compiler's compile() for the test: each call waits for a second one to run beside it (a compile
    one source after another times out on the barrier)."""

    compiler_type = "unix"

    def __init__(self) -> None:
        self.both = threading.Barrier(2, timeout=10)
        self.calls: list[list[str]] = []

    def compile(self, sources: list[str], output_dir: str | None = None) -> list[str]:
        self.calls.append(list(sources))
        self.both.wait()
        return [f"{output_dir}/{s}.o" for s in sources]


def test_sources_compile_a_core_each() -> None:
    compiler = _Compiler()
    load_setup(PROJECT).compile_in_parallel(compiler, 2)
    sources = ["a.c", "b.c", "c.c", "d.c"]
    assert compiler.compile(sources, output_dir="o") == [f"o/{s}.o" for s in sources]  # the sources' order
    assert sorted(compiler.calls) == [[s] for s in sources]


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
