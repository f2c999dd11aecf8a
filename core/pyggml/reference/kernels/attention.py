"""Reference kernels: SOFT_MAX (scale, mask, ALiBi, sinks), DIAG_MASK_INF / DIAG_MASK_ZERO and FLASH_ATTN_EXT,
in float64."""

from __future__ import annotations

import numpy as np

from pyggml.ops.attention import alibi
from pyggml.ops.base import Op
from pyggml.reference.access import load, store
from pyggml.reference.kernels.rules import KernelRules
from pyggml.reference.kernels.util import Array, opt_src, src
from pyggml.tensor import Tensor

rules = KernelRules()


def alibi_slopes(n_head: int, max_bias: float) -> Array:
    """Per-head mask multipliers (float64) of pyggml.ops.attention.alibi's m0, m1 and n_head_log2: all 1 without
    ALiBi (max_bias <= 0)."""
    a = alibi(n_head, max_bias)
    return np.array([a.slope(h) for h in range(n_head)])


def head_mask(mask: Tensor, n_rows: int, batch: tuple[int, int]) -> Array:
    """The mask's first n_rows rows, its dims 2 and 3 tiled up to batch (B, n_head): (B, n_head, n_rows, n)."""
    m = load(mask)[:, :, :n_rows, :]
    return np.tile(m, (batch[0] // m.shape[0], batch[1] // m.shape[1], 1, 1))


@rules.kernel(Op.SOFT_MAX)
def soft_max(dst: Tensor) -> None:
    """softmax over each row of (x * scale + slope[h] * mask), h = dim 2; a sink adds exp(sink[h]) to the
    denominator only."""
    x = load(src(dst, 0))
    p = dst.params
    z = x * p.scale
    mask_t = opt_src(dst, 1)
    if mask_t is not None:
        slopes = alibi_slopes(x.shape[1], p.max_bias)[None, :, None, None]
        z = z + slopes * head_mask(mask_t, x.shape[2], x.shape[:2])
    sinks_t = opt_src(dst, 2)
    with np.errstate(invalid="ignore", over="ignore"):
        zmax = z.max(axis=-1, keepdims=True)
        sink = None
        if sinks_t is not None:
            sink = load(sinks_t).reshape(-1)[None, :, None, None]
            zmax = np.maximum(zmax, sink)
        e = np.exp(z - zmax)
        total = e.sum(axis=-1, keepdims=True)
        if sink is not None:
            total = total + np.exp(sink - zmax)
        store(dst, e / total)


@rules.kernel(Op.DIAG_MASK_INF, Op.DIAG_MASK_ZERO)
def diag_mask(dst: Tensor) -> None:
    """Element (column i, row j) becomes -inf (or 0) where i > n_past + j, in every matrix."""
    x = load(src(dst, 0))
    cols = np.arange(x.shape[-1])[None, :]
    rows = np.arange(x.shape[-2])[:, None]
    value = -np.inf if dst.op is Op.DIAG_MASK_INF else 0.0
    store(dst, np.where(cols > dst.params.n_past + rows, value, x))


@rules.kernel(Op.FLASH_ATTN_EXT)
def flash_attn_ext(dst: Tensor) -> None:
    """softmax(softcap(q.k * scale) + slope[h] * mask) . v per q row and head, GQA by head // (n_head / n_kv_head)
    and batch // (B / B_kv); -inf mask entries drop out (for that query, the key's K and V never read), a row with
    no key left gives zeros; sinks join the denominator. Result [d_v, n_head, n_q, B] (heads and q rows exchanged)."""
    p = dst.params
    q = load(src(dst, 0))  # (B, H, n_q, d_k)
    k = load(src(dst, 1))  # (Bk, Hk, n_kv, d_k)
    v = load(src(dst, 2))  # (Bk, Hk, n_kv, d_v)
    batch, heads = q.shape[:2]
    k = np.repeat(np.repeat(k, batch // k.shape[0], axis=0), heads // k.shape[1], axis=1)
    v = np.repeat(np.repeat(v, batch // v.shape[0], axis=0), heads // v.shape[1], axis=1)
    s = (q @ np.swapaxes(k, -1, -2)) * p.scale  # (B, H, n_q, n_kv)
    if p.logit_softcap != 0.0:
        s = p.logit_softcap * np.tanh(s / p.logit_softcap)
    mask_t = opt_src(dst, 3)
    keep = np.ones(s.shape, dtype=bool)
    if mask_t is not None:
        mv = alibi_slopes(heads, p.max_bias)[None, :, None, None] * head_mask(mask_t, q.shape[2], (batch, heads))
        keep = mv != -np.inf
        s = np.where(keep, s + np.where(keep, mv, 0.0), -np.inf)
    with np.errstate(invalid="ignore", over="ignore"):
        smax = np.max(s, axis=-1, keepdims=True, initial=-np.inf)
        sinks_t = opt_src(dst, 4)
        sink = load(sinks_t).reshape(-1)[None, :, None, None] if sinks_t is not None else None
        if sink is not None:
            smax = np.maximum(smax, sink)
        smax = np.where(np.isfinite(smax), smax, 0.0)  # rows with nothing left: every weight below is 0
        w = np.where(keep, np.exp(s - smax), 0.0)
        total = w.sum(axis=-1, keepdims=True)
        if sink is not None:
            total = total + np.exp(sink - smax)
        out = _weighted_values(w, v, keep) / np.where(total == 0.0, 1.0, total)  # (B, H, n_q, d_v)
    store(dst, np.swapaxes(out, 1, 2))


def _weighted_values(w: Array, v: Array, keep: Array) -> Array:
    """w @ v over the keys each query keeps: a dropped key's value row is never read (a NaN or an infinity there,
    which 0 x v would turn into NaN, reaches only the queries that see the key)."""
    bad = np.asarray(~np.isfinite(v).all(axis=-1))  # (B, H, n_kv): key rows holding NaN or an infinity
    out: Array = w @ np.where(bad[..., None], 0.0, v)
    for b, h, c in zip(*np.nonzero(bad), strict=True):
        seen = keep[b, h, :, c]
        out[b, h, seen] += w[b, h, seen, c][:, None] * v[b, h, c][None, :]
    return out
