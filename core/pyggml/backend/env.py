"""Options every plugin declares the same way (`pyggml.backend.options`): where its compiled kernels are cached
(`cache_option`), and which devices a selection list such as `PYGGML_OPENCL_DEVICES=0,2` chooses (`is_selected`).

`cache_dir` and `device_selection` read the environment when called: they serve plugins that do not declare their
options yet (Vulkan, Metal); a plugin with an options group reads both through it, once."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pyggml.backend.option_parsers import names, under
from pyggml.backend.options import option

CACHE_DIR_ENV = "PYGGML_CACHE_DIR"


def default_cache_root() -> Path:
    """The folder of the kernel caches without PYGGML_CACHE_DIR: `~/.cache/pyggml`."""
    return Path(os.path.expanduser("~")) / ".cache" / "pyggml"


def cache_option(plugin: str) -> Path:
    """The `cache_dir` option of `plugin`'s options group: `$PYGGML_CACHE_DIR/<plugin>`, by default
    `~/.cache/pyggml/<plugin>` (created by whoever writes to it)."""
    return option(factory=lambda: default_cache_root() / plugin, env=CACHE_DIR_ENV, parse=under(plugin),
                  default_doc=f"~/.cache/pyggml/{plugin}",
                  doc=f"the compiled-kernel cache: the folder {plugin}/ under PYGGML_CACHE_DIR")


def cache_dir(plugin: str, environ: Mapping[str, str] | None = None) -> Path:
    """`plugin`'s kernel cache folder as the environment says now (what `cache_option` reads)."""
    raw = (os.environ if environ is None else environ).get(CACHE_DIR_ENV, "").strip()
    return under(plugin)(raw) if raw else default_cache_root() / plugin


def device_selection(env: str, environ: Mapping[str, str] | None = None) -> list[str]:
    """The entries of the comma-separated device list in environment variable `env` (empty: no filter)."""
    return list(names((os.environ if environ is None else environ).get(env, "")))


def is_selected(selection: tuple[str, ...] | list[str], index: int, name: str) -> bool:
    """Whether the device numbered `index` (in the unfiltered enumeration) and called `name` is chosen: an entry is
    either a decimal index or a case-insensitive substring of the name; an empty selection chooses every device."""
    if not selection:
        return True
    return any(int(w) == index if w.isdigit() else w.lower() in name.lower() for w in selection)
