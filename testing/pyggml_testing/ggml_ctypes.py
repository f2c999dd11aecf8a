"""Driving ggml's own CPU library (`load_ggml_cpu`) through ctypes: a context, tensors from numpy arrays, any ggml
constructor by name with typed scalar arguments, a graph built once and computed as often as wanted, results back
as numpy arrays; and the pyggml side of the same comparison (the op built on leaves from numpy, computed on a backend,
read back the same way) with the error measure the op tests judge agreement by. The op tests that compare the cpu
plugin with ggml (their fixtures are in plugins/cpu/tests/conftest.py) and the benchmarks that time both use it, so
that each of them holds only its cases."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from pyggml.backend.protocol import Backend
from pyggml.context import Context
from pyggml.graph import Graph, build_graph
from pyggml.quants import quantize
from pyggml.tensor import Tensor
from pyggml.types import GGMLType

P = ctypes.c_void_p
Array = npt.NDArray[np.float64]
Make = Callable[[npt.NDArray[Any], GGMLType], Tensor]
"""The pyggml side's leaf maker: a numpy array and a type -> a tensor holding it (what GgmlCtx.tensor is for ggml)."""
Build = Callable[[Make], Tensor | tuple[Tensor, ...]]


class _InitParams(ctypes.Structure):
    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", P), ("no_alloc", ctypes.c_bool)]


class CPlan(ctypes.Structure):
    """struct ggml_cplan (ggml-cpu.h)."""

    _fields_ = [("work_size", ctypes.c_size_t), ("work_data", P), ("n_threads", ctypes.c_int), ("threadpool", P),
                ("abort_callback", P), ("abort_callback_data", P), ("use_ref", ctypes.c_bool)]


class Planned:
    """A graph planned once for n threads with its own work buffer: compute() runs it without the per-call work
    allocation from the context that ggml_graph_compute_with_ctx makes (a benchmark repeats the graph)."""

    def __init__(self, lib: ctypes.CDLL, gf: P, n_threads: int) -> None:
        lib.ggml_graph_plan.restype, lib.ggml_graph_plan.argtypes = CPlan, [P, ctypes.c_int, P]
        lib.ggml_graph_compute.restype, lib.ggml_graph_compute.argtypes = ctypes.c_int, [P, ctypes.POINTER(CPlan)]
        self.lib, self.gf = lib, gf
        self.cplan = lib.ggml_graph_plan(gf, n_threads, None)
        self.work = ctypes.create_string_buffer(max(int(self.cplan.work_size), 1))
        self.cplan.work_data = ctypes.cast(self.work, P)

    def compute(self) -> None:
        status = self.lib.ggml_graph_compute(self.gf, ctypes.byref(self.cplan))
        if status != 0:
            raise RuntimeError(f"ggml_graph_compute returned status {status}")


def _argtype(a: Any) -> Any:
    """ctypes type of one constructor argument: tensors are c_void_p, explicit ctypes scalars (c_int64 for
    ggml's int64_t parameters) keep their type, bool is C bool, int is C int, float is C float."""
    if isinstance(a, ctypes._SimpleCData):
        return type(a)
    if isinstance(a, bool):
        return ctypes.c_bool
    if isinstance(a, int):
        return ctypes.c_int
    if isinstance(a, float):
        return ctypes.c_float
    raise TypeError(f"no ctypes type for {a!r}")


