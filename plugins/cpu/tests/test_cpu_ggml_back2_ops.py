"""IM2COL_BACK and POOL_2D_BACK against ggml itself: each computed by the cpu backend and by ggml's CPU backend (the
libggml-cpu of `make llama-cpp-ref`, llama-cpp-python 0.3.36's sources, through pyggml_testing.ggml_ctypes: ggml's
own constructor, then ggml_graph_compute_with_ctx) on the same contiguous inputs. back2.c sums in ggml's order, so
the results are ggml's bit for bit; the MAX pool's inputs have ties, so the element the scan picks is compared
too. (FLASH_ATTN_BACK is not in pyggml's table: ggml_flash_attn_back aborts, see pyggml.ops.backward.DEFERRED_OPS.)
Also the whole IM2COL / POOL_2D backward (pyggml.autodiff) against ggml's: ggml_build_backward_expand's gradient of
the input for the same loss."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import pyggml.ops as O
from pyggml.backend.protocol import Backend
from pyggml.ops import PoolOp
from pyggml.types import GGMLType
from pyggml_testing.ggml_ctypes import GgmlCtx, run_pyggml

T = GGMLType
RNG = np.random.default_rng(90)
P = ctypes.c_void_p


def _x(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _conv_len(n: int, k: int, s: int, p: int, d: int) -> int:
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def _ggml_im2col_back(gg: GgmlCtx, g: P, k: P, ne: tuple[int, ...], words: tuple[int, ...], is_2d: bool) -> P:
    """ggml_im2col_back(ctx, grad, kernel, int64_t ne[4], s0, s1, p0, p1, d0, d1, is_2D): GgmlCtx.call has no
    pointer-argument form, so the signature is set here."""
    fn = gg.lib.ggml_im2col_back
    fn.restype, fn.argtypes = P, [P, P, P, ctypes.POINTER(ctypes.c_int64), *[ctypes.c_int] * 6, ctypes.c_bool]
    arr = (ctypes.c_int64 * 4)(*ne)
    return P(fn(gg.ctx, g, k, arr, *words, is_2d))


IM2COL_GEOMS = [
    # input ne, kernel ne, (s0, s1, p0, p1, d0, d1), is_2d
    ((10, 9, 3, 2), (3, 3, 3, 4), (1, 1, 1, 1, 1, 1), True),
    ((17, 13, 2, 1), (3, 2, 2, 5), (2, 3, 3, 1, 2, 1), True),
    ((11, 9, 2, 2), (2, 3, 2, 1), (5, 4, 0, 1, 1, 1), True),  # strides wider than the kernel
    ((40, 6, 3, 1), (3, 6, 8, 1), (2, 0, 1, 0, 2, 0), False),
    ((31, 4, 1, 1), (5, 4, 2, 1), (3, 0, 2, 0, 1, 0), False),
]


@pytest.mark.parametrize("tk", [T.F32, T.F16])
@pytest.mark.parametrize(("ne", "nk", "words", "is_2d"), IM2COL_GEOMS)
def test_im2col_back(cpu_backend: Backend, gg: GgmlCtx, tk: GGMLType, ne: tuple[int, ...], nk: tuple[int, ...],
                     words: tuple[int, ...], is_2d: bool) -> None:
    s0, s1, p0, p1, d0, d1 = words
    ow = _conv_len(ne[0], nk[0], s0, p0, d0)
    ne_g = (nk[0] * nk[1] * nk[2], ow, _conv_len(ne[1], nk[1], s1, p1, d1), ne[3]) if is_2d else \
        (nk[0] * nk[1], ow, ne[2], 1)
    g, k = _x(*ne_g[::-1]), _x(*nk[::-1])
    got = run_pyggml(cpu_backend, lambda mk: O.im2col_back(mk(g, T.F32), mk(k, tk), ne, *words, is_2d))
    want = gg.run(_ggml_im2col_back(gg, gg.tensor(g, T.F32), gg.tensor(k, tk), ne, words, is_2d), got.shape)
    np.testing.assert_array_equal(got, want)


POOL_GEOMS = [(3, 3, 1, 1, 1, 1), (3, 2, 2, 1, 1, 1), (2, 2, 2, 2, 0, 0), (1, 3, 2, 3, 0, 1), (4, 3, 3, 2, 2, 1)]


@pytest.mark.parametrize("pool", list(PoolOp))
@pytest.mark.parametrize("kp", POOL_GEOMS)
def test_pool_2d_back(cpu_backend: Backend, gg: GgmlCtx, pool: PoolOp, kp: tuple[int, ...]) -> None:
    k0, k1, s0, s1, p0, p1 = kp
    x = (np.round(_x(2, 3, 13, 17) * 2) / 2).astype(np.float32)  # ties in most windows
    x[0, 1, 4] = -np.inf
    oh, ow = (13 + 2 * p1 - k1) // s1 + 1, (17 + 2 * p0 - k0) // s0 + 1
    g = _x(2, 3, oh, ow)
    got = run_pyggml(cpu_backend, lambda mk: O.pool_2d_back(mk(g, T.F32), mk(x, T.F32), pool, *kp))
    res = gg.call("ggml_pool_2d_back", gg.tensor(g, T.F32), gg.tensor(x, T.F32), pool.value, k0, k1, s0, s1,
                  float(p0), float(p1))
    np.testing.assert_array_equal(got, gg.run(res, got.shape))


def _ggml_input_grad(gg: GgmlCtx, out: P, x: P, w: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """d(sum(out * w))/dx by ggml's own autodiff (ggml_build_backward_expand), x marked a parameter."""
    lib = gg.lib
    loss = gg.call("ggml_sum", gg.call("ggml_mul", out, gg.tensor(w, T.F32)))
    lib.ggml_set_loss.argtypes = [P]
    lib.ggml_set_loss(loss)
    lib.ggml_new_graph_custom.restype, lib.ggml_new_graph_custom.argtypes = P, [P, ctypes.c_size_t, ctypes.c_bool]
    gf = P(lib.ggml_new_graph_custom(gg.ctx, 1024, True))
    lib.ggml_build_forward_expand.argtypes = [P, P]
    lib.ggml_build_forward_expand(gf, loss)
    lib.ggml_build_backward_expand.argtypes = [P, P, P]
    lib.ggml_build_backward_expand(gg.ctx, gf, None)
    lib.ggml_graph_reset.argtypes = [P]
    lib.ggml_graph_reset(gf)
    gg.compute(gf)
    lib.ggml_graph_get_grad.restype, lib.ggml_graph_get_grad.argtypes = P, [P, P]
    return gg.read(P(lib.ggml_graph_get_grad(gf, x)), shape, T.F32)


