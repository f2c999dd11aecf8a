"""GraphAllocator: ggml's liveness rules (free on last use, views keep owners, OUTPUT kept, INPUT first,
in-place reuse), buffers per buffer type, and replay."""

from __future__ import annotations

import numpy as np
import pytest

import pyggml as gg
from pyggml import ops
from pyggml.alloc import GraphAllocator, alloc_ctx_tensors, verify_allocation
from pyggml.alloc import gallocr as gallocr_mod
from pyggml.alloc.plan import MemoryPlanner
from pyggml.backend.protocol import BufferUsage
from pyggml.errors import AllocationError, GraphError
from pyggml.reference.backend import compute_node
from pyggml.tensor import Tensor
from pyggml_testing.buffers import TestBufferType

F32 = gg.F32
SIZE = 128  # an [8, 4] F32 tensor


def leaf(ctx: gg.Context, name: str, *ne: int) -> Tensor:
    return ctx.new_tensor(F32, *(ne or (8, 4)), name=name).set_input()


def sins(x: Tensor, n: int) -> list[Tensor]:
    """sin applied n times in a row to x (an op that never runs in place): [sin x, sin sin x, ...]."""
    chain = []
    for _ in range(n):
        x = ops.sin(x)
        chain.append(x)
    return chain


def run(graph: gg.Graph) -> None:
    for node in graph.nodes:
        compute_node(node)


@pytest.fixture
def planner_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    runs: list[int] = []

    class Counting(MemoryPlanner):
        def run(self):  # type: ignore[no-untyped-def]
            runs.append(1)
            return super().run()

    monkeypatch.setattr(gallocr_mod, "MemoryPlanner", Counting)
    return runs


def test_in_place_chain_uses_one_slot() -> None:
    ctx = gg.Context(no_alloc=True)
    with ctx:
        a = leaf(ctx, "a")
        x = a
        for _ in range(6):
            x = ops.sqr(ops.scale(x, 0.5))
        g = gg.build_graph(x)
    ga = GraphAllocator(TestBufferType())
    assert ga.alloc_graph(g)
    verify_allocation(g)
    assert {t.offset for t in g.nodes} == {a.offset}
    assert ga.buffer_size(0) == SIZE
    a.set(np.full(32, 4.0))                       # (x / 2)^2 keeps 4
    run(g)
    assert np.allclose(x.numpy(), 4.0)


def test_clamp_runs_in_place_as_in_ggml() -> None:
    """ggml's in-place list has CLAMP: clamp(sin(a)) + a needs a and one more slot (three without CLAMP)."""
    ctx = gg.Context(no_alloc=True)
    with ctx:
        a = leaf(ctx, "a")
        c = ops.clamp(ops.sin(a), -0.5, 0.5)
        g = gg.build_graph(ops.add(c, a))
    ga = GraphAllocator(TestBufferType(), placement="ggml", view_inplace=False)
    assert ga.alloc_graph(g)
    verify_allocation(g)
    assert len({t.offset for t in g.nodes}) == 1
    assert ga.buffer_size(0) == 2 * SIZE


def test_ops_that_cannot_run_in_place_ping_pong_between_two_slots() -> None:
    ctx = gg.Context(no_alloc=True)
    with ctx:
        g = gg.build_graph(sins(leaf(ctx, "a"), 5)[-1])
    ga = GraphAllocator(TestBufferType())
    assert ga.alloc_graph(g)
    verify_allocation(g)
    assert [t.offset for t in g.nodes] == [SIZE, 0, SIZE, 0, SIZE]
    assert ga.buffer_size(0) == 2 * SIZE


def test_outputs_are_never_freed_nor_taken_over() -> None:
    ctx = gg.Context(no_alloc=True)
    with ctx:
        a = leaf(ctx, "a")
        kept = ops.sin(a).set_output()
        y = ops.sqr(kept)
        z = ops.sin(ops.sin(y))
        g = gg.build_graph(z)
    ga = GraphAllocator(TestBufferType())
    ga.alloc_graph(g)
    verify_allocation(g)
    assert y.offset != kept.offset
    assert all(t.offset != kept.offset for t in g.nodes if t is not kept)


