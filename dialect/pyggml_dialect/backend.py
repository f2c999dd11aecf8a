"""What the dialect plugins' devices and backends (OpenCL, CUDA) share beyond the kernels, none of it tied to a
driver: a device whose kernels report an index out of range in its status word (the dialect's `ERR_ARGS`, codes
from `pyggml.backend.launch.ErrorSites`), and a backend that queues its work, in order, on one driver queue
(OpenCL) or stream (CUDA) of such a device.
"""

from __future__ import annotations

import threading
from abc import abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, TypeVar

import numpy as np

from pyggml.backend.plan_cache import PlannedBackend
from pyggml.backend.protocol import Buffer, Bytes, Device, DeviceCaps, DeviceType, Registry

if TYPE_CHECKING:
    from pyggml.graph import Graph
    from pyggml.tensor import Tensor

P = TypeVar("P")


class DialectDevice(Device):
    """A device that runs dialect kernels: a kernel that finds an index out of range stores a code naming the node
    and the condition in the device's status word (one int32, zero while all is well)."""

    def __init__(self, reg: Registry, name: str, type: DeviceType, caps: DeviceCaps) -> None:
        super().__init__(reg, name, type, caps)
        self.mem_lock = threading.RLock()
        """Held while launches and transfers over the device's buffers are queued and while a buffer is freed: a
        free from another thread waits for the queueing, then for the device's work."""

    @abstractmethod
    def check_status(self) -> None:
        """After the device's work drained: raise ComputeError if a kernel stored a code (and clear the word, so the
        next compute starts clean)."""


D = TypeVar("D", bound=DialectDevice)


class DialectBackend(PlannedBackend[P], Generic[P, D]):
    """A backend that queues its plans' launches and its uploads, in order, on one driver queue or stream of `dev`.
    `synchronize` waits for that work (`drain`), lets go of the host arrays the uploads read from
    (`stage_upload`) and raises what a kernel reported in the device's status word."""

    def __init__(self, device: D, build: Callable[[Graph], P], release: Callable[[P], None] | None = None
                 ) -> None:
        super().__init__(device, build, release)
        self.dev = device
        self._pending: list[Bytes] = []
        """Host arrays that queued uploads read from: each must live until its copy is done."""

    @abstractmethod
    def drain(self) -> None:
        """Wait until the work queued here has run; ComputeError naming the device when the driver reports that it
        failed."""

    def synchronize(self) -> None:
        self.drain()
        self._pending.clear()
        self.dev.check_status()

    def stage_upload(self, buf: Buffer, tensor: Tensor, data: Bytes, offset: int) -> tuple[Bytes, int]:
        """The bytes of an asynchronous upload into `tensor` (at byte `offset` in it), as one flat array kept alive
        until `synchronize`, and where in `buf` they go (AllocationError when they fall outside the tensor)."""
        arr = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        start = buf._check(tensor, offset, arr.size)
        self._pending.append(arr)
        tensor.mark_written()
        return arr, start

    def release_resources(self) -> None:
        self.synchronize()
        super().release_resources()
