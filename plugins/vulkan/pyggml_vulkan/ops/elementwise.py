"""Element-wise ops: ADD/SUB/MUL/DIV/ADD1 (broadcasting), the UNARY family and friends, SCALE, CLAMP, LEAKY_RELU,
FILL, GLU."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml_vulkan.ops import register
from pyggml_vulkan.ops.common import PLAIN, generic_pc, groups_for, srcs_ok
from pyggml_vulkan.recorder import grid

if TYPE_CHECKING:
    from pyggml_vulkan.recorder import Planner

BINARY_CODE = {Op.ADD: 0, Op.SUB: 1, Op.MUL: 2, Op.DIV: 3, Op.ADD1: 0}


def _binary_ok(node: Tensor) -> bool:
    return srcs_ok(node, (PLAIN, PLAIN)) and node.type in PLAIN


@register(Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.ADD1, supports=_binary_ok)
def binary(node: Tensor, p: Planner) -> None:
    a, b = node.src[0], node.src[1]
    assert a is not None and b is not None
    spec = (int(a.type), int(b.type), int(node.type), BINARY_CODE[node.op])
    p.dispatch("binary", spec, [a, b], node, generic_pc(a, b, node), grid(groups_for(node.nelements())))
