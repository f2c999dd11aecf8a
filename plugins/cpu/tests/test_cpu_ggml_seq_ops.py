"""The sequence-model ops against ggml itself: SSM_CONV, SSM_SCAN (Mamba 1, Mamba 2 with groups, state ids,
snapshots), RWKV_WKV6, GATED_LINEAR_ATTN, RWKV_WKV7, GATED_DELTA_NET (scalar and KDA gates, repeated heads,
snapshots), SOLVE_TRI and TRI, computed by the cpu backend and by ggml's CPU library (`make llama-cpp-ref`, driven
through ctypes with each op's own constructor) on the same inputs: the whole packed result, outputs and states."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import pyggml.ops as O
from pyggml.backend.protocol import Backend
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_testing.ggml_ctypes import GgmlCtx, Make, assert_close, run_pyggml

T = GGMLType
RNG = np.random.default_rng(2127)


def _u(*shape: int, lo: float = -1.0, hi: float = 1.0) -> np.ndarray:
    return RNG.uniform(lo, hi, shape).astype(np.float32)


F = T.F32


@pytest.mark.parametrize("kind", list(O.TriType))
def test_tri(cpu_backend: Backend, gg: GgmlCtx, kind: O.TriType) -> None:
    a = _u(3, 4, 10, 10)
    got = run_pyggml(cpu_backend, lambda mk: O.tri(mk(a, F), kind))
    np.testing.assert_array_equal(got, gg.run(gg.call("ggml_tri", gg.tensor(a, F), int(kind)), got.shape))


@pytest.mark.parametrize(("n", "k", "batch"), [(10, 3, (3, 4)), (42, 10, (2, 5)), (79, 417, (1, 2))])
def test_solve_tri(cpu_backend: Backend, gg: GgmlCtx, n: int, k: int, batch: tuple[int, int]) -> None:
    a = np.tril(_u(*batch, n, n, lo=0.1))
    b = _u(*batch, n, k)
    got = run_pyggml(cpu_backend, lambda mk: O.solve_tri(mk(a, F), mk(b, F)))
    want = gg.run(gg.call("ggml_solve_tri", gg.tensor(a, F), gg.tensor(b, F), True, True, False), got.shape)
    assert_close(got, want, 1e-9)


@pytest.mark.parametrize(("d_conv", "d_inner", "n_t", "n_s"), [(4, 1536, 1, 1), (4, 96, 64, 4), (3, 10, 8, 10)])
def test_ssm_conv(cpu_backend: Backend, gg: GgmlCtx, d_conv: int, d_inner: int, n_t: int, n_s: int) -> None:
    sx, c = _u(n_s, d_inner, d_conv - 1 + n_t), _u(d_inner, d_conv)
    got = run_pyggml(cpu_backend, lambda mk: O.ssm_conv(mk(sx, F), mk(c, F)))
    assert_close(got, gg.run(gg.call("ggml_ssm_conv", gg.tensor(sx, F), gg.tensor(c, F)), got.shape))


@pytest.mark.parametrize(("d_state", "head_dim", "n_head", "n_group", "nt", "ns", "k", "spare"), [
    (16, 1, 256, 1, 32, 3, 1, 1),  # Mamba 1
    (128, 64, 8, 2, 16, 2, 1, 0),  # Mamba 2
    (64, 16, 6, 3, 8, 2, 3, 2),  # snapshots, ids into a larger state
    (16, 4, 4, 1, 1, 1, 1, 0),
])
def test_ssm_scan(cpu_backend: Backend, gg: GgmlCtx, d_state: int, head_dim: int, n_head: int, n_group: int,
                  nt: int, ns: int, k: int, spare: int) -> None:
    s = _u(ns + spare, n_head, head_dim, d_state)
    x, dt = _u(ns, nt, n_head, head_dim), _u(ns, nt, n_head, lo=-3.0, hi=3.0)
    a = _u(n_head, 1 if head_dim > 1 else d_state, lo=-1.0, hi=-0.5)
    b, c = _u(ns, nt, n_group, d_state), _u(ns, nt, n_group, d_state)
    ids = RNG.permutation(ns + spare)[:ns].astype(np.int32)
    got = run_pyggml(cpu_backend, lambda mk: O.ssm_scan(mk(s, F), mk(x, F), mk(dt, F), mk(a, F), mk(b, F), mk(c, F),
                                                   mk(ids, T.I32), k))
    args = [gg.tensor(v, F) for v in (s, x, dt, a, b, c)]
    out = gg.call("ggml_ssm_scan", *args, gg.tensor(ids, T.I32), ctypes.c_int64(k))
    assert_close(got, gg.run(out, got.shape))


@pytest.mark.parametrize("op", ["rwkv_wkv6", "gated_linear_attn", "rwkv_wkv7"])
# sizes are multiples of 32: ggml's AVX2 RWKV_WKV7 steps a head 32 floats at a time and reads past smaller heads
# (ggml_support refuses those)
@pytest.mark.parametrize(("heads", "size", "per_seq", "n_seqs"), [(32, 64, 1, 1), (8, 64, 32, 4), (3, 32, 5, 2)])
def test_linear_attention(cpu_backend: Backend, gg: GgmlCtx, op: str, heads: int, size: int, per_seq: int,
                          n_seqs: int) -> None:
    n_tok = per_seq * n_seqs
    toks = [_u(n_tok, heads, size) for _ in range(6)]
    if op == "rwkv_wkv7":  # a and b L2-normalised per head, as RWKV v7 feeds them (and ggml's test)
        for i in (4, 5):
            toks[i] = (toks[i] / np.linalg.norm(toks[i], axis=-1, keepdims=True)).astype(np.float32)
    state = _u(n_seqs, size * size * heads)
    tf = _u(heads, size)
    extra: tuple[float, ...] = ()
    if op == "rwkv_wkv6":
        srcs = [toks[0], toks[1], toks[2], tf, toks[3], state]
    elif op == "gated_linear_attn":
        srcs, extra = [toks[0], toks[1], toks[2], toks[3], state], (size ** -0.5,)
    else:
        srcs = [*toks, state]
    got = run_pyggml(cpu_backend, lambda mk: getattr(O, op)(*(mk(v, F) for v in srcs), *extra))
    want = gg.run(gg.call(f"ggml_{op}", *(gg.tensor(v, F) for v in srcs), *extra), got.shape)
    assert_close(got, want, 1e-9)


@pytest.mark.parametrize(("heads", "size", "nt", "ns", "rep", "kda", "k"), [
    (32, 128, 1, 1, 1, False, 1), (4, 64, 16, 2, 1, False, 4), (8, 32, 4, 2, 2, True, 1), (4, 16, 7, 1, 1, True, 3),
])
def test_gated_delta_net(cpu_backend: Backend, gg: GgmlCtx, heads: int, size: int, nt: int, ns: int, rep: int,
                         kda: bool, k: int) -> None:
    def unit(x: np.ndarray) -> np.ndarray:
        out: np.ndarray = (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)
        return out

    q, kk = unit(_u(ns, nt, heads, size)), unit(_u(ns, nt, heads, size))
    v = _u(ns, nt, heads * rep, size, lo=-0.3, hi=5.0)
    g = _u(ns, nt, heads * rep, size if kda else 1, lo=-20.0, hi=-1e-4)
    beta, state = _u(ns, nt, heads * rep, 1, lo=0.0), _u(ns, heads * rep, size, size)
    srcs = (q, kk, v, g, beta, state)
    def build(mk: Make) -> Tensor:
        tq, tk, tv, tg, tb, ts = (mk(x, F) for x in srcs)
        return O.gated_delta_net(tq, tk, tv, tg, tb, ts, k)

    got = run_pyggml(cpu_backend, build)
    out = gg.call("ggml_gated_delta_net", *(gg.tensor(x, F) for x in srcs), ctypes.c_int64(k))
    assert_close(got, gg.run(out, got.shape), 1e-9)
