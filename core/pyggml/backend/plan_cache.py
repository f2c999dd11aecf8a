"""Plans per graph, for backends that turn a graph into something to replay (the cpu plugin's C descriptors, the
OpenCL and CUDA plugins' launch lists): a graph that is computed again replays its plan and builds nothing.

A plan is bound to the graph object it was built for and to the graph's `PlacementSnapshot`: its node list, each node's
sources (the scheduler rewires them to its copies) and the buffer and offset of every node and source. Tensors
never change type, shape, strides, op or params after they are made, so these identities and places are all a
plan depends on, and checking them on a replay is a few tuple compares done in C, no walk over ops or shapes.

However many graphs a backend runs in turn, each live one replays: the meta device (tensor split) hands every
device one subgraph per allreduce and one ADD graph per butterfly round, 121 distinct graphs per decode step for
SmolLM2 on two devices, far more than any fixed-size cache of recent plans holds. A plan goes when its graph is
gone (released on the next compute) or when the graph's placement changes (its tensors moved). A few plans are also
kept by placement alone (`recent`, least recently used first out), for a new graph object over the same nodes and
places (e.g. a graph view made per compute).

The cache keeps nothing alive that its caller dropped: graphs are held weakly, a live graph's placement holds its
tensors (the graph holds them anyway) but its buffers only by weakref, a dead graph's placement is let go by the
graph's weakref callback, and a recent plan holds nothing of its placement but weakrefs. A buffer the caller drops
is freed at once even while a plan over it is kept; that plan is never replayed again (its placement no longer
holds). A plan object itself should not hold buffers strongly either (the cpu plugin's `CpuGraphPlan.buffers`, the
OpenCL and Vulkan plans still do).
"""

from __future__ import annotations

import threading
import time
import weakref
from abc import abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pyggml.backend.protocol import Backend, Device
from pyggml.errors import AllocationError, GraphError
from pyggml.tensor import Tensor

if TYPE_CHECKING:
    from pyggml.graph import Graph

P = TypeVar("P")
RECENT = 16

_offset = attrgetter("offset")
_buffer = attrgetter("buffer")
_src = attrgetter("src")


class PlacementSnapshot:
    """A graph's node list and where each node and source lives, as captured when its plan was built.

    It holds the nodes and sources (their graph holds them anyway) but the buffers only weakly, by id: a buffer the
    caller drops while the graph lives is freed at once. A weakref callback marks the placement dead when a buffer
    it captured goes (a newcomer may then reuse its id), and a dead placement never holds."""

    __slots__ = ("alive", "buffer_ids", "buffer_refs", "nodes", "offsets", "srcs", "tensors")

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
        bufs = tuple(map(_buffer, self.tensors))
        self.buffer_ids: tuple[int, ...] = tuple(map(id, bufs))
        self.alive = [True]
        """Cleared by a weakref callback (which may run on any thread) when a captured buffer dies."""
        kill = _killer(self.alive)
        self.buffer_refs = tuple(weakref.ref(b, kill) for b in {id(b): b for b in bufs if b is not None}.values())

    def holds_for(self, graph: Graph) -> bool:
        """True while `graph` has the same nodes with the same sources, and none of them moved."""
        ts = self.tensors
        nodes = tuple(graph.nodes)
        return (self.alive[0] and nodes == self.nodes and tuple(map(_src, nodes)) == self.srcs
                and tuple(map(_offset, ts)) == self.offsets and tuple(map(id, map(_buffer, ts))) == self.buffer_ids)

    def key(self) -> tuple[Any, ...]:
        """Hashable and equal for equal placements while every object it names lives (see `_Recent`)."""
        srcs = tuple(tuple(id(s) if s is not None else 0 for s in ss) for ss in self.srcs)
        return tuple(map(id, self.nodes)), srcs, self.offsets, self.buffer_ids


class _Recent(Generic[P]):
    """A plan kept by placement alone, holding nothing of it but weakrefs: its key's ids name the same objects only
    while `alive` (cleared by a callback when any captured tensor or buffer dies, after which a newcomer may reuse
    an id and the entry must not be found)."""

    __slots__ = ("alive", "plan", "refs")

    def __init__(self, placement: PlacementSnapshot, plan: P) -> None:
        self.plan = plan
        self.alive = [True]
        kill = _killer(self.alive)
        self.refs = tuple(weakref.ref(t, kill) for t in placement.tensors) + tuple(
            weakref.ref(r, kill) for r in map(_deref, placement.buffer_refs) if r is not None)


