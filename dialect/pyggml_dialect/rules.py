"""The op rules of the dialect kernels, family by family: the one place that lists them. pyggml-opencl's op table is
these rules; pyggml-cuda's is these with its own fast paths in place of some (both compile the same kernel texts)."""

from __future__ import annotations

from pyggml.backend.op_table import RuleSet
from pyggml_dialect.ops import (
    attention,
    conv,
    elementwise,
    layout,
    matmul,
    moe,
    norm,
    reduce,
    rope,
    rows,
    seq,
    spatial,
    train,
)
from pyggml_dialect.types import Builder

RULES: tuple[RuleSet[Builder], ...] = (
    attention.rules, elementwise.rules, layout.rules, matmul.rules, norm.rules, reduce.rules, rope.rules, rows.rules,
    moe.rules,
    train.rules,
    conv.rules, spatial.rules,
    seq.rules,
)
