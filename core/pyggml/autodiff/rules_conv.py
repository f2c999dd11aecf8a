"""Gradient rules of the convolution and pooling ops ggml differentiates: IM2COL (its input gets IM2COL_BACK of
the gradient; the kernel, read only for its shape, gets none) and POOL_2D (POOL_2D_BACK). ggml's composite
convolutions (conv_1d, conv_2d and their variants: IM2COL + MUL_MAT + layout ops) are differentiated through
these and the MUL_MAT / layout rules, as ggml does; the one-op convolutions (CONV_2D, CONV_2D_DW, CONV_3D,
CONV_TRANSPOSE_*) have no rule in ggml nor here.
"""

from __future__ import annotations

from pyggml import ops
from pyggml.autodiff.rules import Backprop, rule
from pyggml.ops.base import Op
from pyggml.ops.conv import Im2colParams
from pyggml.ops.spatial import Pool2DParams
from pyggml.tensor import Tensor


@rule(Op.IM2COL, ignore=frozenset({0}))
def _im2col(node: Tensor, g: Tensor, bp: Backprop) -> None:
    p = node.params
    assert isinstance(p, Im2colParams)
    kernel, x = node.src[0], node.src[1]
    assert kernel is not None and x is not None
    if bp.needs(1):
        bp.add(1, ops.im2col_back(g, kernel, x.ne, p.s0, p.s1, p.p0, p.p1, p.d0, p.d1, p.is_2d))


@rule(Op.POOL_2D)
def _pool_2d(node: Tensor, g: Tensor, bp: Backprop) -> None:
    p = node.params
    assert isinstance(p, Pool2DParams)
    x = node.src[0]
    assert x is not None
    if bp.needs(0):
        bp.add(0, ops.pool_2d_back(g, x, p.op, p.k0, p.k1, p.s0, p.s1, p.p0, p.p1))