def test_no_in_place_reuse_of_shared_external_or_reshaped_parents() -> None:
    wctx = gg.Context(no_alloc=True)
    w = wctx.new_tensor(F32, 8, 4, name="w")
    buft = TestBufferType()
    alloc_ctx_tensors(wctx, buft)
    ctx = gg.Context(no_alloc=True)
    with ctx:
        a = leaf(ctx, "a")
        s = ops.sin(a)
        two = ops.add(s, s)                       # s has two consumer slots: no reuse
        ext = ops.sqr(w)                          # w belongs to a weights buffer: no reuse
        m = ops.sin(a)
        perm = ops.scale(ops.cont(ops.transpose(m)), 1.0)
        g = gg.build_graph(ops.add(ops.add(two, ext), ops.transpose(perm)))
    ga = GraphAllocator(buft)
    ga.alloc_graph(g)
    verify_allocation(g)
    assert two.offset != s.offset
    assert ext.buffer is not w.buffer and w.offset == 0
    assert w.buffer is not None and w.buffer.usage == BufferUsage.WEIGHTS


def _view_parent_graph(kind: str) -> tuple[gg.Graph, Tensor, Tensor]:
    ctx = gg.Context(no_alloc=True)
    with ctx:
        a = leaf(ctx, "a", 8, 4)
        owner = ops.sin(a)
        if kind == "reshape":
            v = ops.reshape(owner, 4, 8)
        elif kind == "offset":
            v = ops.view(owner, (16,), offset=64)
        else:
            v = ops.transpose(owner)
        node = ops.rms_norm(v)
        return gg.build_graph(ops.sin(node)), owner, node


@pytest.mark.parametrize(("kind", "view_inplace", "reused"), [
    ("reshape", True, True), ("reshape", False, False), ("offset", True, False), ("transpose", True, False)])
def test_in_place_through_a_view_parent(kind: str, view_inplace: bool, reused: bool) -> None:
    g, owner, node = _view_parent_graph(kind)
    ga = GraphAllocator(TestBufferType(), view_inplace=view_inplace)
    ga.alloc_graph(g)
    verify_allocation(g)
    assert (node.offset == owner.offset) is reused


def test_input_nodes_are_placed_before_anything_is_freed() -> None:
    ctx = gg.Context(no_alloc=True)
    with ctx:
        a = leaf(ctx, "a")
        x = ops.sin(ops.sin(a))
        late = ops.sin(a).set_input()             # its data comes from outside: allocated first
        g = gg.build_graph(ops.add(x, late))
    ga = GraphAllocator(TestBufferType())
    ga.alloc_graph(g)
    verify_allocation(g)
    assert late.offset == SIZE                    # right after the leaf, before every other node


def test_none_view_with_consumers_keeps_its_owner() -> None:
    ctx = gg.Context(no_alloc=True)
    with ctx:
        a = leaf(ctx, "a")
        x, _, u = sins(a, 3)                      # x's only node consumer is the next sin
        v = ctx.view_tensor(x)                    # a NONE-op view of x: a leaf of the graph
        out = ops.add(v, u)
        g = gg.build_graph(out)
    assert v in g.leafs
    ga = GraphAllocator(TestBufferType())
    ga.alloc_graph(g)
    verify_allocation(g)
    a.set(np.linspace(-1, 1, 32))
    run(g)
    ref = np.sin(np.linspace(-1, 1, 32, dtype=np.float32))
    assert np.allclose(out.numpy().reshape(-1), ref + np.sin(np.sin(ref)), atol=1e-6)


def test_graph_order_without_compute_flags_is_placed_the_same() -> None:
    def build(expand: bool) -> gg.Graph:
        ctx = gg.Context(no_alloc=True)
        with ctx:
            a = leaf(ctx, "a")
            y = ops.add(ops.sin(a), ops.mul_mat(ops.sin(a), a))
            g = gg.Graph()
            (g.build_forward_expand if expand else g.build_forward_order)(ops.sqr(y).set_output())
        return g

    offsets = []
    for expand in (True, False):
        g = build(expand)
        GraphAllocator(TestBufferType()).alloc_graph(g)
        verify_allocation(g)
        offsets.append([t.offset for t in g.nodes])
    assert offsets[0] == offsets[1]


