"""Issue 21's first slice against ggml itself: EXPM1, XIELU, SWIGLU_OAI, SWIGLU_CLAMP and ADD_ID computed by the cpu
backend and by ggml's CPU backend (the libggml-cpu of `make llama-cpp-ref`, llama-cpp-python 0.3.36's sources,
driven through ctypes: ggml_init, the op's own constructor, ggml_graph_compute_with_ctx) on the same inputs.
Finite inputs only: at -inf pyggml gives the limits where ggml's formulas give NaN (docs/op-semantics.md)."""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import pyggml.ops as O
from pyggml.backend.protocol import Backend
from pyggml.context import Context
from pyggml.graph import build_graph
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_testing.llama_cpp_ref import load_ggml_cpu

T = GGMLType
P = ctypes.c_void_p


class _InitParams(ctypes.Structure):
    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", P), ("no_alloc", ctypes.c_bool)]


class Ggml:
    """A ggml context on the CPU: tensors from numpy arrays, ops by name, compute, results back."""

    def __init__(self, cpu: ctypes.CDLL) -> None:
        self.lib = cpu
        cpu.ggml_init.restype, cpu.ggml_init.argtypes = P, [_InitParams]
        cpu.ggml_get_data.restype, cpu.ggml_get_data.argtypes = P, [P]
        cpu.ggml_new_graph.restype, cpu.ggml_new_graph.argtypes = P, [P]
        cpu.ggml_build_forward_expand.argtypes = [P, P]
        cpu.ggml_graph_compute_with_ctx.argtypes = [P, P, ctypes.c_int]
        cpu.ggml_free.argtypes = [P]
        self.ctx = cpu.ggml_init(_InitParams(64 << 20, None, False))

    def tensor(self, x: np.ndarray, t: GGMLType) -> int:
        fn = self.lib.ggml_new_tensor_4d
        fn.restype, fn.argtypes = P, [P, ctypes.c_int, *[ctypes.c_int64] * 4]
        ne = (*x.shape[::-1], 1, 1, 1)[:4]
        g = fn(self.ctx, int(t), *ne)
        raw = np.ascontiguousarray(x.astype(t.traits.np_dtype))
        ctypes.memmove(self.lib.ggml_get_data(g), raw.ctypes.data, raw.nbytes)
        return int(g)

    def call(self, name: str, *args: Any) -> int:
        fn = getattr(self.lib, name)
        fn.restype = P
        fn.argtypes = [P] + [ctypes.c_float if isinstance(a, float) else P for a in args]
        return int(fn(self.ctx, *args))

    def compute(self, g: int, shape: tuple[int, ...], t: GGMLType) -> np.ndarray:
        gf = self.lib.ggml_new_graph(self.ctx)
        self.lib.ggml_build_forward_expand(gf, g)
        self.lib.ggml_graph_compute_with_ctx(self.ctx, gf, 2)
        out = np.empty(shape, t.traits.np_dtype)
        ctypes.memmove(out.ctypes.data, self.lib.ggml_get_data(g), out.nbytes)
        return out.astype(np.float64)

    def close(self) -> None:
        self.lib.ggml_free(self.ctx)


@pytest.fixture(scope="module")
def ggml_cpu() -> ctypes.CDLL:
    return load_ggml_cpu()


@pytest.fixture
def gg(ggml_cpu: ctypes.CDLL) -> Iterator[Ggml]:
    g = Ggml(ggml_cpu)
    yield g
    g.close()


def _ours(backend: Backend, build: Callable[[Callable[[np.ndarray, GGMLType], Tensor]], Tensor]) -> np.ndarray:
    ctx = Context(16 << 20)

    def tensor(x: np.ndarray, t: GGMLType) -> Tensor:
        out = ctx.new_tensor(t, *x.shape[::-1])
        out.set(x)
        return out

    node = build(tensor)
    backend.graph_compute(build_graph(node))
    return np.asarray(node.numpy(), np.float64)


def _nmse(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.sum((a - b) ** 2) / max(np.sum(b**2), 1e-300))


RNG = np.random.default_rng(21)
X = (RNG.standard_normal((3, 5, 64)) * 4).astype(np.float32)
Y = (RNG.standard_normal((3, 5, 64)) * 4).astype(np.float32)


@pytest.mark.parametrize("t", [T.F32, T.F16])
def test_expm1_and_xielu(cpu_backend: Backend, gg: Ggml, t: GGMLType) -> None:
    x = X / 2  # e^x within F16's range
    want = gg.compute(gg.call("ggml_expm1", gg.tensor(x, t)), x.shape, t)
    got = _ours(cpu_backend, lambda mk: O.expm1(mk(x, t)))
    assert _nmse(got.reshape(x.shape), want) < 1e-12
    for prm in ((4.0, 20.0, 0.5, 1e-7), (0.8, 0.8, 0.5, -1e-6)):
        want = gg.compute(gg.call("ggml_xielu", gg.tensor(X, t), *prm), X.shape, t)
        got = _ours(cpu_backend, lambda mk, prm=prm: O.xielu(mk(X, t), *prm))
        assert _nmse(got.reshape(X.shape), want) < (1e-12 if t == T.F32 else 1e-9), prm  # F16: an ulp


@pytest.mark.parametrize(("alpha", "limit"), [(1.702, 7.0), (0.5, 2.0)])
def test_swiglu_oai_and_clamp(cpu_backend: Backend, gg: Ggml, alpha: float, limit: float) -> None:
    want = gg.compute(gg.call("ggml_swiglu_oai", gg.tensor(X, T.F32), gg.tensor(Y, T.F32), alpha, limit),
                      X.shape, T.F32)
    got = _ours(cpu_backend, lambda mk: O.swiglu_oai(mk(X, T.F32), mk(Y, T.F32), alpha, limit))
    assert _nmse(got.reshape(X.shape), want) < 1e-12
    for t in (T.F32, T.F16):
        want = gg.compute(gg.call("ggml_swiglu_clamp", gg.tensor(X, t), gg.tensor(Y, t), limit), X.shape, t)
        got = _ours(cpu_backend, lambda mk, t=t: O.swiglu_clamp(mk(X, t), mk(Y, t), limit))
        assert _nmse(got.reshape(X.shape), want) < 1e-12, t


def test_add_id(cpu_backend: Backend, gg: Ggml) -> None:
    a = RNG.standard_normal((7, 4, 129)).astype(np.float32)  # [n_embd 129, n_used 4, n_tokens 7]
    b = RNG.standard_normal((8, 129)).astype(np.float32)  # 8 experts
    ids = np.stack([RNG.permutation(8)[:4] for _ in range(7)]).astype(np.int32)
    want = gg.compute(gg.call("ggml_add_id", gg.tensor(a, T.F32), gg.tensor(b, T.F32), gg.tensor(ids, T.I32)),
                      a.shape, T.F32)
    got = _ours(cpu_backend, lambda mk: O.add_id(mk(a, T.F32), mk(b, T.F32), mk(ids, T.I32)))
    np.testing.assert_array_equal(got.reshape(a.shape), want)
