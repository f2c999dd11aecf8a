"""alloc_ctx_tensors (ggml_backend_alloc_ctx_tensors_from_buft): one linear allocation of every unallocated
tensor of a no_alloc context (weights, KV caches), in creation order, split over several buffers when the
buffer type's max size would be exceeded."""

from __future__ import annotations

import logging

from pyggml.alloc.buffers import MultiBuffer
from pyggml.alloc.tensor_alloc import align_up
from pyggml.backend.protocol import Buffer, BufferType, BufferUsage
from pyggml.context import Context, init_view
from pyggml.errors import AllocationError
from pyggml.tensor import Tensor

log = logging.getLogger(__name__)

Range = tuple[list[tuple[Tensor, int]], int]
"""Tensors with their offsets, and the buffer size, of one buffer to allocate."""


def plan_ranges(tensors: list[Tensor], buft: BufferType) -> list[Range]:
    """Pack tensors linearly (each padded to the alignment), starting a new buffer when the next tensor would
    push the current one past max_size. A tensor bigger than max_size on its own is an AllocationError."""
    alignment, max_size = buft.alignment, buft.max_size
    ranges: list[Range] = []
    cur: list[tuple[Tensor, int]] = []
    cur_size = 0
    for t in tensors:
        size = align_up(buft.alloc_size(t), alignment)
        if size > max_size:
            raise AllocationError(
                f"tensor '{t.name}' ({t.type} ne={list(t.ne)}) needs {size} bytes, more than the maximum buffer "
                f"size {max_size} of buffer type '{buft.name}'"
            )
        if cur_size > 0 and cur_size + size > max_size:
            ranges.append((cur, cur_size))
            cur, cur_size = [], 0
        cur.append((t, cur_size))
        cur_size += size
    if cur:
        ranges.append((cur, cur_size))  # (only zero-size tensors: one empty buffer, so they are placed too)
    return ranges


def alloc_ctx_tensors(ctx: Context, buft: BufferType, usage: BufferUsage = BufferUsage.WEIGHTS) -> Buffer | None:
    """Allocate every tensor of `ctx` that has no buffer and is not a view in new buffers of `buft`, then
    initialise the context's views. Returns None when nothing needed memory, the buffer when one was enough,
    else a MultiBuffer over them. All-or-nothing: on error no tensor is placed and nothing stays allocated."""
    if not ctx.no_alloc:
        raise AllocationError("alloc_ctx_tensors needs a no_alloc context; this one holds its own memory")
    todo = [t for t in ctx if t.view_src is None and t.buffer is None]
    views = [t for t in ctx if t.view_src is not None and t.buffer is None]
    placed = {id(t) for t in todo}
    for v in views:
        owner = v.view_src
        assert owner is not None
        if owner.buffer is None and id(owner) not in placed:
            raise AllocationError(
                f"view '{v.name}' of '{owner.name}': the data owner is not in this context and has no buffer"
            )
    ranges = plan_ranges(todo, buft)
    bufs: list[Buffer] = []
    try:
        for _, size in ranges:
            bufs.append(buft.alloc_buffer(size))
    except Exception as e:
        for b in bufs:
            b.free()
        need = ranges[len(bufs)][1]
        raise AllocationError(f"cannot allocate a {need}-byte buffer of buffer type '{buft.name}' ({e})") from e
    for buf, (items, _) in zip(bufs, ranges, strict=True):
        buf.usage = usage
        for t, offset in items:
            t.buffer = buf
            t.offset = offset
            buf.init_tensor(t)
    for v in views:
        init_view(v)
    log.debug("alloc_ctx_tensors: %d tensors in %d buffers of '%s' (%s bytes)", len(todo), len(bufs),
              buft.name, [b.size for b in bufs])
    if not bufs:
        return None
    return bufs[0] if len(bufs) == 1 else MultiBuffer(bufs)
