"""alloc_ctx_tensors (weights placement) and MultiBuffer."""

from __future__ import annotations

import numpy as np
import pytest

import pyggml as gg
from pyggml import ops
from pyggml.alloc import MultiBuffer, alloc_ctx_tensors
from pyggml.backend.protocol import BufferUsage
from pyggml.errors import AllocationError
from pyggml_testing.buffers import TestBufferType


def _ctx(*sizes: int) -> gg.Context:
    ctx = gg.Context(no_alloc=True)
    for i, n in enumerate(sizes):
        ctx.new_tensor(gg.F32, n, name=f"w{i}")
    return ctx


def test_one_buffer_padded_to_the_alignment_in_creation_order() -> None:
    ctx = _ctx(3, 8, 1)
    buf = alloc_ctx_tensors(ctx, TestBufferType(alignment=32))
    assert buf is not None and not isinstance(buf, MultiBuffer)
    assert buf.size == 96 and buf.usage == BufferUsage.WEIGHTS
    assert [(t.buffer, t.offset) for t in ctx] == [(buf, 0), (buf, 32), (buf, 64)]


def test_splits_at_max_size_into_a_multibuffer() -> None:
    ctx = _ctx(16, 16, 24, 8, 32)                 # 64, 64, 96, 32, 128 bytes
    buft = TestBufferType(alignment=32, max_size=160)
    buf = alloc_ctx_tensors(ctx, buft, usage=BufferUsage.ANY)
    assert isinstance(buf, MultiBuffer)
    assert buft.made == [128, 128, 128]
    t = list(ctx)
    assert [p.size for p in buf.parts] == [128, 128, 128] and buf.size == 384
    assert t[0].buffer is t[1].buffer is buf.parts[0] and (t[0].offset, t[1].offset) == (0, 64)
    assert t[2].buffer is t[3].buffer is buf.parts[1] and (t[2].offset, t[3].offset) == (0, 96)
    assert t[4].buffer is buf.parts[2] and t[4].offset == 0
    buf.usage = BufferUsage.WEIGHTS
    assert all(p.usage == BufferUsage.WEIGHTS for p in buf.parts)
    t[3].set(np.arange(8))
    assert np.array_equal(t[3].numpy(), np.arange(8))
    buf.write(120, np.arange(16, dtype=np.uint8))  # crosses the border between two parts
    assert np.array_equal(buf.read(120, 16), np.arange(16, dtype=np.uint8))
    buf.clear(0)
    assert not buf.read(0, buf.size).any()


def test_views_are_initialised_and_placed_tensors_kept() -> None:
    ctx = gg.Context(no_alloc=True)
    w = ctx.new_tensor(gg.F32, 8, 4, name="w")
    with ctx:
        row = ops.view(w, (8,), offset=32)
    other = gg.Context(no_alloc=True)
    pre = other.new_tensor(gg.F32, 4, name="pre")
    first = alloc_ctx_tensors(other, TestBufferType())
    ctx._tensors.append(pre)                       # a tensor with its own buffer is left where it is
    buf = alloc_ctx_tensors(ctx, TestBufferType())
    assert buf is not None and buf.size == 128
    assert row.buffer is w.buffer and row.offset == w.offset + 32
    assert pre.buffer is first
    assert alloc_ctx_tensors(ctx, TestBufferType()) is None  # nothing left to place


def test_tensor_bigger_than_max_size_names_it_and_changes_nothing() -> None:
    ctx = _ctx(8, 1024, 8)
    buft = TestBufferType("small", alignment=32, max_size=1024)
    with pytest.raises(AllocationError, match=r"'w1'.*4096 bytes.*maximum buffer size 1024.*'small'"):
        alloc_ctx_tensors(ctx, buft)
    assert buft.made == [] and all(t.buffer is None for t in ctx)


def test_failed_buffer_frees_and_places_nothing() -> None:
    ctx = _ctx(8, 8, 8)
    buft = TestBufferType("flaky", max_size=64, fail_after=1)
    with pytest.raises(AllocationError, match="32-byte buffer of buffer type 'flaky'"):
        alloc_ctx_tensors(ctx, buft)
    assert all(t.buffer is None for t in ctx)


def test_bad_contexts() -> None:
    with pytest.raises(AllocationError, match="no_alloc"):
        alloc_ctx_tensors(gg.Context(1024), TestBufferType())
    src = gg.Context(no_alloc=True)
    owner = src.new_tensor(gg.F32, 8, name="owner")
    ctx = gg.Context(no_alloc=True)
    with ctx:
        ops.view(owner, (4,))
    with pytest.raises(AllocationError, match="not in this context"):
        alloc_ctx_tensors(ctx, TestBufferType())
    zero = gg.Context(no_alloc=True)
    z = zero.new_tensor(gg.F32, 0, name="empty")
    buf = alloc_ctx_tensors(zero, TestBufferType())
    assert buf is not None and buf.size == 0 and z.buffer is buf
