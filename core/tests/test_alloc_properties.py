"""Property tests: random DAGs (element-wise, binary, mul_mat, reshape, view, permute, cpy, cont, in-place
variants, INPUT and OUTPUT flags, pre-allocated weights) placed by the GraphAllocator (ggml's placement or the
offline by-size repacking) over one or two buffer types (small max sizes force several chunks) pass
`verify_allocation`, and computing them with the numpy backend gives exactly what the same graph gives when
every tensor has memory of its own (a Context with memory). The reserved plan is also replayed onto a second,
identically built graph."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyggml as gg
from pyggml import ops
from pyggml.alloc import GraphAllocator, alloc_ctx_tensors, verify_allocation
from pyggml.ops.base import can_repeat, overlapping
from pyggml.reference.backend import compute_node
from pyggml.tensor import Tensor
from pyggml_testing.buffers import TestBufferType

SHAPES = [(4, 3, 2, 1), (4, 3, 1, 1), (6, 2, 2, 1), (2, 3, 4, 1), (4, 1, 1, 1), (3, 2, 1, 1)]
AXES = [(1, 0, 2, 3), (0, 2, 1, 3), (2, 0, 1, 3), (1, 2, 0, 3)]
Unary = Callable[[Tensor, bool], Tensor]
UNARY: list[Unary] = [
    lambda x, ip: ops.neg(x, inplace=ip),
    lambda x, ip: ops.tanh(x, inplace=ip),
    lambda x, ip: ops.sigmoid(x, inplace=ip),
    lambda x, ip: ops.scale(x, 0.5, 0.25, inplace=ip),
    lambda x, ip: ops.sqr(x, inplace=ip),
    lambda x, ip: ops.silu(x, inplace=ip),
    lambda x, ip: ops.rms_norm(x, inplace=ip),
    lambda x, ip: ops.soft_max(x, inplace=ip),
    lambda x, ip: ops.sin(x, inplace=ip),
    lambda x, ip: ops.clamp(x, -0.5, 0.5, inplace=ip),
]
BINARY = [ops.add, ops.sub, ops.mul, ops.div]

Step = tuple[int, int, int, int]
steps_st = st.lists(st.tuples(st.integers(0, 8), st.integers(0, 999), st.integers(0, 999), st.integers(0, 15)),
                    min_size=6, max_size=24)
leafs_st = st.lists(st.tuples(st.integers(0, len(SHAPES) - 1), st.integers(0, 3)), min_size=1, max_size=3)


@dataclass
class Built:
    graph: gg.Graph
    leafs: list[Tensor]
    outputs: list[Tensor]
    weights: gg.Context | None


class Builder:
    """Interprets a recipe (leaf specs + steps) into tensors; the same recipe always gives the same graph."""

    def __init__(self, ctx: gg.Context, wctx: gg.Context) -> None:
        self.ctx, self.wctx = ctx, wctx
        self.pool: list[Tensor] = []
        self.leafs: list[Tensor] = []
        self.outputs: list[Tensor] = []

    def leaf(self, ne: tuple[int, ...], flags: int) -> Tensor:
        t = (self.wctx if flags & 2 else self.ctx).new_tensor(gg.F32, *ne, name=f"leaf{len(self.leafs)}")
        if flags & 1:
            t.set_input()
        self.leafs.append(t)
        self.pool.append(t)
        return t

    def pick(self, fits: Callable[[Tensor], bool], j: int, ne: tuple[int, ...], flags: int) -> Tensor:
        cands = [t for t in self.pool if fits(t)]
        return cands[j % (len(cands) + 1)] if j % (len(cands) + 1) < len(cands) else self.leaf(ne, flags)

    def step(self, op: int, i: int, j: int, fl: int) -> None:
        # mostly one of the two newest tensors, so that graphs grow deep rather than wide
        a = self.pool[-1 - i % min(2, len(self.pool)) if i < 800 else i % len(self.pool)]
        # in place only where a's elements do not share bytes (an op refuses to write such a view in place)
        ip = bool(fl & 1) and not overlapping(a)
        if op == 0 or (op == 2 and a.is_transposed()) or (op == 3 and not a.is_contiguous()):
            r = UNARY[j % len(UNARY)](a, ip)
        elif op == 1:
            b = self.pick(lambda t: can_repeat(t, a), j, a.ne if fl & 4 else (a.ne[0], 1, 1, 1), fl >> 2)
            r = BINARY[(fl >> 1) % 4](a, b, inplace=ip)
        elif op == 2:
            b = self.pick(lambda t: t.ne[0] == a.ne[0] and t.ne[2] % a.ne[2] == 0 and t.ne[3] % a.ne[3] == 0, j,
                          (a.ne[0], 2, a.ne[2], a.ne[3]), fl >> 2)
            r = ops.mul_mat(a, b)
        elif op == 3:
            n0, n1, n2, n3 = a.ne
            shapes = [(n0 * n1 * n2 * n3,), (n0 * n1, n2 * n3), (n1, n0, n2, n3)]
            r = ops.reshape(a, *shapes[j % 3])
        elif op == 4:
            s = j % a.ne[1]
            r = ops.view(a, (a.ne[0], a.ne[1] - s, a.ne[2], a.ne[3]), a.nb[1:], s * a.nb[1])
        elif op == 5:
            r = ops.permute(a, *AXES[j % 4])
        elif op == 6:
            dst = self.pick(lambda t: t.nelements() == a.nelements() and t is not a, j, a.ne, fl >> 1)
            r = ops.cpy(a, dst)
        elif op == 7:
            r = ops.cont(a) if fl & 2 else ops.cont(a, a.nelements())
        else:
            a.set_output()
            self.outputs.append(a)
            return
        self.pool.append(r)


def build(leaf_specs: list[tuple[int, int]], steps: list[Step], ctx: gg.Context, wctx: gg.Context) -> Built:
    b = Builder(ctx, wctx)
    with ctx:
        for shape, flags in leaf_specs:
            b.leaf(SHAPES[shape], flags)
        for s in steps:
            b.step(*s)
        outputs = [*b.outputs, b.pool[-1]]
        graph = gg.build_graph(*outputs)
    return Built(graph, b.leafs, outputs, wctx)


def fill_and_run(built: Built) -> list[np.ndarray]:
    for k, t in enumerate(built.leafs):
        if t.buffer is not None:
            t.set(np.random.default_rng(k).uniform(-1, 1, t.nelements()).astype(np.float32))
    for node in built.graph.nodes:
        compute_node(node)
    return [t.numpy() for t in built.outputs]


def allocated(leaf_specs: list[tuple[int, int]], steps: list[Step]) -> Built:
    built = build(leaf_specs, steps, gg.Context(no_alloc=True), gg.Context(no_alloc=True))
    assert built.weights is not None
    alloc_ctx_tensors(built.weights, TestBufferType("weights"))
    return built


def same(xs: list[np.ndarray], ys: list[np.ndarray]) -> bool:
    return all(np.array_equal(x, y, equal_nan=True) for x, y in zip(xs, ys, strict=True))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(leaf_specs=leafs_st, steps=steps_st, two_bufts=st.booleans(), small=st.booleans(),
       view_inplace=st.booleans(), by_size=st.booleans(), ids_seed=st.integers(0, 1 << 16))
def test_random_graphs_verify_and_match_the_unallocated_reference(
        leaf_specs: list[tuple[int, int]], steps: list[Step], two_bufts: bool, small: bool, view_inplace: bool,
        by_size: bool, ids_seed: int) -> None:
    ref_ctx = gg.Context(1 << 20)
    reference = fill_and_run(build(leaf_specs, steps, ref_ctx, ref_ctx))

    first = allocated(leaf_specs, steps)
    g = first.graph
    biggest = max(t.nbytes() for t in [*g.leafs, *g.nodes])
    max_size = max(192, (biggest + 31) // 32 * 32) if small else 1 << 40
    bufts = [TestBufferType("b0", max_size=max_size)]
    if two_bufts:
        bufts.append(TestBufferType("b1", alignment=64, pad=8, max_size=max_size + 64))
    galloc = GraphAllocator(bufts, view_inplace=view_inplace, placement="by_size" if by_size else "ggml")
    rng = np.random.default_rng(ids_seed)
    galloc.reserve(g, [int(x) for x in rng.integers(0, len(bufts), g.n_nodes)],
                   [int(x) for x in rng.integers(0, len(bufts), g.n_leafs)])
    assert galloc.alloc_graph(g)
    verify_allocation(g)
    assert same(fill_and_run(first), reference)
    assert galloc.alloc_graph(g)                  # replay onto the same graph
    assert same(fill_and_run(first), reference)

    second = allocated(leaf_specs, steps)         # replay onto new tensors of the same structure
    assert galloc.alloc_graph(second.graph)
    verify_allocation(second.graph)
    assert same(fill_and_run(second), reference)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(leaf_specs=leafs_st, steps=steps_st, view_inplace=st.booleans())
def test_reserving_again_is_idempotent(leaf_specs: list[tuple[int, int]], steps: list[Step],
                                       view_inplace: bool) -> None:
    built = allocated(leaf_specs, steps)
    galloc = GraphAllocator(TestBufferType(), view_inplace=view_inplace)
    galloc.reserve(built.graph)
    records, buffers = galloc.node_allocs, list(galloc.buffers)
    assert galloc.alloc_graph(built.graph)
    galloc.reserve(built.graph)                   # the placed tensors are the allocator's own: planned again
    assert galloc.node_allocs == records and galloc.buffers == buffers
    owned = [t for t in [*built.graph.leafs, *built.graph.nodes] if t.buffer is galloc.buffers[0]]
    assert galloc.buffer_size(0) <= sum((t.nbytes() + 31) // 32 * 32 for t in owned if t.view_src is None)
