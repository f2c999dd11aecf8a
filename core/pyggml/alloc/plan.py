"""The liveness pass of the graph allocator (ggml's alloc_graph_impl), over integer tensor ids.

Every tensor the graph touches gets an id: leafs first, then nodes, then srcs that are in neither list
("extras", e.g. the inputs of a graph view). A tensor is OWNED (the allocator places it), a VIEW (placed from
its data owner) or EXTERNAL (it already has a buffer that is not one of this allocator's, e.g. a weight).

Order of decisions, as in ggml: every leaf (and every extra) is allocated; a pre-pass counts children and
views and allocates INPUT tensors; then for each node its srcs are allocated, the node is allocated (possibly
in place of a dying parent) and every src whose last consumer this was is freed (a view frees its data owner
once the owner has no children and no views left). OUTPUT tensors are never freed. See docs/allocator.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pyggml.alloc.tensor_alloc import TensorAllocator, align_up
from pyggml.backend.protocol import Buffer, BufferType
from pyggml.errors import AllocationError, GraphError
from pyggml.graph import Graph
from pyggml.ops.base import OPS, Op
from pyggml.tensor import Tensor, TensorFlag

OWNED, VIEW, EXTERNAL = 0, 1, 2
NO_ROOT, UNTRACKED_ROOT = -1, -2
NEVER = 1 << 62

_OUTPUT = int(TensorFlag.OUTPUT)
_INPLACE = frozenset(op for op, d in OPS.items() if d.can_inplace)


@dataclass(slots=True)
class MemoryPlan:
    """Where every tensor of one graph goes. Lists are indexed by tensor id."""

    tensors: list[Tensor]
    n_leafs: int
    n_nodes: int
    extra_origin: list[tuple[int, int]]
    """(node index, src slot) where each extra tensor (id n_leafs + n_nodes + e) was first met."""
    node_srcs: list[tuple[int, ...]]
    """Per node: the ids of its srcs in slot order (None slots skipped)."""
    kind: list[int]
    buffer_id: list[int]
    chunk: list[int]
    offset: list[int]
    size: list[int]
    """alloc size of an OWNED tensor in its buffer type (0 otherwise)."""
    block: list[int]
    """Per OWNED tensor: the memory block it lives in (in-place results share their parent's block)."""
    blocks: Blocks
    beyond_ggml: bool = False
    """Whether an in-place reuse through a view parent (a rule ggml does not apply) was taken."""


@dataclass(slots=True)
class Blocks:
    """Every allocation of the pass as a block: buffer id, aligned size, and the event ticks (allocations and
    frees, counted in order) at which it was taken and given back (NEVER: kept to the end)."""

    buffer_id: list[int]
    size: list[int]
    start: list[int]
    end: list[int]


def _root(t: Tensor) -> Tensor:
    r = t.view_src
    assert r is not None
    while r.view_src is not None:
        r = r.view_src
    return r


class MemoryPlanner:
    """The liveness pass over one graph. The graph is analysed once (ids, data owners, kinds, children and view
    counts); `run` is one pass with the in-place rules asked for and `run_ggml_rules` one with ggml's, each
    returning its MemoryPlan (the allocators are reset first), so that both cost one analysis."""

    def __init__(
        self,
        graph: Graph,
        bufts: Sequence[BufferType],
        allocs: Sequence[TensorAllocator],
        node_ids: Sequence[int],
        leaf_ids: Sequence[int],
        is_own: Callable[[Buffer], bool],
        view_inplace: bool,
    ) -> None:
        self.graph = graph
        self.bufts = bufts
        self.allocs = allocs
        self.node_ids = node_ids
        self.leaf_ids = leaf_ids
        self.is_own = is_own
        self.rules_view_inplace = view_inplace
        leafs, nodes = graph.leafs, graph.nodes
        self.n_leafs, self.n_nodes = len(leafs), len(nodes)
        self.tensors: list[Tensor] = [*leafs, *nodes]
        self.index: dict[int, int] = {id(t): k for k, t in enumerate(self.tensors)}
        if len(self.index) != len(self.tensors):
            raise GraphError(f"graph {graph.uid}: a tensor appears twice among its leafs and nodes")
        self.extra_origin: list[tuple[int, int]] = []
        self.node_srcs = [self._src_ids(i, node) for i, node in enumerate(nodes)]
        n = len(self.tensors)
        self.root = [self._root_id(t) for t in self.tensors]
        self.kind = [VIEW if r != NO_ROOT else self._kind(t) for t, r in zip(self.tensors, self.root, strict=True)]
        self.flags = [int(t.flags) for t in self.tensors]
        """TensorFlag bits as plain ints (IntFlag arithmetic is slow in the hot loops)."""
        self.children0, self.views0, self.inputs = self._count()
        self._alloc_sizes = [[-1] * n for _ in bufts]
        """[buffer id][k]: alloc size, computed once for all passes (-1: not yet)."""

    def _reset(self, view_inplace: bool) -> None:
        """The state of one pass."""
        n = len(self.tensors)
        self.view_inplace = view_inplace
        self.n_children = list(self.children0)
        self.n_views = list(self.views0)
        self.placed = [False] * n
        self.alive = [False] * n
        """ggml's `allocated` flag: owned and still holding its memory (cleared when freed or donated)."""
        self.buffer_id = [-1] * n
        self.chunk = [0] * n
        self.offset = [0] * n
        self.size = [0] * n
        self.block = [-1] * n
        self.blocks = Blocks([], [], [], [])
        self.tick = 0
        self.beyond_ggml = False

    # ---- ids ------------------------------------------------------------------------------------------------

    def _src_ids(self, i: int, node: Tensor) -> tuple[int, ...]:
        ids = []
        for j, s in enumerate(node.src):
            if s is None:
                continue
            k = self.index.get(id(s))
            if k is None:
                k = len(self.tensors)
                self.tensors.append(s)
                self.index[id(s)] = k
                self.extra_origin.append((i, j))
            ids.append(k)
        return tuple(ids)

    def _root_id(self, t: Tensor) -> int:
        if t.view_src is None:
            return NO_ROOT
        r = _root(t)
        k = self.index.get(id(r))
        if k is not None:
            return k
        if r.buffer is None:
            raise AllocationError(
                f"view '{t.name}' of '{r.name}' ({r.type} ne={list(r.ne)}): the data owner is neither in the "
                f"graph nor allocated"
            )
        return UNTRACKED_ROOT

    def _kind(self, t: Tensor) -> int:
        b = t.buffer
        return OWNED if b is None or self.is_own(b) else EXTERNAL

    # ---- the pass -------------------------------------------------------------------------------------------

    def run(self) -> MemoryPlan:
        """One pass with the rules given to the constructor (`view_inplace`: in-place reuse through a view
        parent, which ggml does not do)."""
        return self._pass(self.rules_view_inplace)

    def run_ggml_rules(self) -> MemoryPlan:
        """One pass with ggml's in-place rules."""
        return self._pass(False)

    def _pass(self, view_inplace: bool) -> MemoryPlan:
        self._reset(view_inplace)
        for a in {id(a): a for a in self.allocs}.values():
            a.reset()
        L = self.n_leafs
        for i in range(L):
            self.allocate(i, self.leaf_ids[i], inplace=False)
        # srcs from outside the graph carry data in, like leafs (ggml would place them at their first use)
        for e, (i, _) in enumerate(self.extra_origin):
            self.allocate(L + self.n_nodes + e, self.node_ids[i], inplace=False)
        for k, bid in self.inputs:
            self.allocate(k, bid, inplace=False)
        n_children, n_views, root, alive = self.n_children, self.n_views, self.root, self.alive
        for i, srcs in enumerate(self.node_srcs):
            bid = self.node_ids[i]
            for p in srcs:
                self.allocate(p, bid, inplace=False)
            self.allocate(L + i, bid, inplace=True)
            for p in srcs:
                n_children[p] -= 1
                if n_children[p] or n_views[p]:
                    continue
                r = root[p]
                if r >= 0:
                    n_views[r] -= 1
                    if n_views[r] == 0 and n_children[r] == 0 and alive[r]:
                        self.free(r)
                elif r == NO_ROOT and alive[p]:
                    self.free(p)
        return MemoryPlan(self.tensors, L, self.n_nodes, self.extra_origin, self.node_srcs, self.kind, self.buffer_id,
                    self.chunk, self.offset, self.size, self.block, self.blocks, self.beyond_ggml)

    def _count(self) -> tuple[list[int], list[int], list[tuple[int, int]]]:
        """Children and views of every tensor, and the INPUT tensors (with their buffer ids) in the order ggml's
        counting pre-pass allocates them: before anything can be freed."""
        L, tensors, root = self.n_leafs, self.tensors, self.root
        n_children, n_views = [0] * len(tensors), [0] * len(tensors)
        inputs: list[tuple[int, int]] = []
        flags, input_flag = self.flags, int(TensorFlag.INPUT)
        for i, srcs in enumerate(self.node_srcs):
            k = L + i
            if root[k] >= 0 and tensors[k].op is not Op.NONE:
                n_views[root[k]] += 1
            if flags[k] & input_flag:
                inputs.append((k, self.node_ids[i]))
            for p in srcs:
                n_children[p] += 1
                if flags[p] & input_flag:
                    inputs.append((p, self.node_ids[i]))
        # a NONE-op view that has consumers keeps its owner alive too (ggml counts only op != NONE views)
        for k, t in enumerate(tensors):
            if root[k] >= 0 and t.op is Op.NONE and n_children[k]:
                n_views[root[k]] += 1
        return n_children, n_views, inputs

    def alloc_size(self, k: int, bid: int) -> int:
        cache = self._alloc_sizes[bid]
        size = cache[k]
        if size < 0:
            size = cache[k] = self.bufts[bid].alloc_size(self.tensors[k])
        return size

    def allocate(self, k: int, bid: int, *, inplace: bool) -> None:
        if self.placed[k] or self.kind[k] != OWNED:
            return
        self.placed[k] = self.alive[k] = True
        t = self.tensors[k]
        if inplace and t.op in _INPLACE and self._reuse_parent(k, t):
            return
        size = self.alloc_size(k, bid)
        try:
            self.chunk[k], self.offset[k] = self.allocs[bid].alloc(size, "it")
        except AllocationError as e:
            raise AllocationError(f"{_describe(t)}: {e}") from None
        self.buffer_id[k] = bid
        self.size[k] = size
        blocks = self.blocks
        self.block[k] = len(blocks.size)
        blocks.buffer_id.append(bid)
        blocks.size.append(align_up(size, self.allocs[bid].alignment))
        blocks.start.append(self.tick)
        blocks.end.append(NEVER)
        self.tick += 1

    def _reuse_parent(self, k: int, t: Tensor) -> bool:
        """Give node k the memory of a parent whose only remaining consumer it is (ggml's in-place reuse); with
        `view_inplace`, also through a zero-offset view parent whose data owner has nothing else left."""
        tensors, kind, root, flags = self.tensors, self.kind, self.root, self.flags
        output = _OUTPUT
        for p in self.node_srcs[k - self.n_leafs]:
            parent = tensors[p]
            r = root[p]
            owner = p if r == NO_ROOT else r
            if r == UNTRACKED_ROOT or kind[owner] != OWNED or not self.alive[owner]:
                continue
            if r >= 0 and not self.view_inplace:
                continue  # ggml: a view is never "own", so its branch never runs
            if flags[p] & output or flags[owner] & output:
                continue
            if not t.same_layout(parent):
                continue
            if self.n_children[p] != 1 or self.n_views[p] != 0:
                continue
            if r >= 0 and (self.n_views[r] != 1 or self.n_children[r] != 0 or parent.view_offs != 0):
                continue
            bid = self.buffer_id[owner]
            size = self.alloc_size(k, bid)
            if size > self.size[owner]:
                continue
            self.buffer_id[k], self.chunk[k], self.offset[k] = bid, self.chunk[owner], self.offset[owner]
            self.size[k] = size
            self.block[k] = self.block[owner]
            self.alive[owner] = False
            self.beyond_ggml |= r >= 0
            align = self.allocs[bid].alignment
            used, held = align_up(size, align), align_up(self.size[owner], align)
            if held > used:
                self.allocs[bid].free(self.chunk[owner], self.offset[owner] + used, held - used)
            return True
        return False

    def free(self, k: int) -> None:
        if self.flags[k] & _OUTPUT:
            return
        self.allocs[self.buffer_id[k]].free(self.chunk[k], self.offset[k], self.size[k])
        self.alive[k] = False
        self.blocks.end[self.block[k]] = self.tick
        self.tick += 1


def _describe(t: Tensor) -> str:
    return f"tensor '{t.name}' ({t.op.name}, {t.type} ne={list(t.ne)})"
