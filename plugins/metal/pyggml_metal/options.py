"""The Metal devices' options (`pyggml.backend.options`), read once, when the registry enumerates the devices (the
emulator's registry, pyggml-metal-sim's, takes the same group). `SPIRV_CROSS` and `GLSLANG_VALIDATOR` are tools'
variables (mslgen.py), not options."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pyggml.backend.env import cache_option, devices_option
from pyggml.backend.options import Options, option

DEVICES_ENV = "PYGGML_METAL_DEVICES"


@dataclass(frozen=True)
class MetalOptions(Options):
    """Read when the Metal devices are enumerated (their backends take no options); the emulator's registry
    (pyggml-metal-sim) reads the same group, its one device not selected by `devices`."""

    label = "Metal"
    devices: tuple[str, ...] = devices_option(DEVICES_ENV, "indices in MTLCopyAllDevices order or "
                                                           "case-insensitive substrings of the device name")
    shader_dir: Path | None = option(None, env="PYGGML_METAL_SHADER_DIR", default_doc="pyggml-glsl's shaders",
                                     doc="the GLSL shaders to translate to MSL where the built MSL is not current")
    cache_dir: Path = cache_option("metal")