def _pyggml_input_grad(backend: Backend, build: object, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    from pyggml.autodiff import build_backward
    from pyggml.context import Context
    from pyggml.graph import build_graph

    ctx = Context(64 << 20)
    xt = ctx.new_tensor(T.F32, *x.shape[::-1])
    xt.set(x)
    xt.set_param()
    out = build(ctx, xt)  # type: ignore[operator]
    wt = ctx.new_tensor(T.F32, *w.shape[::-1])
    wt.set(w)
    loss = O.sum(O.mul(out, wt))
    loss.set_loss()
    graph = build_graph(loss)
    grads = build_backward(graph)
    grads.reset()
    backend.graph_compute(graph)
    g = grads.grad(xt)
    assert g is not None
    return np.asarray(g.numpy(), np.float64).reshape(x.shape)


def test_autodiff_of_im2col_and_pool_2d_matches_ggmls(cpu_backend: Backend, ggml_cpu: ctypes.CDLL) -> None:
    """pyggml's rules (IM2COL -> IM2COL_BACK, POOL_2D -> POOL_2D_BACK) give ggml's gradients, bit for bit."""
    x = _x(2, 3, 9, 11)
    k = _x(4, 3, 3, 2)
    words = (2, 1, 1, 1, 1, 2)
    cases = {
        "im2col": (lambda ctx, xt: O.im2col(_leaf(ctx, k), xt, *words, True, T.F32),
                   lambda gg, gx: gg.call("ggml_im2col", gg.tensor(k, T.F32), gx, *words, True, int(T.F32))),
        "pool max": (lambda ctx, xt: O.pool_2d(xt, PoolOp.MAX, 3, 2, 2, 1, 1, 1),
                     lambda gg, gx: gg.call("ggml_pool_2d", gx, 0, 3, 2, 2, 1, 1.0, 1.0)),
        "pool avg": (lambda ctx, xt: O.pool_2d(xt, PoolOp.AVG, 2, 3, 1, 2, 0, 1),
                     lambda gg, gx: gg.call("ggml_pool_2d", gx, 1, 2, 3, 1, 2, 0.0, 1.0)),
    }
    for name, (mine, theirs) in cases.items():
        gg = GgmlCtx(ggml_cpu)
        try:
            gx = gg.param(x)
            out = theirs(gg, gx)
            w = _x(*_ne(gg, out)[::-1])
            want = _ggml_input_grad(gg, out, gx, w, x.shape)
        finally:
            gg.close()
        got = _pyggml_input_grad(cpu_backend, mine, x, w)
        np.testing.assert_array_equal(got, want, err_msg=name)


def _leaf(ctx: object, a: np.ndarray) -> object:
    t = ctx.new_tensor(T.F32, *a.shape[::-1])  # type: ignore[attr-defined]
    t.set(a)
    return t


def _ne(gg: GgmlCtx, t: P) -> tuple[int, ...]:
    raw = (ctypes.c_int64 * 4).from_address(t.value + 16)  # struct ggml_tensor: type (4), buffer (8), ne[4]
    return tuple(int(n) for n in raw)
