"""Buffers: device memory (`cuMemAlloc`) and pinned host memory (`cuMemHostAlloc`), through PyCUDA.

Plain buffer operations run on the legacy default stream, which orders them with the work of every backend stream
of the device (those are blocking streams): a write lands before later kernels read it, a read returns after the
kernels queued before it wrote. Copies between two CUDA devices go device to device (`cuMemcpyPeer`), with peer
access enabled first where the devices have it (the driver stages through the host otherwise).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import numpy as np

from pyggml.backend.accounting import alloc_error
from pyggml.backend.host import HostBuffer
from pyggml.backend.protocol import Buffer, Bytes, DeviceBufferType
from pyggml.dlpack import DLDevice, DLDeviceType, DLPackMemory, ExportPins
from pyggml.errors import AllocationError, ComputeError, DLPackError
from pyggml_cuda.cudalib import cudalib

if TYPE_CHECKING:
    from pyggml_cuda.device import CudaDevice

log = logging.getLogger(__name__)
ALIGNMENT = 256
"""cuMemAlloc returns 256-byte aligned memory; tensors are placed at this alignment too."""


def drv() -> Any:
    """pycuda.driver, imported on first use (never at plugin import)."""
    import pycuda.driver as cuda

    return cuda


def device_alloc(dev: CudaDevice, size: int) -> Any:
    """`size` bytes of device memory (a PyCUDA DeviceAllocation); AllocationError names the device and sizes."""
    cuda = drv()
    with dev.active():
        try:
            return cuda.mem_alloc(max(size, 1))
        except cuda.MemoryError as e:
            free, total = dev.memory()
            raise alloc_error(dev, size, f"out of device memory ({free} of {total} bytes free): {e}") from e
        except cuda.Error as e:
            raise alloc_error(dev, size, str(e)) from e


class CudaBuffer(Buffer):
    """Device memory; `ptr` is its address, which kernels receive with each tensor's byte offset."""

    def __init__(self, buft: CudaBufferType, size: int) -> None:
        super().__init__(buft, size)
        dev = buft.dev
        self.dev = dev
        if size > buft.max_size:
            raise alloc_error(dev, size, f"the device has {buft.max_size} bytes of memory")
        self.mem: Any = device_alloc(dev, size)
        self.ptr = int(self.mem)
        self._untrack = dev.allocations.track(self, size)
        self._exports = ExportPins()
        """DLPack exports of the memory: a free() leaves the allocation to the last of them."""

    @property
    def freed(self) -> bool:
        return self.mem is None

    def at(self, offset: int) -> int:
        """The device address of byte `offset`; AllocationError once the buffer is freed (its address may then be
        another allocation's)."""
        if self.mem is None:
            raise AllocationError(f"{self.buft.name}: buffer of {self.size} bytes used after free")
        return self.ptr + offset

    def write(self, offset: int, data: Bytes) -> None:
        if data.size:
            with self.dev.active():
                drv().memcpy_htod(self.at(offset), np.ascontiguousarray(data))

    def read(self, offset: int, size: int) -> Bytes:
        out = np.empty(size, dtype=np.uint8)
        if size:
            with self.dev.active():
                drv().memcpy_dtoh(out, self.at(offset))
        return out

    def fill(self, offset: int, size: int, value: int) -> None:
        if size:
            with self.dev.active():
                drv().memset_d8(self.at(offset), value & 0xFF, size)

    def copy_from(self, src: Buffer, src_offset: int, dst_offset: int, size: int) -> bool:
        if not size:
            return True
        if isinstance(src, CudaBuffer):
            device_copy(self.dev, self.at(dst_offset), src.dev, src.at(src_offset), size)
            return True
        return self.write_from_host(src, src_offset, dst_offset, size)

    def dlpack_memory(self, stream: int | None = None) -> DLPackMemory:
        """Device memory as kDLCUDA of this device's ordinal. The consumer's `stream` (DLPack's convention: None or
        1 the legacy default stream, 2 the per-thread default stream, -1 no ordering, else a CUstream handle) sees
        the data ready: the legacy default stream is ordered after the device's blocking streams by CUDA itself;
        for any other stream the device is synchronized first. A `free()` while an export holds the memory
        releases it when the consumer lets go."""
        if stream == 0:
            raise DLPackError(f"{self.buft.name}: stream 0 is ambiguous in DLPack (give 1 for the legacy default "
                              "stream, 2 for the per-thread one)")
        address = self.at(0)
        if stream not in (None, 1, -1):
            with self.dev.active():
                drv().Context.synchronize()
        return DLPackMemory(address, DLDevice(DLDeviceType.CUDA, self.dev.info.ordinal), (self, self._exports.pin()))

    def free(self) -> None:
        """Release the memory once the device's queued work is done (under the device's mem_lock, so no replay
        queues kernels over it meanwhile); a later use raises AllocationError. Memory a DLPack export holds is
        released when the last export is gone."""
        with self.dev.mem_lock:
            if self.mem is None:
                return
            mem, self.mem = self.mem, None
            with self.dev.active():
                drv().Context.synchronize()
        self._exports.release_when_unused(lambda: self._release(mem))
        self._untrack()

    def _release(self, mem: Any) -> None:
        with self.dev.active():
            mem.free()


