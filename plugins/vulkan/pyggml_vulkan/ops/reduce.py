"""Reductions on reduce.comp: SUM_ROWS, MEAN, ARGMAX, CUMSUM (a work group per row), SUM and COUNT_EQUAL."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_vulkan.ops import register
from pyggml_vulkan.ops.common import PLAIN, generic_pc, srcs_ok
from pyggml_vulkan.recorder import grid

if TYPE_CHECKING:
    from pyggml_vulkan.recorder import Planner

F32 = frozenset({GGMLType.F32})
I32 = frozenset({GGMLType.I32})
CODE = {Op.SUM_ROWS: 0, Op.MEAN: 1, Op.ARGMAX: 2, Op.CUMSUM: 3, Op.SUM: 4, Op.COUNT_EQUAL: 5}


def _ok(node: Tensor) -> bool:
    if node.op is Op.COUNT_EQUAL:
        return srcs_ok(node, (I32, I32))
    if node.op is Op.SUM:
        return srcs_ok(node, (PLAIN,))
    return srcs_ok(node, (F32,))


@register(*CODE, supports=_ok)
def reduce(node: Tensor, p: Planner) -> None:
    a = node.src[0]
    b = node.src[1] if len(node.src) > 1 else None
    assert a is not None
    groups = 1 if node.op in (Op.SUM, Op.COUNT_EQUAL) else a.nrows()
    p.dispatch("reduce", (CODE[node.op], int(a.type)), [a, b], node, generic_pc(a, b, node), grid(groups))
