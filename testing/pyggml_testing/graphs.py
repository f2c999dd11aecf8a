"""Helpers of the reference-kernel tests: tensors from numpy arrays, running a graph on the numpy backend, and
reading results back as float64; the long chain whose replay the cpu plugin's test and benchmark measure, and the
MUL_MAT graph the GPU plugins' matmul benchmarks time."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

import pyggml as gg
from pyggml import ops
from pyggml.backend import init_backend
from pyggml.reference.access import raw_bytes
from pyggml.types import GGMLType

Array = npt.NDArray[Any]


def new_ctx(mem_size: int = 1 << 22) -> gg.Context:
    return gg.Context(mem_size=mem_size)


def tensor(ctx: gg.Context, values: npt.ArrayLike, ttype: GGMLType = GGMLType.F32, name: str = "") -> gg.Tensor:
    """A leaf holding `values` (numpy order: ne = shape reversed), converted to ttype."""
    arr = np.asarray(values)
    t = ctx.new_tensor(ttype, *arr.shape[::-1], name=name)
    t.set(arr)
    return t


def compute(*outs: gg.Tensor) -> None:
    init_backend("numpy").graph_compute(gg.build_graph(*outs))


def result(out: gg.Tensor) -> Array:
    """Compute `out` and return its values as float64 (integer types keep theirs)."""
    compute(out)
    v = out.numpy()
    return v if np.issubdtype(v.dtype, np.integer) else v.astype(np.float64)


def rand(*shape: int, seed: int = 0, scale: float = 1.0) -> Array:
    """Random float32-representable values in numpy order."""
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32).astype(np.float64)


def f16(x: npt.ArrayLike) -> Array:
    """Values rounded through float16, as an F16 tensor holds them."""
    return np.asarray(x, dtype=np.float32).astype(np.float16).astype(np.float64)


def f32(x: npt.ArrayLike) -> Array:
    return np.asarray(x, dtype=np.float32).astype(np.float64)


def q8_0_bytes(rows: Array) -> tuple[Array, Array]:
    """Q8_0 blocks made by hand as ggml's reference quantiser does (float32 d = amax/127, q = roundf(x * (1/d))
    half away from zero, d stored as f16) and the values they hold (q * f16 d)."""
    raw, held = [], []
    for block in rows.astype(np.float32).reshape(-1, 32):
        d = np.float32(np.abs(block).max() / np.float32(127.0))
        scaled = block * (np.float32(1.0) / d)
        q = (np.sign(scaled) * np.floor(np.abs(scaled).astype(np.float64) + 0.5)).astype(np.int8)
        raw.append(np.concatenate([np.frombuffer(np.float16(d).tobytes(), np.uint8), q.view(np.uint8)]))
        held.append(q.astype(np.float64) * np.float64(np.float16(d)))
    return np.concatenate(raw), np.concatenate(held).reshape(rows.shape)


def q8_0_tensor(ctx: gg.Context, rows: Array) -> tuple[gg.Tensor, Array, Array]:
    """A Q8_0 leaf written byte by byte from q8_0_bytes(rows): (tensor, its bytes, the values it holds)."""
    raw, held = q8_0_bytes(rows)
    t = ctx.new_tensor(GGMLType.Q8_0, *rows.shape[::-1])
    raw_bytes(t)[...] = raw
    return t, raw, held


def scale_chain(n_nodes: int = 1000) -> gg.Graph:
    """n_nodes SCALE-by-1 nodes in a chain over a small allocated f32 tensor of ones: a graph whose compute is
    almost free, so replaying it measures (or, in a test, counts) a backend's per-graph overhead such as planning."""
    ctx = gg.Context(64 << 20)
    x = ctx.new_tensor("f32", 32, 4)
    x.set(np.ones((4, 32), np.float32))
    t = x
    for _ in range(n_nodes):
        t = ops.scale(t, 1.0)
    return gg.build_graph(t)


def mul_mat_graph(wtype: str | GGMLType, k: int, m: int, n: int) -> tuple[gg.Context, gg.Graph, list[gg.Tensor]]:
    """Weights [k, m] of wtype times f32 activations [k, n]: the context (no_alloc, for the caller to place on its
    device), the graph, and its two inputs (weights first) for set_normal once they are placed."""
    ctx = gg.Context(no_alloc=True)
    w = ctx.new_tensor(wtype, k, m, name="w")
    x = ctx.new_tensor("f32", k, n, name="x")
    return ctx, gg.build_graph(ops.mul_mat(w, x)), [w, x]


def set_normal(tensors: Sequence[gg.Tensor], seed: int = 0) -> None:
    """Standard normal values into each (placed) tensor in turn, all drawn from one generator seeded `seed`."""
    rng = np.random.default_rng(seed)
    for t in tensors:
        t.set(rng.standard_normal(t.ne[::-1]).astype(np.float32))
