"""Entry point of the pyggml-metal plugin: registers the Metal registry (no driver is touched here)."""

from __future__ import annotations

from pyggml.backend.hookspec import hookimpl
from pyggml.backend.protocol import Registry

PYGGML_API_VERSION = 1


@hookimpl
def pyggml_backend_registries() -> list[Registry]:
    from pyggml_metal.registry import MetalRegistry

    return [MetalRegistry()]
