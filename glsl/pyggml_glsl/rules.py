"""The op rules of the GLSL shaders, family by family: the one place that lists them. pyggml-vulkan's op table is
these rules; pyggml-metal's is the same rules for the ops it claims (`table(backend, ops)`)."""

from __future__ import annotations

from collections.abc import Collection

from pyggml.backend.op_table import OpTable, Rule, RuleSet
from pyggml.ops.base import Op
from pyggml_glsl.builder import Builder
from pyggml_glsl.ops import (
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
from pyggml_glsl.ops.common import fits_u32

RULES: tuple[RuleSet[Builder], ...] = (
    attention.rules, elementwise.rules, index.rules, layout.rules, matmul.rules, norm.rules, reduce.rules,
    rope.rules, sort.rules, moe.rules, train.rules,
    conv.rules, spatial.rules,
    seq.rules,
)


def table(backend: str, ops: Collection[Op] | None = None) -> OpTable[Builder]:
    """The op table of `backend` (the name its errors give) over RULES, of every op or only of `ops` (the rest left
    to other backends), with the shaders' 32-bit size limit (`fits_u32`) before any rule."""
    sets: list[dict[Op, Rule[Builder]]] = [
        {op: r for op, r in s.rules.items() if ops is None or op in ops} for s in RULES]
    return OpTable(backend, *sets, fits=fits_u32)
