"""The numpy backend's op table: every reference family, listed once, over core's `OpTable`."""

from __future__ import annotations

from pyggml.backend.op_table import OpTable
from pyggml.reference.kernels import (
    attention,
    custom,
    elementwise,
    layout,
    matmul,
    moe,
    norm,
    reduce,
    rope,
    unary,
)
from pyggml.reference.kernels.rules import Immediate

TABLE: OpTable[Immediate] = OpTable(
    "numpy", attention.rules, elementwise.rules, layout.rules, matmul.rules, norm.rules, reduce.rules, rope.rules,
    unary.rules, moe.rules, custom.rules,
)
