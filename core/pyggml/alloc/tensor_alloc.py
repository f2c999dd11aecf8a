"""Dynamic tensor allocator (ggml's dyn_tallocr): plans offsets inside up to MAX_CHUNKS chunks of one buffer
type. Nothing is allocated here; each chunk only records its free blocks and its high-water mark (`max_size`),
which later sizes that chunk's backend buffer.

Policy, per aligned request:
1. best fit among every chunk's free blocks except each chunk's last block (smallest block that fits over all
   chunks; ties go to the later block);
2. else the last block of some chunk, choosing by the leftover inside already committed space
   (``reuse = chunk.max_size - block.offset - size``): the smallest non-negative reuse wins, else the least
   growth;
3. else a new chunk.
Freed ranges merge with their neighbours. See docs/allocator.md for where this differs from ggml.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from pyggml.errors import AllocationError

log = logging.getLogger(__name__)

MAX_CHUNKS = 16
"""At most this many chunks (backend buffers) per buffer type, as ggml's vbuffer."""
SIZE_MAX_HALF = (1 << 63) - 1
"""ggml caps a chunk at SIZE_MAX / 2 even when the buffer type has no limit."""


def align_up(size: int, alignment: int) -> int:
    return (size + alignment - 1) // alignment * alignment


@dataclass(slots=True)
class Chunk:
    """Free blocks of one chunk, sorted by offset (parallel lists), and the chunk's high-water mark."""

    offsets: list[int] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    max_size: int = 0


class TensorAllocator:
    """Offsets for tensors of one buffer type: `alloc` -> (chunk, offset), `free` gives a range back."""

    def __init__(self, alignment: int, max_size: int, *, max_chunks: int = MAX_CHUNKS, name: str = "") -> None:
        if alignment <= 0 or alignment & (alignment - 1):
            raise AllocationError(f"buffer type '{name}': alignment {alignment} is not a power of two")
        if max_size <= 0:
            raise AllocationError(f"buffer type '{name}': max size {max_size} must be positive")
        self.alignment = alignment
        self.max_chunk_size = min(max_size, SIZE_MAX_HALF)
        self.max_chunks = max_chunks
        self.name = name
        self.chunks: list[Chunk] = []

    def reset(self) -> None:
        """Forget every chunk (start of a new plan)."""
        self.chunks = []

    @property
    def n_chunks(self) -> int:
        return len(self.chunks)

    def chunk_sizes(self) -> list[int]:
        """High-water mark of each chunk: the size its buffer needs."""
        return [c.max_size for c in self.chunks]

    def free_blocks(self, chunk: int) -> list[tuple[int, int]]:
        """(offset, size) of each free block of a chunk, in offset order."""
        c = self.chunks[chunk]
        return list(zip(c.offsets, c.sizes, strict=True))

    # ---- allocation ------------------------------------------------------------------------------------------

    def alloc(self, size: int, what: str = "a tensor") -> tuple[int, int]:
        """Reserve `size` bytes (rounded up to the alignment); returns (chunk, offset). `what` names the request
        in error messages."""
        size = align_up(size, self.alignment)
        if size == 0:
            if not self.chunks:
                self._new_chunk(what, 0)
            return 0, 0
        c, b = self._best_fit(size)
        if c < 0:
            c, b = self._best_last_block(size)
        if c < 0:
            c, b = self._new_chunk(what, size), 0
        chunk = self.chunks[c]
        offset = chunk.offsets[b]
        left = chunk.sizes[b] - size
        if left:
            chunk.offsets[b] = offset + size
            chunk.sizes[b] = left
        else:
            del chunk.offsets[b]
            del chunk.sizes[b]
        if offset + size > chunk.max_size:
            chunk.max_size = offset + size
        return c, offset

    def _best_fit(self, size: int) -> tuple[int, int]:
        best_c = best_b = -1
        best_size = SIZE_MAX_HALF + 1
        for c, chunk in enumerate(self.chunks):
            sizes = chunk.sizes
            for b in range(len(sizes) - 1):
                s = sizes[b]
                if size <= s <= best_size:
                    best_c, best_b, best_size = c, b, s
        return best_c, best_b

    def _best_last_block(self, size: int) -> tuple[int, int]:
        best_c = best_b = -1
        best_reuse: int | None = None
        for c, chunk in enumerate(self.chunks):
            if not chunk.sizes:
                continue
            b = len(chunk.sizes) - 1
            if chunk.sizes[b] < size:
                continue
            reuse = chunk.max_size - chunk.offsets[b] - size
            if best_reuse is None or (best_reuse < 0 and reuse > best_reuse) or 0 <= reuse < best_reuse:
                best_c, best_b, best_reuse = c, b, reuse
        return best_c, best_b

    def _new_chunk(self, what: str, size: int) -> int:
        if size > self.max_chunk_size:
            raise AllocationError(
                f"{what} needs {size} bytes, more than the maximum buffer size {self.max_chunk_size} of buffer "
                f"type '{self.name}'"
            )
        if len(self.chunks) >= self.max_chunks:
            raise AllocationError(
                f"{what} needs {size} bytes but all {self.max_chunks} buffers of buffer type '{self.name}' "
                f"(at most {self.max_chunk_size} bytes each) are full: chunk high-water marks "
                f"{self.chunk_sizes()}"
            )
        self.chunks.append(Chunk([0], [self.max_chunk_size], 0))
        log.debug("%s: new chunk %d for %s (%d bytes)", self.name, len(self.chunks) - 1, what, size)
        return len(self.chunks) - 1

    # ---- free ------------------------------------------------------------------------------------------------

    def free(self, chunk: int, offset: int, size: int) -> None:
        """Give back [offset, offset + size) of a chunk (size rounded up to the alignment), merging it with the
        adjacent free blocks. pyggml keeps any number of free blocks (ggml aborts past 256)."""
        size = align_up(size, self.alignment)
        if size == 0:
            return
        if not 0 <= chunk < len(self.chunks):
            raise AllocationError(f"{self.name}: free of chunk {chunk}, which does not exist")
        c = self.chunks[chunk]
        offs, sizes = c.offsets, c.sizes
        end = offset + size
        for i in range(len(offs)):
            o = offs[i]
            if o + sizes[i] == offset:
                sizes[i] += size
                if i + 1 < len(offs) and offs[i + 1] == end:
                    sizes[i] += sizes[i + 1]
                    del offs[i + 1]
                    del sizes[i + 1]
                return
            if o == end:
                offs[i] = offset
                sizes[i] += size
                if i > 0 and offs[i - 1] + sizes[i - 1] == offset:
                    sizes[i - 1] += sizes[i]
                    del offs[i]
                    del sizes[i]
                return
            if o < end and offset < o + sizes[i]:
                raise AllocationError(
                    f"{self.name}: freeing [{offset}, {end}) of chunk {chunk}, which overlaps the free block "
                    f"[{o}, {o + sizes[i]})"
                )
            if o > offset:
                offs.insert(i, offset)
                sizes.insert(i, size)
                return
        offs.append(offset)
        sizes.append(size)
