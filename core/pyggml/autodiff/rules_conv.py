"""Gradient rules of the convolution and pooling ops: IM2COL (its input gets IM2COL_BACK of the gradient; the
kernel, read only for its shape, gets none) and POOL_2D (POOL_2D_BACK), as ggml differentiates them, and POOL_1D
(POOL_2D_BACK one row high), which ggml does not. ggml's composite convolutions (conv_1d, conv_2d and their
variants: IM2COL + MUL_MAT + layout ops) are differentiated through these and the MUL_MAT / layout rules, as ggml
does; the one-op convolutions (CONV_2D, CONV_2D_DW, CONV_3D, CONV_TRANSPOSE_*) have no rule in ggml nor here.
"""

from __future__ import annotations

from pyggml import ops
from pyggml.autodiff.rules import Backprop, GradientError, rule
from pyggml.ops.base import Op
from pyggml.ops.conv import Im2colParams
from pyggml.ops.spatial import Pool1DParams, Pool2DParams, PoolOp
from pyggml.tensor import Tensor


@rule(Op.IM2COL, ignore=frozenset({0}))
def _im2col(node: Tensor, g: Tensor, bp: Backprop) -> None:
    p: Im2colParams = node.params
    kernel, x = node.src[0], node.src[1]
    assert kernel is not None and x is not None
    if bp.needs(1):
        bp.add(1, ops.im2col_back(g, kernel, x.ne, p.s0, p.s1, p.p0, p.p1, p.d0, p.d1, p.is_2d))


@rule(Op.POOL_2D)
def _pool_2d(node: Tensor, g: Tensor, bp: Backprop) -> None:
    p: Pool2DParams = node.params
    x = node.src[0]
    assert x is not None
    if bp.needs(0):
        bp.add(0, ops.pool_2d_back(g, x, p.op, p.k0, p.k1, p.s0, p.s1, p.p0, p.p1))


@rule(Op.POOL_1D)
def _pool_1d(node: Tensor, g: Tensor, bp: Backprop) -> None:
    """ggml has no rule: POOL_1D is POOL_2D over windows one row high (x as [ne0, 1, ne1, ne2 ne3]), so its
    gradient is POOL_2D_BACK's. Its AVG divides by the real elements a window covers where POOL_2D's divides by k0,
    which differ only where a window reaches into the padding: AVG with padding has no rule."""
    p: Pool1DParams = node.params
    x = node.src[0]
    assert x is not None
    if not bp.needs(0):
        return
    if p.op is PoolOp.AVG and p.p0:
        raise GradientError(f"POOL_1D: the gradient of AVG pooling with padding ({p.p0}) is not implemented: "
                            "its windows at the edges divide by fewer elements than POOL_2D_BACK's")
    ne0, ne1, ne2, ne3 = x.ne
    xc = x if x.is_contiguous() else ops.cont(x)
    gc = g if g.is_contiguous() else ops.cont(g)
    dx = ops.pool_2d_back(ops.reshape(gc, g.ne[0], 1, ne1, ne2 * ne3), ops.reshape(xc, ne0, 1, ne1, ne2 * ne3),
                          p.op, p.k0, 1, p.s0, 1, p.p0, 0)
    bp.add(0, ops.reshape(dx, ne0, ne1, ne2, ne3))
