"""One op-table machinery for every backend: per op a rule, `accepts(node)` (can this backend run this node: types,
layouts, params) and `build(node, builder)` (turn the node into the backend's work: a kernel call, a descriptor,
launches, dispatches). A backend's `supports_op` and its plan builder both read the same table, so what it claims
and what it runs cannot drift apart, and every backend answers the same questions the same way (views and NONE
are always supported, an empty node runs nothing, an op without an accepting rule raises an error naming it).

Family modules collect their rules in a `RuleSet` (no global registry, no import side effect); a plugin's table
module lists its families explicitly and merges them into an `OpTable`.

A family may also declare fusions: a run of consecutive compute nodes built as one kernel (RMS_NORM then the MUL by
its weight, as ggml's backends fuse them) when every result but the last one's is read only inside the run.
`OpTable.build` applies them when it is given the graph's use counts (`Graph.use_count`, graph-wide, so a result a
later split reads is never fused away); each node of a run is still supported on its own, so a scheduler needs to
know nothing of it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from pyggml.errors import ComputeError, PyGGMLError, UnsupportedOpError
from pyggml.ops.base import VIEW_OPS, Op
from pyggml.tensor import Tensor, TensorFlag, shares_bytes

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


Run = tuple[Tensor, ...]
FuseAccepts = Callable[[Run], bool]
FuseBuild = Callable[[Run, B], None]


def no_operands(run: Run) -> tuple[Tensor, ...]:
    return ()


@dataclass(frozen=True, slots=True)
class Fusion(Generic[B]):
    accepts: FuseAccepts
    """Whether the run of nodes (consecutive compute nodes of the fusion's ops) runs fused: types, shapes, which
    src reads which result; pure."""
    build: FuseBuild[B]
    """Appends the fused work, which writes the last node's result (the others' are never written); the builder's
    node is the last one."""
    in_place: Callable[[Run], tuple[Tensor, ...]] = no_operands
    """The run's operands from outside it that the fused kernel reads element by element where it writes the same
    element of the result (a residual it adds), so the result may take their place exactly (as the allocator places
    an in-place ADD)."""


def outside_srcs(run: Run) -> list[Tensor]:
    """The distinct srcs of the run's nodes that are not nodes of the run."""
    return list({id(s): s for n in run for s in n.src if s is not None and all(s is not m for m in run)}.values())


def read_inside(run: Run, uses: Callable[[Tensor], int]) -> bool:
    """Every result of the run but the last one's is read only by later nodes of the run (as many times as the
    graph's use counts say it is read at all), and none of them is a graph output or a view: a fused kernel need
    not write them."""
    for i, t in enumerate(run[:-1]):
        inside = sum(1 for n in run[i + 1:] for s in n.src if s is t)
        if inside == 0 or uses(t) != inside or t.flags & TensorFlag.OUTPUT or t.view_src is not None:
            return False
    return True


def overwrites_inputs(run: Run, in_place: tuple[Tensor, ...]) -> bool:
    """Whether the run's placed result shares bytes with what the run reads from outside it, but for the `in_place`
    operands exactly where the result is. (The allocator, which places the nodes one at a time, may give a src's
    memory to a later node of the run once its last reader inside the run is done, while a fused kernel still reads
    it as it writes the result; the scheduler keeps such memory apart (`alloc_deps`), this is the check for graphs
    placed otherwise.)"""
    out = run[-1]
    for s in outside_srcs(run):
        exact = any(s is p for p in in_place) and (s.buffer, s.offset, tuple(s.nb)) == (out.buffer, out.offset,
                                                                                         tuple(out.nb))
        if shares_bytes(out, s) and not exact:
            return True
    return False


