"""Entry point of the Vulkan backend (group `pyggml.backends`). Importing this module loads no Vulkan library:
the registry enumerates devices (and loads libvulkan) on first request."""

from __future__ import annotations

from pyggml.backend.hookspec import hookimpl
from pyggml.backend.protocol import Registry

PYGGML_API_VERSION = 1
"""The backend API (pyggml.backend.protocol.API_VERSION) this plugin implements; the loader refuses others."""


@hookimpl
def pyggml_backend_registries() -> list[Registry]:
    from pyggml_vulkan.registry import VulkanRegistry

    return [VulkanRegistry()]
