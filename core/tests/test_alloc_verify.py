"""verify_allocation catches what a broken allocator would do."""

from __future__ import annotations

import pytest

import pyggml as gg
from pyggml import ops
from pyggml.alloc import GraphAllocator, verify_allocation
from pyggml.errors import AllocationError
from pyggml.tensor import Tensor
from pyggml_testing.buffers import TestBufferType


def _placed() -> tuple[gg.Graph, list[Tensor]]:
    ctx = gg.Context(no_alloc=True)
    with ctx:
        a = ctx.new_tensor(gg.F32, 8, 4, name="a").set_input()
        b = ops.sin(a).set_name("b")
        c = ops.sin(b).set_name("c")
        d = ops.reshape(ops.sin(c), 32).set_name("d")
        g = gg.build_graph(ops.add(ops.reshape(a, 32), d).set_name("out"))
    GraphAllocator(TestBufferType()).alloc_graph(g)
    verify_allocation(g)
    return g, [a, b, c, d]


def test_a_placed_graph_and_a_context_with_memory_pass() -> None:
    _placed()
    ctx = gg.Context(1 << 16)
    a = ctx.new_tensor(gg.F32, 8, 4)
    verify_allocation(gg.build_graph(ops.sin(ops.add(a, a, inplace=True))))


def test_overlap_of_live_tensors_is_reported() -> None:
    g, (a, _, c, _) = _placed()
    c.offset = a.offset                          # a is read again by the last node
    with pytest.raises(AllocationError, match=r"'a'.*overlaps 'c'|'c'.*overlaps 'a'"):
        verify_allocation(g)


def test_outputs_live_to_the_end() -> None:
    ctx = gg.Context(no_alloc=True)
    with ctx:
        a = ctx.new_tensor(gg.F32, 8, 4, name="a")
        b = ops.sin(a).set_name("b")
        c = ops.sin(b).set_name("c")
        e = ops.sin(ops.sin(c)).set_name("e")
        g = gg.build_graph(e)
    GraphAllocator(TestBufferType()).alloc_graph(g)
    late = g.nodes[2]
    assert late.offset == b.offset               # b was dead by then
    verify_allocation(g)
    b.set_output()                               # now b must survive the whole graph
    with pytest.raises(AllocationError, match=r"'node_2'.*overlaps 'b'.*steps 0..4"):
        verify_allocation(g)


def test_misaligned_outside_unplaced_and_displaced_views() -> None:
    g, (a, b, _, d) = _placed()
    buf = a.buffer
    assert buf is not None
    b.offset += 4
    with pytest.raises(AllocationError, match="not aligned to 32"):
        verify_allocation(g)
    b.offset = buf.size - 32
    with pytest.raises(AllocationError, match="outside its buffer"):
        verify_allocation(g)
    g, (a, b, _, d) = _placed()
    d.offset += 4
    with pytest.raises(AllocationError, match=r"view 'd'.*its source"):
        verify_allocation(g)
    g, (a, b, _, d) = _placed()
    b.buffer = None
    with pytest.raises(AllocationError, match=r"'b'.*has no buffer"):
        verify_allocation(g)
