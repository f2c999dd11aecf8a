"""Host buffers under misuse (issues 19 and 33): free() releases the memory at once and later use raises, but waits
for a compute holding the buffer; sizes below zero or beyond the machine's memory are refused; Context(mem_size=-1)
is refused; a mapped file that shrank is refused before its mapping is read."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import pyggml as gg
from pyggml import ops
from pyggml.backend.host import ArrayBuffer, HostBufferType, MappedFile, hold_buffers, release_buffers
from pyggml.backend.sysinfo import host_memory
from pyggml.errors import AllocationError, PyGGMLError
from pyggml.graph import build_graph
from pyggml.reference.backend import NumpyRegistry


def test_free_releases_and_later_use_raises() -> None:
    buf = HostBufferType("t").alloc_buffer(1 << 20)
    buf.write(0, np.ones(16, np.uint8))
    buf.free()
    assert buf.freed
    for use in (lambda: buf.read(0, 4), lambda: buf.write(0, np.zeros(4, np.uint8)), buf.host_array,
                lambda: buf.fill(0, 4, 0)):
        with pytest.raises(AllocationError, match="used after free"):
            use()
    buf.free()  # a second free does nothing


def test_compute_on_a_freed_buffer_raises() -> None:
    be = NumpyRegistry().devices()[0].init_backend()
    ctx = gg.Context(mem_size=1 << 16)
    a = ctx.new_tensor("f32", 8)
    a.set(np.ones(8, np.float32))
    g = build_graph(ops.scale(a, 2.0))
    assert ctx.buffer is not None
    ctx.buffer.free()
    with pytest.raises(PyGGMLError, match="used after free"):  # a ComputeError naming the node
        be.graph_compute(g)


@pytest.mark.parametrize("offset,size", [(-1, 4), (0, -1), (14, 4), (17, 0)])
def test_byte_io_outside_the_buffer_is_refused(offset: int, size: int) -> None:
    buf = HostBufferType("t").alloc_buffer(16)
    uses = [lambda: buf.read(offset, size), lambda: buf.fill(offset, size, 0),
            lambda: buf.copy_from(buf, 0, offset, size)]
    if size >= 0:
        uses.append(lambda: buf.write(offset, np.zeros(size, np.uint8)))
    for use in uses:
        with pytest.raises(AllocationError, match=r"^t: bytes .* are outside the buffer of 16 bytes"):
            use()


def test_array_buffer_memory_is_private() -> None:
    """An ArrayBuffer (a device's own memory) has no host array: copies into it and out of it go through the host."""
    buft = HostBufferType("h")
    host, dev = buft.alloc_buffer(8), ArrayBuffer(buft, np.zeros(8, np.uint8))
    host.write(0, np.arange(8, dtype=np.uint8))
    assert dev.host_array() is None and not dev.copy_from(host, 0, 0, 8)
    dev.write(0, host.read(0, 8))
    assert not host.copy_from(dev, 0, 0, 8) and dev.read(2, 3).tolist() == [2, 3, 4]


@pytest.mark.parametrize("size", [-1, -(1 << 40), 1.5, "8"])
def test_bad_sizes_are_refused(size: object) -> None:
    with pytest.raises(AllocationError, match=r"^t: "):
        HostBufferType("t").alloc_buffer(size)  # type: ignore[arg-type]


def test_sizes_beyond_the_machine_are_refused() -> None:
    total = host_memory()[1]
    with pytest.raises(AllocationError, match="exceeds the device's total memory"):
        HostBufferType("t").alloc_buffer(total + 1)


@pytest.mark.parametrize("mem_size", [-1, 1.5])
def test_context_with_a_bad_mem_size_is_refused(mem_size: object) -> None:
    with pytest.raises(AllocationError, match="mem_size"):
        gg.Context(mem_size=mem_size)  # type: ignore[arg-type]
    with pytest.raises(AllocationError, match="mem_size"):
        gg.Context(mem_size=mem_size, no_alloc=True)  # type: ignore[arg-type]


def test_free_returns_the_memory_without_the_garbage_collector() -> None:
    """Host buffers were returned only by the cyclic GC (RSS 129 -> 905 MiB over 30 loops); free() does nothing
    any more: the array goes with it, even while a reference cycle still holds the buffer object."""
    import gc
    import weakref

    gc.disable()
    try:
        buf = HostBufferType("t").alloc_buffer(1 << 20)
        base = buf.array.base if buf.array.base is not None else buf.array
        alive = weakref.ref(base)
        cycle: list[object] = [buf]
        cycle.append(cycle)  # the buffer stays reachable only through a cycle, as tensors <-> context
        del base
        buf.free()
        assert alive() is None
        del cycle, buf
    finally:
        gc.enable()


def test_free_waits_for_a_compute_holding_the_buffer() -> None:
    """What the cpu backend relies on (issue 33): C reads a held buffer by address, so a free from another thread
    waits until the hold ends; new holds and uses are refused from the moment free() is called."""
    buf = HostBufferType("t").alloc_buffer(64)
    held = hold_buffers([buf, buf])
    done = threading.Event()

    def free() -> None:
        buf.free()
        done.set()

    t = threading.Thread(target=free)
    t.start()
    time.sleep(0.1)
    assert not done.is_set(), "free() did not wait for the holds"
    assert buf.freed
    with pytest.raises(AllocationError, match="used after free"):
        hold_buffers([buf])
    release_buffers(held[:1])
    time.sleep(0.05)
    assert not done.is_set(), "free() did not wait for the second hold"
    release_buffers(held[1:])
    t.join(10)
    assert done.is_set() and buf.freed and buf.address == 0
    buf.free()  # a second free does nothing


def test_free_by_the_holding_thread_raises_instead_of_deadlocking() -> None:
    buf = HostBufferType("t").alloc_buffer(64)
    held = hold_buffers([buf])
    with pytest.raises(AllocationError, match="freed by the thread whose running compute uses it"):
        buf.free()
    release_buffers(held)
    buf.free()
    assert buf.freed


def test_a_hold_that_fails_releases_what_it_took() -> None:
    a, b = HostBufferType("a").alloc_buffer(8), HostBufferType("b").alloc_buffer(8)
    b.free()
    with pytest.raises(AllocationError, match=r"^b: .*used after free"):
        hold_buffers([a, b])
    a.free()  # not held: returns at once
    assert a.freed


def test_a_mapped_file_that_shrank_is_refused(tmp_path: Path) -> None:
    """A page of a mapping past the end of a truncated file raises SIGBUS when read (issue 33): a buffer guarded
    by its MappedFile raises the guard's error instead, for holds and byte access alike."""
    path = tmp_path / "weights.bin"
    path.write_bytes(bytes(range(256)) * 64)
    arr = np.memmap(path, dtype=np.uint8, mode="r")
    mf = MappedFile.open(path, arr.size)
    buf = HostBufferType("h").wrap(np.asarray(arr).reshape(-1), guard=mf.check)
    release_buffers(hold_buffers([buf]))
    assert buf.read(0, 4).tolist() == [0, 1, 2, 3]
    os.truncate(path, 100)
    for use in (lambda: hold_buffers([buf]), lambda: buf.read(0, 4), buf.host_array):
        with pytest.raises(AllocationError, match=r"weights\.bin: the file is now 100 bytes, shorter than the 16384"):
            use()
    mf.close()
