"""Entry point of the cpu plugin (group `pyggml.backends`, name `cpu`): registers the `cpu` and `blas`
registries. Importing this module loads nothing compiled; that happens when devices are enumerated."""

from __future__ import annotations

from pyggml.backend.hookspec import hookimpl
from pyggml.backend.protocol import Registry

PYGGML_API_VERSION = 1
"""The backend API (pyggml.backend.protocol.API_VERSION) this plugin implements; the loader refuses others."""


@hookimpl
def pyggml_backend_registries() -> list[Registry]:
    from pyggml_cpu.registry import BlasRegistry, CpuRegistry

    return [CpuRegistry(), BlasRegistry()]
