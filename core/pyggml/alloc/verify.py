"""verify_allocation: an independent check of a placed graph (it shares no code with the planner).

Every tensor the graph touches must have a buffer; views must sit at their owner's offset plus view_offs; data
owners must be aligned to their buffer type and lie inside their buffer; and two data owners whose lifetimes
overlap must not overlap in memory, except a node computed in place of a parent whose last use it is.

Lifetimes are in graph steps (node indices): a data owner lives from the step that produces it (-1 for leafs,
INPUT tensors and srcs outside the graph) to the last step that reads it or writes it, directly or through a
view; OUTPUT tensors and tensors in buffers whose usage is not COMPUTE (weights, context memory) live for the
whole graph.
"""

from __future__ import annotations

from pyggml.backend.protocol import BufferUsage
from pyggml.errors import AllocationError
from pyggml.graph import Graph
from pyggml.ops.base import OPS
from pyggml.tensor import Tensor, TensorFlag


def _owner(t: Tensor) -> Tensor:
    while t.view_src is not None:
        t = t.view_src
    return t


def _name(t: Tensor) -> str:
    return f"'{t.name}' ({t.op.name}, {t.type} ne={list(t.ne)})"


def _check_placement(t: Tensor) -> None:
    buf = t.buffer
    if buf is None:
        raise AllocationError(f"tensor {_name(t)} has no buffer")
    if t.view_src is not None:
        v = t.view_src
        if v.buffer is not buf or t.offset != v.offset + t.view_offs:
            raise AllocationError(
                f"view {_name(t)} is at {buf!r} offset {t.offset}, but its source {_name(v)} is at "
                f"{v.buffer!r} offset {v.offset} + view_offs {t.view_offs}"
            )
        size = t.nbytes()
    else:
        align = buf.buft.alignment
        if t.offset % align:
            raise AllocationError(f"tensor {_name(t)} at offset {t.offset} is not aligned to {align}")
        size = buf.buft.alloc_size(t)
    if t.offset < 0 or t.offset + size > buf.size:
        raise AllocationError(
            f"tensor {_name(t)}: [{t.offset}, {t.offset + size}) is outside its buffer {buf!r} of {buf.size} bytes"
        )


class _Lifetimes:
    def __init__(self, graph: Graph) -> None:
        nodes = graph.nodes
        self.end_all = len(nodes)
        self.owners: dict[int, Tensor] = {}
        self.start: dict[int, int] = {}
        self.end: dict[int, int] = {}
        for t in graph.leafs:
            if t.view_src is None:
                self.produce(t, -1)
        for i, t in enumerate(nodes):
            if t.view_src is None:
                self.produce(t, -1 if t.flags & TensorFlag.INPUT else i)
        for t in [*graph.leafs, *nodes]:
            self.produce(t, -1)  # views (their owner, when outside the graph, exists from the start)
        for i, t in enumerate(nodes):
            for s in t.src:
                if s is not None:
                    self.produce(s, -1)
                    self.use(s, i)
            if t.view_src is not None:
                self.use(t, i)
        for k, o in self.owners.items():
            buf = o.buffer
            if o.flags & TensorFlag.OUTPUT or (buf is not None and buf.usage != BufferUsage.COMPUTE):
                self.end[k] = self.end_all
                if buf is not None and buf.usage != BufferUsage.COMPUTE:
                    self.start[k] = -1

    def produce(self, t: Tensor, step: int) -> None:
        o = _owner(t)
        k = id(o)
        if k not in self.owners:
            self.owners[k] = o
            self.start[k] = step if o is t else -1
            self.end[k] = self.start[k]
        if t.flags & TensorFlag.OUTPUT:
            self.end[k] = self.end_all

    def use(self, t: Tensor, step: int) -> None:
        k = id(_owner(t))
        self.end[k] = max(self.end[k], step)


def _inplace_pair(node: Tensor, parent: Tensor) -> bool:
    """`node` was given `parent`'s memory in place: a src of node that is (a view of) parent starts where node
    starts, with node's layout, and the op may run in place."""
    d = OPS.get(node.op)
    if d is None or not d.can_inplace:
        return False
    for x in node.src:
        if x is not None and _owner(x) is parent and x.buffer is node.buffer and x.offset == node.offset \
                and node.same_layout(x):
            return True
    return False


def verify_allocation(graph: Graph) -> None:
    """Raise AllocationError, naming the tensors, offsets and steps, if the placed graph is not safe to run."""
    seen: set[int] = set()
    for t in [*graph.leafs, *graph.nodes, *(s for n in graph.nodes for s in n.src if s is not None)]:
        if id(t) not in seen:
            seen.add(id(t))
            _check_placement(t)
    lt = _Lifetimes(graph)
    for o in lt.owners.values():
        if id(o) not in seen:
            _check_placement(o)
    items = []
    for k, o in lt.owners.items():
        assert o.buffer is not None
        size = o.buffer.buft.alloc_size(o)
        if size:
            items.append((lt.start[k], lt.end[k], o.offset, o.offset + size, o))
    items.sort(key=lambda x: x[0])
    active: dict[int, list[tuple[int, int, int, int, Tensor]]] = {}
    for item in items:
        start, end, lo, hi, t = item
        assert t.buffer is not None
        live = [u for u in active.get(id(t.buffer), []) if u[1] >= start]
        for u in live:
            if lo < u[3] and u[2] < hi and not (u[1] == start and _inplace_pair(t, u[4])):
                raise AllocationError(
                    f"{_name(t)} [{lo}, {hi}) live in steps {start}..{end} overlaps {_name(u[4])} "
                    f"[{u[2]}, {u[3]}) live in steps {u[0]}..{u[1]} in {t.buffer!r} (graph of "
                    f"{len(graph.nodes)} nodes)"
                )
        live.append(item)
        active[id(t.buffer)] = live
