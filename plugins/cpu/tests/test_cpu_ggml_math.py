"""SOFT_MAX, SILU, SWIGLU and ROPE follow ggml's CPU arithmetic (the vectorised exp of ew.c, the fused ROPE
products of norm.c): the portable and the SIMD kernels give the same bits, and the exp stays within a few ulp of
the exact value, with ggml's flush to 0 and to inf at the ends."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import pyggml.ops as O
from pyggml.backend.protocol import Backend
from pyggml.context import Context
from pyggml.graph import build_graph
from pyggml.ops.rope import ROPE_TYPE_NEOX, ROPE_TYPE_NORMAL
from pyggml.tensor import Tensor
from pyggml_cpu import kernels

RNG = np.random.default_rng(5)
# rows of 37 values: groups of 8 (the vector loops) and a tail of 5 (expf), values from -110 to 110
X = np.concatenate([RNG.standard_normal((6, 37)) * 4, RNG.uniform(-110, 110, (2, 37))]).astype(np.float32)
G = RNG.standard_normal(X.shape).astype(np.float32)
MASK = np.where(RNG.random(X.shape) < 0.2, -np.inf, 0.0).astype(np.float32)
ROPE_X = (RNG.standard_normal((5, 3, 64)) * 8).astype(np.float32)  # ne [64, 3 heads, 5 positions]


def _f32(ctx: Context, v: np.ndarray) -> Tensor:
    t = ctx.new_tensor("f32", *reversed(v.shape))
    t.set(v)
    return t


def _soft_max(ctx: Context) -> Tensor:
    return O.soft_max(_f32(ctx, X[None]), _f32(ctx, MASK), 0.7)


def _rope(mode: int) -> Callable[[Context], Tensor]:
    def build(ctx: Context) -> Tensor:
        x = _f32(ctx, ROPE_X)
        pos = ctx.new_tensor("i32", 5)
        pos.set(np.array([0, 1, 7, 300, 4000], dtype=np.int32))
        return O.rope(x, pos, 64, mode, freq_base=100000.0)

    return build


BUILDS: dict[str, Callable[[Context], Tensor]] = {
    "soft_max": _soft_max,
    "silu": lambda ctx: O.silu(_f32(ctx, X)),
    "swiglu": lambda ctx: O.swiglu(_f32(ctx, X), _f32(ctx, G)),
    "rope_normal": _rope(ROPE_TYPE_NORMAL),
    "rope_neox": _rope(ROPE_TYPE_NEOX),
}


def _compute(backend: Backend, build: Callable[[Context], Tensor], level: int) -> np.ndarray:
    before = kernels.simd_level()
    try:
        kernels.set_simd_level(level)
        ctx = Context(4 << 20)
        out = build(ctx)
        backend.graph_compute(build_graph(out))
        return out.numpy().copy()
    finally:
        kernels.set_simd_level(0 if before == "portable" else -1)


@pytest.mark.parametrize("name", BUILDS)
def test_portable_and_simd_kernels_give_the_same_bits(cpu_backend: Backend, name: str) -> None:
    portable = _compute(cpu_backend, BUILDS[name], 0)
    simd = _compute(cpu_backend, BUILDS[name], -1)
    np.testing.assert_array_equal(simd.view(np.uint32), portable.view(np.uint32))


@pytest.mark.parametrize("level", [0, -1], ids=["portable", "best"])
def test_silu_exp_is_within_a_few_ulp(cpu_backend: Backend, level: int) -> None:
    got = _compute(cpu_backend, BUILDS["silu"], level)
    ok = np.abs(X) < 80  # away from the float range ends
    x = X[ok].astype(np.float64)
    want = x / (1.0 + np.exp(-x))
    ulp = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    assert np.all(np.abs(got[ok] - want) <= 4 * ulp)
    assert np.all(got[X < -89] == 0.0)  # e^-x overflows to inf: x / inf, as ggml
    assert np.all(got[X > 89] == X[X > 89])  # e^-x flushes to 0


@pytest.mark.parametrize("level", [0, -1], ids=["portable", "best"])
def test_soft_max_rows_sum_to_one_and_masked_entries_are_zero(cpu_backend: Backend, level: int) -> None:
    got = _compute(cpu_backend, BUILDS["soft_max"], level)
    w = X * np.float32(0.7) + MASK  # the kernel's float arguments, then exp and sum in double
    want = np.exp((w - w.max(axis=1, keepdims=True)).astype(np.float64))
    want /= want.sum(axis=1, keepdims=True)
    assert np.all(got[np.isinf(MASK)] == 0.0)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-37)
