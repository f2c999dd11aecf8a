"""The default device: `default_device()` and `init_best()`, ggml's `ggml_backend_init_best` with a user's and a
plugin's say.

Order, first match wins:

1. a name given by the caller (`default_device("Vulkan0")`), else the `PYGGML_DEVICE` environment variable: that
   device (or a registry's first device), and an error naming it and listing the devices there are when there is
   none of that name;
2. the highest `Device.priority` (a plugin's `Registry.priority`, as JAX's plugins declare one; 0 by default, the
   numpy reference and CPU-emulated GPUs `FALLBACK_PRIORITY`);
3. among equal priorities, ggml's order of device types: a GPU, else an integrated GPU, else a CPU. ACCEL devices
   (blas, OpenCL on a CPU through PoCL) are never chosen here: ggml meant them to run beside a CPU backend, not
   alone;
4. among those, the order `devices()` lists them in (registries by entry-point name, each registry's devices in
   its own order).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyggml.backend.core_options import ChoiceOptions
from pyggml.backend.protocol import Backend, BackendParams, Device, DeviceType
from pyggml.backend.registry import devices, get_device
from pyggml.errors import PyGGMLError

DEVICE_ENV = "PYGGML_DEVICE"
"""Names the default device (a device name or a registry name), over every other rule: `ChoiceOptions.device`."""

TYPE_ORDER: dict[DeviceType, int] = {DeviceType.GPU: 0, DeviceType.IGPU: 1, DeviceType.CPU: 2}
"""ggml_backend_init_best's order of device types; a type not listed (ACCEL, META) is never the default."""


def rank_devices(devs: Sequence[Device]) -> list[Device]:
    """The devices that may be the default, best first (rules 2 to 4 of the module's order)."""
    order = {id(d): i for i, d in enumerate(devs)}
    chosen = [d for d in devs if d.type in TYPE_ORDER]
    return sorted(chosen, key=lambda d: (-d.priority, TYPE_ORDER[d.type], order[id(d)]))


def best_device(devs: Sequence[Device] | None = None) -> Device:
    """The best of `devs` (default: every device of every loaded plugin), ignoring `PYGGML_DEVICE`; PyGGMLError
    when none is a GPU, an integrated GPU or a CPU."""
    pool = devices() if devs is None else list(devs)
    ranked = rank_devices(pool)
    if not ranked:
        listed = ", ".join(f"{d.name} ({d.type.value})" for d in pool) or "none"
        raise PyGGMLError(f"no GPU, integrated GPU or CPU device to choose as the default; devices: {listed}")
    return ranked[0]


def requested_device_name() -> str | None:
    """The device `PYGGML_DEVICE` names, or None when it is unset or empty (read at each call: the edge)."""
    return ChoiceOptions.from_env().device


def default_device(name: str | None = None) -> Device:
    """The device called `name`; without one, the device `PYGGML_DEVICE` names; without that, `best_device()`. A
    name no device has raises PyGGMLError naming it (and the variable, when it came from there) and listing the
    devices there are."""
    if name is None:
        env = requested_device_name()
        if env is None:
            return best_device()
        try:
            return get_device(env)
        except PyGGMLError as e:
            raise PyGGMLError(f"{DEVICE_ENV}={env!r}: {e}") from e
    return get_device(name)


def init_best(params: BackendParams = None) -> Backend:
    """A backend (stream) on `default_device()` (ggml_backend_init_best, with `PYGGML_DEVICE` and plugin
    priorities): `params` as `Device.init_backend` takes them."""
    return default_device().init_backend(params)
