"""Environment settings every plugin reads the same way: where compiled kernels are cached, and device selection
lists such as `PYGGML_OPENCL_DEVICES=0,2` or `PYGGML_VULKAN_DEVICES=llvmpipe`."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_DIR_ENV = "PYGGML_CACHE_DIR"


def cache_dir(plugin: str) -> Path:
    """The folder of `plugin`'s compiled-kernel cache: `$PYGGML_CACHE_DIR/<plugin>`, by default
    `~/.cache/pyggml/<plugin>` (created by whoever writes to it)."""
    base = os.environ.get(CACHE_DIR_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "pyggml")
    return Path(base) / plugin


def device_selection(env: str) -> list[str]:
    """The entries of the comma-separated device list in environment variable `env` (empty: no filter)."""
    return [w.strip() for w in os.environ.get(env, "").split(",") if w.strip()]


def is_selected(selection: list[str], index: int, name: str) -> bool:
    """Whether the device numbered `index` (in the unfiltered enumeration) and called `name` is chosen: an entry is
    either a decimal index or a case-insensitive substring of the name; an empty selection chooses every device."""
    if not selection:
        return True
    return any(int(w) == index if w.isdigit() else w.lower() in name.lower() for w in selection)
