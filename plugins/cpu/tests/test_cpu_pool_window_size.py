"""POOL_2D and POOL_2D_BACK's AVG divide by the window size k0*k1, which can pass INT32_MAX although each word
fits ggml's int32 op_params (a 70000 x 70000 window over a padded 1 x 1 input is a valid, cheap graph): spatial.c
and back2.c must form that product in 64 bits, as the reference does, not wrap it in an int."""

from __future__ import annotations

import numpy as np

import pyggml.ops as O
from pyggml.backend.protocol import Backend
from pyggml.ops.spatial import PoolOp
from pyggml.types import GGMLType
from pyggml_testing.ggml_ctypes import run_pyggml

K = 70000  # K * K = 4.9e9 > 2**31: an int product wraps to 605032704
WINDOW = np.float32(K * K)


def test_pool_2d_avg_window_past_int32(cpu_backend: Backend) -> None:
    x = np.full((1, 1), 2.0, np.float32)
    out = run_pyggml(cpu_backend, lambda mk: O.pool_2d(mk(x, GGMLType.F32), PoolOp.AVG, K, K, 1, 1, K // 2, K // 2))
    assert out.size == 4
    np.testing.assert_array_equal(out.ravel(), np.full(4, np.float32(2.0) / WINDOW, np.float64))


def test_pool_2d_back_avg_window_past_int32(cpu_backend: Backend) -> None:
    x, g = np.full((1, 1), 2.0, np.float32), np.ones((2, 2), np.float32)
    out = run_pyggml(cpu_backend, lambda mk: O.pool_2d_back(mk(g, GGMLType.F32), mk(x, GGMLType.F32), PoolOp.AVG,
                                                            K, K, 1, 1, K // 2, K // 2))
    share = np.float32(1.0) / WINDOW  # each of the 4 outputs adds grad / (k0*k1) to the one input element
    want = ((share + share) + share) + share
    np.testing.assert_allclose(out.ravel(), [want], rtol=1e-6)
