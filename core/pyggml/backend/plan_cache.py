"""Launch plans per graph, for backends that build one per graph (the OpenCL and CUDA plugins): a graph that is
replayed never builds again.

A plan is bound to the graph object it was built for and checked against the graph's fingerprint on each compute,
so however many graphs a backend runs in turn, each live one replays: the meta device (tensor split) hands every
device one subgraph per allreduce and one ADD graph per butterfly round, 121 distinct graphs per decode step for
SmolLM2 on two devices, far more than any fixed-size cache of recent plans holds. A plan goes when its graph is
gone (released on the next compute) or when the graph's fingerprint changes (its tensors moved). A few plans are also
kept by fingerprint alone (`recent`, least recently used first out), for a new graph object over the same tensors
and placement (e.g. a graph view made per compute).
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pyggml.ops.base import VIEW_OPS, Op
from pyggml.tensor import Tensor, TensorFlag

if TYPE_CHECKING:
    from pyggml.graph import Graph

P = TypeVar("P")
Key = tuple[Any, ...]
RECENT = 16


def _tensor_key(t: Tensor | None) -> Key:
    if t is None:
        return ()
    return (id(t.buffer), t.offset, t.type, t.ne, t.nb)


def fingerprint(graph: Graph) -> Key:
    """Everything a plan depends on; equal fingerprints mean the same launches with the same arguments."""
    return tuple(
        (id(n), n.op, n.params, _tensor_key(n), tuple(_tensor_key(s) for s in n.src))
        for n in graph.nodes
        if n.flags & TensorFlag.COMPUTE and n.op is not Op.NONE and n.op not in VIEW_OPS
    )


@dataclass(slots=True)
class _Entry(Generic[P]):
    graph: weakref.ref[Graph]
    key: Key
    plan: P


def _on_death(dead: list[int], uid: int) -> Callable[[weakref.ref[Graph]], None]:
    """A weakref callback that only notes the uid (it may run inside any allocation, on any thread)."""
    return lambda _ref: dead.append(uid)


class PlanCache(Generic[P]):
    """`get(graph)` returns the graph's plan, building it with `build` only when the graph is new to the cache or
    its fingerprint changed. `release(plan)` (optional) is called, on the caller's thread, for every plan that no
    graph and no recent entry holds any more (CUDA graphs to destroy)."""

    def __init__(self, build: Callable[[Graph], P], release: Callable[[P], None] | None = None,
                 recent: int = RECENT) -> None:
        self._build = build
        self._release = release
        self._recent_max = recent
        self._by_graph: dict[int, _Entry[P]] = {}
        """graph uid -> the graph (weakly), its fingerprint and plan."""
        self._dead: list[int] = []
        """uids of graphs that died since the last compute (appended by weakref callbacks, which only do that)."""
        self._recent: OrderedDict[Key, P] = OrderedDict()
        self.builds = 0

    def __len__(self) -> int:
        return len(self._by_graph)

    def get(self, graph: Graph) -> P:
        if self._dead:
            self._sweep()
        key = fingerprint(graph)
        entry = self._by_graph.get(graph.uid)
        if entry is not None and entry.key == key:
            return entry.plan
        plan = self._recent.get(key)
        if plan is None:
            plan = self._build(graph)  # may raise: the cache is left as it was
            self.builds += 1
            self._recent[key] = plan
            dropped = [self._recent.popitem(last=False)[1] for _ in range(len(self._recent) - self._recent_max)]
        else:
            self._recent.move_to_end(key)
            dropped = []
        self._by_graph[graph.uid] = _Entry(weakref.ref(graph, _on_death(self._dead, graph.uid)), key, plan)
        if entry is not None:
            dropped.append(entry.plan)
        self._release_unused(dropped)
        return plan

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
            if e is not None and e.graph() is None:
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
