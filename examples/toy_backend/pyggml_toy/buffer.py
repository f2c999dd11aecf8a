"""Buffer type and buffer of the toy backend.

The buffer is the part every plugin writes for its memory: `write(offset, data)` and `read(offset, size)` move
bytes as numpy uint8 arrays, and `free()` makes every later use a clear `AllocationError`. The toy's memory is a
numpy array private to the buffer (`is_host` is False), so pyggml reaches it only through these methods, as it
would a GPU's. Core's `pyggml.backend.host.ArrayBuffer` is such a buffer over one numpy array (byte I/O checked
against the buffer's bounds, refused after free), so the toy derives from it and adds only its memory budget. A
plugin over a driver derives from `pyggml.backend.protocol.Buffer` instead and writes `write`, `read` and `free`
(and `fill`, `copy_from` where the driver does better than the defaults) with the driver's calls, as ArrayBuffer
does with numpy's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from pyggml.backend.accounting import check_size
from pyggml.backend.host import ArrayBuffer
from pyggml.backend.protocol import BufferType

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


class ToyBuffer(ArrayBuffer):
    """`array`: the whole buffer (for the kernels); AllocationError once freed. Its size counts against the
    device's memory budget until `free()`."""

    def __init__(self, buft: ToyBufferType, size: int) -> None:
        super().__init__(buft, np.empty(size, dtype=np.uint8))
        self._untrack = buft.dev.allocations.track(self, size)

    def free(self) -> None:
        if not self.freed:
            super().free()
            self._untrack()
