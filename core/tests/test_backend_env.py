"""Options every plugin declares the same way: the kernel cache folder and the device selection."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pyggml.backend.env import cache_option, is_selected
from pyggml.backend.option_parsers import names
from pyggml.backend.options import Options


@dataclass(frozen=True)
class _Cached(Options):
    label = "x"
    cache_dir: Path = cache_option("x")


def test_cache_option_follows_the_variable(tmp_path: Path) -> None:
    assert _Cached.from_env({"PYGGML_CACHE_DIR": str(tmp_path)}).cache_dir == tmp_path / "x"
    assert _Cached.from_env({}).cache_dir == Path.home() / ".cache" / "pyggml" / "x"


def test_device_selection_by_index_or_name() -> None:
    sel = names(" 2, RTX ,,")
    assert sel == ("2", "RTX")
    assert is_selected(sel, 2, "llvmpipe") and is_selected(sel, 0, "NVIDIA GeForce rtx 4090")
    assert not is_selected(sel, 1, "llvmpipe")
    assert names("") == () and is_selected((), 7, "anything")
