"""The Vulkan op table: Op -> (supports, plan). `supports_op` and the dispatch come from this one table, so they
cannot drift apart. Each family module registers its entries on import."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyggml.errors import UnsupportedOpError
from pyggml.graph import Graph
from pyggml.ops.base import VIEW_OPS, Op
from pyggml.tensor import Tensor, TensorFlag

if TYPE_CHECKING:
    from pyggml_vulkan.recorder import Planner

Supports = Callable[[Tensor], bool]
Plan = Callable[[Tensor, "Planner"], None]


@dataclass(frozen=True, slots=True)
class OpImpl:
    supports: Supports
    plan: Plan


TABLE: dict[Op, OpImpl] = {}


def register(*ops: Op, supports: Supports) -> Callable[[Plan], Plan]:
    def deco(fn: Plan) -> Plan:
        for op in ops:
            TABLE[op] = OpImpl(supports, fn)
        return fn

    return deco


def supports(node: Tensor, device: object = None) -> bool:
    if node.op is Op.NONE or node.op in VIEW_OPS:
        return True
    impl = TABLE.get(node.op)
    return impl is not None and impl.supports(node)


def plan_graph(graph: Graph, planner: Planner) -> None:
    for node in graph.nodes:
        op = node.op
        if op is Op.NONE or op in VIEW_OPS or not node.flags & TensorFlag.COMPUTE or node.nelements() == 0:
            continue
        impl = TABLE.get(op)
        if impl is None or not impl.supports(node):
            srcs = ", ".join(f"{s.type} {list(s.ne)}" for s in node.src if s is not None)
            raise UnsupportedOpError(f"Vulkan: node '{node.name}' {op.name} ({node.type} ne={list(node.ne)}; "
                                     f"srcs {srcs}) is not supported")
        planner.node = node
        impl.plan(node, planner)


from pyggml_vulkan.ops import (  # noqa: E402,F401  (registration)
    attention,
    elementwise,
    index,
    layout,
    matmul,
    norm,
    reduce,
    rope,
    sort,
)
