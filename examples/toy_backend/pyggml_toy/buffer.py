"""Buffer type and buffer of the toy backend.

The buffer is the part every plugin writes for its memory: `write(offset, data)` and `read(offset, size)` move
bytes as numpy uint8 arrays, and `free()` makes every later use a clear `AllocationError`. The toy's memory is a
numpy array private to the buffer (`is_host` is False), so pyggml reaches it only through these methods, as it
would a GPU's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from pyggml.backend.accounting import check_size
from pyggml.backend.protocol import Buffer, BufferType, Bytes
from pyggml.errors import AllocationError

if TYPE_CHECKING:
    from pyggml_toy.device import ToyDevice

TOTAL_MEMORY = 1 << 30
"""What the toy device reports as its memory (it allocates host RAM; the budget keeps `memory()` meaningful)."""


class ToyBufferType(BufferType):
    def __init__(self, dev: ToyDevice) -> None:
        super().__init__(dev.name, dev)
        self.dev = dev

    def alloc_buffer(self, size: int) -> ToyBuffer:
        size = check_size(self.name, size, TOTAL_MEMORY)
        return ToyBuffer(self, size)


class ToyBuffer(Buffer):
    def __init__(self, buft: ToyBufferType, size: int) -> None:
        super().__init__(buft, size)
        self._mem: Bytes | None = np.empty(size, dtype=np.uint8)
        self._untrack: Callable[[], object] = buft.dev.allocations.track(self, size)

    @property
    def memory(self) -> Bytes:
        """The whole buffer (for the kernels); AllocationError once freed."""
        mem = self._mem
        if mem is None:
            raise AllocationError(f"{self.buft.name}: buffer of {self.size} bytes used after free")
        return mem

    def _range(self, offset: int, size: int) -> slice:
        if offset < 0 or size < 0 or offset + size > self.size:
            raise AllocationError(f"{self.buft.name}: bytes [{offset}, {offset + size}) are outside the buffer of "
                                  f"{self.size} bytes")
        return slice(offset, offset + size)

    def write(self, offset: int, data: Bytes) -> None:
        self.memory[self._range(offset, data.size)] = data

    def read(self, offset: int, size: int) -> Bytes:
        return self.memory[self._range(offset, size)].copy()

    def fill(self, offset: int, size: int, value: int) -> None:
        self.memory[self._range(offset, size)] = value

    def free(self) -> None:
        if self._mem is not None:
            self._mem = None
            self._untrack()
