"""Names and signatures of the extensions a registry may offer through `Registry.get_extension(NAME)`.

Each constant names an extension; the Protocol next to it is the callable's type. Core code that uses an
extension casts the result to that Protocol after checking it is not None.
"""

from __future__ import annotations

from typing import Protocol

from pyggml.backend.protocol import Backend, Device
from pyggml.tensor import Tensor

SET_N_THREADS = "set_n_threads"
COMM_INIT = "comm_init"
CPU_FEATURES = "cpu_features"
ADD_SERVER = "add_server"
"""A registry of remote devices (RPC) connects to one more server: its devices join the registry's list."""
RESCAN_DEVICES = "rescan_devices"
"""A registry whose devices can appear after its enumeration (RPC: a server that could not be reached then) looks
for the missing ones again: True when it found some (the hub then enumerates the registry again). The hub calls it
when looking a device up by name finds none, for the registries that name starts with; the registry keeps the cost
bounded (RPC: only the unreached servers, each at most once a second)."""


class SetNThreads(Protocol):
    def __call__(self, backend: Backend, n_threads: int) -> None: ...


class CommContext(Protocol):
    def allreduce_tensor(self, tensors: list[Tensor]) -> bool:
        """Sum the per-device tensors in place on every device; False: not able (the caller falls back)."""


class CommInit(Protocol):
    def __call__(self, backends: list[Backend]) -> CommContext | None: ...


class CpuFeatures(Protocol):
    def __call__(self) -> dict[str, bool]: ...


class AddServer(Protocol):
    def __call__(self, endpoint: str) -> list[Device]: ...


class RescanDevices(Protocol):
    def __call__(self) -> bool: ...
