"""Entry point of the OpenCL backend (group `pyggml.backends`). Importing it imports neither pyopencl nor a
driver: the registry enumerates platforms lazily."""

from __future__ import annotations

from pyggml.backend.hookspec import hookimpl
from pyggml.backend.protocol import Registry


@hookimpl
def pyggml_backend_registries() -> list[Registry]:
    from pyggml_opencl.registry import OpenCLRegistry

    return [OpenCLRegistry()]
