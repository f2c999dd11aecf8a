"""Planning a graph on the meta device: per-device graphs, cut into subgraphs at the partial sums.

Every node gets its state and its simple tensors; a node whose src has no slice on device j (or that has no
elements there) is not computed on j. The graph is cut after every PARTIAL node, or later where the allreduce
can wait because it is linear (delayed reduction):
- nodes that are MIRRORED and read only MIRRORED values, not the partial sum, are skipped over;
- a chain of MULs of the partial sum by MIRRORED values joins it (scale, then reduce);
- the MoE pattern joins it: one VIEW per used expert of the [n, n_used, t] partial sum and the chain of ADDs
  summing them;
- two independent partial branches whose results are ADDed are reduced once, after the ADD.
Nodes between a PARTIAL node and its reduction hold partial values (they are marked so reads are refused); on a
device that computes nothing for the PARTIAL node, the nodes depending on it are not computed either and the
reduced tensor is zeroed before the allreduce. Each subgraph but a final one that ends in a full value is
followed by one allreduce of its last node.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pyggml.backend.meta.allreduce import REDUCIBLE
from pyggml.backend.meta.state import Axis, SplitState
from pyggml.backend.meta.tensors import TensorTable
from pyggml.backend.op_table import FREE_OPS
from pyggml.backend.protocol import Backend
from pyggml.errors import UnsupportedOpError, UnsupportedTypeError
from pyggml.graph import Graph
from pyggml.ops.base import Op
from pyggml.tensor import Tensor, TensorFlag


@dataclass
class Subgraph:
    graphs: list[Graph]
    """One graph per device."""
    reduce: list[Tensor] | None
    """The last node's simple tensors when an allreduce follows."""
    zero: list[int]
    """Devices that do not compute the reduced node: it is zeroed there first."""


@dataclass
class MetaPlan:
    subgraphs: list[Subgraph]

    @property
    def n_allreduce(self) -> int:
        return sum(s.reduce is not None for s in self.subgraphs)


def build_plan(table: TensorTable, graph: Graph, backends: Sequence[Backend]) -> MetaPlan:
    nodes = graph.nodes
    async_states = [table.state(n, False) for n in nodes]
    simple = [table.simple(n) for n in nodes]
    _set_compute_flags(table, nodes, simple)
    _check_support(nodes, simple, backends)
    cutter = _Cutter(table, graph, async_states, simple)
    subs: list[Subgraph] = []
    i, start, n = 0, 0, len(nodes)
    while i < n:
        partial = async_states[i].axis == Axis.PARTIAL
        if not partial and i < n - 1:
            i += 1
            continue
        end = cutter.delayed_end(i) if partial else i
        reduce, zero = None, []
        if partial:
            cutter.propagate(i, end)
            _check_reducible(nodes[end])
            reduce = [simple[end][j] for j in range(table.n)]
            zero = [j for j, t in enumerate(reduce) if not t.flags & TensorFlag.COMPUTE]
            table.entry(nodes[end]).reduced = True
        subs.append(Subgraph([_graph(graph, nodes, simple, j, start, end + 1) for j in range(table.n)], reduce,
                             zero))
        start = i = end + 1
    return MetaPlan(subs)


def _set_compute_flags(table: TensorTable, nodes: list[Tensor], simple: list[list[Tensor]]) -> None:
    """A device computes a node only where the node and every split src have elements on it."""
    for node, tjs in zip(nodes, simple, strict=True):
        src_states = [table.state(s, True) for s in node.src if s is not None]
        for j, tj in enumerate(tjs):
            empty = tj.nelements() == 0 or any(st.is_split and st.extent(j) == 0 for st in src_states)
            tj.flags = node.flags & ~TensorFlag.COMPUTE if empty else node.flags
        table.entry(node).pending = False
        table.entry(node).reduced = False


def _check_support(nodes: list[Tensor], simple: list[list[Tensor]], backends: Sequence[Backend]) -> None:
    for node, tjs in zip(nodes, simple, strict=True):
        if node.op in FREE_OPS or not node.flags & TensorFlag.COMPUTE:
            continue
        for b, tj in zip(backends, tjs, strict=True):
            if tj.flags & TensorFlag.COMPUTE and not b.supports_op(tj):
                raise UnsupportedOpError(f"tensor split: device '{b.name}' cannot compute its slice of node "
                                         f"'{node.name}' ({node.op.name}, {tj.type} ne={list(tj.ne)} from "
                                         f"{[list(s.ne) for s in tj.src if s is not None]})")


def _check_reducible(node: Tensor) -> None:
    if node.type not in REDUCIBLE:
        raise UnsupportedTypeError(f"tensor split: node '{node.name}' ({node.op.name}) holds {node.type} partial sums "
                                   f"that cannot be summed across devices (F32, F16 or BF16)")
    if not node.is_contiguous():
        raise UnsupportedOpError(f"tensor split: node '{node.name}' ({node.op.name}) holds partial sums in a "
                                 f"non-contiguous layout, nb={list(node.nb)}; they cannot be reduced")


