"""What the dialect plugins' devices and backends (OpenCL, CUDA) share beyond the kernels, none of it tied to a
driver: a device that serialises queueing and frees (`mem_lock`), and a backend that queues its work, in order, on
one driver queue (OpenCL) or stream (CUDA) of such a device, whose kernels report an index out of range in the
backend's own status word (the dialect's `ERR_ARGS`; core's `pyggml.backend.status.StatusWord`).
"""

from __future__ import annotations

import threading
from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar

import numpy as np

from pyggml.backend.plan_cache import PlannedBackend
from pyggml.backend.protocol import Buffer, Bytes, Device, DeviceCaps, DeviceType, Registry
from pyggml.backend.status import StatusWord
from pyggml_dialect.types import Builder

if TYPE_CHECKING:
    from pyggml.backend.op_table import OpTable
    from pyggml.graph import Graph
    from pyggml.tensor import Tensor

P = TypeVar("P")


class DialectDevice(Device):
    """A device that runs dialect kernels (their status words are its backends', one each: `DialectBackend`)."""

    def __init__(self, reg: Registry, name: str, type: DeviceType, caps: DeviceCaps) -> None:
        super().__init__(reg, name, type, caps)
        self.mem_lock = threading.RLock()
        """Held while launches and transfers over the device's buffers are queued and while a buffer is freed: a
        free from another thread waits for the queueing, then for the device's work."""


D = TypeVar("D", bound=DialectDevice)


class DialectBackend(PlannedBackend[P], Generic[P, D]):
    """A backend that queues its plans' launches and its uploads, in order, on one driver queue or stream of `dev`.
    `synchronize` waits for that work (`drain`), lets go of the host arrays the uploads read from
    (`stage_upload`) and raises what a kernel reported in this backend's status word: another backend of the same
    device has its own, so it never sees, nor clears, this one's errors."""

    table: ClassVar[OpTable[Builder]]
    """The op table the backend's plans are built by (its fusions decide `alloc_deps`)."""

    def __init__(self, device: D, build: Callable[[Graph], P], release: Callable[[P], None] | None = None
                 ) -> None:
        super().__init__(device, build, release)
        self.dev = device
        self.status = StatusWord(device.buffer_type(), self.name)
        """Where this backend's kernels report out-of-range indices (armed by a replay, read by synchronize)."""
        self._pending: list[Bytes] = []
        """Host arrays that queued uploads read from: each must live until its copy is done."""

    def alloc_deps(self, nodes: Sequence[Tensor], uses: Callable[[Tensor], int]) -> list[tuple[Tensor, Tensor]]:
        return self.table.alloc_deps(nodes, uses)

    @abstractmethod
    def drain(self) -> None:
        """Wait until the work queued here has run; ComputeError naming the device when the driver reports that it
        failed."""

    def synchronize(self) -> None:
        self.drain()
        self._pending.clear()
        self.status.check()

    def stage_upload(self, buf: Buffer, tensor: Tensor, data: Bytes, offset: int) -> tuple[Bytes, int]:
        """The bytes of an asynchronous upload into `tensor` (at byte `offset` in it), as one flat array kept alive
        until `synchronize`, and where in `buf` they go (AllocationError when they fall outside the tensor)."""
        arr = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        start = buf.checked_offset(tensor, offset, arr.size)
        self._pending.append(arr)
        tensor.mark_written()
        return arr, start

    def release_resources(self) -> None:
        try:
            self.synchronize()
        finally:
            super().release_resources()
            self.status.free()
