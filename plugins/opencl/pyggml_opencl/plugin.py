"""Entry point of the OpenCL backend (group `pyggml.backends`). Importing it imports neither pyopencl nor a
driver: the registry enumerates platforms lazily."""

from __future__ import annotations

from pyggml.backend.hookspec import hookimpl
from pyggml.backend.protocol import Registry

PYGGML_API_VERSION = 1
"""The backend API (pyggml.backend.protocol.API_VERSION) this plugin implements; the loader refuses others."""


@hookimpl
def pyggml_backend_registries() -> list[Registry]:
    from pyggml_opencl.registry import OpenCLRegistry

    return [OpenCLRegistry()]
