"""Buffers over `cl.Buffer`: device memory, and host-visible memory for devices that share the host's RAM.

Every buffer operation goes through its device's one in-order queue, so it is ordered with the kernels already
queued there; the raw primitives (write/read/fill/copy_from) return when the data has landed. Copies between two
OpenCL devices of one context run device-side: the copy waits on a marker of the source device's queue.

Lifetime: `free()` waits for the device's queue (kernels queued with the buffer finish first, also when another
thread frees it during a compute), then releases the cl.Buffer; every later use raises AllocationError ("used after
free") instead of reaching the driver with a released object, and a second free does nothing. The device's
`mem_lock` orders a free against the enqueueing of transfers and plans (OpenCLBackend.replay checks its buffers
under it).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import numpy as np

from pyggml.backend.accounting import alloc_error, check_size
from pyggml.backend.host import HostBuffer, aligned_empty
from pyggml.backend.protocol import Buffer, BufferType, Bytes, DeviceBufferType
from pyggml.errors import AllocationError

if TYPE_CHECKING:
    import pyopencl as cl

    from pyggml_opencl.device import OpenCLDevice

log = logging.getLogger(__name__)


class OpenCLBuffer(Buffer):
    """Device memory. `clmem` is the cl.Buffer kernels receive (with each tensor's byte offset)."""

    def __init__(self, buft: OpenCLBufferType, size: int) -> None:
        size = check_size(buft.name, size, buft.dev.info.global_mem)
        super().__init__(buft, size)
        import pyopencl as cl

        dev = buft.dev
        self.dev = dev
        if size > buft.max_size:
            raise alloc_error(dev, size, f"the device limit CL_DEVICE_MAX_MEM_ALLOC_SIZE is {buft.max_size} bytes")
        try:
            self.clmem: cl.Buffer = cl.Buffer(dev.ctx, cl.mem_flags.READ_WRITE, max(size, 1))
        except cl.Error as e:
            raise alloc_error(dev, size, f"{e} (device memory {dev.memory()[1]} bytes)") from e
        self._untrack = dev.allocations.track(self, size)
        self.freed = False

    def live(self) -> cl.Buffer:
        """The cl.Buffer, or AllocationError after free (call under the device's mem_lock)."""
        if self.freed:
            raise AllocationError(f"{self.buft.name}: buffer of {self.size} bytes used after free")
        return self.clmem

    # ---- raw primitives ------------------------------------------------------------------------------------

    def write(self, offset: int, data: Bytes) -> None:
        import pyopencl as cl

        with self.dev.mem_lock:
            mem = self.live()
            if data.size:
                cl.enqueue_copy(self.dev.queue, mem, np.ascontiguousarray(data), dst_offset=offset)

    def read(self, offset: int, size: int) -> Bytes:
        import pyopencl as cl

        out = np.empty(size, dtype=np.uint8)
        with self.dev.mem_lock:
            mem = self.live()
            if size:
                cl.enqueue_copy(self.dev.queue, out, mem, src_offset=offset)
        return out

    def fill(self, offset: int, size: int, value: int) -> None:
        import pyopencl as cl

        with self.dev.mem_lock:
            mem = self.live()
            if size:
                pattern = np.full(1, value, dtype=np.uint8)
                cl.enqueue_fill_buffer(self.dev.queue, mem, pattern, offset, size).wait()

    def copy_from(self, src: Buffer, src_offset: int, dst_offset: int, size: int) -> bool:
        with self.dev.mem_lock:
            dst = self.live()
            mem = cl_mem_of(src)
            if mem is not None and src_device(src).ctx is self.dev.ctx:
                device_copy(self.dev, dst, dst_offset, src_device(src), mem, src_offset, size)
                return True
        return self.write_from_host(src, src_offset, dst_offset, size)

    # ---- 2D forms: `rows` rows of `row_bytes`, `stride` bytes apart on the device, packed on the host --------

    def write_2d(self, offset: int, data: Bytes, rows: int, row_bytes: int, stride: int) -> None:
        import pyopencl as cl

        if rows and row_bytes:
            host = np.ascontiguousarray(data).reshape(-1)[: rows * row_bytes]
            # pyopencl's stubs name the rectangle origin `origin`; its runtime wants `buffer_origin`
            with self.dev.mem_lock:
                cl.enqueue_copy(  # type: ignore[call-overload]
                    self.dev.queue, self.live(), host, buffer_origin=(offset, 0, 0), host_origin=(0, 0, 0),
                    region=(row_bytes, rows, 1), buffer_pitches=(stride, 0), host_pitches=(row_bytes, 0)).wait()

    def read_2d(self, offset: int, rows: int, row_bytes: int, stride: int) -> Bytes:
        import pyopencl as cl

        out = np.empty(rows * row_bytes, dtype=np.uint8)
        if rows and row_bytes:
            with self.dev.mem_lock:
                cl.enqueue_copy(  # type: ignore[call-overload]
                    self.dev.queue, out, self.live(), buffer_origin=(offset, 0, 0), host_origin=(0, 0, 0),
                    region=(row_bytes, rows, 1), buffer_pitches=(stride, 0), host_pitches=(row_bytes, 0)).wait()
        return out

    def free(self) -> None:
        with self.dev.mem_lock:
            if self.freed:
                return
            self.freed = True
            self.dev.queue.finish()  # kernels and copies queued with this buffer first
            self.clmem.release()
        self._untrack()


class _DeviceBufferType(DeviceBufferType["OpenCLDevice"]):
    """Facts shared by the device's buffer types: its alignment and allocation limit."""

    @property
    def alignment(self) -> int:
        return self.dev.info.alignment

    @property
    def max_size(self) -> int:
        return self.dev.info.max_alloc


class OpenCLBufferType(_DeviceBufferType):
    def alloc_buffer(self, size: int) -> OpenCLBuffer:
        return OpenCLBuffer(self, size)


class OpenCLHostBuffer(HostBuffer):
    """Host memory the device uses in place (CL_MEM_USE_HOST_PTR on a device with unified memory): numpy sees
    it through `host_array()`, kernels through `clmem`. Host access first waits for the device's queue."""

    def __init__(self, buft: BufferType, dev: OpenCLDevice, array: Bytes) -> None:
        super().__init__(buft, array)
        import pyopencl as cl

        self.dev = dev
        flags = cl.mem_flags.USE_HOST_PTR | cl.mem_flags.READ_WRITE
        try:
            self.clmem: cl.Buffer = cl.Buffer(dev.ctx, flags, hostbuf=array if array.size else np.zeros(1, np.uint8))
        except cl.Error as e:
            raise alloc_error(dev, array.size, str(e)) from e

    def live(self) -> cl.Buffer:
        """The cl.Buffer, or AllocationError after free (call under the device's mem_lock)."""
        if self.freed:
            raise AllocationError(f"{self.buft.name}: buffer of {self.size} bytes used after free")
        return self.clmem

    def free(self) -> None:
        with self.dev.mem_lock:
            if self.freed:
                return
            self.dev.queue.finish()
            self.clmem.release()
            super().free()

    def write(self, offset: int, data: Bytes) -> None:
        self.dev.queue.finish()
        super().write(offset, data)

    def read(self, offset: int, size: int) -> Bytes:
        self.dev.queue.finish()
        return super().read(offset, size)

    def fill(self, offset: int, size: int, value: int) -> None:
        self.dev.queue.finish()
        super().fill(offset, size, value)

    def copy_from(self, src: Buffer, src_offset: int, dst_offset: int, size: int) -> bool:
        self.dev.queue.finish()
        if isinstance(src, OpenCLBuffer):
            self.array[dst_offset : dst_offset + size] = src.read(src_offset, size)
            return True
        return super().copy_from(src, src_offset, dst_offset, size)

    def host_array(self) -> Bytes:
        self.dev.queue.finish()
        return self.array


class OpenCLHostBufferType(_DeviceBufferType):
    """Host-visible buffers of a unified-memory device (`Device.host_buffer_type()`)."""

    suffix = "_Host"

    @property
    def is_host(self) -> bool:
        return True

    def alloc_buffer(self, size: int) -> OpenCLHostBuffer:
        size = check_size(self.name, size, self.dev.info.global_mem)
        if size > self.max_size:
            raise alloc_error(self.dev, size, f"the device limit CL_DEVICE_MAX_MEM_ALLOC_SIZE is {self.max_size} "
                               "bytes")
        return OpenCLHostBuffer(self, self.dev, aligned_empty(size, 4096))

    def wrap(self, array: Bytes) -> OpenCLHostBuffer:
        return OpenCLHostBuffer(self, self.dev, array)


def cl_mem_of(buf: Buffer) -> cl.Buffer | None:
    """The cl.Buffer behind a pyggml buffer of this plugin, or None; AllocationError when it was freed."""
    if isinstance(buf, OpenCLBuffer | OpenCLHostBuffer):
        return buf.live()
    return None


def src_device(buf: Buffer) -> OpenCLDevice:
    assert isinstance(buf, OpenCLBuffer | OpenCLHostBuffer)
    return buf.dev


def device_copy(dst_dev: OpenCLDevice, dst: cl.Buffer, dst_offset: int, src_dev: OpenCLDevice, src: cl.Buffer,
                src_offset: int, size: int, wait: bool = True) -> cl.Event | None:
    """Copy on dst_dev's queue, after everything queued on src_dev's queue (same context)."""
    import pyopencl as cl

    if not size:
        return None
    deps = None if src_dev is dst_dev else [cl.enqueue_marker(src_dev.queue)]
    ev = cl.enqueue_copy(dst_dev.queue, dst, src, src_offset=src_offset, dst_offset=dst_offset, byte_count=size,
                         wait_for=deps)
    if wait:
        ev.wait()
    return ev
