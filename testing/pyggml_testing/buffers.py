"""A host buffer type with a chosen alignment, max size and alloc-size padding that can be told to fail: for
tests of the allocators (and of whatever builds on them) without a device; and the checks the plugins run of a buffer
freed under a graph: used after its free, and freed from another thread during a compute."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from pyggml.backend.host import HostBuffer, HostBufferType
from pyggml.backend.protocol import Backend, Buffer
from pyggml.errors import AllocationError
from pyggml.graph import Graph
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


def check_use_after_free(backend: Backend, graph: Graph, out: Tensor, buf: Buffer) -> None:
    """buf, which holds graph (computed at least once, so a backend may have cached raw addresses of it), freed:
    computing graph and reading out raise AllocationError ("used after free") instead of reaching freed memory, and
    a second free does nothing."""
    buf.free()
    with pytest.raises(AllocationError, match="used after free"):
        backend.graph_compute(graph)
    with pytest.raises(AllocationError, match="used after free"):
        out.numpy()
    buf.free()


def check_free_during_compute(backend: Backend, placed: Callable[[], tuple[Graph, Buffer]], rounds: int = 10) -> None:
    """A buffer freed from another thread while an async compute on it runs: the free waits for the device's work
    (the thread ends within 30 s, no crash), and the graph is then refused as used after free. placed() makes a
    fresh graph and the buffer holding it for each round (several rounds: the race lands differently each time)."""
    for _ in range(rounds):
        g, buf = placed()
        t = threading.Thread(target=buf.free)
        backend.graph_compute_async(g)
        t.start()
        backend.synchronize()
        t.join(30)
        assert not t.is_alive()
        with pytest.raises(AllocationError, match="used after free"):
            backend.graph_compute(g)
