"""Reference kernels of issue 21's first slice against scalar formulas written from ggml's kernels: UNARY EXPM1 and
XIELU (with ggml_xielu's constraining of its alphas), GLU SWIGLU_OAI and SWIGLU_CLAMP (clamps, the +1, the sigmoid
scale, NaN and infinities), ADD_ID (shape rules, ids out of range) and the custom ops (call convention, thread
split, in place, a callable that raises)."""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np
import pytest

from pyggml import ops
from pyggml.backend import init_backend
from pyggml.backend.custom_call import CustomOpError, run_custom
from pyggml.errors import ComputeError, PyGGMLError, ShapeError, UnsupportedTypeError
from pyggml.ops import GluOp, UnaryOp
from pyggml.ops.elementwise import SwigluOaiParams, XieluParams, softplus_f32
from pyggml.types import GGMLType as T
from pyggml_testing.graphs import compute, f32, new_ctx, rand, result, tensor


def _softplus(x: float) -> float:
    return x if x > 20.0 else math.log1p(math.exp(x))


def test_expm1_is_exp_minus_one() -> None:
    x = np.array([[0.0, 1e-6, -1e-6, 3.0, -30.0, 80.0]])
    np.testing.assert_allclose(result(ops.expm1(tensor(new_ctx(), x))).ravel(), f32(np.expm1(f32(x))).ravel(),
                               rtol=2e-7)


def test_xielu_stores_ggml_coefficients() -> None:
    a = tensor(new_ctx(), [[1.0]])
    p = ops.xielu(a, 0.8, 0.8, 0.5, -1e-6).params
    assert isinstance(p, XieluParams) and p.op is UnaryOp.XIELU
    assert p.alpha_p == pytest.approx(_softplus(0.8), rel=2e-7)  # float32 arithmetic, as ggml
    assert p.alpha_n == pytest.approx(0.5 + _softplus(0.8), rel=2e-7)
    assert p.alpha_n == float(np.float32(p.alpha_n))
    assert (p.beta, p.eps) == (0.5, float(np.float32(-1e-6)))
    assert softplus_f32(30.0) == 30.0


@pytest.mark.parametrize("eps", [-1e-6, 0.25])
def test_xielu_matches_ggml_formula(eps: float) -> None:
    x = np.concatenate([[0.0, -0.0, 1e-8, -1e-8, 0.1, 0.3, -0.2, 5.0, -7.0], rand(31, seed=3, scale=2.0)])
    p = ops.xielu(tensor(new_ctx(), x.reshape(1, -1)), 4.0, 20.0, 0.5, eps).params
    an, ap, b, e = p.alpha_n, p.alpha_p, p.beta, p.eps

    def scalar(v: float) -> float:
        return ap * v * v + b * v if v > 0 else (math.expm1(min(v, e)) - v) * an + b * v

    out = ops.xielu(tensor(new_ctx(), x.reshape(1, -1)), 4.0, 20.0, 0.5, eps)
    np.testing.assert_allclose(result(out).ravel(), f32([scalar(float(v)) for v in x]), rtol=2e-7, atol=1e-30)


def test_xielu_infinities_nan() -> None:
    x = np.array([[np.inf, -np.inf, np.nan]])
    got = result(ops.xielu(tensor(new_ctx(), x), 4.0, 20.0, 0.5, 1e-6)).ravel()
    assert got[0] == np.inf and got[1] == np.inf and np.isnan(got[2])  # limit at -inf: +inf (alpha_n > beta)


def test_unary_refuses_missing_or_wrong_params() -> None:
    a = tensor(new_ctx(), [[1.0, 2.0]])
    with pytest.raises(ShapeError, match=r"XIELU needs XieluParams.*ops\.xielu"):
        ops.unary(a, UnaryOp.XIELU)
    with pytest.raises(ShapeError, match="SWIGLU_OAI needs SwigluOaiParams"):
        ops.glu(a, GluOp.SWIGLU_OAI)
    with pytest.raises(ShapeError, match="finite"):
        ops.xielu(a, math.inf, 1.0, 0.5, 0.0)


def _oai(x: float, g: float, alpha: float, limit: float) -> float:
    x = limit if limit < x else x
    g = -limit if g < -limit else (limit if limit < g else g)
    return x / (1.0 + math.exp(-alpha * x)) * (g + 1.0)


def _clamp(x: float, g: float, limit: float) -> float:
    x = limit if limit < x else x
    g = -limit if g < -limit else (limit if limit < g else g)
    return x / (1.0 + math.exp(-x)) * g


