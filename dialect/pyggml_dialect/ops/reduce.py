"""Reductions and orderings (reduce.cl): SUM, SUM_ROWS, MEAN, CUMSUM, ARGMAX, COUNT_EQUAL, ARGSORT, TOP_K."""

from __future__ import annotations

from pyggml.backend.launch import WG, i32, i64
from pyggml.backend.op_table import Accepts, RuleSet, src
from pyggml.ops.base import Op
from pyggml.ops.reduce import SortOrder
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_dialect.source import ProgramSpec
from pyggml_dialect.types import PLAIN, Builder, tname

rules: RuleSet[Builder] = RuleSet()

T = GGMLType


def spec(t0: GGMLType = T.F32) -> ProgramSpec:
    return ProgramSpec.of("reduce.cl", T0=tname(t0), WG=WG)


def _src_in(types: frozenset[GGMLType]) -> Accepts:
    def ok(node: Tensor) -> bool:
        a = node.src[0]
        return a is not None and a.type in types

    return ok


F32 = frozenset({T.F32})
I32 = frozenset({T.I32})


@rules.rule(Op.SUM, accepts=_src_in(PLAIN))
def build_sum(node: Tensor, b: Builder) -> None:
    a = src(node, 0)
    b.launch(spec(a.type), "k_sum_rows", (WG,), (WG,), *b.tensor(a), *b.tensor(node), i32(0), i32(1))


@rules.rule(Op.SUM_ROWS, Op.MEAN, accepts=_src_in(F32))
def build_sum_rows(node: Tensor, b: Builder) -> None:
    a = src(node, 0)
    b.launch(spec(), "k_sum_rows", (a.nrows() * WG,), (WG,), *b.tensor(a), *b.tensor(node),
             i32(int(node.op is Op.MEAN)), i32(0))


@rules.rule(Op.CUMSUM, accepts=_src_in(F32))
def build_cumsum(node: Tensor, b: Builder) -> None:
    a = src(node, 0)
    b.launch_1d(spec(), "k_cumsum", a.nrows(), *b.tensor(a), *b.tensor(node))


@rules.rule(Op.ARGMAX, accepts=_src_in(F32))
def build_argmax(node: Tensor, b: Builder) -> None:
    a = src(node, 0)
    b.launch(spec(), "k_argmax", (a.ne[1] * WG,), (WG,), *b.tensor(a), *b.tensor(node))


@rules.rule(Op.COUNT_EQUAL, accepts=_src_in(I32))
def build_count_equal(node: Tensor, b: Builder) -> None:
    b.launch(spec(), "k_count_equal", (WG,), (WG,), *b.tensor(src(node, 0)), *b.tensor(src(node, 1)),
             *b.tensor(node))


@rules.rule(Op.ARGSORT, Op.TOP_K, accepts=_src_in(F32))
def build_argsort(node: Tensor, b: Builder) -> None:
    a = src(node, 0)
    if node.op is Op.TOP_K:
        desc, k = True, node.params.k
    else:
        desc, k = node.params.order is SortOrder.DESC, a.ne[0]
    b.launch_1d(spec(), "k_argsort", a.nelements(), *b.tensor(a), *b.tensor(node), i32(int(desc)), i64(k))
