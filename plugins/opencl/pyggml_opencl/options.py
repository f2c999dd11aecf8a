"""The OpenCL devices' options (`pyggml.backend.options`), read once, when the registry enumerates the devices."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pyggml.backend.env import cache_option, devices_option
from pyggml.backend.options import Options

DEVICES_ENV = "PYGGML_OPENCL_DEVICES"


@dataclass(frozen=True)
class OpenCLOptions(Options):
    """Read when the OpenCL devices are enumerated (their backends take no options)."""

    label = "OpenCL"
    devices: tuple[str, ...] = devices_option(DEVICES_ENV, "global indices (as listed unfiltered) or case-insensitive "
                                                           "substrings of the platform and device name")
    cache_dir: Path = cache_option("opencl")
