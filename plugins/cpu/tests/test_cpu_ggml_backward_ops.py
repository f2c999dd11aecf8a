"""The training ops against ggml itself: REPEAT_BACK, SILU_BACK, RMS_NORM_BACK, GET_ROWS_BACK, SOFT_MAX_BACK,
ROPE_BACK, CROSS_ENTROPY_LOSS(_BACK), OPT_STEP_ADAMW and OPT_STEP_SGD computed by the cpu backend and by ggml's CPU
backend (the libggml-cpu of `make llama-cpp-ref`, llama-cpp-python 0.3.36's sources, through ctypes: the op's own
ggml constructor, then ggml_graph_compute_with_ctx) on the same inputs, a few shapes each. backward.c keeps ggml's
float32 steps, so REPEAT_BACK and GET_ROWS_BACK are ggml's bit for bit, the rest within an ulp or so where ggml
sums in SIMD lanes (SOFT_MAX_BACK's dot product, the loss's row sums) or its build contracts into FMAs (the
optimiser updates); ROPE_BACK with YaRN differs in the angles exactly as ROPE does."""

from __future__ import annotations

import numpy as np
import pytest

import pyggml.ops as O
from pyggml.backend.protocol import Backend
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_testing.ggml_ctypes import GgmlCtx, Make, nmse, run_pyggml, run_pyggml_all

T = GGMLType
RNG = np.random.default_rng(22)


def _r(*shape: int, scale: float = 1.0) -> np.ndarray:
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


@pytest.mark.parametrize(("ne", "nr"), [((5, 3, 8), (2, 1, 3)), ((2, 4, 6, 16), (3, 2, 1, 2)), ((1, 7), (1, 5))])
def test_repeat_back(cpu_backend: Backend, gg: GgmlCtx, ne: tuple[int, ...], nr: tuple[int, ...]) -> None:
    small = np.zeros(ne, np.float32)
    big = _r(*(a * b for a, b in zip(ne, nr, strict=True)))
    want = gg.run(gg.call("ggml_repeat_back", gg.tensor(big, T.F32), gg.tensor(small, T.F32)), ne)
    got = run_pyggml(cpu_backend, lambda mk: O.repeat_back(mk(big, T.F32), mk(small, T.F32)))
    np.testing.assert_array_equal(got.reshape(ne), want)


@pytest.mark.parametrize("t", [T.F32, T.F16])
def test_silu_back(cpu_backend: Backend, gg: GgmlCtx, t: GGMLType) -> None:
    g, x = _r(3, 5, 67), _r(3, 5, 67, scale=4.0)
    want = gg.run(gg.call("ggml_silu_back", gg.tensor(g, t), gg.tensor(x, t)), g.shape, t)
    got = run_pyggml(cpu_backend, lambda mk: O.silu_back(mk(g, t), mk(x, t)))
    assert nmse(got.reshape(g.shape), want) < (1e-13 if t == T.F32 else 1e-8)


@pytest.mark.parametrize("eps", [0.0, 1e-6, 0.1])
@pytest.mark.parametrize("n", [64, 1025])
def test_rms_norm_back(cpu_backend: Backend, gg: GgmlCtx, eps: float, n: int) -> None:
    g, x = _r(3, 4, n), _r(3, 4, n)
    want = gg.run(gg.call("ggml_rms_norm_back", gg.tensor(g, T.F32), gg.tensor(x, T.F32), eps), g.shape)
    got = run_pyggml(cpu_backend, lambda mk: O.rms_norm_back(mk(g, T.F32), mk(x, T.F32), eps))
    assert nmse(got.reshape(g.shape), want) < 1e-13


@pytest.mark.parametrize("t", [T.F32, T.F16])
@pytest.mark.parametrize(("n", "m", "r"), [(256, 5, 4), (33, 7, 40), (1, 9, 3)])
def test_get_rows_back(cpu_backend: Backend, gg: GgmlCtx, t: GGMLType, n: int, m: int, r: int) -> None:
    g = _r(r, n)
    rows = RNG.integers(0, m, r).astype(np.int32)
    like = np.zeros((m, n), np.float32)
    want = gg.run(gg.call("ggml_get_rows_back", gg.tensor(g, t), gg.tensor(rows, T.I32), gg.tensor(like, T.F32)),
                  like.shape)
    got = run_pyggml(cpu_backend, lambda mk: O.get_rows_back(mk(g, t), mk(rows, T.I32), mk(like, T.F32)))
    np.testing.assert_array_equal(got.reshape(like.shape), want)


@pytest.mark.parametrize("scale", [1.0, 0.1])
@pytest.mark.parametrize("shape", [(16, 16), (1023, 15), (3, 2, 1024)])
def test_soft_max_back(cpu_backend: Backend, gg: GgmlCtx, scale: float, shape: tuple[int, ...]) -> None:
    dy = _r(*shape)
    z = _r(*shape, scale=3.0) * scale
    y = (np.exp(z - z.max(-1, keepdims=True)) / np.exp(z - z.max(-1, keepdims=True)).sum(-1, keepdims=True))
    y = y.astype(np.float32)
    want = gg.run(gg.call("ggml_soft_max_ext_back", gg.tensor(dy, T.F32), gg.tensor(y, T.F32), scale, 0.0), shape)
    got = run_pyggml(cpu_backend, lambda mk: O.soft_max_ext_back(mk(dy, T.F32), mk(y, T.F32), scale))
    assert nmse(got.reshape(shape), want) < 1e-12


