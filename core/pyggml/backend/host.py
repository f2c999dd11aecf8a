"""Host memory buffers shared by every CPU-side backend (numpy reference, cpu plugin, blas).

A HostBuffer is one aligned numpy uint8 array; `host_array()` gives zero-copy access, so a tensor in host
memory can be viewed by numpy (`Tensor.element_view`) or passed to C by address (`HostBuffer.address`).
"""

from __future__ import annotations

import numpy as np

from pyggml.backend.protocol import Buffer, BufferType, Bytes, Device
from pyggml.errors import AllocationError

HOST_ALIGNMENT = 64


def aligned_empty(size: int, alignment: int = HOST_ALIGNMENT) -> Bytes:
    """An uninitialised uint8 array of `size` bytes whose first byte is `alignment`-aligned."""
    try:
        raw = np.empty(size + alignment, dtype=np.uint8)
    except MemoryError as e:
        raise AllocationError(f"cannot allocate {size} bytes of host memory") from e
    shift = (-raw.ctypes.data) % alignment
    return raw[shift : shift + size]


class HostBuffer(Buffer):
    """`free()` drops the buffer's memory at once (numpy views taken before keep theirs alive); any later use raises
    AllocationError, and a second free does nothing."""

    def __init__(self, buft: BufferType, array: Bytes) -> None:
        super().__init__(buft, array.size)
        self._array: Bytes | None = array
        self.address = int(array.ctypes.data) if array.size else 0

    @property
    def array(self) -> Bytes:
        arr = self._array
        if arr is None:
            raise AllocationError(f"{self.buft.name}: buffer of {self.size} bytes used after free")
        return arr

    @property
    def freed(self) -> bool:
        return self._array is None

    def free(self) -> None:
        self._array = None
        self.address = 0

    def write(self, offset: int, data: Bytes) -> None:
        self.array[offset : offset + data.size] = data

    def read(self, offset: int, size: int) -> Bytes:
        return self.array[offset : offset + size].copy()

    def fill(self, offset: int, size: int, value: int) -> None:
        self.array[offset : offset + size] = value

    def copy_from(self, src: Buffer, src_offset: int, dst_offset: int, size: int) -> bool:
        other = src.host_array()
        if other is None:
            return False
        self.array[dst_offset : dst_offset + size] = other[src_offset : src_offset + size]
        return True

    def host_array(self) -> Bytes:
        return self.array


class HostBufferType(BufferType):
    """Plain host memory. One instance per device; any CPU-type device can use any host buffer type."""

    def __init__(self, name: str, device: Device | None = None, alignment: int = HOST_ALIGNMENT) -> None:
        super().__init__(name, device)
        self._alignment = alignment

    @property
    def alignment(self) -> int:
        return self._alignment

    @property
    def is_host(self) -> bool:
        return True

    def alloc_buffer(self, size: int) -> HostBuffer:
        """`size` bytes of fresh host memory; a negative size, or one beyond the machine's memory, raises
        AllocationError."""
        from pyggml.backend.accounting import check_size
        from pyggml.backend.sysinfo import host_memory_total

        size = check_size(self.name, size, host_memory_total())
        return HostBuffer(self, aligned_empty(max(size, 1))[:size] if size else aligned_empty(0))

    def wrap(self, array: Bytes) -> HostBuffer:
        """A buffer over existing memory (an mmap of a GGUF file, say) without copying."""
        if array.dtype != np.uint8 or array.ndim != 1:
            raise AllocationError("host buffers wrap 1-D uint8 arrays")
        return HostBuffer(self, array)
