"""The CUDA op table: the dialect rules of pyggml-opencl (the same kernel texts, launched through
`CudaLaunchBuilder`) with this plugin's fast paths in place of some of them. `supports` and plan building both read
`TABLE`."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pyggml.backend.op_table import OpTable
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml_cuda.launch import CudaLaunchBuilder, Launch
from pyggml_cuda.ops import matmul_q
from pyggml_dialect.rules import RULES
from pyggml_dialect.types import Builder

TABLE: OpTable[Builder] = OpTable("CUDA", *RULES, matmul_q.rules)
CUDA_RULES: frozenset[Op] = frozenset(matmul_q.rules.rules)
"""Ops whose rule is this plugin's own (the rest are the shared dialect's)."""


def supports(node: Tensor) -> bool:
    return TABLE.supports(node)


def build_launches(nodes: Sequence[Tensor], b: CudaLaunchBuilder, who: str = "CUDA",
                   uses: Callable[[Tensor], int] | None = None) -> list[Launch]:
    """Every launch of the compute nodes, in order (with `uses`, the graph's use counts, fused where the table's
    fusions apply); UnsupportedOpError / ComputeError name the node."""
    TABLE.build(nodes, b, who, uses)
    return list(b.launches)