def _graph(graph: Graph, nodes: list[Tensor], simple: list[list[Tensor]], j: int, i0: int, i1: int) -> Graph:
    g = Graph(max(i1 - i0, 1))
    g.nodes = [simple[k][j] for k in range(i0, i1)]
    g.use_counts = {id(simple[k][j]): graph.use_count(nodes[k]) for k in range(i0, i1)}
    return g


class _Cutter:
    """Where the allreduce of a PARTIAL node can wait until (ggml's delayed reduction)."""

    def __init__(self, table: TensorTable, graph: Graph, states: list[SplitState], simple: list[list[Tensor]]):
        self.table = table
        self.nodes = graph.nodes
        self.use: Callable[[Tensor], int] = graph.use_count
        self.states = states
        self.simple = simple

    def _axis(self, t: Tensor) -> Axis:
        return self.table.state(t, False).axis

    def _skip_unrelated(self, k: int, node: Tensor) -> int:
        nodes = self.nodes
        while k + 1 < len(nodes):
            nxt = nodes[k + 1]
            if self.states[k + 1].axis != Axis.MIRRORED or any(
                    s is node or self._axis(s) != Axis.MIRRORED for s in nxt.src if s is not None):
                break
            k += 1
        return k

    def branch_end(self, i: int) -> int:
        nodes, n = self.nodes, len(self.nodes)
        node, k, last = nodes[i], i, i
        while True:  # a chain of MULs by MIRRORED values
            k = self._skip_unrelated(k, node)
            if k + 1 >= n:
                return last
            nxt = nodes[k + 1]
            if not (nxt.op is Op.MUL and nxt.src[0] is node and nxt.src[1] is not None
                    and self._axis(nxt.src[1]) == Axis.MIRRORED):
                break
            node, k = nxt, k + 1
            last = k
        n_used = self.use(node)
        if n_used < 2 or n_used != node.ne[1] or k + 2 * n_used - 1 >= n:
            return last
        for m in range(n_used):  # one view per used expert ...
            v = nodes[k + 1]
            if not (v.op is Op.VIEW and v.src[0] is node and v.view_offs - node.view_offs == m * node.nb[1]
                    and v.ne[0] == node.ne[0] and v.ne[1] == node.ne[2] and v.nb[1] == node.nb[2]
                    and self.use(v) == 1):
                return last
            k += 1
        for m in range(n_used - 1):  # ... summed by a chain of ADDs
            a = nodes[k + 1]
            first = nodes[k - (n_used - 1)] if m == 0 else nodes[k]
            if not (a.op is Op.ADD and a.src[0] is first and a.src[1] is nodes[k - (n_used - 2)]
                    and self.use(a) == 1):
                return last
            k += 1
        return k

    def delayed_end(self, i: int) -> int:
        end = self.branch_end(i)
        node, nodes = self.nodes[end], self.nodes
        if self.use(node) != 1:
            return end
        for k in range(end + 1, len(nodes)):
            nxt = nodes[k]
            if nxt.view_src is node or any(s is node for s in nxt.src):
                return end
            if self.states[k].axis != Axis.PARTIAL:
                continue
            other_end = self.branch_end(k)
            other = nodes[other_end]
            if self.use(other) != 1 or other_end + 1 >= len(nodes):
                return end
            s = nodes[other_end + 1]
            if not (s.op is Op.ADD and {id(x) for x in s.src} == {id(node), id(other)} and node.ne == other.ne
                    and node.type == other.type == s.type and self.states[other_end + 1].axis == Axis.MIRRORED):
                return end
            if any(bool(a.flags & TensorFlag.COMPUTE) != bool(b.flags & TensorFlag.COMPUTE)
                   for a, b in zip(self.simple[i], self.simple[k], strict=True)):
                return end
            self.propagate(k, other_end + 1)
            return other_end + 1
        return end

    def propagate(self, i: int, end: int) -> None:
        """Nodes in (i, end] that read the partial sum of node i: partial themselves (reads refused until the
        allreduce) and not computed where node i is not."""
        nodes, simple = self.nodes, self.simple
        dep = {id(nodes[i])}
        idle = [j for j, t in enumerate(simple[i]) if not t.flags & TensorFlag.COMPUTE]
        if end > i:
            self.table.entry(nodes[i]).pending = True
        for k in range(i + 1, end + 1):
            t = nodes[k]
            if not any(s is not None and id(s) in dep for s in t.src):
                continue
            dep.add(id(t))
            if k < end:
                self.table.entry(t).pending = True
            for j in idle:
                simple[k][j].flags &= ~TensorFlag.COMPUTE
