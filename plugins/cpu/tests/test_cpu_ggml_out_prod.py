"""OUT_PROD (csrc/outprod.c, the packed GEMM) against ggml itself (the libggml-cpu of `make llama-cpp-ref`, through
ctypes) on the shapes that exercise its edges: tile tails in both output dimensions, a dst narrower than a tile
(computed as its transpose), several k blocks (K past the pack's 256 rows), broadcast batches, a transposed b
(MUL_MAT's backward hands OUT_PROD transpose(grad)), F16 and quantised a.

Each dst element is summed k by k from zero, one multiply-add per k, as ggml's vec_mad does; the AVX2 and AVX-512
kernels fuse it as ggml's AVX2 build does, so there the results are ggml's bit for bit. The portable kernels round
each product first: within a few ulp, checked by NMSE. Every case runs on the best level, on AVX2 where the CPU
has more, and on the portable kernels."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import pyggml.ops as O
from pyggml.backend.protocol import Backend
from pyggml.types import GGMLType
from pyggml_cpu import native
from pyggml_testing.ggml_ctypes import GgmlCtx, assert_close, run_pyggml

T = GGMLType
RNG = np.random.default_rng(2022)


@pytest.fixture(params=["best", "avx2+fma+f16c", "portable"])
def level(request: pytest.FixtureRequest) -> Iterator[str]:
    """The kernel level of the test (a level the CPU lacks falls back to its best), restored afterwards."""
    before = native.simd_level()
    got = native.set_simd_level(-1 if request.param == "best" else request.param)
    yield got
    native.set_simd_level(before)

SHAPES = [  # (m, n, K, batches of a, batches of b)
    (16, 6, 4, (1, 1), (1, 1)),
    (37, 11, 5, (1, 1), (1, 1)),
    (64, 64, 300, (1, 1), (1, 1)),
    (33, 13, 520, (1, 1), (1, 1)),
    (24, 7, 9, (2, 1), (4, 3)),
    (1, 1, 1, (1, 1), (1, 1)),
    (2, 70, 33, (1, 1), (1, 1)),  # fewer dst rows than a tile: computed as the transpose
    (5, 40, 270, (1, 2), (2, 2)),
]


@pytest.mark.parametrize(("m", "n", "k", "ab", "bb"), SHAPES)
@pytest.mark.parametrize("transposed_b", [False, True])
def test_out_prod_f32(cpu_backend: Backend, gg: GgmlCtx, level: str, m: int, n: int, k: int,
                      ab: tuple[int, int], bb: tuple[int, int], transposed_b: bool) -> None:
    a = RNG.standard_normal((ab[1], ab[0], k, m)).astype(np.float32)
    b = RNG.standard_normal((bb[1], bb[0], k, n)).astype(np.float32)
    shape = (bb[1], bb[0], n, m)
    if transposed_b:  # b given as its transpose's storage, read through a transposed view by both
        bt = np.ascontiguousarray(np.swapaxes(b, -1, -2))
        want = gg.run(gg.call("ggml_out_prod", gg.tensor(a, T.F32), gg.call("ggml_transpose", gg.tensor(bt, T.F32))),
                      shape)
        got = run_pyggml(cpu_backend, lambda mk: O.out_prod(mk(a, T.F32), O.transpose(mk(bt, T.F32))))
    else:
        want = gg.run(gg.call("ggml_out_prod", gg.tensor(a, T.F32), gg.tensor(b, T.F32)), shape)
        got = run_pyggml(cpu_backend, lambda mk: O.out_prod(mk(a, T.F32), mk(b, T.F32)))
    if level != "portable":
        np.testing.assert_array_equal(got, want)
    else:
        assert_close(got, want, 1e-12)


@pytest.mark.parametrize("t", [T.F16, T.Q8_0, T.Q4_K])
def test_out_prod_converted_a(cpu_backend: Backend, gg: GgmlCtx, level: str, t: GGMLType) -> None:
    """a of another type: rows converted to F32 (ggml's to-float), then the same sums as F32."""
    m, n, k = 256, 10, 40
    a = RNG.standard_normal((k, m)).astype(np.float32)
    b = RNG.standard_normal((k, n)).astype(np.float32)
    want = gg.run(gg.call("ggml_out_prod", gg.tensor(a, t), gg.tensor(b, T.F32)), (1, 1, n, m))
    got = run_pyggml(cpu_backend, lambda mk: O.out_prod(mk(a, t), mk(b, T.F32)))
    if level != "portable":
        np.testing.assert_array_equal(got, want)
    else:
        assert_close(got, want, 1e-12)