class RuleSet(Generic[B]):
    """The rules of one op family, collected by the `rule` decorator; an `OpTable` merges families. `fusions`:
    the ops of a run of nodes -> Fusion (the `fusion` decorator)."""

    def __init__(self) -> None:
        self.rules: dict[Op, Rule[B]] = {}
        self.fusions: dict[tuple[Op, ...], Fusion[B]] = {}

    def fusion(self, *ops: Op, accepts: FuseAccepts, in_place: Callable[[Run], tuple[Tensor, ...]] = no_operands
               ) -> Callable[[FuseBuild[B]], FuseBuild[B]]:
        """Decorator: the function builds a run of consecutive nodes of `ops` (two or more) as one kernel when
        `accepts(run)` holds (and the run's results but the last are read inside it only, `read_inside`, and the
        placed result overwrites none of its inputs but the `in_place(run)` ones, exactly: `overwrites_inputs`)."""

        def deco(fn: FuseBuild[B]) -> FuseBuild[B]:
            if len(ops) < 2:
                raise ValueError("a fusion joins two nodes or more")
            if ops in self.fusions:
                raise ValueError(f"{' + '.join(op.name for op in ops)} has two fusions in one family")
            self.fusions[ops] = Fusion(accepts, fn, in_place)
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
        self.fusions: dict[tuple[Op, ...], Fusion[B]] = {}
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

    def _runs(self, nodes: Sequence[Tensor], i: int, uses: Callable[[Tensor], int]
              ) -> Iterator[tuple[Fusion[B], Run]]:
        """The fusions whose ops, use counts and rule accept the run of compute nodes from nodes[i], longest first
        (placement not asked)."""
        for ops in sorted((k for k in self.fusions if k[0] is nodes[i].op), key=len, reverse=True):
            run = tuple(nodes[i:i + len(ops)])
            f = self.fusions[ops]
            if (tuple(n.op for n in run) == ops and all(self.supports(n) for n in run) and f.accepts(run)
                    and read_inside(run, uses)):
                yield f, run

    def fused(self, nodes: Sequence[Tensor], i: int, uses: Callable[[Tensor], int]) -> tuple[Fusion[B], Run] | None:
        """The fusion that builds the run of compute nodes starting at nodes[i], longest first, if any applies to
        the nodes as placed (`overwrites_inputs`)."""
        for f, run in self._runs(nodes, i, uses):
            if not overwrites_inputs(run, f.in_place(run)):
                return f, run
        return None

    def alloc_deps(self, nodes: Sequence[Tensor], uses: Callable[[Tensor], int]) -> list[tuple[Tensor, Tensor]]:
        """`Backend.alloc_deps` of a backend built by this table: for each run the fusions would build (runs
        chosen as `build` chooses them), the (src, last node) pairs of the run's operands from outside it, but the
        in-place ones, so that the allocator gives none of their memory to a node of the run."""
        out = compute_nodes(nodes)
        deps: list[tuple[Tensor, Tensor]] = []
        i = 0
        while i < len(out):
            found = next(self._runs(out, i, uses), None)
            if found is None:
                i += 1
                continue
            f, run = found
            exempt = f.in_place(run)
            deps += [(s, run[-1]) for s in outside_srcs(run) if all(s is not p for p in exempt)]
            i += len(run)
        return deps

    def build(self, nodes: Sequence[Tensor], builder: B, who: str,
              uses: Callable[[Tensor], int] | None = None) -> list[Tensor]:
        """Hand every node that needs a kernel to its rule, which appends its work to `builder` (whose `node` is
        set to it first); returns those nodes. With `uses` (the graph's use counts), a run of consecutive nodes a
        fusion accepts is built by it instead, as one. A rule failing with anything but a PyGGMLError becomes a
        ComputeError naming `who` and the node (or the run)."""
        out = compute_nodes(nodes)
        i = 0
        while i < len(out):
            found = self.fused(out, i, uses) if uses is not None and self.fusions else None
            run = found[1] if found is not None else (out[i],)
            builder.node = run[-1]  # the node whose result the work writes
            try:
                if found is None:
                    self.rule_for(run[0], who).build(run[0], builder)
                else:
                    found[0].build(run, builder)
            except PyGGMLError:
                raise
            except Exception as e:
                what = " fused with ".join(f"node '{n.name}' ({n.op.name})" for n in run)
                raise ComputeError(f"{who}: preparing {what} failed: {type(e).__name__}: {e}") from e
            i += len(run)
        return out
