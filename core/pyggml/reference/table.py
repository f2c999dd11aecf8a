"""The numpy backend's op table: every reference family, listed once, over core's `OpTable`."""

from __future__ import annotations

from pyggml.backend.op_table import OpTable
from pyggml.reference.kernels import (
    attention,
    backward,
    conv,
    custom,
    deepseek,
    elementwise,
    layout,
    matmul,
    moe,
    norm,
    optim,
    reduce,
    rope,
    seq,
    spatial,
    unary,
)
from pyggml.reference.kernels.rules import Immediate

TABLE: OpTable[Immediate] = OpTable(
    "numpy", attention.rules, elementwise.rules, layout.rules, matmul.rules, norm.rules, reduce.rules, rope.rules,
    unary.rules, moe.rules, custom.rules, seq.rules, backward.rules, optim.rules,
    conv.rules, spatial.rules, deepseek.rules,
)
