"""MUL_MAT: a (any readable type, block types dequantised in registers) x b (f32/f16) -> f32."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_vulkan.ops import register
from pyggml_vulkan.ops.common import PLAIN, READABLE, generic_pc, srcs_ok
from pyggml_vulkan.recorder import grid

if TYPE_CHECKING:
    from pyggml_vulkan.recorder import Planner

NC_MAX = 8
"""Columns of b per work group (each a element loaded once for all of them)."""


def _mul_mat_ok(node: Tensor) -> bool:
    a = node.src[0]
    if a is None or not srcs_ok(node, (READABLE, frozenset({GGMLType.F32, GGMLType.F16}))):
        return False
    return a.type in PLAIN or a.ne[0] % 32 == 0


@register(Op.MUL_MAT, supports=_mul_mat_ok)
def mul_mat(node: Tensor, p: Planner) -> None:
    a, b = node.src[0], node.src[1]
    assert a is not None and b is not None
    nc = 1 if b.ne[1] == 1 else NC_MAX
    n = a.ne[1] * -(-b.ne[1] // nc) * b.ne[2] * b.ne[3]
    p.dispatch("mul_mat", (int(a.type), int(b.type), nc), [a, b], node, generic_pc(a, b, node), grid(n))
