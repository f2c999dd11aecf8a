"""Entry point of the numpy backend (registered by core's own distribution in group `pyggml.backends`)."""

from __future__ import annotations

from pyggml.backend.hookspec import hookimpl
from pyggml.backend.protocol import API_VERSION, Registry

PYGGML_API_VERSION = API_VERSION
"""Shipped with the core, so always the core's own version (a separate plugin writes the number)."""


@hookimpl
def pyggml_backend_registries() -> list[Registry]:
    from pyggml.reference.backend import NumpyRegistry

    return [NumpyRegistry()]
