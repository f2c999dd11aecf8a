"""One op-table machinery for every backend: per op a rule, `accepts(node)` (can this backend run this node: types,
layouts, params) and `build(node, builder)` (turn the node into the backend's work: a kernel call, a descriptor,
launches, dispatches). A backend's `supports_op` and its plan builder both read the same table, so what it claims
and what it runs cannot drift apart, and every backend answers the same questions the same way (views and NONE
are always supported, an empty node runs nothing, an op without an accepting rule raises an error naming it).

Family modules collect their rules in a `RuleSet` (no global registry, no import side effect); a plugin's table
module lists its families explicitly and merges them into an `OpTable`.
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


class RuleSet(Generic[B]):
    """The rules of one op family, collected by the `rule` decorator; an `OpTable` merges families."""

    def __init__(self) -> None:
        self.rules: dict[Op, Rule[B]] = {}

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
        for s in sets:
            self.rules.update(s.rules if isinstance(s, RuleSet) else s)

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

    def build(self, nodes: Sequence[Tensor], builder: B, who: str) -> list[Tensor]:
        """Hand every node that needs a kernel to its rule, which appends its work to `builder` (whose `node` is
        set to it first); returns those nodes. A rule failing with anything but a PyGGMLError becomes a
        ComputeError naming `who` and the node."""
        out = compute_nodes(nodes)
        for node in out:
            r = self.rule_for(node, who)
            builder.node = node
            try:
                r.build(node, builder)
            except PyGGMLError:
                raise
            except Exception as e:
                raise ComputeError(f"{who}: preparing node '{node.name}' ({node.op.name}) failed: "
                                   f"{type(e).__name__}: {e}") from e
        return out