class GgmlCtx:
    """One ggml context (mem_size bytes, allocating) on a loaded libggml-cpu."""

    def __init__(self, cpu: ctypes.CDLL, mem_size: int = 256 << 20) -> None:
        self.lib = cpu
        cpu.ggml_init.restype, cpu.ggml_init.argtypes = P, [_InitParams]
        cpu.ggml_get_data.restype, cpu.ggml_get_data.argtypes = P, [P]
        cpu.ggml_new_graph.restype, cpu.ggml_new_graph.argtypes = P, [P]
        cpu.ggml_build_forward_expand.argtypes = [P, P]
        cpu.ggml_graph_compute_with_ctx.argtypes = [P, P, ctypes.c_int]
        cpu.ggml_free.argtypes = [P]
        self.ctx = cpu.ggml_init(_InitParams(mem_size, None, False))
        if not self.ctx:
            raise MemoryError(f"ggml_init of {mem_size} bytes failed")

    def tensor(self, x: npt.NDArray[Any], t: GGMLType) -> P:
        """A 4-D ggml tensor of type t holding x (numpy order: ne is x.shape reversed); a block type gets x's rows
        quantised by pyggml.quants, the blocks a pyggml tensor of that type gets from the same values."""
        fn = self.lib.ggml_new_tensor_4d
        fn.restype, fn.argtypes = P, [P, ctypes.c_int, *[ctypes.c_int64] * 4]
        ne = (*x.shape[::-1], 1, 1, 1, 1)[:4]
        g = P(fn(self.ctx, int(t), *ne))
        raw = quantize(x, t) if t.traits.is_quantized else np.ascontiguousarray(x.astype(t.traits.np_dtype))
        ctypes.memmove(self.lib.ggml_get_data(g), raw.ctypes.data, raw.nbytes)
        return g

    def param(self, x: npt.NDArray[Any], t: GGMLType = GGMLType.F32) -> P:
        """tensor(x, t) marked trainable (ggml_set_param), as the optimiser steps want their parameter."""
        g = self.tensor(x, t)
        self.lib.ggml_set_param.argtypes = [P]
        self.lib.ggml_set_param(g)
        return g

    def call(self, name: str, *args: Any) -> P:
        """ggml_<name>(ctx, *args) -> the tensor it returns."""
        fn = getattr(self.lib, name)
        fn.restype = P
        fn.argtypes = [P, *(P if isinstance(a, P) else _argtype(a) for a in args)]
        return P(fn(self.ctx, *args))

    def graph(self, out: P) -> P:
        gf = P(self.lib.ggml_new_graph(self.ctx))
        self.lib.ggml_build_forward_expand(gf, out)
        return gf

    def compute(self, gf: P, n_threads: int = 2) -> None:
        self.lib.ggml_graph_compute_with_ctx(self.ctx, gf, n_threads)

    def planned(self, gf: P, n_threads: int = 2) -> Planned:
        return Planned(self.lib, gf, n_threads)

    def read(self, g: P, shape: tuple[int, ...], t: GGMLType) -> npt.NDArray[np.float64]:
        """g's data (contiguous, type t) as float64 of the numpy-order shape."""
        out = np.empty(shape, t.traits.np_dtype)
        ctypes.memmove(out.ctypes.data, self.lib.ggml_get_data(g), out.nbytes)
        return out.astype(np.float64)

    def run(self, out: P, shape: tuple[int, ...], t: GGMLType = GGMLType.F32, n_threads: int = 2
            ) -> npt.NDArray[np.float64]:
        """Build out's graph, compute it, read it back."""
        self.compute(self.graph(out), n_threads)
        return self.read(out, shape, t)

    def close(self) -> None:
        if self.ctx:
            self.lib.ggml_free(self.ctx)
            self.ctx = None


def pyggml_graph(build: Build, mem_size: int = 64 << 20) -> tuple[Graph, tuple[Tensor, ...]]:
    """The op built with pyggml's constructors: `build` gets a leaf maker over a fresh context of mem_size bytes
    and returns the tensor (or tensors) to compute; their graph and them."""
    ctx = Context(mem_size)

    def leaf(x: npt.NDArray[Any], t: GGMLType) -> Tensor:
        out = ctx.new_tensor(t, *x.shape[::-1])
        out.set(x)
        return out

    res = build(leaf)
    outs = res if isinstance(res, tuple) else (res,)
    return build_graph(*outs), outs


def pyggml_result(t: Tensor) -> Array:
    """A computed pyggml tensor as float64 of its 4-D numpy-order shape (ne reversed), as GgmlCtx.read gives."""
    return np.asarray(t.numpy(), np.float64).reshape(t.ne[::-1])


def run_pyggml_all(backend: Backend, build: Build, mem_size: int = 64 << 20) -> list[Array]:
    """Build (pyggml_graph), compute on `backend`, read every tensor `build` returned."""
    graph, outs = pyggml_graph(build, mem_size)
    backend.graph_compute(graph)
    return [pyggml_result(o) for o in outs]


def run_pyggml(backend: Backend, build: Callable[[Make], Tensor], mem_size: int = 64 << 20) -> Array:
    """run_pyggml_all for a build returning one tensor."""
    (out,) = run_pyggml_all(backend, build, mem_size)
    return out


def nmse(got: npt.NDArray[Any], want: npt.NDArray[Any]) -> float:
    """Normalised mean squared error of got (any shape of want's size) against want. Where want is not finite (a
    -inf mask) got must hold the same value at the same place; the error is over the finite rest."""
    want = np.asarray(want, np.float64)
    assert got.size == want.size, f"{got.shape} against {want.shape}"
    got = np.asarray(got, np.float64).reshape(want.shape)
    fin = np.isfinite(want)
    assert np.array_equal(fin, np.isfinite(got)) and np.array_equal(got[~fin], want[~fin])
    return float(np.sum((got[fin] - want[fin]) ** 2) / max(np.sum(want[fin] ** 2), 1e-300))


def assert_close(got: npt.NDArray[Any], want: npt.NDArray[Any], limit: float = 1e-10) -> None:
    """got agrees with a finite want (same shape) to an NMSE under limit."""
    assert got.shape == want.shape, f"{got.shape} against {want.shape}"
    assert np.isfinite(want).all(), "ggml's result is not finite: the case's inputs are out of range"
    err = nmse(got, want)
    assert err < limit, err
