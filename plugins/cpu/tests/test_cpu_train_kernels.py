"""The packed-row paths of backward.c's training kernels give the bits of their element-by-element definition.

OPT_STEP_ADAMW on packed F32 rows runs eight lanes at a time (AVX2) with the scalar loop's float operations in the
scalar loop's order, unfused, and a scalar tail: numpy's float32 arithmetic (IEEE single, correctly rounded sqrt and
divide, no fusion) replays the same steps, so the update must match it exactly, on both kernel levels and for row
lengths around the vector width. SILU_BACK's packed path must match its strided path (a transposed view)."""

from __future__ import annotations

import numpy as np
import pytest

import pyggml.ops as O
from pyggml.backend.protocol import Backend
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_testing.ggml_ctypes import Make, run_pyggml, run_pyggml_all

T = GGMLType
F = np.float32
RNG = np.random.default_rng(57)


def _adamw_f32(w: np.ndarray, g: np.ndarray, m: np.ndarray, v: np.ndarray, hp: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ggml's AdamW update, one float32 rounding per operation, in its order."""
    alpha, beta1, beta2, eps, wd, beta1h, beta2h = (F(x) for x in hp)
    keep = F(1) - alpha * wd
    m = m * beta1 + g * (F(1) - beta1)
    v = v * beta2 + g * g * (F(1) - beta2)
    mh, vh = m * beta1h, np.sqrt(v * beta2h) + eps
    return w * keep - alpha * mh / vh, m, v


@pytest.mark.parametrize("shape", [(3, 13), (2, 8), (5, 1), (1, 67)])
def test_adamw_rows_match_float32_steps(cpu_backend: Backend, simd: str, shape: tuple[int, int]) -> None:
    w, m = RNG.uniform(-1, 1, shape).astype(F), RNG.uniform(-1, 1, shape).astype(F)
    g, v = RNG.standard_normal(shape).astype(F), RNG.uniform(0, 1, shape).astype(F)
    t = 7
    hp = np.array([3e-3, 0.9, 0.999, 1e-8, 0.01, 1 / (1 - 0.9**t), 1 / (1 - 0.999**t)], F)

    def build(mk: Make) -> tuple[Tensor, ...]:
        pw, pm, pv = mk(w, T.F32).set_param(), mk(m, T.F32), mk(v, T.F32)
        return O.opt_step_adamw(pw, mk(g, T.F32), pm, pv, mk(hp, T.F32)), pm, pv

    got = run_pyggml_all(cpu_backend, build)
    for ours, want, what in zip(got, _adamw_f32(w, g, m, v, hp), ("param", "m", "v"), strict=True):
        np.testing.assert_array_equal(ours.reshape(shape), want.astype(np.float64), err_msg=what)


def test_silu_back_packed_matches_strided(cpu_backend: Backend) -> None:
    g, x = RNG.standard_normal((6, 37)).astype(F), (RNG.standard_normal((6, 37)) * 4).astype(F)
    packed = run_pyggml(cpu_backend, lambda mk: O.silu_back(mk(g, T.F32), mk(x, T.F32)))
    strided = run_pyggml(cpu_backend, lambda mk: O.silu_back(O.transpose(mk(g.T.copy(), T.F32)),
                                                             O.transpose(mk(x.T.copy(), T.F32))))
    np.testing.assert_array_equal(packed, strided)
