"""Reductions and orderings (reduce.cl): SUM, SUM_ROWS, MEAN, CUMSUM, ARGMAX, COUNT_EQUAL, ARGSORT, TOP_K."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyggml.ops.base import Op
from pyggml.ops.reduce import SortOrder
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_opencl.op_table import PLAIN, WG, PlanBuilder, Supports, i32, i64, rule, src, tname
from pyggml_opencl.programs import ProgramSpec

if TYPE_CHECKING:
    from pyggml_opencl.device import OpenCLDevice

T = GGMLType


def spec(t0: GGMLType = T.F32) -> ProgramSpec:
    return ProgramSpec.of("reduce.cl", T0=tname(t0), WG=WG)


def _src_in(types: frozenset[GGMLType]) -> Supports:
    def ok(node: Tensor, dev: OpenCLDevice) -> bool:
        a = node.src[0]
        return a is not None and a.type in types

    return ok


F32 = frozenset({T.F32})
I32 = frozenset({T.I32})


@rule(Op.SUM, supports=_src_in(PLAIN))
def build_sum(node: Tensor, b: PlanBuilder) -> None:
    a = src(node, 0)
    b.launch(spec(a.type), "k_sum_rows", (WG,), (WG,), *b.tensor(a), *b.tensor(node), i32(0), i32(1))


@rule(Op.SUM_ROWS, Op.MEAN, supports=_src_in(F32))
def build_sum_rows(node: Tensor, b: PlanBuilder) -> None:
    a = src(node, 0)
    b.launch(spec(), "k_sum_rows", (a.nrows() * WG,), (WG,), *b.tensor(a), *b.tensor(node),
             i32(int(node.op is Op.MEAN)), i32(0))


@rule(Op.CUMSUM, supports=_src_in(F32))
def build_cumsum(node: Tensor, b: PlanBuilder) -> None:
    a = src(node, 0)
    b.launch_1d(spec(), "k_cumsum", a.nrows(), *b.tensor(a), *b.tensor(node))


@rule(Op.ARGMAX, supports=_src_in(F32))
def build_argmax(node: Tensor, b: PlanBuilder) -> None:
    a = src(node, 0)
    b.launch(spec(), "k_argmax", (a.ne[1] * WG,), (WG,), *b.tensor(a), *b.tensor(node))


@rule(Op.COUNT_EQUAL, supports=_src_in(I32))
def build_count_equal(node: Tensor, b: PlanBuilder) -> None:
    b.launch(spec(), "k_count_equal", (WG,), (WG,), *b.tensor(src(node, 0)), *b.tensor(src(node, 1)),
             *b.tensor(node))


@rule(Op.ARGSORT, Op.TOP_K, supports=_src_in(F32))
def build_argsort(node: Tensor, b: PlanBuilder) -> None:
    a = src(node, 0)
    if node.op is Op.TOP_K:
        desc, k = True, node.params.k
    else:
        desc, k = node.params.order is SortOrder.DESC, a.ne[0]
    b.launch_1d(spec(), "k_argsort", a.nelements(), *b.tensor(a), *b.tensor(node), i32(int(desc)), i64(k))
