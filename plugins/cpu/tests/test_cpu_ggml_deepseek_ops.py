"""The DeepSeek-family ops against ggml itself: LIGHTNING_INDEXER (F32, F16 and Q8_0 keys, streams, a broadcast mask
with -inf) and DSV4_HC_COMB / PRE (plain and gated) / POST (with and without comb), computed by the cpu backend and
by ggml's CPU backend (the libggml-cpu of `make llama-cpp-ref`, through pyggml_testing.ggml_ctypes) on the same
inputs, ggml's value ranges (test-backend-ops). deepseek.c follows ggml's float32 order of operations except the
indexer's dot products (ggml's SIMD vec_dot sums in another order) and ggml's contracted FMAs."""

from __future__ import annotations

import numpy as np
import pytest

import pyggml.ops as O
from pyggml.backend.protocol import Backend
from pyggml.quants import dequantize, quantize
from pyggml.types import GGMLType
from pyggml_testing.ggml_ctypes import GgmlCtx, P, nmse, run_pyggml

T = GGMLType
RNG = np.random.default_rng(87)


def _u(lo: float, hi: float, *shape: int) -> np.ndarray:
    return RNG.uniform(lo, hi, shape).astype(np.float32)


@pytest.mark.parametrize(("tk", "n_str", "m3"), [(T.F32, 1, 1), (T.F16, 3, 1), (T.Q8_0, 2, 2)])
def test_lightning_indexer(cpu_backend: Backend, gg: GgmlCtx, tk: GGMLType, n_str: int, m3: int) -> None:
    n_embd, n_head, n_tok, n_kv = 64, 8, 5, 37
    q, k = _u(-1, 1, n_str, n_tok, n_head, n_embd), _u(-1, 1, n_str, n_kv, 1, n_embd)
    w = _u(0, 1 / n_head, n_str, 1, n_tok, n_head)
    mask = _u(-1, 1, m3, 1, n_tok, n_kv)
    mask[RNG.random(mask.shape) < 0.2] = -np.inf
    if tk == T.Q8_0:  # both sides quantise these values with pyggml.quants: the same blocks
        k = dequantize(quantize(k, tk), tk).reshape(k.shape)
    g = gg.call("ggml_lightning_indexer", gg.tensor(q, T.F32), gg.tensor(k, tk), gg.tensor(w, T.F32),
                gg.tensor(mask, T.F16))
    got = run_pyggml(cpu_backend, lambda mk: O.lightning_indexer(mk(q, T.F32), mk(k, tk), mk(w, T.F32),
                                                                 mk(mask, T.F16)))
    assert nmse(got, gg.run(g, got.shape)) < 1e-12


@pytest.mark.parametrize(("n_tok", "n_iter"), [(17, 4), (33, 20), (1, 1)])
def test_dsv4_hc_comb(cpu_backend: Backend, gg: GgmlCtx, n_tok: int, n_iter: int) -> None:
    mixes, scale, base = _u(-2, 2, n_tok, 24), _u(-0.5, 0.5, 3), _u(-0.25, 0.25, 24)
    g = gg.call("ggml_dsv4_hc_comb", gg.tensor(mixes, T.F32), gg.tensor(scale, T.F32), gg.tensor(base, T.F32),
                1e-6, n_iter)
    got = run_pyggml(cpu_backend, lambda mk: O.dsv4_hc_comb(mk(mixes, T.F32), mk(scale, T.F32), mk(base, T.F32), 1e-6,
                                                      n_iter))
    assert nmse(got, gg.run(g, got.shape)) < 1e-12


@pytest.mark.parametrize("gated", [False, True])
@pytest.mark.parametrize("hc", [4, 3])
def test_dsv4_hc_pre(cpu_backend: Backend, gg: GgmlCtx, gated: bool, hc: int) -> None:
    x = _u(-1, 1, 17, hc, 31)
    w = _u(-4, 4, 17, hc, 31) if gated else _u(0, 1, 17, hc)
    args: tuple[P | float, ...] = (gg.tensor(x, T.F32), gg.tensor(w, T.F32))
    g = gg.call("ggml_dsv4_hc_pre_gated", *args, 1.0 / hc) if gated else gg.call("ggml_dsv4_hc_pre", *args)
    got = run_pyggml(cpu_backend, lambda mk: O.dsv4_hc_pre_gated(mk(x, T.F32), mk(w, T.F32), 1.0 / hc) if gated else
                O.dsv4_hc_pre(mk(x, T.F32), mk(w, T.F32)))
    np.testing.assert_allclose(got, gg.run(g, got.shape), rtol=0, atol=1e-6)


@pytest.mark.parametrize("identity", [False, True])
def test_dsv4_hc_post(cpu_backend: Backend, gg: GgmlCtx, identity: bool) -> None:
    x, res, post, comb = _u(-1, 1, 17, 31), _u(-1, 1, 17, 4, 31), _u(0, 2, 17, 4), _u(0, 1, 17, 4, 4)
    gargs = (gg.tensor(x, T.F32), gg.tensor(res, T.F32), gg.tensor(post, T.F32),
             P(None) if identity else gg.tensor(comb, T.F32))
    g = gg.call("ggml_dsv4_hc_post", *gargs)
    got = run_pyggml(cpu_backend, lambda mk: O.dsv4_hc_post(mk(x, T.F32), mk(res, T.F32), mk(post, T.F32),
                                                      None if identity else mk(comb, T.F32)))
    np.testing.assert_allclose(got, gg.run(g, got.shape), rtol=0, atol=1e-6)
