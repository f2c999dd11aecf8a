"""Reference kernels, attention: SOFT_MAX (scale, F16/F32 mask broadcast, ALiBi, sinks, in place),
DIAG_MASK_INF/ZERO, FLASH_ATTN_EXT (GQA, batch broadcast, mask, ALiBi, softcap, sinks, F16 and quantised K/V),
against per-row loops (FLASH_ATTN_EXT's with ggml's streaming max/sum update)."""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest

from pyggml import ops
from pyggml.types import GGMLType as T
from pyggml_testing.graphs import f16, f32, new_ctx, rand, result, tensor

HAVE_QUANTS = importlib.util.find_spec("pyggml.quants") is not None
INF = math.inf


def slope(h: int, n_head: int, max_bias: float) -> float:
    if max_bias <= 0:
        return 1.0
    n = 2 ** int(math.log2(n_head))
    if h < n:
        return float((2 ** (-max_bias / n)) ** (h + 1))
    return float((2 ** (-max_bias / 2 / n)) ** (2 * (h - n) + 1))


def loop_soft_max(x: np.ndarray, mask: np.ndarray | None, scale: float, max_bias: float,
                  sinks: list[float] | None) -> np.ndarray:
    out = np.empty_like(x)
    n_head = x.shape[1]
    for b, h, r in np.ndindex(*x.shape[:3]):
        z = [float(v) * scale for v in x[b, h, r]]
        if mask is not None:
            m = mask[b % mask.shape[0], h % mask.shape[1], r]
            z = [zi + slope(h, n_head, max_bias) * float(mi) for zi, mi in zip(z, m, strict=True)]
        top = max(z + ([sinks[h]] if sinks else []))
        e = [math.exp(zi - top) for zi in z]
        total = math.fsum(e) + (math.exp(sinks[h] - top) if sinks else 0.0)
        out[b, h, r] = [v / total for v in e]
    return out


def test_soft_max_plain_and_scaled() -> None:
    ctx = new_ctx()
    x = rand(1, 2, 3, 5, seed=80, scale=3.0)
    np.testing.assert_allclose(result(ops.soft_max(tensor(ctx, x))), f32(loop_soft_max(x, None, 1.0, 0, None))[0],
                               rtol=1e-6)
    got = result(ops.soft_max(tensor(ctx, x), scale=0.3))
    np.testing.assert_allclose(got, f32(loop_soft_max(x, None, 0.3, 0, None))[0], rtol=1e-6)


@pytest.mark.parametrize("mtype", [T.F32, T.F16], ids=str)
def test_soft_max_mask_broadcast_uses_first_rows(mtype: T) -> None:
    ctx = new_ctx()
    x = rand(2, 4, 3, 6, seed=81)
    mask = f16(rand(1, 2, 5, 6, seed=82))  # 5 rows (only 3 used), 2 heads tiled over 4, 1 batch over 2
    mask[0, 1, 0, 2] = -INF
    got = result(ops.soft_max(tensor(ctx, x), tensor(ctx, mask, mtype), scale=0.5))
    np.testing.assert_allclose(got, f32(loop_soft_max(x, mask, 0.5, 0, None)), rtol=1e-6, atol=1e-7)
    assert got[0, 1, 0, 2] == 0.0


def test_soft_max_alibi_and_sinks_in_place() -> None:
    ctx = new_ctx()
    x = rand(1, 6, 2, 5, seed=83)  # 6 heads: 4 take m0 powers, 2 take m1 powers
    mask = rand(1, 1, 2, 5, seed=84)
    sinks = [0.5, -1.0, 2.0, 0.0, 1.5, -0.5]
    tx = tensor(ctx, x)
    out = ops.soft_max(tx, tensor(ctx, mask), scale=0.7, max_bias=8.0, sinks=tensor(ctx, sinks), inplace=True)
    got = result(out)
    np.testing.assert_allclose(got, f32(loop_soft_max(x, mask, 0.7, 8.0, sinks))[0], rtol=1e-6)
    assert np.all(got.sum(axis=-1) < 1.0)  # the sink takes a share
    np.testing.assert_array_equal(tx.numpy(), got)


@pytest.mark.parametrize("n_past", [0, 2])
def test_diag_mask(n_past: int) -> None:
    ctx = new_ctx()
    x = rand(2, 3, 6, seed=85)
    for fn, value in ((ops.diag_mask_inf, -INF), (ops.diag_mask_zero, 0.0)):
        expected = x.copy()
        for k, j, i in np.ndindex(*x.shape):
            if i > n_past + j:
                expected[k, j, i] = value
        np.testing.assert_array_equal(result(fn(tensor(ctx, x), n_past)), expected)