def _deref(ref: weakref.ref[Any]) -> Any:
    return ref()


def _killer(alive: list[bool]) -> Callable[[weakref.ref[Any]], None]:
    """A weakref callback that only clears the flag (it may run inside any allocation, on any thread)."""

    def kill(_ref: weakref.ref[Any]) -> None:
        alive[0] = False

    return kill


class _Entry(Generic[P]):
    """A graph's plan and placement. The slots are spelled out: `dataclass(slots=True, weakref_slot=True)` leaves
    out `__weakref__` when the class derives from Generic on CPython 3.12.3 (Ubuntu 24.04's python3, gh-118033)."""

    __slots__ = ("__weakref__", "graph", "placement", "plan")

    def __init__(self, placement: PlacementSnapshot | None, plan: P) -> None:
        self.placement = placement
        """None once the graph died (cleared by the graph's weakref callback, so its tensors go with it)."""
        self.plan = plan
        self.graph: weakref.ref[Graph] | None = None


def _on_death(dead: list[int], uid: int, entry: _Entry[Any]) -> Callable[[weakref.ref[Graph]], None]:
    """A weakref callback that notes the uid and lets go of the placement (it may run inside any allocation, on any
    thread: it only appends and assigns). It reaches the entry weakly: no cycle keeps a dropped entry alive."""
    entry_ref = weakref.ref(entry)

    def died(_ref: weakref.ref[Graph]) -> None:
        e = entry_ref()
        if e is not None:
            e.placement = None
        dead.append(uid)

    return died


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
        """uids of graphs that died since the last compute (appended by weakref callbacks)."""
        self._recent: OrderedDict[tuple[Any, ...], _Recent[P]] = OrderedDict()
        self.builds = 0
        """Plans built so far (replays of an unchanged graph build none)."""

    def __len__(self) -> int:
        return len(self._by_graph)

    def get(self, graph: Graph) -> P:
        if self._dead:
            self._sweep()
        entry = self._by_graph.get(graph.uid)
        if entry is not None and entry.placement is not None and entry.placement.holds_for(graph):
            return entry.plan
        placement = PlacementSnapshot(graph)
        key = placement.key()
        hit = self._recent.get(key)
        if hit is not None and not hit.alive[0]:
            self._release_unused([self._recent.pop(key).plan])  # something it named died: its ids may be reused
            hit = None
        if hit is None:
            plan = self._build(graph)  # may raise: the cache is left as it was
            self.builds += 1
            self._recent[key] = _Recent(placement, plan)
            dropped = [self._recent.popitem(last=False)[1].plan for _ in range(len(self._recent) - self._recent_max)]
        else:
            self._recent.move_to_end(key)
            plan = hit.plan
            dropped = []
        new = _Entry(placement, plan)
        new.graph = weakref.ref(graph, _on_death(self._dead, graph.uid, new))
        self._by_graph[graph.uid] = new
        if entry is not None:
            dropped.append(entry.plan)
        self._release_unused(dropped)
        return plan

    def held(self, graph_uid: int) -> P | None:
        """The plan kept for the graph with this uid, if the cache still keeps one (it holds nothing alive)."""
        entry = self._by_graph.get(graph_uid)
        return entry.plan if entry is not None else None

    def clear(self) -> None:
        plans = [e.plan for e in self._by_graph.values()] + [r.plan for r in self._recent.values()]
        self._by_graph.clear()
        self._recent.clear()
        self._release_unused(plans)

    def _sweep(self) -> None:
        """Forget the plans of graphs that no longer exist."""
        gone: list[P] = []
        while self._dead:
            uid = self._dead.pop()
            e = self._by_graph.get(uid)
            if e is not None and e.graph is not None and e.graph() is None:
                gone.append(self._by_graph.pop(uid).plan)
        self._release_unused(gone)

    def _release_unused(self, plans: list[P]) -> None:
        if self._release is None or not plans:
            return
        held = {id(e.plan) for e in self._by_graph.values()} | {id(r.plan) for r in self._recent.values()}
        done: set[int] = set()
        for p in plans:
            if id(p) not in held and id(p) not in done:
                done.add(id(p))
                self._release(p)