def test_graph_view_allocates_srcs_outside_it() -> None:
    ctx = gg.Context(no_alloc=True)
    with ctx:
        b, c, sin_c = sins(leaf(ctx, "a"), 3)
        g = gg.build_graph(ops.add(sin_c, b))
    part = g.view(2, g.n_nodes)                   # b and c are srcs from outside the view
    ga = GraphAllocator(TestBufferType())
    assert ga.alloc_graph(part)
    verify_allocation(part)
    assert b.buffer is not None and c.buffer is not None
    assert ga.alloc_graph(part)                   # replays the outside srcs too


def _sized_graph(n: int) -> gg.Graph:
    ctx = gg.Context(no_alloc=True)
    with ctx:
        a = leaf(ctx, "a", 8, n)
        return gg.build_graph(ops.sin(ops.mul_mat(a, ops.sin(a))))


def test_replay_does_no_analysis(planner_runs: list[int]) -> None:
    g = _sized_graph(4)
    ga = GraphAllocator(TestBufferType())
    ga.reserve(g)
    records = ga.node_allocs
    for _ in range(3):
        assert ga.alloc_graph(g)
    assert len(planner_runs) == 1
    assert ga.node_allocs == records
    g2 = _sized_graph(4)                          # new tensors, same structure: replayed by position
    assert ga.alloc_graph(g2)
    assert len(planner_runs) == 1
    assert [t.offset for t in g2.nodes] == [t.offset for t in g.nodes]
    verify_allocation(g2)
    assert ga.alloc_graph(_sized_graph(2))        # smaller tensors fit their records
    assert len(planner_runs) == 1


def test_bigger_graph_is_reserved_again_with_one_buffer_type(planner_runs: list[int]) -> None:
    buft = TestBufferType()
    ga = GraphAllocator(buft)
    ga.alloc_graph(_sized_graph(2))
    small = ga.buffer_size(0)
    g = _sized_graph(16)
    assert ga.alloc_graph(g)
    assert len(planner_runs) == 2
    verify_allocation(g)
    assert ga.buffer_size(0) > small
    big_buffer = ga.buffers[0]
    ga.alloc_graph(_sized_graph(1))               # fits: same buffer, never shrinks
    assert ga.buffers[0] is big_buffer


def test_several_buffer_types_return_false_until_reserved() -> None:
    b0, b1 = TestBufferType("b0"), TestBufferType("b1")
    ga = GraphAllocator([b0, b1])
    g = _sized_graph(4)
    assert not ga.alloc_graph(g)
    assert all(t.buffer is None for t in g.nodes)
    ids = [i % 2 for i in range(g.n_nodes)]
    ga.reserve(g, node_buffer_ids=ids, leaf_buffer_ids=[1] * g.n_leafs)
    assert ga.alloc_graph(g)
    verify_allocation(g)
    assert [t.buffer for t in g.nodes] == [ga.buffers[i] for i in ids]
    assert g.leafs[0].buffer is ga.buffers[1]
    assert all(b is not None and b.usage == BufferUsage.COMPUTE for b in ga.buffers)
    assert not ga.alloc_graph(_sized_graph(8))
    with pytest.raises(GraphError, match="buffer id 2"):
        ga.reserve(g, node_buffer_ids=[2] * g.n_nodes)
    with pytest.raises(GraphError, match="1 node buffer ids"):
        ga.reserve(g, node_buffer_ids=[0])


def test_same_buffer_type_object_shares_allocator_and_buffer() -> None:
    buft = TestBufferType()
    ga = GraphAllocator([buft, buft])
    g = _sized_graph(4)
    ga.reserve(g, node_buffer_ids=[i % 2 for i in range(g.n_nodes)])
    assert ga.buffers[0] is ga.buffers[1]
    assert ga.buffer_size(0) > 0 and ga.buffer_size(1) == 0
    assert ga.alloc_graph(g)
    verify_allocation(g)


def test_small_max_size_splits_into_several_buffers() -> None:
    buft = TestBufferType(max_size=3 * SIZE)
    ctx = gg.Context(no_alloc=True)
    with ctx:
        a, b, c, d = (leaf(ctx, n) for n in "abcd")
        out = ops.add(ops.add(ops.mul(a, b), ops.mul(c, d)), ops.sin(a))
        g = gg.build_graph(out)
    ga = GraphAllocator(buft)
    assert ga.alloc_graph(g)
    verify_allocation(g)
    parts = ga.buffers[0].parts  # type: ignore[union-attr]
    assert len(parts) == 2 and all(p.size <= 3 * SIZE for p in parts)
    for i, t in enumerate((a, b, c, d)):
        t.set(np.full(32, i + 1.0))
    run(g)
    assert np.allclose(out.numpy(), 1 * 2 + 3 * 4 + np.sin(np.float32(1)))


