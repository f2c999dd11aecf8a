"""One op-table machinery for every backend: per op a rule, `accepts(node)` (can this backend run this node: types,
layouts, params) and `build(node, builder)` (turn the node into the backend's work: a kernel call, a descriptor,
launches, dispatches). A backend's `supports_op` and its plan builder both read the same table, so what it claims
and what it runs cannot drift apart, and every backend answers the same questions the same way (views and NONE
are always supported, an empty node runs nothing, an op without an accepting rule raises an error naming it).

Family modules collect their rules in a `RuleSet` (no global registry, no import side effect); a plugin's table
module lists its families explicitly and merges them into an `OpTable`.

A family may also declare fusions: two consecutive compute nodes run as one kernel (RMS_NORM then the MUL by its
weight, as ggml's backends fuse them) when the first one's result feeds the second one only. `OpTable.build` applies
them when it is given the graph's use counts (`Graph.use_count`, graph-wide, so a result a later split reads is
never fused away); each node of a pair is still supported on its own, so a scheduler needs to know nothing of it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from pyggml.errors import ComputeError, PyGGMLError, UnsupportedOpError
from pyggml.ops.base import VIEW_OPS, Op
from pyggml.tensor import Tensor, TensorFlag

FREE_OPS = VIEW_OPS | {Op.NONE}
"""Ops that never need a kernel: NONE (a leaf) and views (their data is src[0]'s)."""


class NodeBuilder(Protocol):
    """What `OpTable.build` hands each rule: a builder that knows which node it is building (for error sites)."""

    node: Tensor | None


B = TypeVar("B", bound=NodeBuilder)
BuildFn = TypeVar("BuildFn", bound=Callable[..., None])
Accepts = Callable[[Tensor], bool]


def needs_kernel(node: Tensor) -> bool:
    """Whether a backend has anything to run for `node`: a COMPUTE node whose op does work and whose result has
    elements (an empty result needs no kernel; its srcs may be empty too and must not be read)."""
    return bool(node.flags & TensorFlag.COMPUTE) and node.op not in FREE_OPS and node.nelements() > 0


def compute_nodes(nodes: Iterable[Tensor]) -> list[Tensor]:
    """The nodes of `nodes` a backend runs, in order (see `needs_kernel`)."""
    return [n for n in nodes if needs_kernel(n)]


def describe_node(node: Tensor) -> str:
    """`node 'name' OP -> type [ne] from (src types and shapes)`: how errors name a node."""
    types = ", ".join(f"{s.type} {list(s.ne)}" for s in node.src if s is not None)
    return f"node '{node.name}' {node.op.name} -> {node.type} {list(node.ne)} from ({types})"


def srcs(node: Tensor) -> list[Tensor]:
    """The srcs present (optional slots left out)."""
    return [s for s in node.src if s is not None]


def src(node: Tensor, i: int) -> Tensor:
    """src i of `node`, which its op requires (ComputeError naming the node when it is missing)."""
    s = node.src[i] if i < len(node.src) else None
    if s is None:
        raise ComputeError(f"node '{node.name}' ({node.op.name}) has no src{i}")
    return s


def opt_src(node: Tensor, i: int) -> Tensor | None:
    """src i of `node` when the op's slot is optional (None when absent)."""
    return node.src[i] if i < len(node.src) else None


def accept_all(node: Tensor) -> bool:
    """The predicate of a rule that runs every node of its op (the numpy reference)."""
    return True


@dataclass(frozen=True, slots=True)
class Rule(Generic[B]):
    accepts: Accepts
    """Whether this backend can run the node (pure: reads the node's types, shapes, layouts and params)."""
    build: Callable[[Tensor, B], None]
    """Appends the node's work to the builder; runs once per plan, never on replay."""


Pair = tuple[Op, Op]


@dataclass(frozen=True, slots=True)
class Fusion(Generic[B]):
    accepts: Callable[[Tensor, Tensor], bool]
    """Whether the pair (first, second) runs fused (types, shapes, which src of second first is); pure."""
    build: Callable[[Tensor, Tensor, B], None]
    """Appends the fused work, which writes second's result (first's is never written); the builder's node is
    second."""


def feeds_only(first: Tensor, second: Tensor, uses: Callable[[Tensor], int]) -> bool:
    """first's result is read by second alone, once, and is no graph output: a fused kernel need not write it."""
    return (uses(first) == 1 and any(s is first for s in second.src) and not first.flags & TensorFlag.OUTPUT
            and first.view_src is None)


class RuleSet(Generic[B]):
    """The rules of one op family, collected by the `rule` decorator; an `OpTable` merges families. `fusions`:
    (first op, second op) -> Fusion (the `fusion` decorator)."""

    def __init__(self) -> None:
        self.rules: dict[Op, Rule[B]] = {}
        self.fusions: dict[Pair, Fusion[B]] = {}

    def fusion(self, first: Op, second: Op, accepts: Callable[[Tensor, Tensor], bool]
               ) -> Callable[[Callable[[Tensor, Tensor, B], None]], Callable[[Tensor, Tensor, B], None]]:
        """Decorator: the function builds the pair (first, second) as one kernel when `accepts(first, second)` holds
        (and first feeds second only)."""

        def deco(fn: Callable[[Tensor, Tensor, B], None]) -> Callable[[Tensor, Tensor, B], None]:
            if (first, second) in self.fusions:
                raise ValueError(f"{first.name} + {second.name} has two fusions in one family")
            self.fusions[(first, second)] = Fusion(accepts, fn)
            return fn

        return deco

    def rule(self, *ops: Op, accepts: Accepts = accept_all) -> Callable[[BuildFn], BuildFn]:
        """Decorator: the function builds `ops` when `accepts(node)` holds."""

        def deco(fn: BuildFn) -> BuildFn:
            for op in ops:
                self.add(op, Rule(accepts, fn))
            return fn

        return deco

    def add(self, op: Op, rule: Rule[B]) -> None:
        if op in FREE_OPS:
            raise ValueError(f"{op.name} needs no rule: NONE and views do no work")
        if op in self.rules:
            raise ValueError(f"{op.name} has two rules in one family")
        self.rules[op] = rule


class OpTable(Generic[B]):
    """The rules of one backend, op -> Rule. Later rule sets replace earlier ones op by op (a plugin's fast
    paths over shared rules)."""

    def __init__(self, backend: str, *sets: RuleSet[B] | Mapping[Op, Rule[B]], fits: Accepts | None = None) -> None:
        self.backend = backend
        """The backend (plugin) name errors give."""
        self.fits = fits
        """(optional) What every node must satisfy whatever its op, before its rule is asked: the sizes the
        backend's index arithmetic holds (Vulkan's and Metal's 32-bit counts and strides). A node it refuses is
        unsupported, so a scheduler runs it elsewhere instead of the kernels wrapping its counts."""
        self.rules: dict[Op, Rule[B]] = {}
        self.fusions: dict[Pair, Fusion[B]] = {}
        for s in sets:
            self.rules.update(s.rules if isinstance(s, RuleSet) else s)
            if isinstance(s, RuleSet):
                self.fusions.update(s.fusions)

    def __contains__(self, op: object) -> bool:
        return op in self.rules

    def __iter__(self) -> Iterator[Op]:
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)

    def get(self, op: Op) -> Rule[B] | None:
        return self.rules.get(op)

    def supports(self, node: Tensor) -> bool:
        """`Device.supports_op`: NONE and views always (they do no work), otherwise an accepting rule."""
        if node.op in FREE_OPS:
            return True
        r = self.rules.get(node.op)
        return r is not None and self._accepts(r, node)

    def _accepts(self, r: Rule[B], node: Tensor) -> bool:
        return (self.fits is None or bool(self.fits(node))) and bool(r.accepts(node))

    def rule_for(self, node: Tensor, who: str) -> Rule[B]:
        """The rule that runs `node`; UnsupportedOpError naming `who` (device), the node and the op otherwise."""
        r = self.rules.get(node.op)
        if r is None or not self._accepts(r, node):
            raise UnsupportedOpError(f"{who}: {describe_node(node)} is not supported by the {self.backend} backend")
        return r

    def fused(self, first: Tensor, second: Tensor, uses: Callable[[Tensor], int]) -> Fusion[B] | None:
        """The fusion that runs the consecutive compute nodes first and second as one kernel, if any applies."""
        f = self.fusions.get((first.op, second.op))
        if f is None or not feeds_only(first, second, uses) or not (self.supports(first) and self.supports(second)):
            return None
        return f if f.accepts(first, second) else None

    def build(self, nodes: Sequence[Tensor], builder: B, who: str,
              uses: Callable[[Tensor], int] | None = None) -> list[Tensor]:
        """Hand every node that needs a kernel to its rule, which appends its work to `builder` (whose `node` is
        set to it first); returns those nodes. With `uses` (the graph's use counts), consecutive nodes a fusion
        accepts are built by it instead, as one. A rule failing with anything but a PyGGMLError becomes a
        ComputeError naming `who` and the node."""
        out = compute_nodes(nodes)
        i = 0
        while i < len(out):
            node, second = out[i], out[i + 1] if i + 1 < len(out) else None
            fusion = self.fused(node, second, uses) if second is not None and uses is not None else None
            builder.node = node if fusion is None else second  # the node whose result the work writes
            try:
                if fusion is None:
                    self.rule_for(node, who).build(node, builder)
                else:
                    assert second is not None
                    fusion.build(node, second, builder)
            except PyGGMLError:
                raise
            except Exception as e:
                what = f"node '{node.name}' ({node.op.name})"
                if fusion is not None and second is not None:
                    what = f"{what} fused with node '{second.name}' ({second.op.name})"
                raise ComputeError(f"{who}: preparing {what} failed: {type(e).__name__}: {e}") from e
            i += 1 if fusion is None else 2
        return out