def loop_flash(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None, scale: float,
               max_bias: float, softcap: float, sinks: list[float] | None) -> np.ndarray:
    """q (B, H, n_q, d), k (Bk, Hk, n_kv, d), v (Bk, Hk, n_kv, dv) -> (B, n_q, H, dv)."""
    B, H, n_q, _ = q.shape
    out = np.zeros((B, n_q, H, v.shape[-1]))
    for b, h, i in np.ndindex(B, H, n_q):
        kb, kh = b // (B // k.shape[0]), h // (H // k.shape[1])
        M, S = -INF, 0.0
        acc = np.zeros(v.shape[-1])
        for c in range(k.shape[2]):
            mv = 0.0 if mask is None else slope(h, H, max_bias) * float(mask[b % mask.shape[0], h % mask.shape[1],
                                                                             i, c])
            if mv == -INF:
                continue
            s = math.fsum(float(p) * float(r) for p, r in zip(q[b, h, i], k[kb, kh, c], strict=True)) * scale
            if softcap:
                s = softcap * math.tanh(s / softcap)
            s += mv
            if s > M:
                ms, vs, M = math.exp(M - s), 1.0, s
                acc *= ms
            else:
                ms, vs = 1.0, math.exp(s - M)
            acc += vs * v[kb, kh, c]
            S = S * ms + vs
        if sinks:
            if sinks[h] > M:
                acc *= math.exp(M - sinks[h])
                S = S * math.exp(M - sinks[h]) + 1.0
            else:
                S += math.exp(sinks[h] - M)
        out[b, i, h] = acc / S if S else 0.0
    return out


def test_flash_attn_gqa_mask_alibi_softcap_sinks() -> None:
    ctx = new_ctx()
    q = rand(2, 4, 3, 8, seed=86)  # ne (d 8, 3 queries, 4 heads, batch 2)
    k = f16(rand(2, 2, 5, 8, seed=87))  # 2 kv heads: GQA ratio 2
    v = f16(rand(2, 2, 5, 6, seed=88))
    mask = f16(rand(1, 1, 4, 5, seed=89))
    mask[0, 0, 1, :] = -INF  # query 1 sees nothing: zeros (no sinks) / zeros (sinks: only the sink)
    mask[0, 0, 2, 3] = -INF
    sinks = [0.3, -0.2, 1.0, 0.0]
    for kw in ({}, {"max_bias": 4.0, "logit_softcap": 2.0}, {"sinks": sinks}):
        out = ops.flash_attn_ext(tensor(ctx, q), tensor(ctx, k, T.F16), tensor(ctx, v, T.F16),
                                 tensor(ctx, mask, T.F16), scale=0.35, max_bias=kw.get("max_bias", 0.0),
                                 logit_softcap=kw.get("logit_softcap", 0.0),
                                 sinks=tensor(ctx, sinks) if "sinks" in kw else None)
        assert out.ne == (6, 4, 3, 2) and out.type == T.F32
        expected = loop_flash(q, k, v, mask, 0.35, kw.get("max_bias", 0.0), kw.get("logit_softcap", 0.0),
                              sinks if "sinks" in kw else None)
        got = result(out)
        np.testing.assert_allclose(got, f32(expected), rtol=1e-5, atol=1e-6)
        assert np.all(got[:, 1] == 0.0)


def test_flash_attn_f32_kv_no_mask_batch_broadcast() -> None:
    ctx = new_ctx()
    q = rand(2, 2, 2, 4, seed=90)
    k = rand(1, 1, 3, 4, seed=91)
    v = rand(1, 1, 3, 4, seed=92)
    out = ops.flash_attn_ext(tensor(ctx, q), tensor(ctx, k), tensor(ctx, v), scale=0.5)
    np.testing.assert_allclose(result(out), f32(loop_flash(q, k, v, None, 0.5, 0, 0, None)), rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(not HAVE_QUANTS, reason="pyggml.quants (block (de)quantisation) is not there yet")
def test_flash_attn_q8_0_kv() -> None:
    from pyggml.quants import dequantize, quantize

    ctx = new_ctx()
    q = rand(1, 2, 2, 32, seed=93)
    k = rand(1, 1, 4, 32, seed=94)
    v = rand(1, 1, 4, 32, seed=95)
    held = [dequantize(quantize(x.astype(np.float32).ravel(), T.Q8_0), T.Q8_0).reshape(x.shape) for x in (k, v)]
    out = ops.flash_attn_ext(tensor(ctx, q), tensor(ctx, k, T.Q8_0), tensor(ctx, v, T.Q8_0), scale=0.2)
    expected = loop_flash(q, held[0].astype(np.float64), held[1].astype(np.float64), None, 0.2, 0, 0, None)
    np.testing.assert_allclose(result(out), f32(expected)[0], rtol=1e-5, atol=1e-6)