def test_tensor_bigger_than_max_size_names_it_and_keeps_the_old_plan(planner_runs: list[int]) -> None:
    buft = TestBufferType("tiny", max_size=4 * SIZE)
    ga = GraphAllocator(buft)
    g = _sized_graph(4)
    ga.reserve(g)
    buffers = list(ga.buffers)
    ctx = gg.Context(no_alloc=True)
    with ctx:
        big = ctx.new_tensor(F32, 8, 64, name="huge")
        bad = gg.build_graph(ops.sin(big).set_name("too_big"))
    with pytest.raises(AllocationError, match=r"'huge'.*2048 bytes.*maximum buffer size 512.*'tiny'"):
        ga.reserve(bad)
    assert ga.buffers == buffers
    assert ga.alloc_graph(g)                      # the previous plan still replays
    assert len(planner_runs) == 2
    verify_allocation(g)


def test_failed_buffer_allocation_keeps_previous_buffers() -> None:
    buft = TestBufferType("flaky", fail_after=1)
    ga = GraphAllocator(buft)
    g = _sized_graph(2)
    ga.reserve(g)
    before = ga.buffers[0]
    with pytest.raises(AllocationError, match="flaky"):
        ga.reserve(_sized_graph(32))
    assert ga.buffers[0] is before
    assert ga.alloc_graph(g)
    verify_allocation(g)


def test_records_name_buffer_offsets_and_sizes() -> None:
    g = _sized_graph(4)
    ga = GraphAllocator(TestBufferType())
    ga.reserve(g)
    (leaf_rec,) = ga.leaf_allocs
    assert leaf_rec.buffer_id == 0 and leaf_rec.size_max == SIZE
    mm = ga.node_allocs[1]
    assert mm.src[0] == leaf_rec and mm.dst.size_max == 4 * 4 * 4
    with pytest.raises(AllocationError):
        ga.buffer_size(1)
    ga.free()
    assert ga.buffers == [None] and ga.buffer_size(0) == 0


def test_none_view_node_without_consumers_only_delays_the_free() -> None:
    ctx = gg.Context(no_alloc=True)
    with ctx:
        x, _, z = sins(leaf(ctx, "a"), 3)
        g = gg.build_graph(z)
        dep = ctx.view_tensor(x)                  # the scheduler's trick: a dependency node, nothing reads it
    g.nodes.insert(2, dep)
    ga = GraphAllocator(TestBufferType())
    ga.alloc_graph(g)
    verify_allocation(g)
    assert z.offset == x.offset                   # x was freed after the dependency, not kept to the end


def test_by_size_placement_removes_fragmentation() -> None:
    def graph() -> gg.Graph:
        # llama's FFN in small: h dies after `up`, leaving a hole too small for the GLU result
        wctx = gg.Context(no_alloc=True)
        w_gate, w_up = (wctx.new_tensor(F32, 8, 16, name=n) for n in ("gate", "up"))
        w_down = wctx.new_tensor(F32, 16, 8, name="down")
        alloc_ctx_tensors(wctx, TestBufferType())
        ctx = gg.Context(no_alloc=True)
        with ctx:
            x = leaf(ctx, "x")                                  # 128 bytes, read again at the end
            h = ops.sin(x)                                      # 128
            ff = ops.swiglu(ops.mul_mat(w_gate, h), ops.mul_mat(w_up, h))  # 3 x 256
            return gg.build_graph(ops.add(ops.mul_mat(w_down, ff), x))

    sizes = {}
    for placement in ("ggml", "by_size"):
        g = graph()
        ga = GraphAllocator(TestBufferType(), placement=placement)  # type: ignore[arg-type]
        assert ga.alloc_graph(g)
        verify_allocation(g)
        sizes[placement] = ga.buffer_size(0)
    assert sizes == {"ggml": 1024, "by_size": 896}              # x + gate + up + glu = the liveness bound
    with pytest.raises(AllocationError, match="placement"):
        GraphAllocator(TestBufferType(), placement="best")  # type: ignore[arg-type]
