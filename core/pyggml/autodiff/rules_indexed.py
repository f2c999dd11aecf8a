"""Gradient rules of the indexed writes and products that ggml does not differentiate: SET_ROWS (a KV-cache write)
and MUL_MAT_ID (a mixture of experts' matmul). The indices take no gradient; the derivatives follow from the ops'
definitions and are checked against finite differences like every other rule (conformance --mode grad).
"""

from __future__ import annotations

from pyggml import ops
from pyggml.autodiff.rules import Backprop, GradientError, rule
from pyggml.ops.base import Op, describe
from pyggml.tensor import ACTIVE_CONTEXT, Tensor
from pyggml.types import GGMLType


def _src(node: Tensor, j: int) -> Tensor:
    s = node.src[j]
    assert s is not None
    return s


@rule(Op.SET_ROWS, ignore=frozenset({2}))
def _set_rows(node: Tensor, g: Tensor, bp: Backprop) -> None:
    """y = set_rows(a, b, ids): a with row ids[i] of each batch replaced by row i of b. The replaced rows of a
    do not reach y (da = g with those rows zeroed: a copy of g with zero rows written at ids); b's rows are y's
    rows at ids (db = get_rows(g, ids)). Each destination row is assumed written once: where ids repeat a row,
    the write that wins is the last one, and the gradient would also reach the rows it overwrote."""
    a, b, ids = _src(node, 0), _src(node, 1), _src(node, 2)
    if a.type != GGMLType.F32 or ids.type != GGMLType.I32:
        raise GradientError(f"SET_ROWS: gradients need an F32 destination and I32 row ids, got {describe(a)} and "
                            f"{describe(ids)}")
    if ids.ne[1] != b.ne[2] or ids.ne[2] != b.ne[3]:
        raise GradientError(f"SET_ROWS: the gradient with row ids {describe(ids)} broadcast over the batches of "
                            f"{describe(b)} is not implemented")
    if bp.needs(1):
        bp.add(1, ops.get_rows(g, ids))
    if bp.needs(0):
        bp.add(0, ops.set_rows(ops.dup(g), ops.fill(b, 0.0), ids))


@rule(Op.MUL_MAT_ID, ignore=frozenset({2}))
def _mul_mat_id(node: Tensor, g: Tensor, bp: Backprop) -> None:
    """y[:, e, t] = A_x b[:, e % nb, t] with x = ids[e, t] (experts as [K, M, X], b [K, nb, T], ids [E, T]).
    Write slot e = j + nb r. Everything goes through H[m, x, j, t] = sum_r g[m, j + nb r, t] [ids[j + nb r, t] = x],
    the node's gradient sorted by expert (an OUT_PROD over r of g and the one-hot rows of ids):
      d as[k, m, x] = sum_{j,t} b[k, j, t] H[m, x, j, t]        (OUT_PROD of b and H)
      d b[k, j, t]  = sum_{m,x} as[k, m, x] H[m, x, j, t]       (OUT_PROD of as and H^T, as may be quantised)
    Both products cost what a dense product over all X experts would (X / E times the forward's multiply-adds),
    the price of staying within ggml's ops; H holds M X nb T floats."""
    as_, b, ids = _src(node, 0), _src(node, 1), _src(node, 2)
    k, m, n_x = as_.ne[0], as_.ne[1], as_.ne[2]
    n_e, n_t, nb = ids.ne[0], ids.ne[1], b.ne[1]
    r = n_e // nb
    ctx = ACTIVE_CONTEXT.get() or g.ctx
    if ctx is None:
        raise GradientError(f"MUL_MAT_ID: no context to record the backward of {describe(node)} in")
    eye = ops.diag(ops.fill(ops.arange(ctx, 0.0, float(n_x)), 1.0))
    flat = ids if ids.is_contiguous() else ops.cont(ids)
    onehot = ops.get_rows(eye, ops.reshape(flat, n_e * n_t))  # [X, E T]: row (e, t) is the unit vector of ids[e, t]
    onehot = ops.cont(ops.permute(ops.reshape(onehot, n_x, nb, r, n_t), 0, 2, 1, 3))  # [X, r, nb, T]
    gc = g if g.is_contiguous() else ops.cont(g)
    g4 = ops.cont(ops.permute(ops.reshape(gc, m, nb, r, n_t), 0, 2, 1, 3))  # [M, r, nb, T]
    h = ops.reshape(ops.out_prod(g4, onehot), m * n_x, nb * n_t)  # H as [M X, nb T]
    if bp.needs(0):
        bc = b if b.is_contiguous() else ops.cont(b)
        bp.add(0, ops.reshape(ops.out_prod(ops.reshape(bc, k, nb * n_t), h), k, m, n_x))
    if bp.needs(1):
        if not as_.is_contiguous():
            raise GradientError(f"MUL_MAT_ID: the gradient of src1 needs contiguous experts, got {describe(as_)}")
        bp.add(1, ops.reshape(ops.out_prod(ops.reshape(as_, k, m * n_x), ops.transpose(h)), k, nb, n_t))
