"""MultiBuffer: several buffers of one buffer type seen as one (ggml's multi-buffer).

Tensors always live in one of the parts (their `buffer` is the part); the MultiBuffer is what an allocation
that needed more than one buffer returns: its size is the sum, and usage, clear and free apply to every part.
Byte I/O by offset addresses the parts laid end to end.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from pyggml.backend.protocol import Buffer, BufferUsage, Bytes
from pyggml.errors import AllocationError


class PartedBuffer(Buffer):
    """A buffer made of other buffers that it owns (`parts`: a MultiBuffer's pieces laid end to end, a meta
    buffer's one part per device): clearing or freeing it clears or frees every part."""

    parts: list[Buffer]

    def clear(self, value: int = 0) -> None:
        for p in self.parts:
            p.clear(value)

    def free(self) -> None:
        for p in self.parts:
            p.free()


class MultiBuffer(PartedBuffer):
    def __init__(self, parts: Sequence[Buffer]) -> None:
        if not parts:
            raise AllocationError("a MultiBuffer needs at least one buffer")
        self.parts = list(parts)
        usage = self.parts[0].usage
        super().__init__(self.parts[0].buft, sum(p.size for p in self.parts))
        self.usage = usage

    @property
    def usage(self) -> BufferUsage:
        return self.parts[0].usage

    @usage.setter
    def usage(self, value: BufferUsage) -> None:
        for p in self.parts:
            p.usage = value

    def _spans(self, offset: int, size: int) -> Iterator[tuple[Buffer, int, int, int]]:
        """(part, offset in part, bytes, offset in the request) covering [offset, offset + size)."""
        if offset < 0 or size < 0 or offset + size > self.size:
            raise AllocationError(f"range [{offset}, {offset + size}) is outside {self!r}")
        base = 0
        done = 0
        for p in self.parts:
            lo = max(offset + done, base)
            hi = min(offset + size, base + p.size)
            if lo < hi:
                yield p, lo - base, hi - lo, lo - offset
                done = hi - offset
            base += p.size

    def write(self, offset: int, data: Bytes) -> None:
        for p, o, n, at in self._spans(offset, data.size):
            p.write(o, data[at : at + n])

    def read(self, offset: int, size: int) -> Bytes:
        out = np.empty(size, dtype=np.uint8)
        for p, o, n, at in self._spans(offset, size):
            out[at : at + n] = p.read(o, n)
        return out

    def fill(self, offset: int, size: int, value: int) -> None:
        for p, o, n, _ in self._spans(offset, size):
            p.fill(o, n, value)

    def __repr__(self) -> str:
        return f"<MultiBuffer {self.buft.name} {self.size} bytes in {len(self.parts)} parts>"
