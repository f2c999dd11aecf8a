"""Options every plugin declares the same way (`pyggml.backend.options`): where its compiled kernels are cached
(`cache_option`), and which devices a selection list such as `PYGGML_OPENCL_DEVICES=0,2` chooses (`is_selected`).
Each plugin reads both through its options group, once."""

from __future__ import annotations

import os
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


def devices_option(env: str, entries: str, default_doc: str = "every device") -> tuple[str, ...]:
    """The `devices` option of a plugin's group: the comma-separated selection in `env` (`is_selected` applies it);
    `entries` says what an entry may be."""
    return option((), env=env, parse=names, default_doc=default_doc,
                  doc=f"the devices to use, comma-separated: {entries}")


def is_selected(selection: tuple[str, ...] | list[str], index: int, name: str) -> bool:
    """Whether the device numbered `index` (in the unfiltered enumeration) and called `name` is chosen: an entry is
    either a decimal index or a case-insensitive substring of the name; an empty selection chooses every device."""
    if not selection:
        return True
    return any(int(w) == index if w.isdigit() else w.lower() in name.lower() for w in selection)
