"""Settings read from the environment the same way by every plugin."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyggml.backend.env import cache_dir, device_selection, is_selected


def test_cache_dir_follows_the_variable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PYGGML_CACHE_DIR", str(tmp_path))
    assert cache_dir("opencl") == tmp_path / "opencl"
    monkeypatch.delenv("PYGGML_CACHE_DIR")
    assert cache_dir("cuda") == Path.home() / ".cache" / "pyggml" / "cuda"


def test_device_selection_by_index_or_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYGGML_X_DEVICES", " 2, RTX ,,")
    sel = device_selection("PYGGML_X_DEVICES")
    assert sel == ["2", "RTX"]
    assert is_selected(sel, 2, "llvmpipe") and is_selected(sel, 0, "NVIDIA GeForce rtx 4090")
    assert not is_selected(sel, 1, "llvmpipe")
    monkeypatch.delenv("PYGGML_X_DEVICES")
    assert device_selection("PYGGML_X_DEVICES") == [] and is_selected([], 7, "anything")
