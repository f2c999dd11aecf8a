"""Memory bookkeeping for device plugins whose driver cannot say how much memory is free: the bytes a device's live
buffers hold, and the error an allocation that fails raises."""

from __future__ import annotations

import operator
import threading
import weakref
from collections.abc import Callable

from pyggml.backend.protocol import Device
from pyggml.errors import AllocationError


class AllocationTally:
    """Bytes held by one device's live buffers: a buffer counts from `track()` until it is garbage collected.

    Thread-safe and re-entrant: the decrement runs from the buffer's finalizer, which garbage collection may call
    on any thread in the middle of anything, including an increment of this tally on the same thread (a plain lock
    deadlocked a conformance worker that way)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._bytes = 0

    @property
    def bytes(self) -> int:
        return self._bytes

    def track(self, buffer: object, size: int) -> Callable[[], object]:
        """Count `size` bytes until `buffer` is garbage collected, or until the returned callable is called (by the
        buffer's `free()`; only the first of the two counts)."""
        self._add(size)
        return weakref.finalize(buffer, self._add, -size)

    def memory(self, total: int) -> tuple[int, int]:
        """A device's `memory()` when it has `total` bytes: (what the live buffers leave of it, never negative,
        total)."""
        return max(total - self._bytes, 0), total

    def _add(self, size: int) -> None:
        with self._lock:
            self._bytes += size


def check_size(name: str, size: object, total: int | None = None) -> int:
    """A buffer size as asked of `name`'s alloc_buffer: an integer >= 0 and, when the device's total memory is known,
    at most that; else AllocationError naming the buffer type and the size."""
    try:
        n = operator.index(size)  # type: ignore[arg-type]
    except TypeError:
        raise AllocationError(f"{name}: a buffer size must be an integer, got {size!r}") from None
    if n < 0:
        raise AllocationError(f"{name}: negative buffer size {n}")
    if total is not None and total > 0 and n > total:
        raise AllocationError(f"{name}: a buffer of {n} bytes exceeds the device's total memory of {total} bytes")
    return n


def alloc_error(dev: Device, size: int, why: str) -> AllocationError:
    """The error of a failed buffer allocation on `dev`: names the device and the size."""
    return AllocationError(f"{dev.name} ({dev.description}): cannot allocate a buffer of {size} bytes: {why}")
