"""Device memory: one VkBuffer (+ VkDeviceMemory) per pyggml buffer; the graph allocator suballocates it.

Where device-local memory is also host visible and coherent (UMA, lavapipe) the buffer stays mapped and byte I/O
is a memcpy; otherwise (discrete GPUs, or `VulkanOptions.staging`) it goes through a host-visible staging buffer
and vkCmdCopyBuffer, ordered after earlier submissions on the one queue. Host access to mapped memory (and freeing
a buffer) first waits for the submitted graphs that bind the buffer. Sizes are limited by maxStorageBufferRange
(shaders bind whole buffers), the largest allocation and the device-local heap: `max_size`.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING

import numpy as np

from pyggml.backend.accounting import check_size
from pyggml.backend.protocol import Buffer, Bytes, DeviceBufferType
from pyggml.dlpack import DLPackMemory, ExportPins, host_memory
from pyggml.errors import AllocationError, DLPackError
from pyggml_vulkan.vk import CData, ffi, lib, new

if TYPE_CHECKING:
    from pyggml_vulkan.context import DeviceContext
    from pyggml_vulkan.device import VulkanDevice  # noqa: F401 (the type argument of the base class, a string)

log = logging.getLogger(__name__)

STAGING_CHUNK = 16 << 20
MIN_ALIGNMENT = 64


class VulkanBufferType(DeviceBufferType["VulkanDevice"]):
    @property
    def alignment(self) -> int:
        return max(MIN_ALIGNMENT, self.dev.info.min_storage_offset_alignment)

    @property
    def max_size(self) -> int:
        i = self.dev.info
        return min(i.max_storage_buffer_range, i.max_allocation, i.device_local_bytes)

    def alloc_buffer(self, size: int) -> VulkanBuffer:
        size = check_size(self.name, size)
        limit = self.max_size
        if size > limit:
            i = self.dev.info
            raise AllocationError(
                f"{self.name}: a buffer of {size} bytes exceeds the device limit of {limit} bytes "
                f"(maxStorageBufferRange {i.max_storage_buffer_range}, maxMemoryAllocationSize {i.max_allocation}, "
                f"device-local heap {i.device_local_bytes}); split it into several buffers")
        ctx = self.dev.context()
        return VulkanBuffer(self, ctx, size)


class VulkanBuffer(Buffer):
    def __init__(self, buft: VulkanBufferType, ctx: DeviceContext, size: int) -> None:
        super().__init__(buft, size)
        self.ctx = ctx
        host = ctx.info.unified_memory and not buft.dev.options().staging
        self.vk_buffer, self._memory, ptr = ctx.create_buffer(max(size, 16), host)
        self._mapped: Bytes | None = None
        if ptr is not None:
            self._mapped = np.frombuffer(ffi.buffer(ptr, max(size, 16)), dtype=np.uint8)[:size]
        self.handle_id = int(ffi.cast("uintptr_t", self.vk_buffer))
        self._freed = False
        self._untrack = buft.dev.allocations.track(self, size)
        self._exports = ExportPins()
        """DLPack exports of the mapped memory: a free() leaves the memory to the last of them."""

    @property
    def mapped(self) -> bool:
        return self._mapped is not None

    def _range(self, offset: int, size: int, what: str) -> None:
        self.check_span(offset, size, f"{what} bytes")
        if self._freed:
            raise AllocationError(f"{self.buft.name}: buffer used after free")
        self.ctx.ensure_alive()

    # ---- raw bytes ------------------------------------------------------------------------------------------

    def write(self, offset: int, data: Bytes) -> None:
        data = np.ascontiguousarray(data, dtype=np.uint8).reshape(-1)
        self._range(offset, data.size, "write")
        if self._mapped is not None:
            self.ctx.wait_for_buffer(self.handle_id)
            self._mapped[offset: offset + data.size] = data
            return
        with self.ctx.lock:
            self._write_staged(offset, data)

    def _write_staged(self, offset: int, data: Bytes) -> None:
        for start in range(0, data.size, STAGING_CHUNK):
            part = data[start: start + STAGING_CHUNK]
            stage_buf, stage_host = self.ctx.staging(part.size)
            stage_host[: part.size] = part
            self._copy(stage_buf, 0, self.vk_buffer, offset + start, part.size)

    def read(self, offset: int, size: int) -> Bytes:
        self._range(offset, size, "read")
        if self._mapped is not None:
            self.ctx.wait_for_buffer(self.handle_id)
            return self._mapped[offset: offset + size].copy()
        res = np.empty(size, dtype=np.uint8)
        with self.ctx.lock:
            self._read_staged(offset, res)
        return res

    def _read_staged(self, offset: int, res: Bytes) -> None:
        size = res.size
        for start in range(0, size, STAGING_CHUNK):
            n = min(STAGING_CHUNK, size - start)
            stage_buf, stage_host = self.ctx.staging(n)
            self._copy(self.vk_buffer, offset + start, stage_buf, 0, n)
            res[start: start + n] = stage_host[:n]

    def fill(self, offset: int, size: int, value: int) -> None:
        self._range(offset, size, "fill")
        if self._mapped is not None:
            self.ctx.wait_for_buffer(self.handle_id)
            self._mapped[offset: offset + size] = value
        elif offset % 4 == 0 and size % 4 == 0 and size:
            word = (value & 0xFF) * 0x01010101
            self.ctx.one_shot(lambda cb: lib.vkCmdFillBuffer(cb, self.vk_buffer, offset, size, word))
        elif size:
            super().fill(offset, size, value)

    def copy_from(self, src: Buffer, src_offset: int, dst_offset: int, size: int) -> bool:
        if isinstance(src, VulkanBuffer) and src.ctx is self.ctx:
            src._range(src_offset, size, "copy source")
            self._range(dst_offset, size, "copy")
            if size:
                self._copy(src.vk_buffer, src_offset, self.vk_buffer, dst_offset, size)
            return True
        return self.write_from_host(src, src_offset, dst_offset, size)

    def _copy(self, src: CData, src_off: int, dst: CData, dst_off: int, size: int) -> None:
        region = new("VkBufferCopy", srcOffset=src_off, dstOffset=dst_off, size=size)
        self.ctx.one_shot(lambda cb: lib.vkCmdCopyBuffer(cb, src, dst, 1, region))

    def dlpack_memory(self, stream: int | None = None) -> DLPackMemory:
        """Host-mapped memory (unified memory, lavapipe) exports as host memory once the graphs that bind the buffer
        are done; device-local memory the host cannot map (a discrete GPU, PYGGML_VULKAN_STAGING=1) cannot."""
        self._range(0, 0, "export")
        if self._mapped is None:
            raise DLPackError(f"{self.buft.name}: device-local memory the host does not map (a discrete GPU, or "
                              "PYGGML_VULKAN_STAGING=1): DLPack exports only host-visible Vulkan memory")
        self.ctx.wait_for_buffer(self.handle_id)
        return host_memory(self._mapped, (self, self._exports.pin()))

    @property
    def freed(self) -> bool:
        return self._freed

    def free(self) -> None:
        """Wait for the submitted graphs that bind the buffer, then destroy it; later use raises AllocationError
        (a graph submitted after this marked it freed is refused: VulkanBackend checks under the same lock). Memory
        exported through DLPack is destroyed when the last export is gone."""
        with self.ctx.lock:
            if self._freed:
                return
            self._freed = True
        if not self.ctx.lost:
            self.ctx.wait_for_buffer(self.handle_id)
        self._exports.release_when_unused(self._destroy)

    def _destroy(self) -> None:
        self._mapped = None
        self.ctx.destroy_buffer(self.vk_buffer, self._memory)
        self._untrack()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.free()
