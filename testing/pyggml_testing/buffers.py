"""A host buffer type with a chosen alignment, max size and alloc-size padding that can be told to fail: for
tests of the allocators (and of whatever builds on them) without a device."""

from __future__ import annotations

from pyggml.backend.host import HostBuffer, HostBufferType
from pyggml.errors import AllocationError
from pyggml.tensor import Tensor


class TestBufferType(HostBufferType):
    """Host memory; `alloc_buffer` fails once `fail_after` buffers were made; `pad` bytes are added to every
    tensor's alloc size; `made` lists the size of every buffer allocated."""

    __test__ = False  # not a pytest class

    def __init__(self, name: str = "test", *, alignment: int = 32, max_size: int = 1 << 62, pad: int = 0,
                 fail_after: int | None = None) -> None:
        super().__init__(name, alignment=alignment)
        self._max_size = max_size
        self.pad = pad
        self.fail_after = fail_after
        self.made: list[int] = []

    @property
    def max_size(self) -> int:
        return self._max_size

    def alloc_size(self, tensor: Tensor) -> int:
        return tensor.nbytes() + self.pad

    def alloc_buffer(self, size: int) -> HostBuffer:
        if self.fail_after is not None and len(self.made) >= self.fail_after:
            raise AllocationError(f"{self.name}: out of memory (test) for {size} bytes")
        self.made.append(size)
        return super().alloc_buffer(size)
