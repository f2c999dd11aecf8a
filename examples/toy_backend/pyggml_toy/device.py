"""The toy device: one device, `Toy0`, with a memory budget; its buffers are in buffer.py, its backend in
backend.py."""

from __future__ import annotations

from pyggml.backend.accounting import AllocationTally
from pyggml.backend.protocol import Backend, BufferType, Device, DeviceCaps, DeviceType, Registry
from pyggml.tensor import Tensor
from pyggml_toy.buffer import TOTAL_MEMORY, ToyBufferType


class ToyDevice(Device):
    def __init__(self, reg: Registry, name: str) -> None:
        super().__init__(reg, name, DeviceType.ACCEL, DeviceCaps())
        self.allocations = AllocationTally()
        self._buft = ToyBufferType(self)

    @property
    def description(self) -> str:
        return "pyggml-toy: ADD, MUL, SCALE of F32 tensors in numpy (an example plugin)"

    def memory(self) -> tuple[int, int]:
        return self.allocations.memory(TOTAL_MEMORY)

    def new_backend(self) -> Backend:
        from pyggml_toy.backend import ToyBackend

        return ToyBackend(self)

    def buffer_type(self) -> BufferType:
        return self._buft

    def supports_op(self, op: Tensor) -> bool:
        from pyggml_toy.backend import supports

        return supports(op)
