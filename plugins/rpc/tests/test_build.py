"""Building pyggml-rpc from source without a C compiler or Python's headers names what is missing (setup.py)."""

from __future__ import annotations

import importlib.util
import sysconfig
from pathlib import Path
from types import ModuleType

import pytest

PROJECT = Path(__file__).resolve().parents[1]


def setup_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_setup_pyggml_rpc", PROJECT / "setup.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # setup() runs only under __main__
    return mod


def test_toolchain_checked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    mod = setup_module()
    assert mod.toolchain_problems() == []
    monkeypatch.setenv("CC", "/nonexistent/cc")
    monkeypatch.setattr(sysconfig, "get_path", lambda name, *a, **k: str(tmp_path))
    assert mod.toolchain_problems() == ["the C compiler '/nonexistent/cc' (named by the CC variable)",
                                        f"Python's headers ({tmp_path}/Python.h)"]
