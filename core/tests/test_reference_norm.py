"""Reference kernels, normalisations: NORM, RMS_NORM, L2_NORM per row and GROUP_NORM over channel groups, against
loops with math.fsum."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pyggml import ops
from pyggml_testing.graphs import f32, new_ctx, rand, result, tensor


def _rows(x: np.ndarray) -> list[tuple[tuple[int, ...], list[float]]]:
    return [(idx, [float(v) for v in x[idx]]) for idx in np.ndindex(*x.shape[:-1])]


def test_norm() -> None:
    ctx = new_ctx()
    x = rand(2, 3, 8, seed=40, scale=3.0) + 1.0
    expected = np.empty_like(x)
    for idx, row in _rows(x):
        mu = math.fsum(row) / len(row)
        var = math.fsum((v - mu) ** 2 for v in row) / len(row)
        expected[idx] = [(v - mu) / math.sqrt(var + 1e-5) for v in row]
    np.testing.assert_allclose(result(ops.norm(tensor(ctx, x), 1e-5)), f32(expected), rtol=1e-6)


@pytest.mark.parametrize("inplace", [False, True])
def test_rms_norm(inplace: bool) -> None:
    ctx = new_ctx()
    x = rand(4, 16, seed=41)
    expected = np.empty_like(x)
    for idx, row in _rows(x):
        expected[idx] = [v / math.sqrt(math.fsum(u * u for u in row) / len(row) + 1e-6) for v in row]
    tx = tensor(ctx, x)
    got = result(ops.rms_norm(tx, 1e-6, inplace=inplace))
    np.testing.assert_allclose(got, f32(expected), rtol=1e-6)
    if inplace:
        np.testing.assert_array_equal(tx.numpy(), got)


def test_l2_norm_and_eps_floor() -> None:
    ctx = new_ctx()
    x = rand(3, 5, seed=42)
    x[2] = 1e-9
    expected = np.empty_like(x)
    for idx, row in _rows(x):
        expected[idx] = [v / max(math.sqrt(math.fsum(u * u for u in row)), 1e-6) for v in row]
    np.testing.assert_allclose(result(ops.l2_norm(tensor(ctx, x), 1e-6)), f32(expected), rtol=1e-6)


def test_rms_norm_of_a_permuted_view() -> None:
    ctx = new_ctx()
    x = rand(6, 4, seed=43)
    got = result(ops.rms_norm(ops.transpose(tensor(ctx, x)), 0.0))
    xt = x.T
    np.testing.assert_allclose(got, xt / np.sqrt((xt**2).mean(axis=1, keepdims=True)), rtol=1e-6)


@pytest.mark.parametrize("n_groups", [1, 2, 3, 5])
def test_group_norm(n_groups: int) -> None:
    ctx = new_ctx()
    x = rand(2, 5, 3, 4, seed=44)  # ne = (4, 3, 5 channels, 2 batches)
    per = -(-5 // n_groups)
    expected = np.empty_like(x)
    for b in range(2):
        for start in range(0, 5, per):
            chans = range(start, min(start + per, 5))
            vals = [float(x[b, c, i, j]) for c in chans for i in range(3) for j in range(4)]
            mu = math.fsum(vals) / len(vals)
            var = math.fsum((v - mu) ** 2 for v in vals) / len(vals)
            for c in chans:
                expected[b, c] = (x[b, c] - mu) / math.sqrt(var + 1e-6)
    np.testing.assert_allclose(result(ops.group_norm(tensor(ctx, x), n_groups, 1e-6)), f32(expected), rtol=1e-6)
