"""The plan cache shared by the cpu, OpenCL and CUDA backends: a plan lives as long as its graph, is rebuilt when
a node moves or is rewired to other sources (the scheduler's copies), and is found again by placement alone for a
new graph object over the same nodes."""

from __future__ import annotations

import gc

from pyggml import ops
from pyggml.alloc import alloc_ctx_tensors
from pyggml.backend.plan_cache import PlanCache
from pyggml.backend.registry import get_device
from pyggml.context import Context
from pyggml.graph import build_graph
from pyggml.types import GGMLType as T


def _cache(recent: int = 2) -> tuple[PlanCache[object], list[object], list[object]]:
    built: list[object] = []
    released: list[object] = []

    def build(_g: object) -> object:
        built.append(plan := object())
        return plan

    return PlanCache(build, released.append, recent=recent), built, released


def test_plans_go_with_their_graphs_and_follow_moved_tensors() -> None:
    cache, _, released = _cache()
    ctx = Context(no_alloc=True)
    a = ctx.new_tensor(T.F32, 8)
    graphs = [build_graph(ops.scale(a, float(k))) for k in range(5)]
    buft = get_device("numpy").buffer_type()
    assert alloc_ctx_tensors(ctx, buft) is not None
    plans = [cache.get(g) for g in graphs]
    assert [cache.get(g) for g in graphs] == plans and cache.builds == 5  # all replay, beyond `recent`
    del graphs[0]
    gc.collect()
    assert released == []  # the plan of a graph that died goes on the next compute
    cache.get(graphs[0])
    assert released == [plans[0]] and len(cache) == 4
    y = graphs[1].nodes[-1]
    other = Context(no_alloc=True)
    y2 = other.new_tensor(T.F32, 8)
    assert alloc_ctx_tensors(other, buft) is not None
    y.buffer, y.offset = y2.buffer, y2.offset  # the node moved: its graph gets a new plan
    assert cache.get(graphs[1]) is not plans[2] and cache.builds == 6
    assert released == [plans[0], plans[2]]  # replaced, and not among the recent ones
    cache.clear()
    assert len(cache) == 0 and all(p in released for p in plans[1:])


def test_rewired_sources_get_their_own_plan_and_the_old_one_back() -> None:
    cache, _, _ = _cache()
    ctx = Context(no_alloc=True)
    a, b = ctx.new_tensor(T.F32, 8), ctx.new_tensor(T.F32, 8)
    out = ops.scale(a, 2.0)
    g = build_graph(out)
    assert alloc_ctx_tensors(ctx, get_device("numpy").buffer_type()) is not None
    first = cache.get(g)
    original = out.src
    out.src = (b,)  # what the scheduler does when it points a node at its copy of an input
    second = cache.get(g)
    assert second is not first and cache.builds == 2
    out.src = original  # back to the first wiring: found among the recent plans, nothing built
    assert cache.get(g) is first and cache.builds == 2


def test_a_new_graph_object_over_the_same_nodes_reuses_the_plan() -> None:
    cache, _, _ = _cache()
    ctx = Context(no_alloc=True)
    a = ctx.new_tensor(T.F32, 8)
    g = build_graph(ops.exp(ops.scale(a, 2.0)))
    assert alloc_ctx_tensors(ctx, get_device("numpy").buffer_type()) is not None
    plan = cache.get(g.view(0, len(g.nodes)))
    assert cache.get(g.view(0, len(g.nodes))) is plan and cache.builds == 1
    assert cache.get(g.view(0, 1)) is not plan and cache.builds == 2