@pytest.mark.parametrize("t", [T.F32, T.F16])
@pytest.mark.parametrize(("mode", "n_dims", "yarn"), [(0, 64, False), (2, 32, False), (0, 20, True), (2, 64, True)])
def test_rope_back(cpu_backend: Backend, gg: GgmlCtx, t: GGMLType, mode: int, n_dims: int, yarn: bool) -> None:
    x = _r(2, 5, 3, 64)  # [head 64, n_head 3, tokens 5, batch 2]
    pos = RNG.integers(0, 4096, 5).astype(np.int32)
    ff = RNG.uniform(0.9, 1.1, n_dims // 2).astype(np.float32)
    fs, ef, af = (0.25, 0.75, 1.4) if yarn else (1.0, 0.0, 1.0)
    args = (n_dims, mode, 512, 10000.0, fs, ef, af, 32.0, 1.0)
    want = gg.run(gg.call("ggml_rope_ext_back", gg.tensor(x, t), gg.tensor(pos, T.I32), gg.tensor(ff, T.F32), *args),
                  x.shape, t)
    got = run_pyggml(cpu_backend, lambda mk: O.rope_back(mk(x, t), mk(pos, T.I32), O.RopeParams(*args), mk(ff, T.F32)))
    err = nmse(got.reshape(x.shape), want)
    # YaRN: the angles of positions up to 4096 differ from ggml's by float32 roundings, as ROPE's do (same NMSE)
    assert err < (1e-8 if t == T.F16 else 1e-10 if yarn else 1e-12), err


def _softmax_rows(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)).astype(np.float32)


@pytest.mark.parametrize("shape", [(3, 4, 5, 10), (1, 30000), (64, 257)])
def test_cross_entropy_loss_and_back(cpu_backend: Backend, gg: GgmlCtx, shape: tuple[int, ...]) -> None:
    logits = RNG.uniform(-100, 100, shape).astype(np.float32)
    labels = _softmax_rows(_r(*shape))
    want = gg.run(gg.call("ggml_cross_entropy_loss", gg.tensor(logits, T.F32), gg.tensor(labels, T.F32)), (1,))
    got = run_pyggml(cpu_backend, lambda mk: O.cross_entropy_loss(mk(logits, T.F32), mk(labels, T.F32)))
    assert got.ravel()[0] == pytest.approx(want[0], rel=1e-6)
    d = np.array([0.75], np.float32)
    want = gg.run(gg.call("ggml_cross_entropy_loss_back", gg.tensor(d, T.F32), gg.tensor(logits, T.F32),
                          gg.tensor(labels, T.F32)), shape)
    got = run_pyggml(cpu_backend, lambda mk: O.cross_entropy_loss_back(mk(d, T.F32), mk(logits, T.F32),
                                                                     mk(labels, T.F32)))
    assert nmse(got.reshape(shape), want) < 1e-12


@pytest.mark.parametrize("shape", [(3, 4, 5, 10), (1000, 3)])
def test_opt_step_adamw(cpu_backend: Backend, gg: GgmlCtx, shape: tuple[int, ...]) -> None:
    w, g, m = (RNG.uniform(0, 1, shape).astype(np.float32) for _ in range(3))
    v = RNG.uniform(0, 1, shape).astype(np.float32)
    t = 3
    hp = np.array([1e-3, 0.9, 0.999, 1e-8, 0.01, 1 / (1 - 0.9**t), 1 / (1 - 0.999**t)], np.float32)
    gw, gm, gv = gg.param(w), gg.tensor(m, T.F32), gg.tensor(v, T.F32)
    out = gg.call("ggml_opt_step_adamw", gw, gg.tensor(g, T.F32), gm, gv, gg.tensor(hp, T.F32))
    want = [gg.run(out, shape), gg.read(gm, shape, T.F32), gg.read(gv, shape, T.F32)]

    def build(mk: Make) -> tuple[Tensor, ...]:
        pw, pm, pv = mk(w, T.F32).set_param(), mk(m, T.F32), mk(v, T.F32)
        return O.opt_step_adamw(pw, mk(g, T.F32), pm, pv, mk(hp, T.F32)), pm, pv

    for ours, theirs, what in zip(run_pyggml_all(cpu_backend, build), want, ("param", "m", "v"), strict=True):
        assert nmse(ours.reshape(shape), theirs) < 1e-13, what


def test_opt_step_sgd(cpu_backend: Backend, gg: GgmlCtx) -> None:
    shape = (3, 4, 5, 10)
    w, g = RNG.uniform(0, 1, shape).astype(np.float32), _r(*shape)
    hp = np.array([0.05, 0.1], np.float32)
    want = gg.run(gg.call("ggml_opt_step_sgd", gg.param(w), gg.tensor(g, T.F32), gg.tensor(hp, T.F32)), shape)
    got = run_pyggml(cpu_backend, lambda mk: O.opt_step_sgd(mk(w, T.F32).set_param(), mk(g, T.F32), mk(hp, T.F32)))
    assert nmse(got.reshape(shape), want) < 1e-13  # ggml's build contracts the update into an FMA: an ulp
