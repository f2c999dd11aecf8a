"""Entry point of the CUDA backend (group `pyggml.backends`). Importing it imports neither pycuda nor a driver:
the registry enumerates devices lazily."""

from __future__ import annotations

from pyggml.backend.hookspec import hookimpl
from pyggml.backend.protocol import Registry


@hookimpl
def pyggml_backend_registries() -> list[Registry]:
    from pyggml_cuda.registry import CudaRegistry

    return [CudaRegistry()]
