"""The Vulkan devices' options (`pyggml.backend.options`), read once, when the registry enumerates the devices.
`GLSLANG_VALIDATOR` is a tool's variable (shaderc.py), not one of these."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from pyggml.backend.env import devices_option
from pyggml.backend.option_parsers import count
from pyggml.backend.options import Options, option

DEVICES_ENV = "PYGGML_VULKAN_DEVICES"


def default_cache_dir() -> Path:
    """`$XDG_CACHE_HOME/pyggml_vulkan`, else `~/.cache/pyggml_vulkan` (where the plugin has always cached)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")) / "pyggml_vulkan"


@dataclass(frozen=True)
class VulkanOptions(Options):
    """Read when the Vulkan devices are enumerated; a backend takes its own `tpr` (`init_backend("tpr=8")`)."""

    label = "Vulkan"
    devices: tuple[str, ...] = devices_option(DEVICES_ENV, "physical device indices or case-insensitive substrings "
                                                           "of the device name", "every usable device")
    staging: bool = option(False, env="PYGGML_VULKAN_STAGING",
                           doc="reach device memory through staging copies even where it is host visible (UMA, "
                               "lavapipe)")
    validation: bool = option(False, env="PYGGML_VULKAN_VALIDATION",
                              doc="enable the Khronos validation layer and collect its errors (the process-wide "
                                  "instance: the first registry to make it decides)")
    cache_dir: Path = option(factory=default_cache_dir, env="PYGGML_VULKAN_CACHE",
                             default_doc="$XDG_CACHE_HOME/pyggml_vulkan, else ~/.cache/pyggml_vulkan",
                             parse=lambda t: Path(t.strip()),
                             doc="where SPIR-V compiled at first use is cached (shaders newer than the build's)")
    tpr: int | None = option(None, env="PYGGML_VULKAN_TPR", parse=count, per_backend=True,
                             default_doc="32 on a GPU, fewer on a CPU-emulated device",
                             doc="threads per matrix row of MUL_MAT and MUL_MAT_ID (at most the work group's 64)")
