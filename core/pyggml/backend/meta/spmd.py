"""The meta device across processes (SPMD): every process builds the same meta device, but only its own devices
are real; the others' places are held by `PeerDevice`s, placeholders that take no memory and compute nothing.

Each process then runs the same graphs on its real devices, holds only its slices of every split tensor (a peer's
buffer is only a size: writes to it are skipped, its pages are never touched), and the `Communicator` sums the
partial results across processes (an MPI communicator: `pyggml.backend.meta.mpi`). Reading a split tensor gathers
the slices of every process (`Spmd.combine`: each process fills its own chunks, zeros elsewhere, and an OR across
processes joins them); reading a MIRRORED one reads a local device.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from pyggml.backend.protocol import Backend, Buffer, BufferType, Bytes, Device, DeviceCaps, Registry
from pyggml.tensor import Tensor

if TYPE_CHECKING:
    from pyggml.graph import Graph


@dataclass(frozen=True)
class Spmd:
    """Which devices of a meta device are this process's, and how to join byte arrays across processes."""

    local: frozenset[int]
    combine: Callable[[np.ndarray], None]
    """OR a uint8 array, in place, with every other process's (each holds non-zero bytes only where it has data)."""

    def is_local(self, j: int) -> bool:
        return j in self.local


class PeerRegistry(Registry):
    name = "peer"

    def devices(self) -> list[Device]:
        return []


class PeerDevice(Device):
    """Another process's device, modelled on this process's device `like` (the same kind on every rank): it
    answers support, alignment and limits as `like` does, and holds and computes nothing."""

    def __init__(self, like: Device, rank: int) -> None:
        super().__init__(PeerRegistry(), f"{like.name}@rank{rank}", like.type, DeviceCaps(async_ops=True))
        self.like = like
        self.rank = rank
        self._buft = PeerBufferType(self)

    @property
    def description(self) -> str:
        return f"{self.like.name} of rank {self.rank}"

    def memory(self) -> tuple[int, int]:
        return self.like.memory()

    def new_backend(self) -> Backend:
        return PeerBackend(self)

    def buffer_type(self) -> BufferType:
        return self._buft

    def supports_op(self, op: Tensor) -> bool:
        return self.like.supports_op(op)

    def supports_buft(self, buft: BufferType) -> bool:
        return buft is self._buft


class PeerBufferType(BufferType):
    def __init__(self, dev: PeerDevice) -> None:
        super().__init__(f"peer({dev.name})", dev)
        self._like = dev.like.buffer_type()

    @property
    def alignment(self) -> int:
        return self._like.alignment

    @property
    def max_size(self) -> int:
        return self._like.max_size

    def alloc_size(self, tensor: Tensor) -> int:
        return self._like.alloc_size(tensor)

    def alloc_buffer(self, size: int) -> Buffer:
        return PeerBuffer(self, size)


class PeerBuffer(Buffer):
    """A size without memory: writes are dropped, reads give zeros (the combine step fills in the owner's
    bytes)."""

    def write(self, offset: int, data: Bytes) -> None:
        pass

    def read(self, offset: int, size: int) -> Bytes:
        return np.zeros(size, dtype=np.uint8)

    def fill(self, offset: int, size: int, value: int) -> None:
        pass


class PeerBackend(Backend):
    """Another process's stream: its work is done there."""

    def graph_compute(self, graph: Graph) -> None:
        pass
