"""ARGSORT / TOP_K: ties keep index order in both directions (as the reference), in shared memory and through the
scratch path for rows longer than a work group's chunk; non-contiguous rows."""

from __future__ import annotations

import numpy as np
import pytest

from pyggml import ops
from pyggml.context import Context
from pyggml.ops.reduce import SortOrder
from pyggml_glsl.ops.sort import CHUNK
from pyggml_testing.devices import numpy_backend
from pyggml_testing.on_device import run_built


def _ties(rows: int, n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(-20, 20, (rows, n)).astype(np.float32)


@pytest.mark.parametrize("n", [1, 7, 64, CHUNK, CHUNK + 1, 3 * CHUNK + 5])
@pytest.mark.parametrize("order", list(SortOrder))
def test_argsort_ties_stable(backend, n, order):
    def build(ctx: Context):
        a = ctx.new_tensor("f32", n, 3, name="a")
        return [a], ops.argsort(a, order)

    data = {"a": _ties(3, n)}
    assert np.array_equal(run_built(build, backend, data), run_built(build, numpy_backend(), data))


@pytest.mark.parametrize("n,k", [(100, 5), (CHUNK * 2 + 3, 40), (9000, 9000)])
def test_top_k_permuted_rows(backend, n, k):
    def build(ctx: Context):
        a = ctx.new_tensor("f32", n, 2, 3, name="a")
        return [a], ops.top_k(ops.permute(a, 0, 2, 1, 3), k)

    data = {"a": np.random.default_rng(1).standard_normal((3, 2, n)).astype(np.float32)}
    got, ref = run_built(build, backend, data), run_built(build, numpy_backend(), data)
    assert np.array_equal(np.sort(got, axis=-1), np.sort(ref, axis=-1))
