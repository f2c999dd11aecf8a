"""Entry point (group `pyggml.backends`, name `toy`): declares the backend API and hands pyggml the registry.
Importing it must stay cheap; a real plugin touches its driver only in `Registry.devices()`."""

from __future__ import annotations

from pyggml.backend.hookspec import hookimpl
from pyggml.backend.protocol import Registry

PYGGML_API_VERSION = 1
"""The backend API this plugin was written for, as a literal: pyggml refuses to load it under another."""


@hookimpl
def pyggml_backend_registries() -> list[Registry]:
    from pyggml_toy.registry import ToyRegistry

    return [ToyRegistry()]
