"""Metal buffers: shared storage (unified memory), so the host reads and writes a buffer's bytes in place through
its contents; a buffer bound by committed, unfinished command buffers is waited for before host access or free.
`buffer_from_host_ptr` wraps page-aligned host memory (mmapped GGUF weights) without copying."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import numpy as np

from pyggml.backend.accounting import check_size
from pyggml.backend.protocol import Buffer, BufferUsage, Bytes, DeviceBufferType
from pyggml.errors import AllocationError
from pyggml_metal.driver import DriverBuffer, MetalError

if TYPE_CHECKING:
    from pyggml_metal.device import MetalDevice  # noqa: F401 (the type argument of the base class, a string)

ALIGNMENT = 256
"""Offsets of bound buffers: Metal wants 256 bytes for constant data on some GPUs; 256 serves every use."""
_ids = itertools.count(1)


class MetalBufferType(DeviceBufferType["MetalDevice"]):
    alignment = ALIGNMENT

    @property
    def max_size(self) -> int:
        return self.dev.driver_device.max_buffer_length

    def alloc_buffer(self, size: int) -> MetalBuffer:
        size = check_size(self.name, size)
        if size > self.max_size:
            raise AllocationError(f"{self.name}: a buffer of {size} bytes exceeds the device's maxBufferLength "
                                  f"({self.max_size} bytes); split it into several buffers")
        try:
            mem = self.dev.driver_device.new_buffer(max(size, 1))
        except MetalError as e:
            raise AllocationError(f"{self.name}: allocating {size} bytes failed: {e}") from e
        return MetalBuffer(self, mem, size)


class MetalBuffer(Buffer):
    def __init__(self, buft: MetalBufferType, mem: DriverBuffer, size: int, host: Bytes | None = None) -> None:
        super().__init__(buft, size)
        self.dev = buft.dev
        self.mem: DriverBuffer | None = mem
        self.handle_id = next(_ids)
        self.freed = False
        self._host = host
        """The wrapped host memory of a buffer_from_host_ptr buffer (kept alive with it)."""
        self._untrack = self.dev.allocations.track(self, size) if host is None else None

    def contents(self) -> Bytes:
        if self.mem is None:
            raise AllocationError(f"{self.buft.name}: buffer {self.handle_id} was freed (buffer used after free)")
        return self.mem.contents()[: self.size]

    def write(self, offset: int, data: Bytes) -> None:
        self.dev.drain()
        self.contents()[offset : offset + data.size] = data

    def read(self, offset: int, size: int) -> Bytes:
        self.dev.drain()
        return np.array(self.contents()[offset : offset + size], copy=True)

    def fill(self, offset: int, size: int, value: int) -> None:
        self.dev.drain()
        self.contents()[offset : offset + size] = value

    def copy_from(self, src: Buffer, src_offset: int, dst_offset: int, size: int) -> bool:
        if not isinstance(src, MetalBuffer) or src.dev is not self.dev:
            return False
        self.dev.drain()
        self.contents()[dst_offset : dst_offset + size] = src.contents()[src_offset : src_offset + size]
        return True

    def free(self) -> None:
        if self.mem is None:
            return
        self.dev.drain()
        self.mem.release()
        self.mem = None
        self._host = None
        self.freed = True
        if self._untrack is not None:
            self._untrack()

    def __repr__(self) -> str:
        kind = "host memory" if self._host is not None else "shared"
        return f"<MetalBuffer {self.buft.name}#{self.handle_id} {self.size} bytes, {kind}>"


def wrap_host(buft: MetalBufferType, array: Bytes, max_tensor_size: int) -> MetalBuffer:
    """buffer_from_host_ptr: no copy where the memory is page-aligned and whole pages long (Metal's rule for
    newBufferWithBytesNoCopy); other memory is refused with the reason (AllocationError): the caller copies."""
    page = buft.dev.page_size
    if array.ndim != 1 or array.dtype != np.uint8:
        raise AllocationError(f"{buft.name}: buffer_from_host_ptr takes a 1-D uint8 array, got {array.dtype} "
                              f"{array.shape}")
    if array.ctypes.data % page or array.size % page:
        raise AllocationError(f"{buft.name}: host memory at 0x{array.ctypes.data:x} of {array.size} bytes is not "
                              f"page-aligned and a whole number of {page}-byte pages, as Metal needs to use it "
                              "without a copy")
    if max_tensor_size > buft.max_size:
        raise AllocationError(f"{buft.name}: a tensor of {max_tensor_size} bytes exceeds maxBufferLength")
    try:
        mem = buft.dev.driver_device.buffer_no_copy(array)
    except MetalError as e:
        raise AllocationError(f"{buft.name}: wrapping {array.size} bytes of host memory failed: {e}") from e
    buf = MetalBuffer(buft, mem, array.size, host=array)
    buf.usage = BufferUsage.WEIGHTS
    return buf
