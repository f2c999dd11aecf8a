"""Host memory buffers shared by every CPU-side backend (numpy reference, cpu plugin, blas).

An ArrayBuffer keeps its memory in one numpy uint8 array that only its methods reach (the "device memory" of the
toy backend or of a test's fake device). A HostBuffer is an ArrayBuffer over one aligned array that the host may
address: `host_array()` gives zero-copy access, so a tensor in host memory can be viewed by numpy
(`Tensor.element_view`) or passed to C by address (`HostBuffer.address`).

Code that hands a host buffer's memory to C by address, where no numpy reference keeps it alive (the cpu plugin's
kernels), holds the buffer for as long as C runs (`hold_buffers`): a `free()` from another thread then waits for it,
and a freed buffer is refused before C is reached. A buffer over a memory-mapped file can carry a guard
(`MappedFile.check`) that such holds and every access run first: it refuses the memory once the file shrank under
the mapping, where reading it would kill the process with SIGBUS.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from threading import get_ident

import numpy as np

from pyggml.backend.protocol import Buffer, BufferType, Bytes, Device
from pyggml.errors import AllocationError, PyGGMLError

HOST_ALIGNMENT = 64

_holds = threading.Lock()
"""Guards every array buffer's hold list (one lock for all: a compute takes it once for all its buffers)."""
_released = threading.Condition(_holds)
"""Notified when holds end while a free() waits."""
_waiting_frees = [0]
"""free() calls waiting for holds to end (release notifies only then)."""


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
    theirs alive; a compute holding the buffer, `hold_buffers`, is waited for), any later use raises AllocationError,
    and a second free does nothing. `guard` (optional) runs before every use and raises where the memory went bad
    (a mapped file that shrank: `MappedFile.check`)."""

    def __init__(self, buft: BufferType, array: Bytes, guard: Callable[[], None] | None = None) -> None:
        super().__init__(buft, array.size)
        self._array: Bytes | None = array
        self.guard = guard
        self._holders: list[int] = []
        """The thread id of each hold (`hold_buffers`) of the memory; free() waits while there are any."""

    def _used_after_free(self) -> AllocationError:
        return AllocationError(f"{self.buft.name}: buffer of {self.size} bytes used after free")

    @property
    def array(self) -> Bytes:
        arr = self._array
        if arr is None:
            raise self._used_after_free()
        if self.guard is not None:
            self.guard()
        return arr

    @property
    def freed(self) -> bool:
        return self._array is None

    def acquire(self) -> None:
        """Hold the memory until `release()` (`hold_buffers` of this buffer alone)."""
        hold_buffers((self,))

    def release(self) -> None:
        """End one hold of this thread."""
        release_buffers((self,))

    def free(self) -> None:
        """Drop the memory: at once for every new use (it raises AllocationError), and once no compute holds it
        (one on another thread is waited for). AllocationError when the calling thread itself holds it (a custom
        op's callable freeing a buffer its graph runs on)."""
        with _holds:
            if get_ident() in self._holders:
                raise AllocationError(f"{self.buft.name}: buffer of {self.size} bytes freed by the thread whose "
                                      "running compute uses it; free it after the compute")
            arr, self._array = self._array, None  # kept alive here until the holders are done
            if self._holders:
                _waiting_frees[0] += 1
                try:
                    while self._holders:
                        _released.wait()
                finally:
                    _waiting_frees[0] -= 1
        del arr

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
    """Host memory: an ArrayBuffer whose array numpy and C may address directly (`host_array()`, `address`: C holds
    the buffer while it runs, `hold_buffers`), and which copies from any buffer that has a host array."""

    def __init__(self, buft: BufferType, array: Bytes, guard: Callable[[], None] | None = None) -> None:
        super().__init__(buft, array, guard)
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

    def wrap(self, array: Bytes, guard: Callable[[], None] | None = None) -> HostBuffer:
        """A buffer over existing memory (an mmap of a GGUF file, say) without copying; `guard`: run before every
        use of the memory (`MappedFile.check` for a mapping)."""
        if array.dtype != np.uint8 or array.ndim != 1:
            raise AllocationError("host buffers wrap 1-D uint8 arrays")
        return HostBuffer(self, array, guard)


def hold_buffers(buffers: Iterable[Buffer]) -> list[ArrayBuffer]:
    """Hold every array buffer among `buffers` (a plan's distinct buffers) for work that reaches their memory by
    address, until `release_buffers(held)` on the same thread: a `free()` meanwhile waits. Any other buffer is only
    checked not freed. All or nothing: AllocationError ("used after free") for a freed buffer, or a guard's error
    (`MappedFile.check`), and then none is held. Returns the held buffers."""
    held: list[ArrayBuffer] = []
    for b in buffers:
        if isinstance(b, ArrayBuffer):
            if b.guard is not None:
                b.guard()
            held.append(b)
        elif getattr(b, "freed", False):
            raise AllocationError(f"{b.buft.name}: buffer of {b.size} bytes used after free")
    me = get_ident()
    with _holds:
        for b in held:
            if b._array is None:
                raise b._used_after_free()
        for b in held:
            b._holders.append(me)
    return held


def release_buffers(held: Iterable[ArrayBuffer]) -> None:
    """End the holds `hold_buffers` returned (on the thread that took them)."""
    me = get_ident()
    with _holds:
        for b in held:
            b._holders.remove(me)
        if _waiting_frees[0]:
            _released.notify_all()


class MappedFile:
    """An open descriptor of a file whose bytes [0, `end`) are memory-mapped, kept to check (one fstat) that they
    are all still there: a mapped page past the end of a file that another process truncated raises SIGBUS on
    access, which kills the interpreter. `check()` raises `error` naming the file instead. The check is made
    before each use; a truncation while a compute reads the mapping still crashes, as it does llama.cpp."""

    def __init__(self, path: str | os.PathLike[str], fd: int, end: int,
                 error: type[PyGGMLError] = AllocationError) -> None:
        """Takes ownership of `fd` (closed with this object)."""
        self.path = Path(path)
        self.end = end
        self.error = error
        self._fd = fd
        self._close = weakref.finalize(self, os.close, fd)

    @classmethod
    def open(cls, path: str | os.PathLike[str], end: int, error: type[PyGGMLError] = AllocationError
             ) -> MappedFile:
        return cls(path, os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)), end, error)

    def check(self) -> None:
        """`error` naming the file when it is now shorter than the mapped bytes (or cannot be checked)."""
        try:
            size = os.fstat(self._fd).st_size
        except OSError as e:
            raise self.error(f"{self.path}: cannot check the mapped file: {e}") from e
        if size < self.end:
            raise self.error(f"{self.path}: the file is now {size} bytes, shorter than the {self.end} bytes mapped "
                             "from it: another process truncated or rewrote it after it was loaded (reading the "
                             "mapping would crash with SIGBUS); load it again")

    def stat(self) -> os.stat_result:
        """The mapped file's status (fstat of the kept descriptor: the file mapped, even when another one was renamed
        over its path since); `error` naming the file when it cannot be read."""
        try:
            return os.fstat(self._fd)
        except OSError as e:
            raise self.error(f"{self.path}: cannot check the mapped file: {e}") from e

    def read(self, offset: int, size: int, into: Bytes | None = None) -> Bytes:
        """Bytes [offset, offset + size) of the file (pread on the kept descriptor) into new memory, or into the
        first `size` bytes of `into` (a uint8 array a caller reuses: new memory costs the kernel a page clearing
        per page first), returned; `error` naming the file when it ends before them."""
        if into is not None and into.size < size:
            raise ValueError(f"a {into.size}-byte array cannot take {size} bytes")
        out = np.empty(size, dtype=np.uint8) if into is None else into[:size]
        view, done = out.data, 0
        while done < size:
            n = os.preadv(self._fd, [view[done:]], offset + done)
            if n <= 0:
                raise self.error(f"{self.path}: the file ends {size - done} bytes before byte {offset + size} "
                                 "(truncated since it was loaded?)")
            done += n
        return out

    def close(self) -> None:
        self._close()
