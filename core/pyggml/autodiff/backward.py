"""build_backward: extend a forward graph with the nodes that compute the gradient of its loss with respect to
every parameter (ggml_build_backward_expand), and reset the gradient accumulators (ggml_graph_reset).

The walk is ggml's: a forward pass over the graph's nodes decides which nodes need a gradient (parameters, the
loss, and every node with a source that needs one, skipping I32 nodes and the source slots a rule ignores); then
the nodes are visited in reverse order and each one's rule adds its contribution to the gradients of its sources.
The first contribution to a source is its gradient; later ones are summed with ADD, in place when the source has
a gradient accumulator (so a micro-batch's gradient adds into what the previous ones left there).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from pyggml import ops
from pyggml.autodiff import rules_conv, rules_fused, rules_indexed, rules_layout, rules_math  # noqa: F401 (fill RULES)
from pyggml.autodiff.rules import GradientError, lookup, require
from pyggml.context import Context
from pyggml.graph import Graph
from pyggml.ops.base import VIEW_OPS, Op, describe
from pyggml.tensor import Tensor, TensorFlag
from pyggml.types import GGMLType

GRAD_TYPES = frozenset({GGMLType.F32, GGMLType.F16})
"""Types of tensors a gradient may flow through (ggml's assertion in ggml_build_backward_expand)."""
_INPLACE_OK = VIEW_OPS | {Op.CPY, Op.SET_ROWS}
"""Nodes whose result is a view of a source and that can still be differentiated (ggml's list)."""


class Gradients:
    """The backward half of a graph: the gradient (and accumulator, where there is one) of every node that
    needed one. `graph` is the forward graph, now extended with the backward nodes."""

    def __init__(self, graph: Graph, n_forward: int) -> None:
        self.graph = graph
        self.n_forward = n_forward
        """How many of graph.nodes are the forward pass."""
        self.grads: dict[int, Tensor] = {}
        self.accs: dict[int, Tensor] = {}
        self.params: list[Tensor] = []
        self.loss: list[Tensor] = []

    def grad(self, t: Tensor) -> Tensor | None:
        """The tensor holding d(loss)/d(t) after compute (ggml_graph_get_grad), or None when no gradient reaches t."""
        return self.grads.get(id(t))

    def grad_acc(self, t: Tensor) -> Tensor | None:
        """t's gradient accumulator (ggml_graph_get_grad_acc), or None."""
        return self.accs.get(id(t))

    def reset(self) -> None:
        """Set the loss's gradient to 1 and every other accumulator to 0 (ggml_graph_reset); also clears the
        AdamW moments of any optimiser step in the graph. The accumulators must be allocated."""
        for t in self.graph.nodes:
            if t.op is Op.OPT_STEP_ADAMW:
                for m in t.src[2:4]:
                    if m is not None:
                        m.set(np.zeros(m.nelements(), dtype=np.float32))
        for node in self.graph.nodes[: self.n_forward]:
            a = self.accs.get(id(node))
            if a is None or (a.buffer is None and a not in self.graph):
                continue  # no backward node reads it (e.g. every gradient is zero): nothing to reset
            if node.flags & TensorFlag.LOSS:
                a.set(np.ones(1, dtype=np.float32))
            else:
                a.set(np.zeros(a.nelements(), dtype=np.float32))

    def accumulators(self) -> list[Tensor]:
        return list(self.accs.values())


def build_backward(graph: Graph, grad_accs: Mapping[Tensor, Tensor] | None = None, *,
                   ctx: Context | None = None) -> Gradients:
    """Append the backward pass of `graph` (which must hold a PARAM and a LOSS node) to it and return the
    gradients (ggml_build_backward_expand).

    `grad_accs` maps forward nodes (parameters, typically) to F32 accumulators of their shape: their gradients are
    summed into them in place, so running the graph over several micro-batches between two `Gradients.reset()`
    calls accumulates (ggml's grad_accs). The loss always gets one, holding the seed 1 that `reset` writes; when
    `grad_accs` gives none, a new one is made in `ctx`. The backward nodes are created in `ctx` too (default: the
    loss's context, i.e. the compute context; never a parameter's, which would place them with the weights).
    Accumulators are marked OUTPUT, so the graph allocator never hands their memory to another tensor; to keep
    their values from one compute to the next, allocate them in a buffer of their own (`alloc_ctx_tensors` on a
    static context, as pyggml.opt does for the loss seed and the optimiser state)."""
    nodes = list(graph.nodes)
    n_f = len(nodes)
    res = Gradients(graph, n_f)
    res.params = [t for t in nodes if t.flags & TensorFlag.PARAM]
    res.loss = [t for t in nodes if t.flags & TensorFlag.LOSS]
    if not res.params:
        raise GradientError("build_backward: the graph has no parameter (call Tensor.set_param() on a leaf that "
                            "the loss depends on)")
    if not res.loss:
        raise GradientError("build_backward: the graph has no loss (call Tensor.set_loss() on a scalar F32 node)")
    accs_by_id = {id(k): v for k, v in (grad_accs or {}).items()}
    needed: set[int] = set()
    for node in nodes:
        if node.type == GGMLType.I32:
            continue
        wants = bool(node.flags & (TensorFlag.PARAM | TensorFlag.LOSS))
        if not wants and node.op is not Op.NONE:
            r = lookup(node)  # a node without a rule fails later, only if a gradient reaches it
            ignore = r.ignore if r is not None else frozenset()
            for j, s in enumerate(node.src):
                if s is None or j in ignore or id(s) not in needed:
                    continue
                if s.type not in GRAD_TYPES:
                    raise GradientError(f"{node.op.name}: a gradient must flow through src[{j}] {describe(s)} of "
                                        f"node {describe(node)}, but only F32 and F16 tensors carry gradients")
                wants = True
                break
        if not wants:
            continue
        if node.view_src is not None and node.op not in _INPLACE_OK and node.op is not Op.NONE:
            raise GradientError(f"{node.op.name}: node {describe(node)} is an in-place result (a view of its "
                                "source); in-place ops cannot be differentiated, build it out of place")
        acc = accs_by_id.get(id(node))
        if acc is None and node.flags & TensorFlag.LOSS:
            acc = _new_acc(node, ctx)
        if acc is not None:
            if acc.ne != node.ne or acc.type != GGMLType.F32:
                raise GradientError(f"gradient accumulator {describe(acc)} of {describe(node)} must be F32 with "
                                    "the node's shape")
            acc.set_output()
            res.accs[id(node)] = acc
            res.grads[id(node)] = acc
        needed.add(id(node))
    bp = _Backprop(res, needed)
    with _compute_ctx(res.loss[0], ctx):  # backward nodes go there, not into a parameter's (weights') context
        for node in reversed(nodes):
            bp.visit(node)
    for p in res.params:
        g = res.grads.get(id(p))
        if g is not None:
            g.set_output()
    return res


def _compute_ctx(loss: Tensor, ctx: Context | None) -> Context:
    c = ctx if ctx is not None else loss.ctx
    if c is None:
        raise GradientError(f"loss {describe(loss)} belongs to no context: pass ctx= for the backward nodes")
    return c


def _new_acc(node: Tensor, ctx: Context | None) -> Tensor:
    return _compute_ctx(node, ctx).new_tensor(GGMLType.F32, *node.ne, name=f"grad acc for {node.name}"[:63])


class _Backprop:
    """The one place gradients are summed: first contribution sets, later ones add (in place into an
    accumulator), each result named and expanded into the graph as it is made (ggml's *_or_set helpers)."""

    def __init__(self, res: Gradients, needed: set[int], *, expand: bool = True) -> None:
        self.res = res
        self.needed = needed
        self.expand = expand
        """Add each gradient to res.graph as it is made (False: a decomposition's gradients, used by a rule)."""
        self.node: Tensor | None = None
        self.ignore: frozenset[int] = frozenset()

    def visit(self, node: Tensor) -> None:
        grad = self.res.grads.get(id(node))
        if grad is None or node.op is Op.NONE:
            return
        r = require(node)
        self.node, self.ignore = node, r.ignore
        r.fn(node, grad, self)
        for j, s in enumerate(node.src):
            if s is not None and self.needs(j):
                g = self.res.grads.get(id(s))
                if g is None or g.ne != s.ne:
                    raise GradientError(f"{node.op.name}: the gradient rule gave src[{j}] {describe(s)} a gradient "
                                        f"of shape {describe(g)}")

    def _src(self, j: int) -> Tensor:
        assert self.node is not None
        s = self.node.src[j]
        assert s is not None
        return s

    def needs(self, j: int) -> bool:
        assert self.node is not None
        src = self.node.src
        return j < len(src) and src[j] is not None and j not in self.ignore and id(src[j]) in self.needed

    def _set(self, s: Tensor, g: Tensor) -> None:
        g.set_name(f"grad for {s.name}")
        self.res.grads[id(s)] = g
        if self.expand:
            self.res.graph.build_forward_expand(g)

    def add(self, j: int, t: Tensor) -> None:
        s = self._src(j)
        old = self.res.grads.get(id(s))
        self._set(s, t if old is None else ops.add(old, t, inplace=id(s) in self.res.accs))

    def sub(self, j: int, t: Tensor) -> None:
        s = self._src(j)
        old = self.res.grads.get(id(s))
        self._set(s, ops.neg(t) if old is None else ops.sub(old, t, inplace=id(s) in self.res.accs))

    def acc(self, j: int, t: Tensor, nb1: int, nb2: int, nb3: int, offset: int) -> None:
        s = self._src(j)
        old = self.res.grads.get(id(s))
        if old is None:
            # the zeros come from the source itself (ggml does the same; a source holding inf/NaN gives NaN)
            g = ops.acc(ops.scale(s, 0.0), t, nb1, nb2, nb3, offset)
        else:
            g = ops.acc(old, t, nb1, nb2, nb3, offset, inplace=id(s) in self.res.accs)
        self._set(s, g)


def backprop_through(out: Tensor, grad: Tensor, inputs: Sequence[Tensor | None],
                     targets: Sequence[Tensor]) -> list[Tensor | None]:
    """The gradients of `targets` (some of `inputs`) given `grad` = d(loss)/d(out), where `out` was recorded from
    `inputs` as a small subgraph (a fused op's decomposition, recomputed in the backward graph). The subgraph,
    walked from `out` down to `inputs`, is differentiated with the same rules; none of it enters a graph until the
    caller uses the results."""
    stop = {id(t) for t in inputs if t is not None}
    order: list[Tensor] = []
    seen: set[int] = set()
    stack: list[tuple[Tensor, bool]] = [(out, False)]
    while stack:  # post-order, stopping at the inputs
        t, done = stack.pop()
        if done:
            order.append(t)
            continue
        if id(t) in seen or id(t) in stop:
            continue
        seen.add(id(t))
        stack.append((t, True))
        stack.extend((s, False) for s in reversed(t.src) if s is not None)
    needed = {id(t) for t in targets}
    for node in order:
        r = lookup(node)
        ignore = r.ignore if r is not None else frozenset()
        if any(s is not None and j not in ignore and id(s) in needed for j, s in enumerate(node.src)):
            needed.add(id(node))
    res = Gradients(Graph(), 0)
    res.grads[id(out)] = grad
    bp = _Backprop(res, needed, expand=False)
    for node in reversed(order):
        bp.visit(node)
    return [res.grads.get(id(t)) for t in targets]


def params_of(graph: Graph) -> Iterable[Tensor]:
    """The PARAM nodes of a graph, in graph order."""
    return (t for t in graph.nodes if t.flags & TensorFlag.PARAM)
