"""The Vulkan op table: the rules of the op families (`pyggml_vulkan.ops`), listed here once, over core's
`OpTable`. `supports_op` and the recording both read `TABLE`, so they cannot drift apart."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyggml.backend.op_table import OpTable
from pyggml.graph import Graph
from pyggml_vulkan.ops import (
    attention,
    conv,
    elementwise,
    index,
    layout,
    matmul,
    moe,
    norm,
    reduce,
    rope,
    seq,
    sort,
    spatial,
    train,
)
from pyggml_vulkan.ops.common import fits_u32

if TYPE_CHECKING:
    from pyggml_vulkan.recorder import DispatchBuilder

TABLE: OpTable[DispatchBuilder] = OpTable(
    "Vulkan", attention.rules, elementwise.rules, index.rules, layout.rules, matmul.rules, norm.rules, reduce.rules,
    rope.rules, sort.rules, moe.rules, train.rules,
    conv.rules, spatial.rules,
    seq.rules,
    fits=fits_u32,
)


def plan_graph(graph: Graph, planner: DispatchBuilder, who: str = "Vulkan") -> None:
    """Record the dispatches of every node that needs a kernel into `planner`."""
    TABLE.build(graph.nodes, planner, who)
