"""Reference kernels of the DeepSeek-family ops: LIGHTNING_INDEXER and the DeepSeek V4 hyper-connection ops
DSV4_HC_COMB, DSV4_HC_PRE, DSV4_HC_POST (numpy order: [i3, i2, i1, i0])."""

from __future__ import annotations

import numpy as np

from pyggml.ops.base import Op
from pyggml.ops.deepseek import HcCombParams, HcPreParams
from pyggml.reference.access import load, store
from pyggml.reference.kernels.rules import KernelRules
from pyggml.reference.kernels.util import Array, opt_src, src, tiled
from pyggml.tensor import Tensor

rules = KernelRules()


@rules.kernel(Op.LIGHTNING_INDEXER)
def lightning_indexer(dst: Tensor) -> None:
    """score[s, t, j] = sum_h relu(q[s, t, h] . k[s, j]) * w[s, t, h] + mask[s mod M, t, j]."""
    q = load(src(dst, 0))  # [S, T, H, E]
    k = load(src(dst, 1))[:, :, 0]  # [S, J, E]
    w = load(src(dst, 2))[:, 0]  # [S, T, H]
    mask = tiled(load(src(dst, 3)), dst.ne[::-1])[:, 0]  # [S, T, J]
    qk = np.maximum(np.einsum("sthe,sje->sthj", q, k), 0.0)
    with np.errstate(invalid="ignore"):
        store(dst, (np.einsum("sthj,sth->stj", qk, w) + mask)[:, None])


def hc_comb(logits: Array, eps: float, n_iter: int) -> Array:
    """The Sinkhorn normalisation of DSV4_HC_COMB on logits [..., s, d] (numpy order: the last axis is d)."""
    e: Array = np.exp(logits - logits.max(axis=-1, keepdims=True))
    c: Array = e / e.sum(axis=-1, keepdims=True) + eps
    c = c / (eps + c.sum(axis=-2, keepdims=True))  # each d over s
    for _ in range(n_iter - 1):
        c = c / (eps + c.sum(axis=-1, keepdims=True))  # each s over d
        c = c / (eps + c.sum(axis=-2, keepdims=True))
    return c


@rules.kernel(Op.DSV4_HC_COMB)
def dsv4_hc_comb(dst: Tensor) -> None:
    """comb[t, s, d] from logits mixes[t, 2hc + d + hc*s] * scale[2] + base[2hc + d + hc*s]."""
    p: HcCombParams = dst.params
    hc = dst.ne[0]
    mixes = load(src(dst, 0))[0, 0]  # [T, (2 + hc) * hc]
    scale = load(src(dst, 1)).ravel()[2]
    base = load(src(dst, 2)).ravel()
    logits = (mixes[:, 2 * hc :] * scale + base[2 * hc :]).reshape(-1, hc, hc)  # [T, s, d]
    store(dst, hc_comb(logits, p.eps, p.n_iter)[None])


def _sigmoid(x: Array) -> Array:
    return np.exp(-np.logaddexp(0.0, -x))


@rules.kernel(Op.DSV4_HC_PRE)
def dsv4_hc_pre(dst: Tensor) -> None:
    """dst[t, i] = scale * sum_h x[t, h, i] * (w[t, h] or sigmoid(gate[t, h, i]))."""
    p: HcPreParams = dst.params
    x = load(src(dst, 0))[0]  # [T, H, E]
    w = load(src(dst, 1))
    wv = _sigmoid(w[0]) if p.gated else w[0, 0][:, :, None]  # [T, H, E] or [T, H, 1]
    store(dst, p.scale * (x * wv).sum(axis=1))


@rules.kernel(Op.DSV4_HC_POST)
def dsv4_hc_post(dst: Tensor) -> None:
    """dst[t, d, i] = x[t, i] * post[t, d] + sum_s comb[t, s, d] * residual[t, s, i] (identity without comb)."""
    x = load(src(dst, 0))[0, 0]  # [T, E]
    res = load(src(dst, 1))[0]  # [T, S, E]
    post = load(src(dst, 2))[0, 0]  # [T, D]
    comb_t = opt_src(dst, 3)
    mixed = res if comb_t is None else np.einsum("tsd,tse->tde", load(comb_t)[0], res)
    store(dst, x[:, None, :] * post[:, :, None] + mixed)
