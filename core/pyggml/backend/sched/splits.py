"""Pass 5 of the scheduler: cut the assigned graph into splits, create input copies, rewire srcs, and build the
allocation graph the graph allocator plans from.

A split is a run of consecutive nodes on one backend. A src living where the split's backend cannot read it is a
split input: it gets `n_copies` copies on that backend (one per pipeline slot), named `<backend>#<tensor>#<c>`,
created once per (tensor, backend) and shared by later splits on that backend, and the consuming node's src is
rewired to the copy of the current slot. The user's graph is changed only through those src slots, and
`SplitPlan.restore()` puts the original srcs back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyggml.backend.sched.passes import weight_owner
from pyggml.backend.sched.table import BackendTable
from pyggml.graph import Graph
from pyggml.ops.base import VIEW_OPS, Op
from pyggml.tensor import Tensor, TensorFlag

Srcs = tuple[Tensor | None, ...]


@dataclass(slots=True)
class Split:
    """Nodes [i_start, i_end) of the graph, run on backend `backend_id`."""

    backend_id: int
    i_start: int
    i_end: int = 0
    inputs: list[Tensor] = field(default_factory=list)
    """Tensors copied in before the split runs, in discovery order."""
    input_copies: list[list[Tensor]] = field(default_factory=list)
    """Per input, its copy on this split's backend for each pipeline slot."""
    input_backends: list[int] = field(default_factory=list)
    """Per input, the backend the source tensor lives on."""
    input_bytes: int = 0
    """Bytes copied into this split per compute: the sum of its inputs' sizes (`Tensor.nbytes`)."""
    wait_for: tuple[int, ...] = ()
    """Other backends whose queued work must finish before this split starts (direct reads of their results
    through shared memory, reuse of memory they may still be using)."""
    graphs: list[Graph] = field(default_factory=list)
    """The split's nodes as a graph, one object per pipeline slot (backends may cache per graph object)."""
    reads_from: set[int] = field(default_factory=set)
    """Backends whose results this split reads in place (shared memory), found while cutting; feeds wait_for."""

    @property
    def n_inputs(self) -> int:
        return len(self.inputs)


@dataclass(slots=True)
class SplitPlan:
    """Everything decided for one graph: assignments, splits, copies, rewiring and the allocation graph."""

    graph: Graph
    n_nodes: int
    n_leafs: int
    backend_of: dict[int, int]
    cause: dict[int, str]
    splits: list[Split]
    copies: dict[tuple[int, int], list[Tensor]]
    rewired: list[tuple[Tensor, Srcs, list[Srcs]]]
    """(node, original srcs, srcs for each pipeline slot)."""
    alloc_graph: Graph
    node_ids: list[int]
    leaf_ids: list[int]
    slot: int = 0

    def wire(self, slot: int) -> None:
        """Point every rewired src at the copies of pipeline slot `slot`."""
        if slot != self.slot:
            for node, _, per_slot in self.rewired:
                node.src = per_slot[slot]
            self.slot = slot

    def restore(self) -> None:
        """Give the user's nodes their original srcs back."""
        for node, original, _ in self.rewired:
            node.src = original

    @property
    def n_split_inputs(self) -> int:
        """Tensors copied between backends per compute."""
        return sum(len(s.inputs) for s in self.splits)

    @property
    def split_input_bytes(self) -> int:
        """Bytes copied between backends per compute."""
        return sum(s.input_bytes for s in self.splits)


def cut_splits(tab: BackendTable, graph: Graph, backend_of: dict[int, int], cause: dict[int, str],
               n_copies: int, slot: int) -> SplitPlan:
    """Pass 5 and the allocation graph. backend_of must cover every leaf, node and src (passes 1-4)."""
    nodes = graph.nodes
    splits: list[Split] = []
    copies: dict[tuple[int, int], list[Tensor]] = {}
    new_srcs: dict[int, tuple[Tensor, list[list[Tensor | None]]]] = {}
    copy_user_inputs = [n_copies > 1 and dev.caps.async_ops for dev in tab.devices]
    split: Split | None = None
    cur = -1
    for i, node in enumerate(nodes):
        if node.op in VIEW_OPS:
            continue
        b = backend_of[id(node)]
        if split is None:
            split = Split(b, 0)
            splits.append(split)
            cur = b
        elif b != cur or (split.inputs and _weight_elsewhere(tab, node, cur, backend_of)):
            split.i_end = i
            split = Split(b, i)
            splits.append(split)
            cur = b
        for j, s in enumerate(node.src):
            if s is None:
                continue
            sb = backend_of[id(s)]
            readable = sb == cur or tab.buffer_supported(s, cur, backend_of)
            if readable and not (copy_user_inputs[cur] and s.flags & TensorFlag.INPUT):
                if sb != cur and (s.view_src if s.view_src is not None else s).op is not Op.NONE:
                    split.reads_from.add(sb)
                continue
            key = (id(s), cur)
            cps = copies.get(key)
            if cps is None:
                cps = copies[key] = [_make_copy(tab, s, cur, c, n_copies, cause) for c in range(n_copies)]
                split.inputs.append(s)
                split.input_copies.append(cps)
                split.input_backends.append(sb)
                split.input_bytes += s.nbytes()
            entry = new_srcs.get(id(node))
            if entry is None:
                entry = new_srcs[id(node)] = (node, [list(node.src) for _ in range(n_copies)])
            for c in range(n_copies):
                entry[1][c][j] = cps[c]
    if split is None:  # only views: one empty split on the backend of the first node, if any
        if not nodes:
            return _finish(tab, graph, backend_of, cause, [], copies, [], n_copies, slot)
        split = Split(backend_of[id(nodes[0])], 0)
        splits.append(split)
    split.i_end = len(nodes)
    rewired = [(node, node.src, [tuple(s) for s in per_slot]) for node, per_slot in new_srcs.values()]
    for node, _, per_slot in rewired:
        node.src = per_slot[slot]
    return _finish(tab, graph, backend_of, cause, splits, copies, rewired, n_copies, slot)


