"""The blas registry: big F32/F16 matmuls through OpenBLAS, in the same host memory as the cpu device."""

from __future__ import annotations

import numpy as np
import pytest

import pyggml.ops as O
from pyggml.backend.registry import get_registry, hub
from pyggml.context import Context
from pyggml.graph import build_graph
from pyggml_testing.devices import devices_or_skip


@pytest.fixture(scope="module")
def blas_device():  # type: ignore[no-untyped-def]
    return devices_or_skip(get_registry("blas"), "no BLAS library here")[0]


@pytest.mark.parametrize("wtype", ["f32", "f16", "bf16"])
def test_blas_matmul_matches_numpy(blas_device, wtype: str) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(3)
    ctx = Context(16 << 20)
    w = ctx.new_tensor(wtype, 96, 64, 2)
    x = ctx.new_tensor("f32", 96, 40, 4)
    wv = rng.standard_normal((2, 64, 96)).astype(np.float32)
    xv = rng.standard_normal((4, 40, 96)).astype(np.float32)
    w.set(wv)
    x.set(xv)
    out = O.mul_mat(w, x)
    assert blas_device.supports_op(out)
    be = blas_device.init_backend()
    be.graph_compute(build_graph(out))
    wr = w.numpy()  # the weights as stored (rounded to f16 / bf16)
    ref = np.stack([xv[b] @ wr[b // 2].T for b in range(4)])
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=1e-3)


def test_blas_takes_only_big_float_matmuls(blas_device) -> None:  # type: ignore[no-untyped-def]
    ctx = Context(4 << 20)
    w = ctx.new_tensor("f32", 64, 64)
    assert not blas_device.supports_op(O.mul_mat(w, ctx.new_tensor("f32", 64, 1)))  # mat-vec: cpu's job
    assert not blas_device.supports_op(O.mul_mat(ctx.new_tensor("q4_0", 64, 64), ctx.new_tensor("f32", 64, 64)))
    assert not blas_device.supports_op(O.add(w, w))
    assert blas_device.supports_buft(hub().device("cpu").buffer_type())
