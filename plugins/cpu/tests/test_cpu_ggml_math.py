"""SOFT_MAX, SILU, SWIGLU and ROPE follow ggml's CPU arithmetic (the vectorised exp of ew.c, the fused ROPE
products of norm.c): the portable and the SIMD kernels give the same bits, and the exp stays within a few ulp of
the exact value, with ggml's flush to 0 and to inf at the ends. F16 prompt matmuls give, on every kernel level,
the bits of a numpy model of llamafile tinyBLAS's summation order, and F16 mat-vecs (and the matmuls ggml leaves
to ggml_vec_dot_f16) those of a model of that function's order."""

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
from pyggml_cpu import native

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
    before = native.simd_level()
    try:
        native.set_simd_level(level)
        ctx = Context(4 << 20)
        out = build(ctx)
        backend.graph_compute(build_graph(out))
        return out.numpy().copy()
    finally:
        native.set_simd_level(0 if before == "portable" else -1)


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


def _tinyblas_f16(w: np.ndarray, a: np.ndarray) -> np.ndarray:
    """llamafile tinyBLAS's F16 matmul sums in numpy: w [..., m, k] halves, a [..., n, k] activations (rounded to
    F16 first, as ggml converts them) -> [..., n, m]. Per output one 8-lane float32 accumulator over k in order (a
    product of two halves is exact in float32, so acc + x * y rounds once, as the FMA does), lanes l and l + 4
    added, then (0 + 2) + (1 + 3)."""
    x = w.astype(np.float32)[..., None, :, :]
    y = a.astype(np.float16).astype(np.float32)[..., :, None, :]
    acc = np.zeros((*np.broadcast_shapes(x.shape[:-1], y.shape[:-1]), 8), np.float32)
    for i in range(0, w.shape[-1], 8):
        acc += x[..., i:i + 8] * y[..., i:i + 8]
    t = acc[..., :4] + acc[..., 4:]
    return (t[..., 0] + t[..., 2]) + (t[..., 1] + t[..., 3])


def _f16_matmul(w: np.ndarray, a: np.ndarray, strided: bool) -> Callable[[Context], Tensor]:
    """MUL_MAT of the F16 weights w [b3, b2, m, k] by a; strided: w laid out [b3, m, b2, k] in memory and permuted
    back, so its rows are b2 * k halves apart."""

    def build(ctx: Context) -> Tensor:
        host = np.ascontiguousarray(w.transpose(0, 2, 1, 3)) if strided else w
        wt = ctx.new_tensor("f16", *reversed(host.shape))
        wt.set(host)
        return O.mul_mat(O.permute(wt, 0, 2, 1, 3) if strided else wt, _f32(ctx, a))

    return build


def _level_available(level: int) -> bool:
    before = native.simd_level()
    try:
        return native.set_simd_level(level) == native.SIMD_LEVELS[level]
    finally:
        native.set_simd_level(0 if before == "portable" else -1)


F16Shape = tuple[int, int, int, tuple[int, int], tuple[int, int]]
# (k, m, n, weight batch, activation batch): k % 8 == 0, m % 4 == 0 and n >= 2 take tinyBLAS's order in ggml;
# n from 2 to 10 and 17, 33 cross the register tiles of every level (4 x 3 AVX2, 4 x 8 AVX-512) and their
# remainders; AVX-512 takes k <= 256 as panels of 16 rows against 512 columns that run across the heads sharing
# a matrix (k = 256, 264 around that bound; 2 x 300 columns cross a chunk inside a head); the last case broadcasts
# the weights (ne12 = 3 * ne02, ne13 = 2 * ne03)
F16_SHAPES: list[F16Shape] = [(72, 20, n, (1, 2), (1, 2)) for n in range(2, 11)] + [
    (136, 36, 17, (1, 2), (1, 2)), (64, 4, 33, (1, 1), (1, 1)), (256, 20, 7, (1, 1), (1, 1)),
    (264, 8, 3, (1, 1), (1, 1)), (64, 20, 300, (1, 2), (1, 4)), (40, 12, 5, (1, 2), (2, 6)),
]