def _weight_elsewhere(tab: BackendTable, node: Tensor, cur: int, backend_of: dict[int, int]) -> bool:
    """A src is a weight on another backend that `cur` cannot read: cutting here lets the copy of that weight
    take memory freed by the previous split (ggml's offloaded-weights rule)."""
    return any(
        s is not None and weight_owner(s) is not None and backend_of[id(s)] != cur
        and not tab.buffer_supported(s, cur, backend_of)
        for s in node.src
    )


def _make_copy(tab: BackendTable, s: Tensor, b: int, c: int, n_copies: int, cause: dict[int, str]) -> Tensor:
    t = Tensor(s.type, s.ne, s.nb, op=Op.NONE)
    t.set_name(f"{tab.backends[b].name}#{s.name}#{c}")
    if n_copies > 1:
        # pipeline slots stay allocated for the whole graph at stable addresses: never reused, never freed
        t.flags |= TensorFlag.INPUT | TensorFlag.OUTPUT
    cause[id(t)] = "5.cpy"
    return t


def _keep_alive(t: Tensor) -> Tensor:
    """A node of the allocation graph only (a view of t reading t, computing nothing): t's memory is not given away
    before the allocator reaches it."""
    dep = Tensor(t.type, t.ne, t.nb, op=Op.NONE, src=(t,), view_src=t.data_owner, view_offs=t.view_offs)
    dep.set_name(f"{t.name} (dep)")
    return dep


def _finish(tab: BackendTable, graph: Graph, backend_of: dict[int, int], cause: dict[int, str],
            splits: list[Split], copies: dict[tuple[int, int], list[Tensor]],
            rewired: list[tuple[Tensor, Srcs, list[Srcs]]], n_copies: int, slot: int) -> SplitPlan:
    nodes = graph.nodes
    alloc_nodes: list[Tensor] = []
    node_ids: list[int] = []
    leafs: list[Tensor] = []
    leaf_ids: list[int] = []
    prev = -1
    for split in splits:
        b = split.backend_id
        for inp, cps, ib in zip(split.inputs, split.input_copies, split.input_backends, strict=True):
            # a dependency on the source keeps it alive until this split copies it
            alloc_nodes.append(_keep_alive(inp))
            node_ids.append(ib)
            if n_copies == 1:
                alloc_nodes.append(cps[0])  # allocated at the start of the split
                node_ids.append(b)
            else:
                leafs.extend(cps)
                leaf_ids.extend([b] * len(cps))
        part = nodes[split.i_start:split.i_end]
        # srcs the backend still reads when it writes a later node (its fused kernels) stay alive until that node
        deps: dict[int, list[Tensor]] = {}
        for src, until in tab.backends[b].alloc_deps(part, graph.use_count):
            deps.setdefault(id(until), []).append(src)
        for t in part:
            alloc_nodes.append(t)
            node_ids.append(backend_of[id(t)])
            for src in deps.get(id(t), ()):
                alloc_nodes.append(_keep_alive(src))
                node_ids.append(b)
        waits = set(split.reads_from)
        if prev >= 0 and prev != b and (not split.inputs or tab.group[prev] == tab.group[b]):
            waits.add(prev)
        waits.discard(b)
        split.wait_for = tuple(sorted(waits))
        split.graphs = [graph.view(split.i_start, split.i_end) for _ in range(n_copies)]
        prev = b
    for key, cps in copies.items():
        for cp in cps:
            backend_of[id(cp)] = key[1]
    leafs.extend(graph.leafs)
    leaf_ids.extend([backend_of[id(t)] for t in graph.leafs])
    ag = Graph(max(len(alloc_nodes), 1))
    ag.nodes = alloc_nodes
    ag.leafs = leafs
    return SplitPlan(graph, len(nodes), len(graph.leafs), backend_of, cause, splits, copies, rewired, ag, node_ids,
                leaf_ids, slot)