class CudaForeignBuffer(CudaBuffer):
    """Device memory another library allocated (a DLPack import, `CudaDevice.buffer_from_dlpack`): kernels use it
    in place; `owner` (the producer's export) is held until `free()` (and the exports of this buffer) or garbage
    collection, and the memory is never freed here."""

    def __init__(self, buft: CudaBufferType, address: int, size: int, owner: object) -> None:
        Buffer.__init__(self, buft, size)
        self.dev = buft.dev
        self.mem = owner
        self.ptr = address
        self._untrack = _nothing
        self._exports = ExportPins()

    def _release(self, mem: Any) -> None:
        """The producer's memory: pyggml lets go of it, nothing more."""


def _nothing() -> None:
    """A foreign buffer's memory is not counted in the device's allocations."""


class CudaBufferType(DeviceBufferType["CudaDevice"]):
    alignment = ALIGNMENT

    @property
    def max_size(self) -> int:
        return self.dev.info.total_memory

    def alloc_buffer(self, size: int) -> CudaBuffer:
        return CudaBuffer(self, size)


class CudaHostBuffer(HostBuffer):
    """Pinned (page-locked) host memory: numpy and the CPU backends use it like any host buffer, and copies
    between it and the device run at full bus speed and can be asynchronous."""


class CudaHostBufferType(DeviceBufferType["CudaDevice"]):
    """`Device.host_buffer_type()`: pinned host memory for staging weights and inputs. Its tensors sit at the
    device's alignment; its size limit is the host's (BufferType's default), not the device memory's."""

    suffix = "_Host"

    alignment = ALIGNMENT

    @property
    def is_host(self) -> bool:
        return True

    def alloc_buffer(self, size: int) -> CudaHostBuffer:
        cuda = drv()
        with self.dev.active():
            try:
                arr = cuda.pagelocked_empty(max(size, 1), np.uint8)
            except cuda.Error as e:
                raise alloc_error(self.dev, size, f"pinned host memory: {e}") from e
        return CudaHostBuffer(self, arr[:size])


def device_copy(dst_dev: CudaDevice, dst: int, src_dev: CudaDevice, src: int, size: int,
                stream: Any = None) -> None:
    """`size` bytes from src (on src_dev) to dst (on dst_dev); synchronous unless a stream of dst_dev is given."""
    cuda = drv()
    with dst_dev.active():
        try:
            if src_dev is dst_dev:
                if stream is None:
                    cuda.memcpy_dtod(dst, src, size)
                else:
                    cuda.memcpy_dtod_async(dst, src, size, stream)
                return
            dst_dev.enable_peer(src_dev)
            lib = cudalib()
            if stream is None:
                lib.memcpy_peer(dst, dst_dev.ctx.handle, src, src_dev.ctx.handle, size)
            else:
                lib.memcpy_peer_async(dst, dst_dev.ctx.handle, src, src_dev.ctx.handle, size, stream.handle)
        except cuda.Error as e:
            raise ComputeError(f"copy of {size} bytes {src_dev.name} -> {dst_dev.name} failed: {e}") from e


def device_ptr(buf: Buffer | None, dev: CudaDevice) -> int | None:
    """The device address of `buf` when kernels of `dev` can read it, else None."""
    if isinstance(buf, CudaBuffer) and buf.dev is dev:
        return buf.at(0)
    return None