@dataclass
class PlanStats:
    """What a planned backend did so far (host side; the device runs after)."""

    computes: int = 0
    plan_seconds: float = 0.0
    """Time spent building plans (`plans_built` of them)."""
    host_seconds: float = 0.0
    """Time inside graph_compute_async: finding or building the plan, then queueing its replay."""


class PlannedBackend(Backend, Generic[P]):
    """A backend that computes a graph by replaying its plan (OpenCL, CUDA, Vulkan, Metal, RPC, the meta device):
    `replay(plan)` queues the plan's work; plans come from `build(graph)` through a `PlanCache`, released with
    `release(plan)`.

    Threads: `lock` is held over each `graph_compute_async` (planning and queueing one graph whole) and over
    `free()`, so computes from several threads queue one graph after another, and a free from another thread waits
    for the queueing in progress and then, in `release_resources`, for the queued work. Once freed, a compute
    raises ComputeError (`freed_error`) and a second free does nothing; a subclass whose `synchronize` or events
    touch what `release_resources` let go of checks `freed` under `lock` there."""

    def __init__(self, device: Device, build: Callable[[Graph], P], release: Callable[[P], None] | None = None
                 ) -> None:
        super().__init__(device)
        self.lock = threading.RLock()
        """Held while a graph is planned and queued and while the backend is freed."""
        self.freed = False
        self.plans: PlanCache[P] = PlanCache(build, release)
        self.stats = PlanStats()
        self._last_graph: int | None = None
        """The uid of the graph planned last (not the plan: that would keep a dropped graph's plan alive)."""

    @property
    def plans_built(self) -> int:
        """Plans built so far (a replayed graph builds none)."""
        return self.plans.builds

    @property
    def last_plan(self) -> P:
        """The plan of the graph computed last: what it ran (dispatches, subgraphs, allreduces...)."""
        plan = None if self._last_graph is None else self.plans.held(self._last_graph)
        if plan is None:
            raise GraphError(f"{self.name}: no plan of the graph computed last (none computed, or it is gone)")
        return plan

    def graph_compute(self, graph: Graph) -> None:
        self.graph_compute_async(graph)
        self.synchronize()

    def graph_compute_async(self, graph: Graph) -> None:
        with self.lock:
            if self.freed:
                raise self.freed_error()
            t0 = time.perf_counter()
            self.replay(self.plan(graph))
            self.stats.computes += 1
            self.stats.host_seconds += time.perf_counter() - t0

    def plan(self, graph: Graph) -> P:
        """The plan of `graph`: built now unless the graph is unchanged since it was planned."""
        t0, builds = time.perf_counter(), self.plans.builds
        plan = self.plans.get(graph)
        self._last_graph = graph.uid
        if self.plans.builds != builds:
            self.stats.plan_seconds += time.perf_counter() - t0
        return plan

    @abstractmethod
    def replay(self, plan: P) -> None:
        """Queue the plan's work on this backend's stream (no waiting)."""

    def free(self) -> None:
        """Once, under `lock`: mark the backend freed, then `release_resources`."""
        with self.lock:
            if self.freed:
                return
            self.freed = True
            self.release_resources()

    def release_resources(self) -> None:
        """What `free()` lets go of, run once under `lock`; a subclass waits for its queued work, then drops its
        own resources and calls this (the plans)."""
        self.plans.clear()


def check_not_freed(buffers: Iterable[object], who: str) -> None:
    """AllocationError when one of the buffers a recorded plan points into was freed since it was recorded: a
    replay would otherwise read and write memory that is gone (or now another buffer's). `who` names the backend."""
    for b in buffers:
        if getattr(b, "freed", False):
            raise AllocationError(f"{who}: the graph's buffer {b!r} was freed (buffer used after free)")


def check_tensors_not_freed(nodes: Iterable[Tensor], who: str) -> None:
    """AllocationError naming the first node whose own tensor or a source lies in a freed buffer (`check_not_freed`
    with the tensor named: before a graph is planned, or on the error path of a replay that found a freed buffer)."""
    for node in nodes:
        for t in (node, *node.src):
            buf = None if t is None else t.buffer
            if t is not None and buf is not None and getattr(buf, "freed", False):
                raise AllocationError(f"{who}: node '{node.name}' ({node.op.name}): tensor '{t.name}' is in {buf!r}, "
                                      "which was freed (buffer used after free)")
