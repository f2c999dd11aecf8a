"""The backends of a scheduler for one device: the device's backend, then the CPU backend a Scheduler needs last
for what the device cannot run (`Scheduler(backends_for("OpenCL0"))`). The device is the one named, or the default
one (`pyggml.backend.default_device()`: the `PYGGML_DEVICE` variable, else the best GPU, integrated GPU or CPU)."""

from __future__ import annotations

from pyggml.backend.choice import default_device
from pyggml.backend.protocol import Backend, Device, DeviceType
from pyggml.backend.registry import init_backend
from pyggml.errors import PyGGMLError

DeviceChoice = str | Device | Backend | None
"""A device name ("cpu", "OpenCL0"), a Device, a Backend made with options (`init_backend("cpu",
"n_threads=1")`), or None: `default_device()`."""


def backends_for(device: DeviceChoice) -> list[Backend]:
    """The device's backend first, then (unless it is a CPU device itself) a CPU backend for the ops it lacks:
    the cpu plugin's, or the numpy reference where that is not installed."""
    if isinstance(device, Backend):
        first = device
    else:
        first = (default_device(device) if device is None or isinstance(device, str) else device).init_backend()
    dev = first.device
    out = [first]
    if dev.type is not DeviceType.CPU:
        try:
            out.append(init_backend("cpu"))
        except PyGGMLError:
            out.append(init_backend("numpy"))
    return out
