"""The plan cache holds no graph, tensor or buffer (issues 19 and 34): a buffer the caller drops is freed at once,
though a plan over it is still kept among the recent ones, and the cache goes on working; plans are keyed by serials
that are never reused, so a buffer or tensor made after another was freed is never taken for it; a replay with
nothing placed since compares three ints, no placement."""

from __future__ import annotations

import gc
import weakref

import pytest

from pyggml import ops
from pyggml.alloc import alloc_ctx_tensors
from pyggml.backend.plan_cache import PlanCache, PlannedBackend, placement_key
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


def test_a_recent_plan_over_dead_tensors_is_not_found_by_a_newcomer() -> None:
    """A newcomer made like the dead tensors and buffer, maybe at their ids, has other serials: nothing matches."""
    cache, _ = _cache()
    ctx, a, g = _graph()
    plan = cache.get(g.view(0, len(g.nodes)))
    (key,) = cache._recent
    del ctx, a, g
    gc.collect()
    _ctx2, _a2, g2 = _graph()
    fresh = g2.view(0, len(g2.nodes))
    assert placement_key(fresh) != key
    got = cache.get(fresh)
    assert got is not plan and cache.builds == 2


def test_a_freed_buffer_and_its_successor_are_told_apart() -> None:
    """The graph's tensors move into a new buffer made after the old one was freed and collected (perhaps at its
    id, at the same offsets): the plan over the old one is not replayed."""
    cache, _ = _cache()
    ctx, a, g = _graph()
    plan = cache.get(g)
    tensors = [*g.leafs, *g.nodes]
    places = [t.offset for t in tensors]
    old = a.buffer
    assert old is not None
    size = old.size
    old.free()
    for t in tensors:
        t.buffer = None
    del old
    gc.collect()
    new = get_device("numpy").buffer_type().alloc_buffer(size)
    for t, off in zip(tensors, places, strict=True):
        t.buffer, t.offset = new, off
    assert cache.get(g) is not plan and cache.builds == 2
    del ctx


def test_an_unchanged_graph_replays_on_its_stamp_and_a_placement_elsewhere_costs_one_key_check() -> None:
    cache, _ = _cache()
    _ctx, _a, g = _graph()
    plan = cache.get(g)
    checks = cache.key_checks
    assert all(cache.get(g) is plan for _ in range(5)) and cache.key_checks == checks  # three ints compared
    _other = _graph(3.0)  # tensors placed elsewhere advance the placement clock
    assert cache.get(g) is plan and cache.key_checks == checks + 1  # the key still matches: re-stamped
    assert cache.get(g) is plan and cache.key_checks == checks + 1 and cache.builds == 1


def test_a_node_added_to_a_planned_graph_gets_a_new_plan() -> None:
    cache, _ = _cache()
    ctx, a, g = _graph()
    plan = cache.get(g)
    g.build_forward_expand(ops.exp(g.nodes[-1]))  # added, not placed yet: the clock did not move, the version did
    assert cache.get(g) is not plan and cache.builds == 2
    del ctx, a


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
