"""Reference kernels, matrix products: MUL_MAT (types, batch broadcasting, non-contiguous src1, quantised src0),
MUL_MAT_ID and OUT_PROD, against explicit dot-product loops."""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest

from pyggml import ops
from pyggml.types import GGMLType as T
from pyggml_testing.graphs import f16, f32, new_ctx, q8_0_tensor, rand, result, tensor

HAVE_QUANTS = importlib.util.find_spec("pyggml.quants") is not None
needs_quants = pytest.mark.skipif(not HAVE_QUANTS, reason="pyggml.quants (block (de)quantisation) is not there yet")


def dot(u: np.ndarray, v: np.ndarray) -> float:
    return math.fsum(float(p) * float(q) for p, q in zip(u, v, strict=True))


def loop_mul_mat(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a (A3, A2, m, k), b (B3, B2, n, k) -> (B3, B2, n, m); b batch (i3, i2) uses a batch (i3 // r3, i2 // r2)."""
    r3, r2 = b.shape[0] // a.shape[0], b.shape[1] // a.shape[1]
    out = np.empty((b.shape[0], b.shape[1], b.shape[2], a.shape[2]))
    for i3, i2, j, i in np.ndindex(*out.shape):
        out[i3, i2, j, i] = dot(a[i3 // r3, i2 // r2, i], b[i3, i2, j])
    return out


@pytest.mark.parametrize("atype", [T.F32, T.F16, T.BF16], ids=str)
def test_mul_mat_broadcast_batches(atype: T) -> None:
    ctx = new_ctx()
    a = rand(1, 2, 3, 8, seed=50)
    b = rand(2, 6, 4, 8, seed=51)  # a's 2 matrices each serve 3 consecutive b batches; dim 3 broadcasts 2x
    ta = tensor(ctx, a, atype)
    a_held = ta.numpy().astype(np.float64).reshape(a.shape)
    out = ops.mul_mat(ta, tensor(ctx, b))
    assert out.ne == (3, 4, 6, 2)
    np.testing.assert_allclose(result(out), f32(loop_mul_mat(a_held, b)), rtol=1e-6, atol=1e-6)


def test_mul_mat_f16_src1_and_transposed_src1() -> None:
    ctx = new_ctx()
    a = rand(5, 6, seed=52)
    b = f16(rand(6, 4, seed=53))  # numpy (6, 4): transposed it is 4 rows of 6
    bt = ops.transpose(tensor(ctx, b, T.F16))
    got = result(ops.mul_mat(tensor(ctx, a), bt))
    expected = [[dot(a[i], b[:, j]) for i in range(5)] for j in range(4)]
    np.testing.assert_allclose(got, f32(expected), rtol=1e-6, atol=1e-6)


def test_mul_mat_vector() -> None:
    ctx = new_ctx()
    a = rand(7, 3, seed=54)
    x = rand(3, seed=55)
    got = result(ops.mul_mat(tensor(ctx, a), tensor(ctx, x)))
    np.testing.assert_allclose(got, f32([dot(a[i], x) for i in range(7)]), rtol=1e-6)


def test_mul_mat_id() -> None:
    ctx = new_ctx()
    experts = rand(4, 3, 8, seed=56)  # 4 experts of [k=8, m=3]
    b = rand(5, 2, 8, seed=57)  # 5 tokens, 2 rows each
    ids = np.array([[3, 0, 0, 2], [1, 1, 3, 0], [2, 3, 1, 1], [0, 2, 2, 3], [1, 0, 3, 2]], dtype=np.int32)
    out = ops.mul_mat_id(tensor(ctx, experts), tensor(ctx, b), tensor(ctx, ids, T.I32))
    assert out.ne == (3, 4, 5, 1)
    expected = np.empty((5, 4, 3))
    for t in range(5):
        for e in range(4):
            for i in range(3):
                expected[t, e, i] = dot(experts[ids[t, e], i], b[t, e % 2])
    np.testing.assert_allclose(result(out), f32(expected), rtol=1e-6, atol=1e-6)


def test_mul_mat_id_bad_expert_is_an_error() -> None:
    from pyggml.errors import ComputeError

    ctx = new_ctx()
    out = ops.mul_mat_id(tensor(ctx, rand(2, 3, 8)), tensor(ctx, rand(1, 1, 8)),
                         tensor(ctx, np.array([[5]], dtype=np.int32), T.I32))
    with pytest.raises(ComputeError, match="MUL_MAT_ID: expert id 5 is outside"):
        result(out)


def test_out_prod_with_broadcast() -> None:
    ctx = new_ctx()
    a = rand(2, 1, 5, 3, seed=58)  # ne (m=3, k=5, 1, 2)
    b = rand(2, 2, 5, 4, seed=59)  # ne (n=4, k=5, 2, 2)
    out = ops.out_prod(tensor(ctx, a), tensor(ctx, b))
    assert out.ne == (3, 4, 2, 2)
    expected = np.empty((2, 2, 4, 3))
    for i3, i2, j, i in np.ndindex(*expected.shape):
        expected[i3, i2, j, i] = dot(a[i3, 0, :, i], b[i3, i2, :, j])
    np.testing.assert_allclose(result(out), f32(expected), rtol=1e-6, atol=1e-6)


@needs_quants
def test_mul_mat_q8_0_src0() -> None:
    ctx = new_ctx()
    tw, _, held = q8_0_tensor(ctx, rand(3, 64, seed=60))
    x = rand(2, 64, seed=61)
    got = result(ops.mul_mat(tw, tensor(ctx, x)))
    expected = [[dot(held[i], x[j]) for i in range(3)] for j in range(2)]
    np.testing.assert_allclose(got, f32(expected), rtol=1e-6, atol=1e-6)
