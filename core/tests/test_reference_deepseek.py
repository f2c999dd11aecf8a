"""The DeepSeek-family reference kernels (LIGHTNING_INDEXER, DSV4_HC_COMB / PRE / POST) against scalar loops written
from ggml's CPU kernels (ops.cpp), and the shape rules' refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pyggml import ops
from pyggml.errors import ShapeError, UnsupportedTypeError
from pyggml.ops.deepseek import hc_streams
from pyggml.types import GGMLType as T
from pyggml_testing.graphs import f16, f32, new_ctx, rand, result, tensor


def test_lightning_indexer_matches_loop() -> None:
    n_embd, n_head, n_tok, n_kv, n_str = 8, 3, 5, 7, 4
    q, k = rand(n_str, n_tok, n_head, n_embd, seed=1), rand(n_str, n_kv, 1, n_embd, seed=2)
    w = rand(n_str, 1, n_tok, n_head, seed=3)
    mask = f16(rand(2, 1, n_tok, n_kv, seed=4))
    mask[1, 0, 2, 3] = -np.inf
    ctx = new_ctx()
    got = result(ops.lightning_indexer(tensor(ctx, q), tensor(ctx, k, T.F16), tensor(ctx, w),
                                       tensor(ctx, mask, T.F16))).reshape(n_str, n_tok, n_kv)
    kh = f16(k)
    for s, t, j in np.ndindex(n_str, n_tok, n_kv):
        score = sum(max(float(q[s, t, h] @ kh[s, j, 0]), 0.0) * w[s, 0, t, h] for h in range(n_head))
        want = score + mask[s % 2, 0, t, j]
        assert got[s, t, j] == (pytest.approx(want, rel=1e-5, abs=1e-6) if math.isfinite(want) else want)


def _comb_loop(logits: np.ndarray, eps: float, n_iter: int) -> np.ndarray:
    """One token, comb[isrc][idst] as ggml's kernel: softmax over dst per src, + eps, then Sinkhorn."""
    hc = logits.shape[0]
    c = [[0.0] * hc for _ in range(hc)]
    for s in range(hc):
        m = max(logits[s])
        e = [math.exp(v - m) for v in logits[s]]
        for d in range(hc):
            c[s][d] = e[d] / sum(e) + eps

    def cols() -> None:
        for d in range(hc):
            tot = eps + sum(c[s][d] for s in range(hc))
            for s in range(hc):
                c[s][d] /= tot

    def rows() -> None:
        for s in range(hc):
            tot = eps + sum(c[s])
            c[s] = [v / tot for v in c[s]]

    cols()
    for _ in range(n_iter - 1):
        rows()
        cols()
    return np.array(c)


@pytest.mark.parametrize(("hc", "n_iter", "eps"), [(4, 1, 1e-6), (4, 20, 1e-6), (2, 3, 0.01), (5, 4, 0.0)])
def test_hc_comb_matches_loop(hc: int, n_iter: int, eps: float) -> None:
    n_tok, dim = 6, (2 + hc) * hc
    mixes, scale, base = rand(n_tok, dim, seed=5) * 2, rand(3, seed=6) * 0.5, rand(dim, seed=7) * 0.25
    ctx = new_ctx()
    got = result(ops.dsv4_hc_comb(tensor(ctx, mixes), tensor(ctx, scale), tensor(ctx, base), eps, n_iter))
    got = got.reshape(n_tok, hc, hc)
    for t in range(n_tok):
        logits = np.array([[mixes[t, 2 * hc + d + hc * s] * scale[2] + base[2 * hc + d + hc * s] for d in range(hc)]
                           for s in range(hc)])
        np.testing.assert_allclose(got[t], f32(_comb_loop(logits, float(np.float32(eps)), n_iter)), rtol=1e-6)


