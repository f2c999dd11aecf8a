"""GraphAllocator (ggml's gallocr): plan every intermediate's address once (`reserve`), replay it many times
(`alloc_graph`).

One TensorAllocator per distinct buffer type object (buffer ids that share a buffer type object share the
allocator and the buffer). Each allocator's chunks become backend buffers (usage COMPUTE) sized to the chunks'
high-water marks; buffers only ever grow. Tensors that already have a buffer that is not one of this
allocator's (weights, KV caches) are not owned: they are read in place and never moved or freed.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Sequence
from typing import Literal, NamedTuple

from pyggml.alloc.buffers import MultiBuffer
from pyggml.alloc.by_size import lower_bound, repack
from pyggml.alloc.plan import OWNED, MemoryPlan, MemoryPlanner
from pyggml.alloc.replay import Replay
from pyggml.alloc.tensor_alloc import TensorAllocator
from pyggml.backend.protocol import Buffer, BufferType, BufferUsage
from pyggml.errors import AllocationError, GraphError
from pyggml.graph import Graph

log = logging.getLogger(__name__)


class AllocRecord(NamedTuple):
    """Where the allocator put one tensor (ggml's tensor_alloc). buffer_id -1 and size_max 0: not placed by the
    allocator (pre-allocated, a view, or an empty src slot)."""

    buffer_id: int
    offset: int
    size_max: int
    chunk: int = 0


NOT_OWNED = AllocRecord(-1, 0, 0)


class NodeAlloc(NamedTuple):
    dst: AllocRecord
    src: tuple[AllocRecord, ...]
    """One record per non-empty src slot of the node, in slot order."""


PlacementPolicy = Literal["smallest", "ggml", "by_size"]
PLACEMENT_POLICIES: tuple[PlacementPolicy, ...] = ("smallest", "ggml", "by_size")
_Candidate = tuple[MemoryPlan, list[list[int]]]
"""A plan and, per allocator, its chunk sizes."""


class GraphAllocator:
    """Static memory planning of compute graphs over one or several buffer types (buffer ids index `bufts`).

    `view_inplace` lets a node take over a dying data owner through a view of it (ggml's branch for this never
    runs). `placement`: "ggml" is ggml's online best fit, so `placement="ggml", view_inplace=False` gives ggml's
    plan exactly; "by_size" also repacks the planned blocks offline, largest first, when that is smaller;
    "smallest" (the default) plans with `view_inplace` and, where that took a reuse ggml would not, with ggml's
    rules too, repacks the more promising plan, and keeps the smallest plan that is on no buffer type larger than
    ggml's own (docs/allocator.md)."""

    def __init__(self, bufts: BufferType | Sequence[BufferType], *, view_inplace: bool = True,
                 placement: PlacementPolicy = "smallest") -> None:
        self.bufts: list[BufferType] = [bufts] if isinstance(bufts, BufferType) else list(bufts)
        if not self.bufts:
            raise AllocationError("GraphAllocator needs at least one buffer type")
        self.view_inplace = view_inplace
        if placement not in PLACEMENT_POLICIES:
            raise AllocationError(f"GraphAllocator: placement {placement!r} is not one of "
                                  f"{', '.join(PLACEMENT_POLICIES)}")
        self.placement = placement
        self._unique: list[TensorAllocator] = []
        self._slot: list[int] = []
        """buffer id -> index of its allocator (and chunk buffers) in `_unique`."""
        for i, buft in enumerate(self.bufts):
            if not isinstance(buft, BufferType):
                raise AllocationError(f"GraphAllocator: buffer type {i} is {buft!r}, not a BufferType")
            same = next((self._slot[j] for j in range(i) if self.bufts[j] is buft), None)
            if same is None:
                same = len(self._unique)
                self._unique.append(TensorAllocator(buft.alignment, buft.max_size, name=buft.name))
            self._slot.append(same)
        self._allocs = [self._unique[s] for s in self._slot]
        self._chunk_bufs: list[list[Buffer]] = [[] for _ in self._unique]
        self.buffers: list[Buffer | None] = [None] * len(self.bufts)
        self._own: weakref.WeakSet[Buffer] = weakref.WeakSet()
        self._replay: Replay | None = None
        self._plan: MemoryPlan | None = None

    @property
    def n_buffers(self) -> int:
        return len(self.bufts)

    def owns(self, buffer: Buffer) -> bool:
        """Whether `buffer` is one of the buffers this allocator made (current or replaced)."""
        return buffer in self._own

    # ---- reserve ----------------------------------------------------------------------------------------------

    def reserve(self, graph: Graph, node_buffer_ids: Sequence[int] | None = None,
                leaf_buffer_ids: Sequence[int] | None = None) -> None:
        """Plan every tensor of `graph` and size the buffers (they only grow). Tensors are placed by
        `alloc_graph`. Raises AllocationError naming the tensor and sizes when something cannot fit; on any error
        the previous plan and buffers stay as they were."""
        node_ids = self._check_ids(node_buffer_ids, graph.n_nodes, "node")
        leaf_ids = self._check_ids(leaf_buffer_ids, graph.n_leafs, "leaf")
        plan, sizes = self._make_plan(graph, node_ids, leaf_ids)
        chunk_bufs = self._grown_buffers(sizes)
        for old, new in zip(self._chunk_bufs, chunk_bufs, strict=True):
            for b in old:
                if b not in new:
                    b.free()
        self._chunk_bufs = chunk_bufs
        for parts in chunk_bufs:
            self._own.update(parts)
        views = [parts[0] if len(parts) == 1 else MultiBuffer(parts) for parts in chunk_bufs]
        self.buffers = [views[s] for s in self._slot]
        self._replay = Replay(plan, self._place, self.bufts)
        self._plan = _strip(plan)
        if log.isEnabledFor(logging.DEBUG):
            for i in range(len(self.bufts)):
                log.debug("reserve: %s buffer %d: %d bytes", self.bufts[i].name, i, self.buffer_size(i))

    def _make_plan(self, graph: Graph, node_ids: Sequence[int], leaf_ids: Sequence[int]) -> _Candidate:
        """The plan of `graph` for this allocator's placement, and each allocator's chunk sizes under it."""
        n_slots, max_chunk = len(self._unique), [a.max_chunk_size for a in self._unique]

        planner = MemoryPlanner(graph, self.bufts, self._allocs, node_ids, leaf_ids, self.owns, self.view_inplace)

        def online(ggml_rules: bool = False) -> _Candidate:
            plan = planner.run_ggml_rules() if ggml_rules else planner.run()
            return plan, [a.chunk_sizes() for a in self._unique]

        def bound(plan: MemoryPlan) -> list[int]:
            return lower_bound(plan.blocks, self._slot, n_slots)

        first = online()
        if self.placement == "ggml":
            return first
        if self.placement == "by_size":
            repack(first[0], self._slot, n_slots, max_chunk, first[1], bound(first[0]))
            return first
        # "smallest": ggml's own plan is the reference; another plan is taken only where it is nowhere larger
        candidates = [first]
        if first[0].beyond_ggml:
            candidates.append(online(ggml_rules=True))
        ggml_sizes = [sum(s) for s in candidates[-1][1]]

        def total(sizes: list[list[int]]) -> int:
            return sum(map(sum, sizes))

        def allowed(sizes: list[list[int]]) -> bool:
            return all(sum(s) <= g for s, g in zip(sizes, ggml_sizes, strict=True))

        best = min((c for c in candidates if allowed(c[1])), key=lambda c: total(c[1]))
        # repack the candidate with the lowest liveness bound (packing both costs twice the time for a few bytes),
        # unless that bound shows that no packing can beat the best online plan
        bounds = [bound(c[0]) for c in candidates]
        i = min(range(len(candidates)), key=lambda i: sum(bounds[i]))
        if sum(bounds[i]) < total(best[1]):
            plan, sizes = candidates[i][0], [list(s) for s in candidates[i][1]]
            # repack only ever makes a plan smaller: if this plan was the best, it still is, with the new sizes
            repack(plan, self._slot, n_slots, max_chunk, sizes, bounds[i])
            if allowed(sizes) and total(sizes) < total(best[1]):
                best = plan, sizes
        return best

    def _place(self, buffer_id: int, chunk: int) -> Buffer:
        return self._chunk_bufs[self._slot[buffer_id]][chunk]

    def _check_ids(self, ids: Sequence[int] | None, n: int, what: str) -> Sequence[int]:
        if ids is None:
            return [0] * n
        if len(ids) != n:
            raise GraphError(f"reserve: {len(ids)} {what} buffer ids for a graph of {n} {what}s")
        bad = [i for i, b in enumerate(ids) if not 0 <= b < len(self.bufts)]
        if bad:
            raise GraphError(f"reserve: {what} {bad[0]} has buffer id {ids[bad[0]]}, not in 0..{len(self.bufts) - 1}")
        return ids

    def _grown_buffers(self, sizes: list[list[int]]) -> list[list[Buffer]]:
        """Each allocator's chunk buffers after this plan: a chunk that outgrew its buffer gets a new one; nothing
        shrinks. All-or-nothing: on failure, buffers made here are freed and the error names type and size."""
        made: list[Buffer] = []
        out: list[list[Buffer]] = []
        for u, planned in enumerate(sizes):
            parts = list(self._chunk_bufs[u])
            buft = self.bufts[self._slot.index(u)]
            for c, need in enumerate(planned or [0]):
                if c < len(parts) and parts[c].size >= need:
                    continue
                try:
                    buf = buft.alloc_buffer(need)
                except Exception as e:
                    for b in made:
                        b.free()
                    raise AllocationError(
                        f"cannot allocate compute buffer {c} of buffer type '{buft.name}': {need} bytes ({e})"
                    ) from e
                buf.usage = BufferUsage.COMPUTE
                made.append(buf)
                if c < len(parts):
                    parts[c] = buf
                else:
                    parts.append(buf)
            out.append(parts)
        return out

    # ---- replay -----------------------------------------------------------------------------------------------

    def alloc_graph(self, graph: Graph) -> bool:
        """Place every tensor of `graph` where the reserved plan says (views from their data owners). A graph that
        no longer fits the plan (other node/leaf counts, a tensor bigger than its record) is re-reserved when
        there is one buffer id; with several, returns False and the caller must `reserve` with its ids."""
        rp = self._replay
        leafs, nodes = graph.leafs, graph.nodes
        if rp is None or not rp.fits(leafs, nodes, self.owns):
            if len(self.bufts) != 1:
                log.debug("alloc_graph: graph %d does not fit the reserved plan; reserve it first", graph.uid)
                return False
            log.debug("alloc_graph: graph %d does not fit the reserved plan; reserving again", graph.uid)
            self.reserve(graph)
            rp = self._replay
            assert rp is not None
        rp.assign(leafs, nodes, self.owns)
        return True

    # ---- queries ----------------------------------------------------------------------------------------------

    def buffer_size(self, buffer_id: int) -> int:
        """Bytes of the buffer of `buffer_id`; 0 when none yet or when an earlier id shares it (no double count)."""
        if not 0 <= buffer_id < len(self.bufts):
            raise AllocationError(f"buffer id {buffer_id} is not in 0..{len(self.bufts) - 1}")
        buf = self.buffers[buffer_id]
        if buf is None or any(self.buffers[j] is buf for j in range(buffer_id)):
            return 0
        return buf.size

    @property
    def leaf_allocs(self) -> list[AllocRecord]:
        """The reserved record of each leaf of the last reserved graph."""
        p = self._plan
        return [] if p is None else [_record(p, k) for k in range(p.n_leafs)]

    @property
    def node_allocs(self) -> list[NodeAlloc]:
        """The reserved records of each node of the last reserved graph: its own and its srcs'."""
        p = self._plan
        if p is None:
            return []
        return [NodeAlloc(_record(p, p.n_leafs + i), tuple(_record(p, s) for s in srcs))
                for i, srcs in enumerate(p.node_srcs)]

    def free(self) -> None:
        """Release the buffers; the next alloc_graph needs a reserve."""
        for parts in self._chunk_bufs:
            for b in parts:
                b.free()
        self._chunk_bufs = [[] for _ in self._unique]
        self.buffers = [None] * len(self.bufts)
        self._replay = None
        self._plan = None


def _record(p: MemoryPlan, k: int) -> AllocRecord:
    if p.kind[k] != OWNED:
        return NOT_OWNED
    return AllocRecord(p.buffer_id[k], p.offset[k], p.size[k], p.chunk[k])


def _strip(p: MemoryPlan) -> MemoryPlan:
    """The plan without tensor references (records only), so a reserve does not keep a graph alive."""
    return MemoryPlan([], p.n_leafs, p.n_nodes, p.extra_origin, p.node_srcs, p.kind, p.buffer_id, p.chunk, p.offset,
                p.size, p.block, p.blocks, p.beyond_ggml)
