"""Memory bookkeeping for device plugins whose driver cannot say how much memory is free: the bytes a device's live
buffers hold, and the error an allocation that fails raises."""

from __future__ import annotations

import threading
import weakref

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

    def track(self, buffer: object, size: int) -> None:
        """Count `size` bytes until `buffer` is garbage collected."""
        self._add(size)
        weakref.finalize(buffer, self._add, -size)

    def free_of(self, total: int) -> int:
        """What is left of `total` bytes of memory (never negative)."""
        return max(total - self._bytes, 0)

    def _add(self, size: int) -> None:
        with self._lock:
            self._bytes += size


def alloc_error(dev: Device, size: int, why: str) -> AllocationError:
    """The error of a failed buffer allocation on `dev`: names the device and the size."""
    return AllocationError(f"{dev.name} ({dev.description}): cannot allocate a buffer of {size} bytes: {why}")
