"""The spatial ops against ggml itself: POOL_1D, POOL_2D, UPSCALE (every mode and flag), PAD_REFLECT_1D, ROLL,
TIMESTEP_EMBEDDING, WIN_PART, WIN_UNPART, GET_REL_POS and ADD_REL_POS computed by the cpu backend and by ggml's CPU
backend (the libggml-cpu of `make llama-cpp-ref`, llama-cpp-python 0.3.36's sources, through
pyggml_testing.ggml_ctypes: the op's own ggml constructor, then ggml_graph_compute_with_ctx) on the same contiguous
inputs. spatial.c keeps ggml's float32 steps, so the results are ggml's bit for bit, but for TIMESTEP_EMBEDDING
(libm's cosf/sinf against ggml's build) and the filtering UPSCALE modes (the compilers contract the weighted sums
into FMAs differently): ulps."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import pyggml.ops as O
from pyggml.backend.protocol import Backend
from pyggml.ops import PoolOp, ScaleMode
from pyggml.ops.spatial import SCALE_FLAG_ALIGN_CORNERS, SCALE_FLAG_ANTIALIAS
from pyggml.types import GGMLType
from pyggml_testing.ggml_ctypes import GgmlCtx, nmse, run_pyggml

T = GGMLType
I64, U32 = ctypes.c_int64, ctypes.c_uint32


RNG = np.random.default_rng(70)


def _x(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("t", [T.F32, T.F16])
@pytest.mark.parametrize("pool", list(PoolOp))
@pytest.mark.parametrize(("k", "s", "p"), [(3, 2, 1), (2, 3, 3), (5, 1, 0)])
def test_pool_1d(cpu_backend: Backend, gg: GgmlCtx, t: GGMLType, pool: PoolOp, k: int, s: int, p: int) -> None:
    x = _x(2, 3, 37)
    g = gg.call("ggml_pool_1d", gg.tensor(x, t), pool.value, k, s, p)
    got = run_pyggml(cpu_backend, lambda mk: O.pool_1d(mk(x, t), pool, k, s, p))
    np.testing.assert_array_equal(got, gg.run(g, got.shape))


@pytest.mark.parametrize("t", [T.F32, T.F16])
@pytest.mark.parametrize("pool", list(PoolOp))
@pytest.mark.parametrize("kp", [(3, 3, 1, 1, 0, 0), (3, 2, 2, 1, 1, 1), (2, 2, 2, 2, 0, 0), (1, 3, 2, 3, 0, 1)])
def test_pool_2d(cpu_backend: Backend, gg: GgmlCtx, t: GGMLType, pool: PoolOp, kp: tuple[int, ...]) -> None:
    x = _x(2, 3, 13, 17)
    k0, k1, s0, s1, p0, p1 = kp
    g = gg.call("ggml_pool_2d", gg.tensor(x, t), pool.value, k0, k1, s0, s1, float(p0), float(p1))
    got = run_pyggml(cpu_backend, lambda mk: O.pool_2d(mk(x, t), pool, *kp))
    np.testing.assert_array_equal(got, gg.run(g, got.shape))


AC, AA = SCALE_FLAG_ALIGN_CORNERS, SCALE_FLAG_ANTIALIAS


@pytest.mark.parametrize("mode", [ScaleMode.NEAREST, ScaleMode.BILINEAR, ScaleMode.BICUBIC, ScaleMode.BILINEAR | AA,
                                  ScaleMode.NEAREST | AC, ScaleMode.BILINEAR | AC, ScaleMode.BICUBIC | AC,
                                  ScaleMode.BILINEAR | AA | AC])
@pytest.mark.parametrize(("src", "dst"), [((2, 3, 5, 7), (2, 3, 10, 14)), ((11, 7, 5, 2), (13, 11, 7, 5)),
                                          ((2, 3, 24, 30), (2, 3, 7, 11)), ((2, 3, 4, 1), (2, 3, 8, 1))])
def test_upscale(cpu_backend: Backend, gg: GgmlCtx, mode: int, src: tuple[int, ...], dst: tuple[int, ...]) -> None:
    x = _x(*src)
    ne = dst[::-1]
    g = gg.call("ggml_interpolate", gg.tensor(x, T.F32), *(I64(n) for n in ne), U32(int(mode)))
    got = run_pyggml(cpu_backend, lambda mk: O.interpolate(mk(x, T.F32), ne[0], ne[1], ne[2], ne[3], mode))
    want = gg.run(g, dst)
    if mode & 0xFF == ScaleMode.NEAREST:
        np.testing.assert_array_equal(got, want)  # the same pixels picked
    else:  # the same taps and weights; the compilers fuse the weighted sums into FMAs differently (ulps)
        assert nmse(got, want) < 1e-11


@pytest.mark.parametrize(("shape", "p0", "p1"), [((2, 34, 512), 10, 9), ((1, 3, 7), 6, 0), ((4, 80, 300), 255, 3)])
def test_pad_reflect_1d(cpu_backend: Backend, gg: GgmlCtx, shape: tuple[int, ...], p0: int, p1: int) -> None:
    x = _x(*shape)
    g = gg.call("ggml_pad_reflect_1d", gg.tensor(x, T.F32), p0, p1)
    got = run_pyggml(cpu_backend, lambda mk: O.pad_reflect_1d(mk(x, T.F32), p0, p1))
    np.testing.assert_array_equal(got, gg.run(g, got.shape))


@pytest.mark.parametrize("shifts", [(3, -2, 1, -1), (-9, 4, 0, 2), (0, 0, -3, 0)])
def test_roll(cpu_backend: Backend, gg: GgmlCtx, shifts: tuple[int, int, int, int]) -> None:
    x = _x(3, 4, 5, 10)
    g = gg.call("ggml_roll", gg.tensor(x, T.F32), *shifts)
    got = run_pyggml(cpu_backend, lambda mk: O.roll(mk(x, T.F32), *shifts))
    np.testing.assert_array_equal(got, gg.run(g, got.shape))


@pytest.mark.parametrize(("n", "dim", "max_period"), [(2, 320, 10000), (9, 255, 10000), (4, 7, 100)])
def test_timestep_embedding(cpu_backend: Backend, gg: GgmlCtx, n: int, dim: int, max_period: int) -> None:
    t = (RNG.random(n) * 1000).astype(np.float32)
    g = gg.call("ggml_timestep_embedding", gg.tensor(t, T.F32), dim, max_period)
    got = run_pyggml(cpu_backend, lambda mk: O.timestep_embedding(mk(t, T.F32), dim, max_period))
    np.testing.assert_allclose(got, gg.run(g, got.shape), rtol=0, atol=2e-6)


@pytest.mark.parametrize(("shape", "w"), [((14, 14, 8), 7), ((13, 15, 8), 7), ((2, 3, 4), 5)])
def test_win_part_unpart(cpu_backend: Backend, gg: GgmlCtx, shape: tuple[int, int, int], w: int) -> None:
    x = _x(*shape)  # [H, W, C]
    h, wd, c = shape
    g = gg.call("ggml_win_part", gg.tensor(x, T.F32), w)
    n = -(-h // w) * -(-wd // w)
    got = run_pyggml(cpu_backend, lambda mk: O.win_part(mk(x, T.F32), w))
    want = gg.run(g, (n, w, w, c))
    np.testing.assert_array_equal(got, want)
    g2 = gg.call("ggml_win_unpart", gg.tensor(want.astype(np.float32), T.F32), wd, h, w)
    back = run_pyggml(cpu_backend, lambda mk: O.win_unpart(mk(want.astype(np.float32), T.F32), wd, h, w))
    np.testing.assert_array_equal(back, gg.run(g2, back.shape))


@pytest.mark.parametrize(("c", "size"), [(4, 5), (64, 14)])
def test_get_rel_pos(cpu_backend: Backend, gg: GgmlCtx, c: int, size: int) -> None:
    a = _x(2 * size - 1, c)
    g = gg.call("ggml_get_rel_pos", gg.tensor(a, T.F16), size, size)
    got = run_pyggml(cpu_backend, lambda mk: O.get_rel_pos(mk(a, T.F16), size, size))
    np.testing.assert_array_equal(got, gg.run(g, got.shape, T.F16))


@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize(("k", "qw", "qh", "n"), [(14, 14, 14, 2), (5, 4, 3, 3)])
def test_add_rel_pos(cpu_backend: Backend, gg: GgmlCtx, inplace: bool, k: int, qw: int, qh: int, n: int) -> None:
    a, pw, ph = _x(n, qh * qw, k * k), _x(n, qh, qw, k), _x(n, qh, qw, k)
    name = "ggml_add_rel_pos_inplace" if inplace else "ggml_add_rel_pos"
    g = gg.call(name, gg.tensor(a, T.F32), gg.tensor(pw, T.F32), gg.tensor(ph, T.F32))
    got = run_pyggml(cpu_backend, lambda mk: O.add_rel_pos(mk(a, T.F32), mk(pw, T.F32), mk(ph, T.F32), inplace=inplace))
    np.testing.assert_array_equal(got, gg.run(g, got.shape))
