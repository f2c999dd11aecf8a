"""A Metal device over one driver device: Metal0... on a Mac (PyObjC), MetalSim0 for the emulator. Memory is the
system's (unified memory): the GPU's share is recommendedMaxWorkingSetSize, less what this plugin allocated.

The device keeps the command buffers committed and not yet waited for, so host access to a buffer (and its free)
first waits for the work that may still write it."""

from __future__ import annotations

import mmap
import threading
from typing import TYPE_CHECKING

from pyggml.backend.accounting import AllocationTally
from pyggml.backend.protocol import FALLBACK_PRIORITY, Backend, Bytes, Device, DeviceCaps, DeviceType, Event, Registry
from pyggml.errors import PyGGMLError
from pyggml_metal.buffer import MetalBuffer, MetalBufferType, wrap_host
from pyggml_metal.driver import DriverCommandBuffer, DriverDevice

if TYPE_CHECKING:
    from pyggml.tensor import Tensor


class MetalDevice(Device):
    def __init__(self, reg: Registry, driver_device: DriverDevice, name: str, emulated: bool = False) -> None:
        super().__init__(reg, name, DeviceType.GPU,
                         DeviceCaps(async_ops=True, events=True, buffer_from_host_ptr=True))
        self.driver_device = driver_device
        self.emulated = emulated
        self.page_size = mmap.PAGESIZE
        self.allocations = AllocationTally()
        self._buft = MetalBufferType(self)
        self._inflight: list[Submission] = []
        self._lock = threading.RLock()

    @property
    def description(self) -> str:
        d = self.driver_device.name
        return f"{d} (CPU-emulated: the Metal kernels compiled as C++, not a GPU)" if self.emulated else d

    @property
    def priority(self) -> int:
        """The emulator is never the default device while a real one (or the cpu device) is there."""
        return FALLBACK_PRIORITY if self.emulated else super().priority

    def memory(self) -> tuple[int, int]:
        return self.allocations.memory(self.driver_device.working_set_bytes)

    def details(self) -> dict[str, str]:
        dd = self.driver_device
        return {"unified_memory": str(dd.unified_memory), "max_buffer_length": str(dd.max_buffer_length),
                "recommended_working_set": str(dd.working_set_bytes), "allocated": str(dd.allocated_bytes()),
                "emulated": "cpu (pyggml's MSL emulator)" if self.emulated else "no"}

    def new_backend(self) -> Backend:
        from pyggml_metal.backend import MetalBackend

        return MetalBackend(self)

    def buffer_type(self) -> MetalBufferType:
        return self._buft

    def buffer_from_host_ptr(self, array: Bytes, max_tensor_size: int) -> MetalBuffer:
        return wrap_host(self._buft, array, max_tensor_size)

    def supports_op(self, op: Tensor) -> bool:
        from pyggml_metal.op_table import TABLE

        return TABLE.supports(op)

    def offload_op(self, op: Tensor) -> bool:
        return False

    def event_new(self) -> Event:
        from pyggml_metal.backend import MetalEvent

        return MetalEvent(self)

    # ---- command buffers in flight --------------------------------------------------------------------------

    def commit(self, cb: DriverCommandBuffer) -> Submission:
        """Commit cb; it stays in flight until waited for (by its backend, or by host access to any buffer)."""
        sub = Submission(cb)
        cb.commit()
        with self._lock:
            self._inflight.append(sub)
        return sub

    def drain(self) -> None:
        """Wait for every command buffer in flight (before the host touches a buffer: any of them may write it);
        their errors stay with their submissions for the committing backends to raise."""
        with self._lock:
            pending, self._inflight = self._inflight, []
        for sub in pending:
            sub.finish()

    def finish(self, subs: list[Submission]) -> None:
        """Wait for these submissions (a backend's synchronize); they are no longer in flight."""
        for sub in subs:
            sub.finish()
        with self._lock:
            done = {id(s) for s in subs}
            self._inflight = [s for s in self._inflight if id(s) not in done]


class Submission:
    """A committed command buffer: waited for once; a failure is kept for the backend that committed it."""

    def __init__(self, cb: DriverCommandBuffer) -> None:
        self.cb = cb
        self.done = False
        self.error: PyGGMLError | None = None

    def finish(self) -> None:
        if not self.done:
            try:
                self.cb.wait()
            except PyGGMLError as e:
                self.error = e
            self.done = True
