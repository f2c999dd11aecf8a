"""Host memory buffers shared by every CPU-side backend (numpy reference, cpu plugin, blas).

An ArrayBuffer keeps its memory in one numpy uint8 array that only its methods reach (the "device memory" of the
toy backend or of a test's fake device). A HostBuffer is an ArrayBuffer over one aligned array that the host may
address: `host_array()` gives zero-copy access, so a tensor in host memory can be viewed by numpy
(`Tensor.element_view`) or passed to C by address (`HostBuffer.address`).
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


class ArrayBuffer(Buffer):
    """A buffer whose memory is one numpy uint8 array (`array`), private to it unless a subclass says otherwise
    (`host_array()` is None: pyggml reaches the bytes only through the methods, as it would a GPU's). Byte I/O
    outside the buffer raises AllocationError; `free()` drops the memory at once (numpy views taken before keep
    theirs alive), any later use raises AllocationError, and a second free does nothing."""

    def __init__(self, buft: BufferType, array: Bytes) -> None:
        super().__init__(buft, array.size)
        self._array: Bytes | None = array

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

    def _span(self, offset: int, size: int) -> slice:
        """Bytes [offset, offset + size) as a slice of `array` (checked: `check_span`)."""
        self.check_span(offset, size)
        return slice(offset, offset + size)

    def write(self, offset: int, data: Bytes) -> None:
        self.array[self._span(offset, data.size)] = data

    def read(self, offset: int, size: int) -> Bytes:
        return self.array[self._span(offset, size)].copy()

    def fill(self, offset: int, size: int, value: int) -> None:
        self.array[self._span(offset, size)] = value

    def copy_from(self, src: Buffer, src_offset: int, dst_offset: int, size: int) -> bool:
        other = self._source_array(src)
        if other is None:
            return False
        self.array[self._span(dst_offset, size)] = other[src_offset : src_offset + size]
        return True

    def _source_array(self, src: Buffer) -> Bytes | None:
        """The memory of `src` where `copy_from` may copy from it directly; None (the default): through the
        host."""
        return None


class HostBuffer(ArrayBuffer):
    """Host memory: an ArrayBuffer whose array numpy and C may address directly (`host_array()`, `address`), and
    which copies from any buffer that has a host array."""

    def __init__(self, buft: BufferType, array: Bytes) -> None:
        super().__init__(buft, array)
        self.address = int(array.ctypes.data) if array.size else 0

    def free(self) -> None:
        super().free()
        self.address = 0

    def _source_array(self, src: Buffer) -> Bytes | None:
        return src.host_array()

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
