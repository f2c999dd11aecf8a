"""The op rules of the dialect kernels, family by family: the one place that lists them. The OpenCL table is these
rules; pyggml-cuda's is these plus its own fast paths (it compiles the same kernel texts)."""

from __future__ import annotations

from pyggml.backend.op_table import RuleSet
from pyggml_opencl.dialect import Builder
from pyggml_opencl.ops import attention, elementwise, layout, matmul, norm, reduce, rope, rows

RULES: tuple[RuleSet[Builder], ...] = (
    attention.rules, elementwise.rules, layout.rules, matmul.rules, norm.rules, reduce.rules, rope.rules, rows.rules,
)
