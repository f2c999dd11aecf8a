"""Graph: ggml's compute graph. build_forward_expand walks a result's srcs depth-first (post-order), dedupes by
identity and counts uses; `nodes` is then a valid execution order and `leafs` the data the graph reads."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from pyggml.errors import GraphError
from pyggml.ops.base import VIEW_OPS, Op
from pyggml.serial import new_serial
from pyggml.tensor import Tensor, TensorFlag

DEFAULT_GRAPH_SIZE = 2048


class Graph:
    """Nodes (computed or views, in execution order) and leafs (op NONE, not PARAM), with use counts."""

    def __init__(self, size: int = DEFAULT_GRAPH_SIZE) -> None:
        self.size = size
        self._nodes: list[Tensor] = []
        self.leafs: list[Tensor] = []
        self.use_counts: dict[int, int] = {}
        """id(tensor) -> number of src slots, among visited nodes, that reference it (the graph holds them)."""
        self._visited: dict[int, Tensor] = {}
        self.uid = new_serial()
        """Never reused in this process (a serial, as tensors' and buffers'): caches of plans key on it."""
        self.version = 0
        """Advanced whenever a node is added or the node list is replaced: a plan stamped with it (and the
        placement clock, `pyggml.serial`) knows the graph's nodes did not change."""

    @property
    def nodes(self) -> list[Tensor]:
        """The nodes in execution order (add with `build_forward_expand`; assigning a new list is a new version)."""
        return self._nodes

    @nodes.setter
    def nodes(self, nodes: list[Tensor]) -> None:
        self._nodes = nodes
        self.version += 1

    # ---- building -------------------------------------------------------------------------------------------

    def build_forward_expand(self, tensor: Tensor) -> Graph:
        """Add `tensor` and everything it depends on (ggml_build_forward_expand); marks them COMPUTE."""
        self._visit(tensor, compute=True)
        return self

    def build_forward_order(self, tensor: Tensor) -> Graph:
        """Add in order without marking COMPUTE (ggml_build_forward_order)."""
        self._visit(tensor, compute=False)
        return self

    def _visit(self, root: Tensor, compute: bool) -> None:
        visited = self._visited
        use = self.use_counts
        compute_flag = TensorFlag.COMPUTE
        # iterative post-order DFS: a frame is (tensor, next src index)
        stack: list[tuple[Tensor, int]] = []
        t: Tensor | None = root
        while True:
            if t is not None:
                if compute and t.op is not Op.NONE:
                    t.flags |= compute_flag
                tid = id(t)
                if tid in visited:
                    if compute:
                        # revisit srcs that were added without COMPUTE (ggml's visit_parents on revisit)
                        for s in t.src:
                            if s is not None and s.op is not Op.NONE and not s.flags & compute_flag:
                                self._visit(s, True)
                    t = None
                else:
                    visited[tid] = t
                    use[tid] = 0
                    stack.append((t, 0))
                    t = None
            if not stack:
                break
            node, i = stack[-1]
            srcs = node.src
            if i > 0:
                prev = srcs[i - 1]
                if prev is not None:
                    use[id(prev)] += 1
            while i < len(srcs) and srcs[i] is None:
                i += 1
            if i < len(srcs):
                stack[-1] = (node, i + 1)
                t = srcs[i]
                continue
            stack.pop()
            self._append(node)

    def _append(self, t: Tensor) -> None:
        if t.op is Op.NONE and not t.flags & TensorFlag.PARAM:
            if not t.name:
                t.name = f"leaf_{len(self.leafs)}"
            self.leafs.append(t)
        else:
            if len(self.nodes) >= self.size:
                raise GraphError(
                    f"graph is full: {self.size} nodes; adding '{t.name or t.op.name}' needs a larger graph "
                    f"(Graph(size=...))"
                )
            if not t.name:
                t.name = f"node_{len(self.nodes)}"
            self._nodes.append(t)
            self.version += 1

    # ---- queries --------------------------------------------------------------------------------------------

    @property
    def n_nodes(self) -> int:
        return len(self.nodes)

    @property
    def n_leafs(self) -> int:
        return len(self.leafs)

    def use_count(self, t: Tensor) -> int:
        return self.use_counts.get(id(t), 0)

    def __contains__(self, t: Tensor) -> bool:
        return id(t) in self._visited

    def __iter__(self) -> Iterator[Tensor]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)

    def view(self, i0: int, i1: int) -> Graph:
        """Nodes i0..i1-1 as a graph sharing this graph's use counts (ggml_graph_view)."""
        g = Graph.__new__(Graph)
        g.size = i1 - i0
        g._nodes = self.nodes[i0:i1]
        g.leafs = []
        g.use_counts = self.use_counts
        g._visited = self._visited
        g.uid = new_serial()
        g.version = 0
        return g

    def copy(self) -> Graph:
        g = Graph(self.size)
        g.nodes = list(self.nodes)
        g.leafs = list(self.leafs)
        g.use_counts = dict(self.use_counts)
        g._visited = dict(self._visited)
        return g

    def get_tensor(self, name: str) -> Tensor | None:
        for t in itertools.chain(self.leafs, self.nodes):
            if t.name == name:
                return t
        return None

    # ---- pictures ---------------------------------------------------------------------------------------------

    def to_dot(self, color_of: dict[int, str] | None = None) -> str:
        """Graphviz DOT of the graph: nodes as records (op, name, type, ne), leafs as boxes; optional fill colours
        by id(tensor) (the scheduler colours by backend)."""
        lines = ["digraph G {", "  rankdir=TB;", '  node [shape=record, fontname="monospace", fontsize=10];']
        ids: dict[int, str] = {}
        for i, t in enumerate(self.leafs):
            ids[id(t)] = f"l{i}"
            lines.append(f'  l{i} [shape=box, style=filled, fillcolor="#eeeeee", label="{_label(t)}"];')
        for i, t in enumerate(self.nodes):
            ids[id(t)] = f"n{i}"
            color = (color_of or {}).get(id(t), "#ffffff" if t.op not in VIEW_OPS else "#f4f4ff")
            lines.append(f'  n{i} [style=filled, fillcolor="{color}", label="{{{t.op.name}|{_label(t)}}}"];')
        for t in self.nodes:
            for j, s in enumerate(t.src):
                if s is not None and id(s) in ids:
                    lines.append(f'  {ids[id(s)]} -> {ids[id(t)]} [label="{j}", fontsize=8];')
        lines.append("}")
        return "\n".join(lines)


def _label(t: Tensor) -> str:
    name = t.name.replace('"', "'").replace("{", "(").replace("}", ")").replace("|", "/").replace("<", "(")
    name = name.replace(">", ")")
    return f"{name}\\n{t.type} {list(t.ne)}"


def build_graph(*outputs: Tensor, size: int = DEFAULT_GRAPH_SIZE) -> Graph:
    """A graph computing `outputs` (each marked OUTPUT)."""
    g = Graph(size)
    for t in outputs:
        t.set_output()
        g.build_forward_expand(t)
    return g
