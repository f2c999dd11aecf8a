"""Gradient rules of fused ops by decomposition: the op is recorded again from its sources as the plain ops it
fuses, in the backward graph, and that small subgraph is differentiated with the other rules
(`backward.backprop_through`). Memory and time are those of the unfused ops, which is the price of having no
dedicated backward kernel; in exchange every piece is already checked by the gradient conformance cases.
"""

from __future__ import annotations

from pyggml import ops
from pyggml.autodiff.rules import Backprop, GradientError, rule
from pyggml.ops.attention import FlashAttnParams
from pyggml.ops.base import Op, describe
from pyggml.tensor import Tensor
from pyggml.types import GGMLType


def _attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, sinks: Tensor | None,
               p: FlashAttnParams) -> Tensor:
    """FLASH_ATTN_EXT as MUL_MAT, SOFT_MAX and a permute: softmax(softcap(k.q scale) + slope mask) . v, result
    [d_v, n_head, n_q, B]. Heads of q share kv heads (GQA) through MUL_MAT's batch broadcast, which maps q head h
    to kv head h // (n_head / n_head_kv) as the fused op does."""
    kq = ops.mul_mat(k, q)  # [n_kv, n_q, n_head, B]
    scale = p.scale
    if p.logit_softcap > 0:
        kq = ops.scale(ops.tanh(ops.scale(kq, p.scale / p.logit_softcap)), p.logit_softcap)
        scale = 1.0
    probs = ops.soft_max(kq, mask, scale=scale, max_bias=p.max_bias, sinks=sinks)
    kqv = ops.mul_mat(ops.cont(ops.transpose(v)), probs)  # [d_v, n_q, n_head, B]
    return ops.permute(kqv, 0, 2, 1, 3)


@rule(Op.FLASH_ATTN_EXT, ignore=frozenset({3, 4}))
def _flash_attn_ext(node: Tensor, g: Tensor, bp: Backprop) -> None:
    """(ggml has no rule for it.) q, k and v get gradients; the mask and the sinks are constants."""
    from pyggml.autodiff.backward import backprop_through  # backward imports this module to fill the table

    p: FlashAttnParams = node.params
    q, k, v = node.src[0], node.src[1], node.src[2]
    assert q is not None and k is not None and v is not None
    mask = node.src[3] if len(node.src) > 3 else None
    sinks = node.src[4] if len(node.src) > 4 else None
    for j, t in ((1, k), (2, v)):
        if bp.needs(j) and t.type != GGMLType.F32:
            raise GradientError(f"FLASH_ATTN_EXT: a gradient for {describe(t)} needs F32 k and v")
    out = _attention(q, k, v, mask, sinks, p)
    slots = [j for j in range(3) if bp.needs(j)]
    grads = backprop_through(out, g, node.src, [(q, k, v)[j] for j in slots])
    for j, gj in zip(slots, grads, strict=True):
        if gj is not None:
            bp.add(j, gj)
