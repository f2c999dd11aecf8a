"""The table of gradient rules: one rule per differentiable op (UNARY and GLU per sub-op), and the small interface
(`Backprop`) through which a rule adds what it computes to the gradient of a source.

A rule receives the node, the node's gradient and a `Backprop`; for each source slot j that needs a gradient
(`bp.needs(j)`) it records the backward nodes and hands the result to `bp.add(j, t)` (or `sub`, `acc`). How the
contributions of several consumers are summed (a fresh ADD, or an in-place ADD into a gradient accumulator) is
decided in one place, `Backprop`, never in a rule. Rules live in `rules_math`, `rules_layout`,
`rules_indexed`, `rules_conv` and `rules_fused`; this module holds only the table and the lookup.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from pyggml.errors import UnsupportedOpError
from pyggml.ops.base import Op, describe
from pyggml.ops.elementwise import GluOp, GluParams, UnaryOp, UnaryParams
from pyggml.tensor import Tensor


class GradientError(UnsupportedOpError):
    """Backward through a node whose op has no gradient rule, or a graph that cannot be differentiated."""


class Backprop(Protocol):
    """What a rule may do with the gradients of its node's sources."""

    def needs(self, j: int) -> bool:
        """Whether src[j] needs a gradient (it leads to a parameter and is not an ignored slot)."""
        ...

    def add(self, j: int, t: Tensor) -> None:
        """grad(src[j]) += t (t has src[j]'s shape)."""
        ...

    def sub(self, j: int, t: Tensor) -> None:
        """grad(src[j]) -= t."""
        ...

    def acc(self, j: int, t: Tensor, nb1: int, nb2: int, nb3: int, offset: int) -> None:
        """grad(src[j]) += t placed into the view (src[j]'s element size, byte strides nb1..nb3, byte offset)."""
        ...


RuleFn = Callable[[Tensor, Tensor, Backprop], None]
"""(node, grad of node, backprop) -> None."""


@dataclass(frozen=True, slots=True)
class Rule:
    fn: RuleFn
    ignore: frozenset[int] = frozenset()
    """Source slots through which no gradient flows (indices, positions, a copy's destination, a step function):
    they neither need nor receive a gradient, so a parameter reached only through them gets none."""


RULES: dict[Op, Rule] = {}
UNARY_RULES: dict[UnaryOp, Rule] = {}
GLU_RULES: dict[GluOp, Rule] = {}
NO_GRADIENT = Rule(lambda node, grad, bp: None, frozenset(range(10)))
"""Piecewise-constant functions: zero gradient almost everywhere."""


def rule(op: Op, *, ignore: frozenset[int] = frozenset()) -> Callable[[RuleFn], RuleFn]:
    """Register the decorated function as the gradient rule of `op`."""

    def deco(fn: RuleFn) -> RuleFn:
        RULES[op] = Rule(fn, ignore)
        return fn

    return deco


def unary_rule(uop: UnaryOp) -> Callable[[RuleFn], RuleFn]:
    def deco(fn: RuleFn) -> RuleFn:
        UNARY_RULES[uop] = Rule(fn)
        return fn

    return deco


def glu_rule(gop: GluOp) -> Callable[[RuleFn], RuleFn]:
    def deco(fn: RuleFn) -> RuleFn:
        GLU_RULES[gop] = Rule(fn)
        return fn

    return deco


def _op_name(node: Tensor) -> str:
    p = node.params
    if node.op is Op.UNARY and isinstance(p, UnaryParams):
        return f"UNARY {p.op.name}"
    if node.op is Op.GLU and isinstance(p, GluParams):
        return f"GLU {p.op.name}"
    return node.op.name


def lookup(node: Tensor) -> Rule | None:
    """The node's rule, or None when it has none (UNARY / GLU: by sub-op)."""
    p = node.params
    if node.op is Op.UNARY and isinstance(p, UnaryParams):
        return UNARY_RULES.get(p.op)
    if node.op is Op.GLU and isinstance(p, GluParams):
        return GLU_RULES.get(p.op)
    return RULES.get(node.op)


def require(node: Tensor) -> Rule:
    """The node's rule, or a GradientError naming the op and the node."""
    r = lookup(node)
    if r is None:
        raise GradientError(f"no gradient rule for {_op_name(node)}: cannot differentiate node {describe(node)} "
                            f"(srcs: {', '.join(describe(s) for s in node.src if s is not None)})")
    return r


def differentiable() -> list[str]:
    """Names of every op (and UNARY / GLU sub-op) with a rule, for docs and conformance coverage."""
    return sorted([op.name for op in RULES if op not in (Op.UNARY, Op.GLU)]
                  + [f"UNARY {u.name}" for u in UNARY_RULES] + [f"GLU {g.name}" for g in GLU_RULES])
