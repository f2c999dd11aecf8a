"""Registry, device, buffer type and buffer of the toy backend.

The buffer is the part every plugin writes for its memory: `write(offset, data)` and `read(offset, size)` move
bytes as numpy uint8 arrays, and `free()` makes every later use a clear `AllocationError`. The toy's memory is a
numpy array private to the buffer (`is_host` is False), so pyggml reaches it only through these methods, as it
would a GPU's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from pyggml.backend.accounting import AllocationTally, check_size
from pyggml.backend.protocol import Backend, Buffer, BufferType, Bytes, Device, DeviceCaps, DeviceType, LazyRegistry
from pyggml.errors import AllocationError
from pyggml.tensor import Tensor

TOTAL_MEMORY = 1 << 30
"""What the toy device reports as its memory (it allocates host RAM; the budget keeps `memory()` meaningful)."""


class ToyRegistry(LazyRegistry):
    def __init__(self) -> None:
        super().__init__("Toy")

    def _enumerate(self) -> Sequence[Device]:
        return [ToyDevice(self, "Toy0")]


class ToyDevice(Device):
    def __init__(self, reg: ToyRegistry, name: str) -> None:
        super().__init__(reg, name, DeviceType.ACCEL, DeviceCaps())
        self.allocations = AllocationTally()
        self._buft = ToyBufferType(self)

    @property
    def description(self) -> str:
        return "pyggml-toy: ADD, MUL, SCALE of F32 tensors in numpy (an example plugin)"

    def memory(self) -> tuple[int, int]:
        return self.allocations.free_of(TOTAL_MEMORY), TOTAL_MEMORY

    def init_backend(self, params: str | None = None) -> Backend:
        from pyggml_toy.backend import ToyBackend

        if params:
            raise ValueError(f"{self.name}: the toy backend takes no parameters, got {params!r}")
        return ToyBackend(self)

    def buffer_type(self) -> BufferType:
        return self._buft

    def supports_op(self, op: Tensor) -> bool:
        from pyggml_toy.backend import supports

        return supports(op)


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
