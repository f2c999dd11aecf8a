"""The plan cache holds graphs, tensors and buffers weakly (issue 19): a buffer the caller drops is freed at once,
though a plan over it is still kept among the recent ones, and the cache goes on working; a plan whose buffer or
tensors died is never replayed, even if a newcomer gets the same ids."""

from __future__ import annotations

import gc
import weakref

import pytest

from pyggml import ops
from pyggml.alloc import alloc_ctx_tensors
from pyggml.backend.plan_cache import PlacementSnapshot, PlanCache, PlannedBackend
from pyggml.backend.registry import get_device
from pyggml.context import Context
from pyggml.errors import GraphError
from pyggml.graph import build_graph
from pyggml.tensor import Tensor
from pyggml.types import GGMLType as T


def _cache() -> tuple[PlanCache[object], list[object]]:
    released: list[object] = []
    return PlanCache(lambda _g: object(), released.append), released


def _graph(scale: float = 2.0) -> tuple[Context, Tensor, object]:
    ctx = Context(no_alloc=True)
    a = ctx.new_tensor(T.F32, 8)
    g = build_graph(ops.exp(ops.scale(a, scale)))
    buf = alloc_ctx_tensors(ctx, get_device("numpy").buffer_type())
    assert buf is not None
    return ctx, a, g


def test_a_dropped_buffer_is_freed_while_its_plan_is_kept() -> None:
    cache, released = _cache()
    ctx, a, g = _graph()
    plan = cache.get(g.view(0, len(g.nodes)))  # a graph view that dies at once: the plan stays among the recent
    assert cache.get(g.view(0, len(g.nodes))) is plan and cache.builds == 1
    buf = weakref.ref(a.buffer)
    tensor = weakref.ref(a)
    del ctx, a, g
    gc.collect()
    assert buf() is None and tensor() is None  # freed, though `recent` still holds the plan built over them
    assert released == []
    _ctx2, _a2, g2 = _graph(3.0)  # the cache keeps working: builds, replays, finds by placement
    p2 = cache.get(g2)
    assert cache.get(g2) is p2 and cache.get(g2.view(0, len(g2.nodes))) is p2 and cache.builds == 2


def test_the_entry_of_a_live_graph_does_not_hold_its_buffer() -> None:
    cache, _ = _cache()
    _ctx, a, g = _graph()
    plan = cache.get(g)
    buf = weakref.ref(a.buffer)
    old = a.buffer
    other = Context(no_alloc=True)
    b = other.new_tensor(T.F32, 8)
    assert alloc_ctx_tensors(other, get_device("numpy").buffer_type()) is not None
    for t in [*g.leafs, *g.nodes]:  # every tensor moves to another buffer; the old one is dropped
        t.buffer = b.buffer
    del old
    gc.collect()
    assert buf() is None
    assert cache.get(g) is not plan and cache.builds == 2  # its placement no longer holds: rebuilt


def test_a_recent_plan_over_dead_tensors_is_not_found_by_reused_ids() -> None:
    """A key built from the ids of objects that died may match a newcomer's; the hit is checked, not trusted."""
    cache, released = _cache()
    ctx, a, g = _graph()
    plan = cache.get(g.view(0, len(g.nodes)))
    (key, record), = cache._recent.items()
    del ctx, a, g
    gc.collect()
    assert not record.alive[0]
    _ctx2, _a2, g2 = _graph()
    fresh = g2.view(0, len(g2.nodes))
    del cache._recent[key]
    cache._recent[fresh_key := PlacementSnapshot(fresh).key()] = record  # as if every id had been reused
    got = cache.get(fresh)
    assert got is not plan and cache.builds == 2 and plan in released
    assert cache._recent[fresh_key].plan is got


class _Planned(PlannedBackend[object]):
    """A planned backend over the numpy device whose plans are plain objects (replay does nothing)."""

    def __init__(self) -> None:
        super().__init__(get_device("numpy"), lambda _g: _Plan())

    def replay(self, plan: object) -> None:
        pass

    def synchronize(self) -> None:
        pass


class _Plan:
    pass


def test_last_plan_names_the_graph_computed_last_and_keeps_nothing_alive() -> None:
    be = _Planned()
    with pytest.raises(GraphError, match="no plan of the graph computed last"):
        be.last_plan  # noqa: B018
    _ctx, _a, g = _graph()
    be.graph_compute(g)
    plan = weakref.ref(be.last_plan)
    assert be.last_plan is be.plans.held(g.uid) and be.stats.computes == 1
    be.plans.clear()  # the cache lets the plan go; the backend held it by its graph's uid only
    assert plan() is None
    with pytest.raises(GraphError, match="no plan of the graph computed last"):
        be.last_plan  # noqa: B018
