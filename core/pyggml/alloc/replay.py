"""Replay of a reserved plan: no analysis, only checks that the graph still fits and then assignments.

At reserve time the plan is flattened into per-list arrays (leafs, nodes): which positions hold tensors the
allocator places (with their buffer, offset, type, ne, nb and alloc size), which hold pre-allocated tensors and
which hold views. Tensors are fetched by position with `operator.itemgetter` and compared with `map`, so the
per-tensor work of a replay runs mostly in C; only placing a tensor is a Python statement.

A graph fits its plan when the node and leaf counts are equal and every tensor is what the plan expects: a
placed tensor has the recorded type/ne/nb (or, failing that, an alloc size within the recorded one, or it
now has its own buffer), a pre-allocated tensor still has a buffer, a view is still a view.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import attrgetter, itemgetter
from typing import Any

from pyggml.alloc.plan import EXTERNAL, OWNED, VIEW, MemoryPlan
from pyggml.backend.protocol import Buffer, BufferType
from pyggml.context import init_view
from pyggml.tensor import Tensor

Getter = Callable[[Sequence[Tensor]], tuple[Tensor, ...]]
Owns = Callable[[Buffer], bool]

_ne = attrgetter("ne")
_nb = attrgetter("nb")
_type = attrgetter("type")
_buffer = attrgetter("buffer")
_view_src = attrgetter("view_src")


def _getter(idx: Sequence[int]) -> Getter:
    if not idx:
        return lambda seq: ()
    if len(idx) == 1:
        i = idx[0]
        return lambda seq: (seq[i],)
    get: Getter = itemgetter(*idx)
    return get


def _calls_init(buf: Buffer) -> bool:
    return type(buf).init_tensor is not Buffer.init_tensor


class ListReplay:
    """The placements of one tensor list (the graph's leafs or its nodes)."""

    def __init__(self, plan: MemoryPlan, first: int, count: int, place: Callable[[int, int], Buffer],
                 bufts: Sequence[BufferType]) -> None:
        kinds = plan.kind
        owned = [k for k in range(first, first + count) if kinds[k] == OWNED]
        self.get_owned = _getter([k - first for k in owned])
        self.get_external = _getter([k - first for k in range(first, first + count) if kinds[k] == EXTERNAL])
        self.get_views = _getter([k - first for k in range(first, first + count) if kinds[k] == VIEW])
        self.bufs = [place(plan.buffer_id[k], plan.chunk[k]) for k in owned]
        self.offsets = [plan.offset[k] for k in owned]
        tensors = plan.tensors
        self.types = [tensors[k].type for k in owned]
        self.nes = [tensors[k].ne for k in owned]
        self.nbs = [tensors[k].nb for k in owned]
        self.size_max = [plan.size[k] for k in owned]
        self.bufts = [bufts[plan.buffer_id[k]] for k in owned]
        self.call_init = any(_calls_init(b) for b in self.bufs)

    def fits(self, seq: Sequence[Tensor], owns: Owns) -> bool:
        ts = self.get_owned(seq)
        if list(map(_view_src, ts)).count(None) != len(ts):
            return False  # a tensor the plan places is a view now
        if list(map(_ne, ts)) != self.nes or list(map(_nb, ts)) != self.nbs or list(map(_type, ts)) != self.types:
            for t, ne, nb, tt, buft, size_max in zip(ts, self.nes, self.nbs, self.types, self.bufts,
                                                     self.size_max, strict=True):
                if t.ne == ne and t.nb == nb and t.type == tt:
                    continue
                b = t.buffer
                if (b is None or owns(b)) and buft.alloc_size(t) > size_max:
                    return False
        if None in map(_buffer, self.get_external(seq)):
            return False
        return None not in map(_view_src, self.get_views(seq))

    def assign(self, seq: Sequence[Tensor], owns: Owns) -> None:
        ts = self.get_owned(seq)
        for t, buf, off in zip(ts, self.bufs, self.offsets, strict=True):
            b = t.buffer
            if b is not buf and b is not None and not owns(b):
                continue  # it has its own memory now (ggml: a tensor with data always fits)
            t.buffer = buf
            t.offset = off
        if self.call_init:
            for t, buf in zip(ts, self.bufs, strict=True):
                if t.buffer is buf:
                    buf.init_tensor(t)

    def init_views(self, seq: Sequence[Tensor]) -> None:
        for t in self.get_views(seq):
            init_view(t)


class ExtraReplay:
    """Tensors met only as srcs of nodes (graph views): fetched as nodes[i].src[j]; a plain Python loop."""

    def __init__(self, plan: MemoryPlan, place: Callable[[int, int], Buffer], bufts: Sequence[BufferType]) -> None:
        base = plan.n_leafs + plan.n_nodes
        self.items: list[tuple[int, int, int, Any]] = []
        for e, (i, j) in enumerate(plan.extra_origin):
            k = base + e
            t = plan.tensors[k]
            kind = plan.kind[k]
            rec = None
            if kind == OWNED:
                bid = plan.buffer_id[k]
                rec = (place(bid, plan.chunk[k]), plan.offset[k], (t.type, t.ne, t.nb), plan.size[k], bufts[bid])
            self.items.append((i, j, kind, rec))

    def _get(self, nodes: Sequence[Tensor], i: int, j: int) -> Tensor | None:
        src = nodes[i].src
        return src[j] if j < len(src) else None

    def fits(self, nodes: Sequence[Tensor], owns: Owns) -> bool:
        for i, j, kind, rec in self.items:
            t = self._get(nodes, i, j)
            if t is None or (kind == VIEW) != (t.view_src is not None):
                return False
            if kind == EXTERNAL and t.buffer is None:
                return False
            if rec is not None and (t.type, t.ne, t.nb) != rec[2]:
                b = t.buffer
                if (b is None or owns(b)) and rec[4].alloc_size(t) > rec[3]:
                    return False
        return True

    def assign(self, nodes: Sequence[Tensor], owns: Owns) -> None:
        for i, j, _, rec in self.items:
            t = nodes[i].src[j]
            assert t is not None
            if rec is None:
                continue
            b = t.buffer
            if b is not None and b is not rec[0] and not owns(b):
                continue
            t.buffer, t.offset = rec[0], rec[1]
            rec[0].init_tensor(t)

    def init_views(self, nodes: Sequence[Tensor]) -> None:
        for i, j, kind, _ in self.items:
            t = nodes[i].src[j]
            if kind == VIEW and t is not None:
                init_view(t)


class Replay:
    """Everything alloc_graph needs to place a graph that fits the reserved plan."""

    def __init__(self, plan: MemoryPlan, place: Callable[[int, int], Buffer], bufts: Sequence[BufferType]) -> None:
        self.n_leafs = plan.n_leafs
        self.n_nodes = plan.n_nodes
        self.leafs = ListReplay(plan, 0, plan.n_leafs, place, bufts)
        self.nodes = ListReplay(plan, plan.n_leafs, plan.n_nodes, place, bufts)
        self.extras = ExtraReplay(plan, place, bufts) if plan.extra_origin else None

    def fits(self, leafs: Sequence[Tensor], nodes: Sequence[Tensor], owns: Owns) -> bool:
        if len(leafs) != self.n_leafs or len(nodes) != self.n_nodes:
            return False
        if not (self.leafs.fits(leafs, owns) and self.nodes.fits(nodes, owns)):
            return False
        return self.extras is None or self.extras.fits(nodes, owns)

    def assign(self, leafs: Sequence[Tensor], nodes: Sequence[Tensor], owns: Owns) -> None:
        """Place every owned tensor, then initialise every view from its (now placed) data owner."""
        self.leafs.assign(leafs, owns)
        self.nodes.assign(nodes, owns)
        if self.extras is not None:
            self.extras.assign(nodes, owns)
        self.leafs.init_views(leafs)
        self.nodes.init_views(nodes)
        if self.extras is not None:
            self.extras.init_views(nodes)
