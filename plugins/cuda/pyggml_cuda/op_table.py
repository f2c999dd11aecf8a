"""The CUDA op table: the OpenCL plugin's rules (the same kernel texts, launched through `CudaPlanBuilder`) with
CUDA fast paths in place of some of them. `supports` and plan building both read `TABLE`."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from pyggml.ops.base import VIEW_OPS, Op
from pyggml.tensor import Tensor
from pyggml_cuda.ops import matmul_q
from pyggml_cuda.plan import CudaPlanBuilder, Launch
from pyggml_opencl.op_table import TABLE as SHARED_TABLE
from pyggml_opencl.op_table import OpRule, build_nodes

log = logging.getLogger(__name__)

TABLE: dict[Op, OpRule] = dict(SHARED_TABLE)
TABLE[Op.MUL_MAT] = OpRule(SHARED_TABLE[Op.MUL_MAT].supports, matmul_q.build_mul_mat)
CUDA_RULES = frozenset({Op.MUL_MAT})
"""Ops whose rule is this plugin's own (the rest are pyggml_opencl's)."""


def supports(node: Tensor, dev: Any = None) -> bool:
    if node.op is Op.NONE or node.op in VIEW_OPS:
        return True
    r = TABLE.get(node.op)
    return r is not None and r.supports(node, dev)


def build_launches(nodes: Sequence[Tensor], b: CudaPlanBuilder, backend_name: str = "CUDA") -> list[Launch]:
    """Every launch of the compute nodes, in order; UnsupportedOpError / ComputeError name the node."""
    build_nodes(TABLE, nodes, b, b.dev, backend_name, "CUDA")
    return list(b.launches)
