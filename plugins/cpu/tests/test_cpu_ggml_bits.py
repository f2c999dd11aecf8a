"""MUL_MAT of every quantised weight type gives, on each x86 kernel level, the bits of ggml's CPU backend built for
AVX2 (the libggml-cpu `make llama-cpp-ref` builds from llama-cpp-python 0.3.36's sources for generic x86-64, or
that package's own build; it exports ggml's row quantisers and vec_dot kernels): each output equals
ggml_vec_dot_<type>_<partner> of the weight row and the activation column quantised by ggml's quantize_row_q8_0 /
q8_1 / q8_K. That is ggml's matmul for one activation column and, on its stock path, for any number (this
llama.cpp build hands K-quant matmuls of 8 or more columns to a tiled kernel of its own, whose order is not
followed)."""

from __future__ import annotations

import ctypes
from collections.abc import Iterator

import numpy as np
import pytest

import pyggml.ops as O
from pyggml import quants
from pyggml.backend.protocol import Backend
from pyggml.context import Context
from pyggml.graph import build_graph
from pyggml.types import GGMLType
from pyggml_cpu import native
from pyggml_testing.llama_cpp_ref import ggml_library, load_ggml_cpu

# weight type -> its activations' type (ggml's vec_dot_type)
PARTNER = {"Q4_0": "q8_0", "Q4_1": "q8_1", "Q5_0": "q8_0", "Q5_1": "q8_1", "Q8_0": "q8_0",
           "Q2_K": "q8_K", "Q3_K": "q8_K", "Q4_K": "q8_K", "Q5_K": "q8_K", "Q6_K": "q8_K"}
X86_LEVELS = [lv for lv in sorted(native.SIMD_LEVELS) if native.SIMD_LEVELS[lv].startswith("avx")]


def _ggml_cpu() -> ctypes.CDLL:
    """ggml's AVX2 libggml-cpu (with libggml-base loaded first), or a skip saying why not."""
    cpu = load_ggml_cpu()
    if cpu.ggml_cpu_has_avx512() or not cpu.ggml_cpu_has_avx2():
        pytest.skip(f"{ggml_library('cpu')} is not ggml's AVX2 build (the order matched is AVX2's)")
    return cpu


@pytest.fixture(scope="module")
def ggml() -> ctypes.CDLL:
    return _ggml_cpu()


@pytest.fixture(params=X86_LEVELS, ids=lambda lv: native.SIMD_LEVELS[lv])
def level(request: pytest.FixtureRequest) -> Iterator[int]:
    before = native.simd_level()
    try:
        if native.set_simd_level(request.param) != native.SIMD_LEVELS[request.param]:
            pytest.skip(f"this CPU has no {native.SIMD_LEVELS[request.param]}")
        yield request.param
    finally:
        native.set_simd_level(0 if before == "portable" else -1)


def _quantize_rows(ggml: ctypes.CDLL, partner: str, x: np.ndarray) -> np.ndarray:
    """ggml's quantize_row_<partner> of each row of x -> [rows, row bytes]."""
    t = GGMLType[partner.upper()]
    out = np.zeros((x.shape[0], x.shape[1] // t.traits.blck_size * t.traits.type_size), np.uint8)
    fn = getattr(ggml, f"quantize_row_{partner}")
    for r in range(x.shape[0]):
        row = np.ascontiguousarray(x[r], np.float32)
        fn(ctypes.c_void_p(row.ctypes.data), ctypes.c_void_p(out[r].ctypes.data), ctypes.c_int64(x.shape[1]))
    return out


def _ggml_matmul(ggml: ctypes.CDLL, t: str, w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """x @ w.T as ggml's vec_dot computes each output; w: raw weight rows [m, row bytes]."""
    yq = _quantize_rows(ggml, PARTNER[t], x)
    dot = getattr(ggml, f"ggml_vec_dot_{t.lower().replace('_k', '_K')}_{PARTNER[t]}")
    out = np.zeros((x.shape[0], w.shape[0]), np.float32)
    s = ctypes.c_float()
    for c in range(x.shape[0]):
        for r in range(w.shape[0]):
            dot(ctypes.c_int(x.shape[1]), ctypes.byref(s), ctypes.c_size_t(0), ctypes.c_void_p(w[r].ctypes.data),
                ctypes.c_size_t(0), ctypes.c_void_p(yq[c].ctypes.data), ctypes.c_size_t(0), ctypes.c_int(1))
            out[c, r] = s.value
    return out


def _ours(backend: Backend, t: GGMLType, w: np.ndarray, k: int, x: np.ndarray) -> np.ndarray:
    ctx = Context(w.nbytes + x.nbytes * 2 + (4 << 20))
    wt = ctx.new_tensor(t, k, w.shape[0])
    assert wt.buffer is not None
    wt.buffer.set_tensor(wt, w.reshape(-1))
    xt = ctx.new_tensor("f32", k, x.shape[0])
    xt.set(x)
    out = O.mul_mat(wt, xt)
    backend.graph_compute(build_graph(out))
    return out.numpy().reshape(x.shape[0], w.shape[0]).copy()


@pytest.mark.parametrize("t", PARTNER)
def test_mul_mat_gives_ggml_avx2_bits(ggml: ctypes.CDLL, cpu_backend: Backend, level: int, t: str) -> None:
    """One, two, three and nine activation columns (the one-column, two-column, eight-row and tile kernels and their
    remainders) against 21 weight rows of 512 values, activations of very different sizes per column."""
    qt = GGMLType[t]
    rng = np.random.default_rng(len(t) * 31 + int(qt))
    k, m = 512, 21
    w = quants.quantize(rng.standard_normal((m, k)).astype(np.float32), qt).reshape(m, -1)
    for n in (1, 2, 3, 9):
        x = (rng.standard_normal((n, k)) * rng.uniform(0.01, 100, (n, 1))).astype(np.float32)
        want = _ggml_matmul(ggml, t, w, x)
        got = _ours(cpu_backend, qt, w, k, x)
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32), err_msg=f"{t} n={n}")


def test_q8_K_activations_are_ggml_bytes(ggml: ctypes.CDLL, level: int) -> None:
    """The K-quants' activation blocks (Q8_K) are ggml's quantize_row_q8_K bytes at each x86 level (dot_impl.h's
    text compiled for it), zero rows and ties of magnitude included."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((40, 512)) * rng.uniform(1e-3, 1e3, (40, 1))).astype(np.float32)
    x[0] = 0.0
    x[1] = np.round(x[1] * 4) / 4
    x[2] = np.clip(x[2] / np.abs(x[2]).max(), -0.9, 0.9)  # the largest magnitude twice, opposite signs: the first
    x[2, [37, 200]] = -1.0, 1.0                            # one's sign sets the scale's (in the first block)
    x[3] = np.clip(x[3] / np.abs(x[3]).max(), -0.9, 0.9)
    x[3, [260, 500]] = 1.0, -1.0                           # in the second block
    np.testing.assert_array_equal(native.quantize(x, GGMLType.Q8_K).reshape(40, -1),
                                  _quantize_rows(ggml, "q8_K", x))
