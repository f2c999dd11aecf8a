"""Reference kernel ROPE: normal and NeoX pairings, partial rotation (n_dims < head size), frequency factors,
YaRN (ext_factor, corr dims, magnitude scale), F16, in place; against a scalar loop that follows ggml's
procedure (theta multiplied along the row, ramp per pair)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pyggml import ops
from pyggml.ops import ROPE_TYPE_NEOX, ROPE_TYPE_NORMAL
from pyggml.types import GGMLType as T
from pyggml_testing.graphs import f16, f32, new_ctx, rand, result, tensor


def loop_rope(x: np.ndarray, pos: list[int], n_dims: int, neox: bool, ff: list[float] | None = None,
              n_ctx_orig: int = 0, base: float = 10000.0, fscale: float = 1.0, ext: float = 0.0,
              attn: float = 1.0, beta_fast: float = 32.0, beta_slow: float = 1.0) -> np.ndarray:
    out = x.copy()
    low = high = 0.0
    if ext != 0.0:
        def corr(beta: float) -> float:
            return n_dims * math.log(n_ctx_orig / (beta * 2 * math.pi)) / (2 * math.log(base))
        low = max(0.0, math.floor(corr(beta_fast)))
        high = min(n_dims - 1.0, math.ceil(corr(beta_slow)))
    for b, t, h in np.ndindex(*x.shape[:3]):
        theta_base = float(pos[t])
        for i in range(n_dims // 2):
            theta_e = theta_base / (ff[i] if ff else 1.0)
            theta = fscale * theta_e
            mscale = attn
            if ext != 0.0:
                y = (i - low) / max(0.001, high - low)
                mix = (1.0 - min(1.0, max(0.0, y))) * ext
                theta = theta * (1 - mix) + theta_e * mix
                mscale *= 1.0 + 0.1 * math.log(1.0 / fscale)
            c, s = math.cos(theta) * mscale, math.sin(theta) * mscale
            j0, j1 = (i, i + n_dims // 2) if neox else (2 * i, 2 * i + 1)
            x0, x1 = x[b, t, h, j0], x[b, t, h, j1]
            out[b, t, h, j0] = x0 * c - x1 * s
            out[b, t, h, j1] = x0 * s + x1 * c
            theta_base *= base ** (-2.0 / n_dims)
    return out


@pytest.mark.parametrize("mode", [ROPE_TYPE_NORMAL, ROPE_TYPE_NEOX], ids=["normal", "neox"])
@pytest.mark.parametrize("n_dims", [8, 4])
def test_rope_modes_and_partial_rotation(mode: int, n_dims: int) -> None:
    ctx = new_ctx()
    x = rand(2, 3, 2, 8, seed=70)  # ne (head 8, 2 heads, 3 positions, batch 2)
    pos = [0, 5, 17]
    out = ops.rope(tensor(ctx, x), tensor(ctx, np.array(pos, np.int32), T.I32), n_dims, mode)
    expected = loop_rope(x, pos, n_dims, mode == ROPE_TYPE_NEOX)
    got = result(out)
    np.testing.assert_allclose(got, f32(expected), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got[..., n_dims:], x[..., n_dims:])  # the tail is copied


def test_rope_freq_factors_and_freq_base() -> None:
    ctx = new_ctx()
    x = rand(1, 4, 3, 6, seed=71)
    pos = [3, 1, 4, 1]
    ff = [1.0, 2.0, 8.0]
    out = ops.rope(tensor(ctx, x), tensor(ctx, np.array(pos, np.int32), T.I32), 6, ROPE_TYPE_NEOX,
                   freq_factors=tensor(ctx, ff), freq_base=500.0)
    expected = loop_rope(x, pos, 6, True, ff=ff, base=500.0)
    np.testing.assert_allclose(result(out), f32(expected).squeeze(0), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", [ROPE_TYPE_NORMAL, ROPE_TYPE_NEOX], ids=["normal", "neox"])
def test_rope_yarn(mode: int) -> None:
    ctx = new_ctx()
    x = rand(1, 3, 2, 16, seed=72)
    pos = [0, 100, 4000]
    kw = dict(n_ctx_orig=4096, fscale=0.25, ext=1.0, attn=1.0, beta_fast=32.0, beta_slow=1.0)
    out = ops.rope(tensor(ctx, x), tensor(ctx, np.array(pos, np.int32), T.I32), 16, mode, n_ctx_orig=4096,
                   freq_scale=0.25, ext_factor=1.0, attn_factor=1.0)
    expected = loop_rope(x, pos, 16, mode == ROPE_TYPE_NEOX, **kw)  # type: ignore[arg-type]
    np.testing.assert_allclose(result(out), f32(expected).squeeze(0), rtol=1e-5, atol=1e-6)


def test_rope_linear_scaling_and_attn_factor_without_yarn() -> None:
    ctx = new_ctx()
    x = rand(1, 2, 1, 4, seed=73)
    pos = [7, 9]
    out = ops.rope(tensor(ctx, x), tensor(ctx, np.array(pos, np.int32), T.I32), 4, freq_scale=0.5,
                   attn_factor=2.0)
    expected = loop_rope(x, pos, 4, False, fscale=0.5, attn=2.0)
    np.testing.assert_allclose(result(out), f32(expected).squeeze(0), rtol=1e-5, atol=1e-6)


def test_rope_f16_in_place() -> None:
    ctx = new_ctx()
    x = f16(rand(1, 2, 2, 8, seed=74))
    tx = tensor(ctx, x, T.F16)
    out = ops.rope(tx, tensor(ctx, np.array([2, 3], np.int32), T.I32), 8, ROPE_TYPE_NEOX, inplace=True)
    assert out.type == T.F16 and out.view_src is tx
    got = result(out)
    np.testing.assert_allclose(got, f16(loop_rope(x, [2, 3], 8, True))[0], rtol=2e-3, atol=2e-3)
    np.testing.assert_array_equal(tx.numpy(), got)
