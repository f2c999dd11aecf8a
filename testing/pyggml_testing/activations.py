"""Any UNARY / GLU sub-op built with representative params, for backend tests that sweep every sub-op: XIELU,
SWIGLU_OAI and SWIGLU_CLAMP need params of their own (test-backend-ops' values here)."""

from __future__ import annotations

from pyggml import ops
from pyggml.ops.elementwise import GluOp, UnaryOp
from pyggml.tensor import Tensor

XIELU_ARGS = (4.0, 20.0, 0.5, 1e-7)
"""ggml_xielu's raw (alpha_n, alpha_p, beta, eps) in test-backend-ops."""


def any_unary(a: Tensor, u: UnaryOp) -> Tensor:
    return ops.xielu(a, *XIELU_ARGS) if u is UnaryOp.XIELU else ops.unary(a, u)


def any_glu(a: Tensor, g: GluOp, b: Tensor | None = None, *, swapped: bool = False) -> Tensor:
    if g is GluOp.SWIGLU_OAI:
        return ops.swiglu_oai(a, b, 1.702, 7.0, swapped=swapped)
    if g is GluOp.SWIGLU_CLAMP:
        return ops.swiglu_clamp(a, b, 2.0, swapped=swapped)
    return ops.glu(a, g, b, swapped=swapped)
