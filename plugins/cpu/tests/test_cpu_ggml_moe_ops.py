"""Issue 21's first slice against ggml itself: EXPM1, XIELU, SWIGLU_OAI, SWIGLU_CLAMP and ADD_ID computed by the cpu
backend and by ggml's CPU backend (the libggml-cpu of `make llama-cpp-ref`, llama-cpp-python 0.3.36's sources,
through pyggml_testing.ggml_ctypes: the op's own constructor, ggml_graph_compute_with_ctx) on the same inputs.
Finite inputs only: at -inf pyggml gives the limits where ggml's formulas give NaN (docs/op-semantics.md)."""

from __future__ import annotations

import numpy as np
import pytest

import pyggml.ops as O
from pyggml.backend.protocol import Backend
from pyggml.types import GGMLType
from pyggml_testing.ggml_ctypes import GgmlCtx, nmse, run_pyggml

T = GGMLType
RNG = np.random.default_rng(21)
X = (RNG.standard_normal((3, 5, 64)) * 4).astype(np.float32)
Y = (RNG.standard_normal((3, 5, 64)) * 4).astype(np.float32)


@pytest.mark.parametrize("t", [T.F32, T.F16])
def test_expm1_and_xielu(cpu_backend: Backend, gg: GgmlCtx, t: GGMLType) -> None:
    x = X / 2  # e^x within F16's range
    want = gg.run(gg.call("ggml_expm1", gg.tensor(x, t)), x.shape, t)
    got = run_pyggml(cpu_backend, lambda mk: O.expm1(mk(x, t)))
    assert nmse(got.reshape(x.shape), want) < 1e-12
    for prm in ((4.0, 20.0, 0.5, 1e-7), (0.8, 0.8, 0.5, -1e-6)):
        want = gg.run(gg.call("ggml_xielu", gg.tensor(X, t), *prm), X.shape, t)
        got = run_pyggml(cpu_backend, lambda mk, prm=prm: O.xielu(mk(X, t), *prm))
        assert nmse(got.reshape(X.shape), want) < (1e-12 if t == T.F32 else 1e-9), prm  # F16: an ulp


@pytest.mark.parametrize(("alpha", "limit"), [(1.702, 7.0), (0.5, 2.0)])
def test_swiglu_oai_and_clamp(cpu_backend: Backend, gg: GgmlCtx, alpha: float, limit: float) -> None:
    want = gg.run(gg.call("ggml_swiglu_oai", gg.tensor(X, T.F32), gg.tensor(Y, T.F32), alpha, limit),
                      X.shape, T.F32)
    got = run_pyggml(cpu_backend, lambda mk: O.swiglu_oai(mk(X, T.F32), mk(Y, T.F32), alpha, limit))
    assert nmse(got.reshape(X.shape), want) < 1e-12
    for t in (T.F32, T.F16):
        want = gg.run(gg.call("ggml_swiglu_clamp", gg.tensor(X, t), gg.tensor(Y, t), limit), X.shape, t)
        got = run_pyggml(cpu_backend, lambda mk, t=t: O.swiglu_clamp(mk(X, t), mk(Y, t), limit))
        assert nmse(got.reshape(X.shape), want) < 1e-12, t


def test_add_id(cpu_backend: Backend, gg: GgmlCtx) -> None:
    a = RNG.standard_normal((7, 4, 129)).astype(np.float32)  # [n_embd 129, n_used 4, n_tokens 7]
    b = RNG.standard_normal((8, 129)).astype(np.float32)  # 8 experts
    ids = np.stack([RNG.permutation(8)[:4] for _ in range(7)]).astype(np.int32)
    want = gg.run(gg.call("ggml_add_id", gg.tensor(a, T.F32), gg.tensor(b, T.F32), gg.tensor(ids, T.I32)),
                      a.shape, T.F32)
    got = run_pyggml(cpu_backend, lambda mk: O.add_id(mk(a, T.F32), mk(b, T.F32), mk(ids, T.I32)))
    np.testing.assert_array_equal(got.reshape(a.shape), want)
