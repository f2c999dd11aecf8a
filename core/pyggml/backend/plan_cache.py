"""Plans per graph, for backends that turn a graph into something to replay (the cpu plugin's C descriptors, the
OpenCL and CUDA plugins' launch lists): a graph that is computed again replays its plan and builds nothing.

A plan is bound to the graph object it was built for and to the graph's `Placement`: its node list, each node's
sources (the scheduler rewires them to its copies) and the buffer and offset of every node and source. Tensors
never change type, shape, strides, op or params after they are made, so these identities and places are all a
plan depends on, and checking them on a replay is a few tuple compares done in C, no walk over ops or shapes.

However many graphs a backend runs in turn, each live one replays: the meta device (tensor split) hands every
device one subgraph per allreduce and one ADD graph per butterfly round, 121 distinct graphs per decode step for
SmolLM2 on two devices, far more than any fixed-size cache of recent plans holds. A plan goes when its graph is
gone (released on the next compute) or when the graph's placement changes (its tensors moved). A few plans are also
kept by placement alone (`recent`, least recently used first out), for a new graph object over the same nodes and
places (e.g. a graph view made per compute).
"""

from __future__ import annotations

import weakref
from abc import abstractmethod
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pyggml.backend.protocol import Backend, Device
from pyggml.tensor import Tensor

if TYPE_CHECKING:
    from pyggml.graph import Graph

P = TypeVar("P")
RECENT = 16

_offset = attrgetter("offset")
_buffer = attrgetter("buffer")
_src = attrgetter("src")


class Placement:
    """A graph's node list and where each node and source lives, as captured when its plan was built."""

    __slots__ = ("buffers", "nodes", "offsets", "srcs", "tensors")

    def __init__(self, graph: Graph) -> None:
        self.nodes = tuple(graph.nodes)
        self.srcs: tuple[tuple[Tensor | None, ...], ...] = tuple(map(_src, self.nodes))
        seen: dict[int, Tensor] = {}
        for n, srcs in zip(self.nodes, self.srcs, strict=True):
            seen[id(n)] = n
            for s in srcs:
                if s is not None:
                    seen.setdefault(id(s), s)
        self.tensors = tuple(seen.values())
        self.offsets: tuple[int, ...] = tuple(map(_offset, self.tensors))
        self.buffers: tuple[Any, ...] = tuple(map(_buffer, self.tensors))

    def holds_for(self, graph: Graph) -> bool:
        """True while `graph` has the same nodes with the same sources, and none of them moved."""
        ts = self.tensors
        nodes = tuple(graph.nodes)
        return (nodes == self.nodes and tuple(map(_src, nodes)) == self.srcs
                and tuple(map(_offset, ts)) == self.offsets and tuple(map(_buffer, ts)) == self.buffers)

    def key(self) -> tuple[Any, ...]:
        """Hashable and equal for equal placements (ids stay valid: this object holds what they name)."""
        srcs = tuple(tuple(id(s) if s is not None else 0 for s in ss) for ss in self.srcs)
        return tuple(map(id, self.nodes)), srcs, self.offsets, tuple(map(id, self.buffers))


@dataclass(slots=True)
class _Entry(Generic[P]):
    graph: weakref.ref[Graph]
    placement: Placement
    plan: P


def _on_death(dead: list[int], uid: int) -> Callable[[weakref.ref[Graph]], None]:
    """A weakref callback that only notes the uid (it may run inside any allocation, on any thread)."""
    return lambda _ref: dead.append(uid)


class PlanCache(Generic[P]):
    """`get(graph)` returns the graph's plan, building it with `build` only when the graph is new to the cache or
    its placement changed. `release(plan)` (optional) is called, on the caller's thread, for every plan that no
    graph and no recent entry holds any more (CUDA graphs to destroy)."""

    def __init__(self, build: Callable[[Graph], P], release: Callable[[P], None] | None = None,
                 recent: int = RECENT) -> None:
        self._build = build
        self._release = release
        self._recent_max = recent
        self._by_graph: dict[int, _Entry[P]] = {}
        """graph uid -> the graph (weakly), its placement and plan."""
        self._dead: list[int] = []
        """uids of graphs that died since the last compute (appended by weakref callbacks, which only do that)."""
        self._recent: OrderedDict[tuple[Any, ...], tuple[Placement, P]] = OrderedDict()
        self.builds = 0
        """Plans built so far (replays of an unchanged graph build none)."""

    def __len__(self) -> int:
        return len(self._by_graph)

    def get(self, graph: Graph) -> P:
        if self._dead:
            self._sweep()
        entry = self._by_graph.get(graph.uid)
        if entry is not None and entry.placement.holds_for(graph):
            return entry.plan
        placement = Placement(graph)
        key = placement.key()
        hit = self._recent.get(key)
        if hit is None:
            plan = self._build(graph)  # may raise: the cache is left as it was
            self.builds += 1
            self._recent[key] = (placement, plan)
            dropped = [self._recent.popitem(last=False)[1][1] for _ in range(len(self._recent) - self._recent_max)]
        else:
            self._recent.move_to_end(key)
            placement, plan = hit
            dropped = []
        self._by_graph[graph.uid] = _Entry(weakref.ref(graph, _on_death(self._dead, graph.uid)), placement, plan)
        if entry is not None:
            dropped.append(entry.plan)
        self._release_unused(dropped)
        return plan

    def clear(self) -> None:
        plans = [e.plan for e in self._by_graph.values()] + [p for _, p in self._recent.values()]
        self._by_graph.clear()
        self._recent.clear()
        self._release_unused(plans)

    def _sweep(self) -> None:
        """Forget the plans of graphs that no longer exist."""
        gone: list[P] = []
        while self._dead:
            uid = self._dead.pop()
            e = self._by_graph.get(uid)
            if e is not None and e.graph() is None:
                gone.append(self._by_graph.pop(uid).plan)
        self._release_unused(gone)

    def _release_unused(self, plans: list[P]) -> None:
        if self._release is None or not plans:
            return
        held = {id(e.plan) for e in self._by_graph.values()} | {id(p) for _, p in self._recent.values()}
        done: set[int] = set()
        for p in plans:
            if id(p) not in held and id(p) not in done:
                done.add(id(p))
                self._release(p)


class PlannedBackend(Backend, Generic[P]):
    """A backend that computes a graph by replaying its plan (the OpenCL and CUDA plugins): `replay(plan)` queues
    the plan's work; plans come from `build(graph)` through a `PlanCache`, released with `release(plan)`."""

    def __init__(self, device: Device, build: Callable[[Graph], P], release: Callable[[P], None] | None = None
                 ) -> None:
        super().__init__(device)
        self.plans: PlanCache[P] = PlanCache(build, release)

    @property
    def plans_built(self) -> int:
        """Plans built so far (a replayed graph builds none)."""
        return self.plans.builds

    def graph_compute(self, graph: Graph) -> None:
        self.graph_compute_async(graph)
        self.synchronize()

    def graph_compute_async(self, graph: Graph) -> None:
        self.replay(self.plans.get(graph))

    @abstractmethod
    def replay(self, plan: P) -> None:
        """Queue the plan's work on this backend's stream (no waiting)."""

    def free(self) -> None:
        self.plans.clear()
