"""A built pyggml-vulkan always carries its SPIR-V: without glslangValidator the build fails, naming it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pyggml_testing.build import source_copy

PROJECT = Path(__file__).resolve().parents[1]


def build_py(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    src = source_copy(PROJECT, tmp_path / "src", "spv")  # a copy: nothing is written into the sources
    return subprocess.run([sys.executable, "setup.py", "build_py", "--build-lib", str(tmp_path / "lib")], cwd=src,
                          env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("glslang", [None, "/nonexistent/glslangValidator"])
def test_no_glslang_fails_the_build(tmp_path: Path, glslang: str | None) -> None:
    env = {k: v for k, v in os.environ.items() if k != "GLSLANG_VALIDATOR"}
    env["PATH"] = str(tmp_path / "empty")  # no glslangValidator to find
    if glslang:
        env["GLSLANG_VALIDATOR"] = glslang
    r = build_py(tmp_path, env)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert "pyggml-vulkan ships its shaders as SPIR-V, compiled when the wheel is built" in out, out
    assert ("is not an executable" if glslang else "glslangValidator not found") in out
    assert not list((tmp_path / "lib").rglob("*.spv"))