@pytest.mark.parametrize(("alpha", "limit"), [(1.702, 7.0), (0.5, 2.0)])
@pytest.mark.parametrize("mode", ["fused", "swapped", "split"])
def test_swiglu_oai_and_clamp(alpha: float, limit: float, mode: str) -> None:
    ctx = new_ctx()
    x, g = rand(3, 8, seed=5, scale=6.0), rand(3, 8, seed=6, scale=6.0)
    if mode == "split":
        oai = ops.swiglu_oai(tensor(ctx, x), tensor(ctx, g), alpha, limit)
        clp = ops.swiglu_clamp(tensor(ctx, x), tensor(ctx, g), limit)
    else:
        sw = mode == "swapped"
        both = tensor(ctx, np.concatenate([g, x] if sw else [x, g], axis=1))
        oai = ops.swiglu_oai(both, alpha=alpha, limit=limit, swapped=sw)
        clp = ops.swiglu_clamp(both, limit=limit, swapped=sw)
    assert isinstance(oai.params, SwigluOaiParams)
    pairs = [list(zip(r, s, strict=True)) for r, s in zip(x, g, strict=True)]
    want = [[_oai(float(u), float(v), alpha, limit) for u, v in row] for row in pairs]
    np.testing.assert_allclose(result(oai), f32(want), rtol=3e-7, atol=1e-30)
    want = [[_clamp(float(u), float(v), limit) for u, v in row] for row in pairs]
    np.testing.assert_allclose(result(clp), f32(want), rtol=3e-7, atol=1e-30)


def test_swiglu_oai_edges() -> None:
    ctx = new_ctx()
    x = np.array([[-np.inf, np.inf, np.nan, 1.0, -200.0]])
    g = np.array([[1.0, 100.0, 1.0, np.nan, -np.inf]])
    got = result(ops.swiglu_oai(tensor(ctx, x), tensor(ctx, g), 1.702, 7.0)).ravel()
    assert got[0] == 0.0  # the gate's limit at -inf
    assert got[1] == pytest.approx(_oai(7.0, 7.0, 1.702, 7.0), rel=1e-6)  # x and g clamped
    assert np.isnan(got[2]) and np.isnan(got[3])
    assert got[4] == 0.0  # -200 * sigmoid(-340) * (1 - 7): -0


def test_add_id_matches_loop() -> None:
    ctx = new_ctx()
    a, b = rand(4, 3, 5, seed=7), rand(6, 5, seed=8)  # a: [n_embd 5, n_used 3, n_tokens 4]; b: 6 experts
    ids = np.array([[0, 5, 2], [1, 1, 3], [4, 0, 5], [2, 3, 1]], dtype=np.int32)
    out = ops.add_id(tensor(ctx, a), tensor(ctx, b), tensor(ctx, ids, T.I32))
    want = np.array([[a[t, u] + b[ids[t, u]] for u in range(3)] for t in range(4)])
    np.testing.assert_allclose(result(out), f32(want), rtol=1e-7)


def test_add_id_shape_rules_and_bad_ids() -> None:
    ctx = new_ctx()
    a, b = tensor(ctx, rand(4, 3, 5)), tensor(ctx, rand(6, 5))
    with pytest.raises(ShapeError, match="ids must be"):
        ops.add_id(a, b, tensor(ctx, np.zeros((4, 2), np.int32), T.I32))
    with pytest.raises(ShapeError, match="as long as"):
        ops.add_id(a, tensor(ctx, rand(6, 4)), tensor(ctx, np.zeros((4, 3), np.int32), T.I32))
    with pytest.raises(UnsupportedTypeError, match="ADD_ID: src2"):
        ops.add_id(a, b, tensor(ctx, np.zeros((4, 3))))
    bad = np.zeros((4, 3), np.int32)
    bad[2, 1] = 6
    with pytest.raises(PyGGMLError, match="ADD_ID: row id of src1 6 is outside"):
        compute(ops.add_id(a, b, tensor(ctx, bad, T.I32)))


def _rows_times_two_plus_one(dst: Any, a: Any, ith: int, nth: int, userdata: Any) -> None:
    rows = dst.reshape(-1, dst.shape[-1])
    src = a.reshape(-1, a.shape[-1])
    for r in range(ith, rows.shape[0], nth):
        rows[r] = src[r] * 2 + userdata


