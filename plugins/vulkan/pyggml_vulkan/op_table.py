"""The Vulkan op table: every GLSL op rule (`pyggml_glsl.rules`, the families the Metal plugin runs too) over core's
`OpTable`, built into a `DispatchBuilder`. `supports_op` and the recording both read `TABLE`, so they cannot drift
apart."""

from __future__ import annotations

from pyggml.backend.op_table import OpTable
from pyggml.graph import Graph
from pyggml_glsl.builder import Builder
from pyggml_glsl.rules import table

TABLE: OpTable[Builder] = table("Vulkan")


def plan_graph(graph: Graph, planner: Builder, who: str = "Vulkan") -> None:
    """Record the dispatches of every node that needs a kernel into `planner`."""
    TABLE.build(graph.nodes, planner, who)