@pytest.mark.parametrize("level", sorted(native.SIMD_LEVELS))
@pytest.mark.parametrize("shape", F16_SHAPES, ids=lambda s: "k{}_m{}_n{}_b{}x{}".format(*s[:3], *s[4]))
@pytest.mark.parametrize("strided", [False, True], ids=["contiguous", "strided"])
def test_f16_prompt_matmul_sums_in_tinyblas_order(cpu_backend: Backend, level: int, strided: bool,
                                                  shape: F16Shape) -> None:
    """Every output of an F16 x F32 prompt matmul has the bits of one 8-lane FMA chain over k, however many
    outputs a level's kernel computes at once."""
    if not _level_available(level):
        pytest.skip(f"this CPU has no {native.SIMD_LEVELS[level]}")
    k, m, n, wb, ab = shape
    rng = np.random.default_rng(k * n)
    w = rng.standard_normal((*wb, m, k)).astype(np.float16)
    a = rng.standard_normal((*ab, n, k)).astype(np.float32)
    wr = np.repeat(np.repeat(w, ab[0] // wb[0], 0), ab[1] // wb[1], 1)  # ggml's broadcast: i02 = i12 / r2
    want = _tinyblas_f16(wr, a)
    # the data is such that the order matters: a float64 product rounded once differs somewhere
    wide = (a.astype(np.float16).astype(np.float64) @ np.swapaxes(wr, -1, -2).astype(np.float64)).astype(np.float32)
    assert np.any(want != wide)
    got = _compute(cpu_backend, _f16_matmul(w, a, strided), level).reshape(want.shape)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def _vec_dot_f16(w: np.ndarray, a: np.ndarray) -> np.ndarray:
    """ggml_vec_dot_f16's sums in numpy, shapes as _tinyblas_f16: four 8-lane float32 accumulators over the first
    k - k % 32 values in steps of 32 (acc + x * y rounds once, as the FMA does), (a0 + a2) + (a1 + a3), lanes l and
    l + 4 added, then (0 + 1) + (2 + 3); the k % 32 tail's float32 products added in double."""
    x = w.astype(np.float32)[..., None, :, :]
    y = a.astype(np.float16).astype(np.float32)[..., :, None, :]
    k = w.shape[-1]
    kp = k - k % 32
    acc = np.zeros((*np.broadcast_shapes(x.shape[:-1], y.shape[:-1]), 4, 8), np.float32)
    for i in range(0, kp, 32):
        acc += (x[..., i:i + 32] * y[..., i:i + 32]).reshape(acc.shape)
    v = (acc[..., 0, :] + acc[..., 2, :]) + (acc[..., 1, :] + acc[..., 3, :])
    t = v[..., :4] + v[..., 4:]
    s = ((t[..., 0] + t[..., 1]) + (t[..., 2] + t[..., 3])).astype(np.float64)
    for i in range(kp, k):
        s += (x[..., i] * y[..., i]).astype(np.float64)
    return s.astype(np.float32)


# (k, m, n, weight batch, activation batch): k around the 32-value steps and their tails; m past the rows that
# the levels' kernels take per pass (3 on AVX2, 8 on AVX-512) and the 16-row work units, with every remainder; n = 1
# (mat-vec), or a matmul ggml gives to ggml_vec_dot_f16 (k % 8 != 0 or m % 4 != 0); broadcast weights last (decode
# attention: short rows converted once for the columns; long ones in chunks of 256 values, 8 columns at a time)
F16_VEC_SHAPES: list[F16Shape] = [(k, 41, 1, (1, 2), (1, 2)) for k in (1, 31, 33, 64, 100, 1031)] + [
    (96, 23, 1, (1, 1), (1, 1)), (36, 19, 3, (1, 2), (1, 2)), (64, 18, 2, (1, 1), (1, 1)),
    (130, 17, 1, (1, 2), (2, 6)), (1100, 19, 1, (1, 2), (2, 6)), (2100, 9, 1, (1, 1), (1, 10)),
]


@pytest.mark.parametrize("level", sorted(native.SIMD_LEVELS))
@pytest.mark.parametrize("shape", F16_VEC_SHAPES, ids=lambda s: "k{}_m{}_n{}_b{}x{}".format(*s[:3], *s[4]))
@pytest.mark.parametrize("strided", [False, True], ids=["contiguous", "strided"])
def test_f16_mat_vec_sums_in_ggml_vec_dot_f16_order(cpu_backend: Backend, level: int, strided: bool,
                                                    shape: F16Shape) -> None:
    """Every output of an F16 x F32 mat-vec has the bits of ggml_vec_dot_f16 for its row, however many weight rows
    a level's kernel takes per pass."""
    if not _level_available(level):
        pytest.skip(f"this CPU has no {native.SIMD_LEVELS[level]}")
    k, m, n, wb, ab = shape
    rng = np.random.default_rng(k * m + n)
    w = rng.standard_normal((*wb, m, k)).astype(np.float16)
    a = rng.standard_normal((*ab, n, k)).astype(np.float32)
    wr = np.repeat(np.repeat(w, ab[0] // wb[0], 0), ab[1] // wb[1], 1)
    want = _vec_dot_f16(wr, a)
    if k >= 32:  # the data is such that the order matters (below 32 values, all is summed in double)
        wide = (a.astype(np.float16).astype(np.float64) @ np.swapaxes(wr, -1, -2).astype(np.float64))
        assert np.any(want != wide.astype(np.float32))
    got = _compute(cpu_backend, _f16_matmul(w, a, strided), level).reshape(want.shape)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