def test_map_custom_ops_and_threads() -> None:
    ctx = new_ctx()
    x, y, z = rand(2, 3, 4, seed=9), rand(2, 3, 4, seed=10), rand(2, 3, 4, seed=11)
    tx, ty, tz = tensor(ctx, x), tensor(ctx, y), tensor(ctx, z)
    np.testing.assert_allclose(result(ops.map_custom1(tx, _rows_times_two_plus_one, userdata=1.0)), f32(x * 2 + 1))

    def fma(dst: Any, a: Any, b: Any, c: Any, ith: int, nth: int, ud: Any) -> None:
        assert (ith, nth) == (0, 1) and not a.flags.writeable
        dst[...] = a * b + c

    np.testing.assert_allclose(result(ops.map_custom3(tx, ty, tz, fma)), f32(f32(x * y) + z), rtol=1e-6)
    seen: list[tuple[int, int]] = []

    def add(dst: Any, a: Any, b: Any, ith: int, nth: int, ud: Any) -> None:
        seen.append((ith, nth))
        dst[...] = a + b

    np.testing.assert_allclose(result(ops.map_custom2(tx, ty, add, n_tasks=4)), f32(x + y))
    assert seen == [(0, 1)]  # the numpy backend has one thread: nth = min(n_tasks, 1)


def test_custom_new_shape_and_in_place() -> None:
    ctx = new_ctx()
    x = rand(3, 4, seed=12)
    tx = tensor(ctx, x)

    def row_sums(dst: Any, args: tuple[Any, ...], ith: int, nth: int, ud: Any) -> None:
        dst[...] = args[0].sum(axis=-1, keepdims=True) + args[1][..., :1]

    out = ops.custom([tx, tx], row_sums, T.F32, (1, 3))
    assert out.ne == (1, 3, 1, 1) and out.op.name == "CUSTOM"
    np.testing.assert_allclose(result(out).ravel(), f32(x.sum(axis=1) + x[:, 0]), rtol=1e-6)

    def negate(dst: Any, args: tuple[Any, ...], ith: int, nth: int, ud: Any) -> None:
        assert args[0].shape == dst.shape
        dst[...] = -dst

    out = ops.custom_inplace(tx, [], negate)
    assert out.view_src is tx
    np.testing.assert_allclose(result(out), -x)


def test_custom_refusals() -> None:
    ctx = new_ctx()
    a = tensor(ctx, rand(2, 4))
    with pytest.raises(ShapeError, match="not callable"):
        ops.map_custom1(a, 42)  # type: ignore[arg-type]
    with pytest.raises(ShapeError, match="n_tasks"):
        ops.map_custom1(a, _rows_times_two_plus_one, n_tasks=0)
    with pytest.raises(ShapeError, match="1 to 10 args"):
        ops.custom([], _rows_times_two_plus_one, T.F32, (1,))
    q = ctx.new_tensor(T.Q8_0, 32, 2)
    with pytest.raises(ShapeError, match="block type"):
        ops.map_custom1(q, _rows_times_two_plus_one)


def test_custom_callable_that_raises_names_the_node_and_backend_stays_usable() -> None:
    ctx = new_ctx()
    a = tensor(ctx, rand(2, 4))

    def boom(dst: Any, a: Any, ith: int, nth: int, ud: Any) -> None:
        raise ValueError("no luck")

    bad = ops.map_custom1(a, boom)
    bad.name = "my_node"
    be = init_backend("numpy")
    import pyggml as gg

    with pytest.raises(ComputeError, match=r"node 'my_node' \(MAP_CUSTOM1.*boom raised ValueError: no luck") as ei:
        be.graph_compute(gg.build_graph(bad))
    assert isinstance(ei.value.__cause__, CustomOpError) and isinstance(ei.value.__cause__.__cause__, ValueError)
    good = ops.map_custom1(a, _rows_times_two_plus_one, userdata=0.0)
    be.graph_compute(gg.build_graph(good))
    np.testing.assert_allclose(good.numpy(), a.numpy() * 2)


def test_run_custom_splits_across_threads() -> None:
    ctx = new_ctx()
    x = rand(8, 16, seed=13)
    a = tensor(ctx, x)
    names: set[str] = set()

    def fn(dst: Any, src: Any, ith: int, nth: int, ud: Any) -> None:
        names.add(threading.current_thread().name)
        _rows_times_two_plus_one(dst, src, ith, nth, 0.0)

    out = ops.map_custom1(a, fn, n_tasks=3)
    compute(out)  # allocates and runs once with one task
    run_custom(out, 8)  # three tasks: min(n_tasks, threads)
    assert len(names) == 3
    np.testing.assert_allclose(out.numpy(), f32(x * 2))
