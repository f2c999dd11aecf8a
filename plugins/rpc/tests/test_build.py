"""Building pyggml-rpc from source without a C compiler or Python's headers names what is missing (setup.py)."""

from __future__ import annotations

import sysconfig
from pathlib import Path

import pytest

from pyggml_testing.build import load_setup

PROJECT = Path(__file__).resolve().parents[1]


def test_toolchain_checked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    mod = load_setup(PROJECT)
    assert mod.toolchain_problems() == []
    monkeypatch.setenv("CC", "/nonexistent/cc")
    monkeypatch.setattr(sysconfig, "get_path", lambda name, *a, **k: str(tmp_path))
    assert mod.toolchain_problems() == ["the C compiler '/nonexistent/cc' (named by the CC variable)",
                                        f"Python's headers ({tmp_path}/Python.h)"]