@pytest.mark.parametrize("gated", [False, True])
def test_hc_pre_matches_loop(gated: bool) -> None:
    n_embd, hc, n_tok = 5, 4, 3
    x = rand(n_tok, hc, n_embd, seed=8)
    w = rand(n_tok, hc, n_embd, seed=9) * 4 if gated else rand(n_tok, hc, seed=9)
    ctx = new_ctx()
    out = ops.dsv4_hc_pre_gated(tensor(ctx, x), tensor(ctx, w), 0.25) if gated else \
        ops.dsv4_hc_pre(tensor(ctx, x), tensor(ctx, w))
    got = result(out).reshape(n_tok, n_embd)
    for t, i in np.ndindex(n_tok, n_embd):
        if gated:
            want = 0.25 * sum(x[t, h, i] / (1 + math.exp(-w[t, h, i])) for h in range(hc))
        else:
            want = sum(x[t, h, i] * w[t, h] for h in range(hc))
        assert got[t, i] == pytest.approx(want, rel=1e-6, abs=1e-7)


@pytest.mark.parametrize("identity", [False, True])
def test_hc_post_matches_loop(identity: bool) -> None:
    n_embd, hc, n_tok = 5, 3, 4
    x, res, post = rand(n_tok, n_embd, seed=10), rand(n_tok, hc, n_embd, seed=11), rand(n_tok, hc, seed=12)
    comb = rand(n_tok, hc, hc, seed=13)
    ctx = new_ctx()
    out = ops.dsv4_hc_post(tensor(ctx, x), tensor(ctx, res), tensor(ctx, post), None if identity else tensor(ctx, comb))
    got = result(out).reshape(n_tok, hc, n_embd)
    for t, d, i in np.ndindex(n_tok, hc, n_embd):
        mix = res[t, d, i] if identity else sum(res[t, s, i] * comb[t, s, d] for s in range(hc))
        assert got[t, d, i] == pytest.approx(x[t, i] * post[t, d] + mix, rel=1e-6, abs=1e-7)


def test_hc_streams() -> None:
    assert [hc_streams(n) for n in (3, 8, 15, 24, 35, 25)] == [1, 2, 3, 4, 5, 0]


def test_bad_input_names_op_and_tensor() -> None:
    ctx = new_ctx()
    x = tensor(ctx, rand(3, 4, 8), name="x")
    with pytest.raises(ShapeError, match=r"DSV4_HC_PRE: src1 must be the weights \[hc, n_tokens\].*'x'"):
        ops.dsv4_hc_pre(x, tensor(ctx, rand(4, 4)))
    with pytest.raises(ShapeError, match="DSV4_HC_PRE: src1 must be the gate"):
        ops.dsv4_hc_pre_gated(x, tensor(ctx, rand(3, 4)), 1.0)
    with pytest.raises(ShapeError, match=r"DSV4_HC_COMB: mixes must be \[\(2 \+ hc\) \* hc"):
        ops.dsv4_hc_comb(tensor(ctx, rand(2, 23)), tensor(ctx, rand(3)), tensor(ctx, rand(23)), 1e-6, 4)
    with pytest.raises(ShapeError, match="DSV4_HC_COMB: n_iter=0"):
        ops.dsv4_hc_comb(tensor(ctx, rand(2, 24)), tensor(ctx, rand(3)), tensor(ctx, rand(24)), 1e-6, 0)
    with pytest.raises(ShapeError, match=r"DSV4_HC_POST: comb must be \[hc, hc, n_tokens\]"):
        ops.dsv4_hc_post(tensor(ctx, rand(3, 8)), x, tensor(ctx, rand(3, 4)), tensor(ctx, rand(3, 4, 3)))
    q = tensor(ctx, rand(2, 5, 3, 8))
    k = tensor(ctx, rand(2, 7, 1, 8))
    w = tensor(ctx, rand(2, 1, 5, 3))
    with pytest.raises(UnsupportedTypeError, match=r"LIGHTNING_INDEXER: src3 \(mask\)"):
        ops.lightning_indexer(q, k, w, tensor(ctx, rand(1, 1, 5, 7)))
    with pytest.raises(ShapeError, match="LIGHTNING_INDEXER: mask must be"):
        ops.lightning_indexer(q, k, w, tensor(ctx, rand(3, 1, 5, 7), T.F16))
    with pytest.raises(ShapeError, match=r"LIGHTNING_INDEXER: k must be \[n_embd, 1, n_kv, n_stream\]"):
        ops.lightning_indexer(q, tensor(ctx, rand(2, 7, 2, 8)), w, tensor(ctx, rand(1, 1, 5, 7), T.F16))
