"""Entry point of the numpy backend (registered by core's own distribution in group `pyggml.backends`)."""

from __future__ import annotations

from pyggml.backend.hookspec import hookimpl
from pyggml.backend.protocol import Registry


@hookimpl
def pyggml_backend_registries() -> list[Registry]:
    from pyggml.reference.backend import NumpyRegistry

    return [NumpyRegistry()]
