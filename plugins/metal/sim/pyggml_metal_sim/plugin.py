"""Entry point of the pyggml-metal-sim plugin: registers the MetalSim registry (nothing is built or enumerated here)."""

from __future__ import annotations

from pyggml.backend.hookspec import hookimpl
from pyggml.backend.protocol import Registry

PYGGML_API_VERSION = 1


@hookimpl
def pyggml_backend_registries() -> list[Registry]:
    from pyggml_metal_sim.registry import MetalSimRegistry

    return [MetalSimRegistry()]
