"""Plans per graph, for backends that turn a graph into something to replay (the cpu plugin's C descriptors, the
OpenCL and CUDA plugins' launch lists): a graph that is computed again replays its plan and builds nothing.

Validity rule. A plan is bound to its graph's `uid` and to what it was built over: the node list, each node's
sources (the scheduler rewires them to its copies) and the buffer and offset of every node and source. Tensors
never change type, shape, strides, op or params after they are made, so nothing else can make a plan wrong. All of
it is named by serials that are never reused (`pyggml.serial`: `Graph.uid`, `Tensor.serial`, `Buffer.serial`),
never by `id()`: a buffer freed and collected, and a newcomer made where it was, are different buffers to the cache.

- Fast path: each graph's entry carries a stamp, (placement clock, graph version, node count), read when it was
  last found valid. The clock (`pyggml.serial.PLACEMENT`) advances on every change of any tensor's buffer, offset
  or sources and the graph's version on every change of its node list, so while the stamp reads the same nothing the
  plan depends on moved: three int compares, no walk over the graph.
- Otherwise (something was placed somewhere since): the graph's `placement_key` (node serials, source serials,
  offsets and buffer serials) is compared with the entry's; equal means still valid (re-stamped), else the plan is
  looked up by key among the recent ones, or built.

However many graphs a backend runs in turn, each live one replays: the meta device (tensor split) hands every
device one subgraph per allreduce and one ADD graph per butterfly round, 121 distinct graphs per decode step for
SmolLM2 on two devices, far more than any fixed-size cache of recent plans holds. A plan goes when its graph is
gone (released on the next compute) or when the graph's placement changes (its tensors moved). A few plans are also
kept by placement key alone (`recent`, least recently used first out), for a new graph object over the same nodes
and places (e.g. a graph view made per compute).

The cache keeps nothing alive that its caller dropped: graphs are held weakly (only to learn when one dies) and
keys are ints, so the cache holds no tensor and no buffer. A buffer the caller drops is freed at once even while a
plan over it is kept; that plan is never found again (no live tensor names that buffer's serial). A plan object
holds buffers only where its recorded work must reach them: the cpu plugin's (C reads them by address while it
holds them), CUDA's, Vulkan's and Metal's (captured graphs, descriptor sets and command buffers bind the memory);
OpenCL's checks them through weak references (a queued kernel keeps what it uses, as OpenCL retains it).
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
from typing import TYPE_CHECKING, Generic, TypeVar

from pyggml.backend.protocol import Backend, Device
from pyggml.errors import AllocationError, GraphError
from pyggml.serial import PLACEMENT
from pyggml.tensor import Tensor

if TYPE_CHECKING:
    from pyggml.graph import Graph

P = TypeVar("P")
RECENT = 16

_offset = attrgetter("offset")
_buffer = attrgetter("buffer")
_src = attrgetter("src")
_serial = attrgetter("serial")

PlacementKey = tuple[tuple[int, ...], tuple[tuple[int, ...], ...], tuple[int, ...], tuple[int, ...]]
"""(node serials, each node's source serials (0: none), offsets and buffer serials (0: none) of the distinct nodes
and sources in order of first appearance): equal keys mean the same nodes, wired alike, in the same places."""

Stamp = tuple[int, int, int]
"""(placement clock, graph version, node count) when a plan was last found valid for its graph."""


def placement_key(graph: Graph) -> PlacementKey:
    """The graph's placement, named by serials (hashable, holds no object)."""
    nodes = graph.nodes
    srcs = tuple(map(_src, nodes))
    seen: dict[int, Tensor] = {}
    for n, ss in zip(nodes, srcs, strict=True):
        seen[n.serial] = n
        for s in ss:
            if s is not None:
                seen.setdefault(s.serial, s)
    ts = seen.values()
    bufs = tuple(0 if b is None else b.serial for b in map(_buffer, ts))
    return (tuple(map(_serial, nodes)), tuple(tuple(0 if s is None else s.serial for s in ss) for ss in srcs),
            tuple(map(_offset, ts)), bufs)


def stamp_of(graph: Graph) -> Stamp:
    """Read before looking at the graph's tensors: a change after the read moves the clock past it."""
    return PLACEMENT.now, graph.version, len(graph.nodes)


class _Entry(Generic[P]):
    """A live graph's plan, the placement key it was built or found for, and the stamp of its last check."""

    __slots__ = ("graph", "key", "plan", "stamp")

    def __init__(self, graph: weakref.ref[Graph], key: PlacementKey, stamp: Stamp, plan: P) -> None:
        self.graph = graph
        """Only to learn when the graph dies (its weakref callback queues the uid for the next sweep)."""
        self.key = key
        self.stamp = stamp
        self.plan = plan


def _on_death(dead: list[int], uid: int) -> Callable[[weakref.ref[Graph]], None]:
    """A weakref callback that notes the uid (it may run inside any allocation, on any thread: it only appends)."""

    def died(_ref: weakref.ref[Graph]) -> None:
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
        """graph uid -> the graph's (weakly held) entry: plan, placement key, stamp."""
        self._dead: list[int] = []
        """uids of graphs that died since the last compute (appended by weakref callbacks)."""
        self._recent: OrderedDict[PlacementKey, P] = OrderedDict()
        self.builds = 0
        """Plans built so far (replays of an unchanged graph build none)."""
        self.key_checks = 0
        """Lookups that had to compare placement keys (the stamp had moved): a replay with nothing placed since
        takes none."""

    def __len__(self) -> int:
        return len(self._by_graph)

    def get(self, graph: Graph) -> P:
        if self._dead:
            self._sweep()
        stamp = stamp_of(graph)
        entry = self._by_graph.get(graph.uid)
        if entry is not None and entry.stamp == stamp:
            return entry.plan
        self.key_checks += 1
        key = placement_key(graph)
        if entry is not None and entry.key == key:
            entry.stamp = stamp
            return entry.plan
        plan = self._recent.get(key)
        dropped: list[P] = []
        if plan is None:
            plan = self._build(graph)  # may raise: the cache is left as it was
            self.builds += 1
            self._recent[key] = plan
            dropped = [self._recent.popitem(last=False)[1] for _ in range(len(self._recent) - self._recent_max)]
        else:
            self._recent.move_to_end(key)
        if entry is None:
            self._by_graph[graph.uid] = _Entry(weakref.ref(graph, _on_death(self._dead, graph.uid)), key, stamp, plan)
        else:
            dropped.append(entry.plan)
            entry.key, entry.stamp, entry.plan = key, stamp, plan
        self._release_unused(dropped)
        return plan

    def held(self, graph_uid: int) -> P | None:
        """The plan kept for the graph with this uid, if the cache still keeps one (it holds nothing alive)."""
        entry = self._by_graph.get(graph_uid)
        return entry.plan if entry is not None else None

    def clear(self) -> None:
        plans = [e.plan for e in self._by_graph.values()] + list(self._recent.values())
        self._by_graph.clear()
        self._recent.clear()
        self._release_unused(plans)

    def _sweep(self) -> None:
        """Forget the plans of graphs that no longer exist."""
        gone: list[P] = []
        while self._dead:
            uid = self._dead.pop()
            e = self._by_graph.get(uid)
            if e is not None and e.graph() is None:  # uids are never reused: the entry is the dead graph's
                gone.append(self._by_graph.pop(uid).plan)
        self._release_unused(gone)

    def _release_unused(self, plans: list[P]) -> None:
        if self._release is None or not plans:
            return
        held = {id(e.plan) for e in self._by_graph.values()} | {id(p) for p in self._recent.values()}
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
