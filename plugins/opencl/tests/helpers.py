"""Test helpers: place a context's tensors in one buffer, run a graph on a backend."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from pyggml.backend.protocol import Backend, Buffer, BufferType, Device
from pyggml.context import Context, init_view
from pyggml.graph import Graph, build_graph
from pyggml.tensor import Tensor
from pyggml.types import GGMLType


def place(ctx: Context, buft: BufferType, tensors: Iterable[Tensor] | None = None) -> Buffer:
    """Allocate every data owner of `ctx` (or the given tensors) linearly in one new buffer of `buft`."""
    owners = [t for t in (tensors if tensors is not None else ctx) if t.view_src is None and t.buffer is None]
    align = buft.alignment
    offs: list[int] = []
    size = 0
    for t in owners:
        offs.append(size)
        size += (buft.alloc_size(t) + align - 1) // align * align
    buf = buft.alloc_buffer(size)
    for t, o in zip(owners, offs, strict=True):
        t.buffer = buf
        t.offset = o
    for t in ctx:
        if t.view_src is not None and t.buffer is None and t.view_src.buffer is not None:
            init_view(t)
    return buf


def run(backend: Backend, *outs: Tensor) -> Graph:
    g = build_graph(*outs)
    backend.graph_compute(g)
    return g


# ---- running one graph on the numpy reference and on an OpenCL device -------------------------------------

BuildFn = Callable[[Context], list[Tensor]]


def fill(t: Tensor, rng: np.random.Generator) -> None:
    """Inputs by name: 'ids<N>' integers in [0, N); 'mask' zeros with some -inf; anything else N(0, 1)."""
    n = t.nelements()
    if t.name.startswith("ids"):
        hi = int(t.name[3:].split(":")[0])
        t.set(rng.integers(0, hi, size=n).astype(np.int64 if t.type == GGMLType.I64 else np.int32))
    elif t.name.startswith("mask"):
        t.set(np.where(rng.random(n) < 0.2, -np.inf, rng.standard_normal(n) * 0.1).astype(np.float32))
    elif t.type in (GGMLType.I32, GGMLType.I16, GGMLType.I8):
        t.set(rng.integers(-50, 50, size=n).astype(t.type.traits.np_dtype))
    else:
        t.set(rng.standard_normal(n).astype(np.float32))


def run_on(device: Device, build: BuildFn, seed: int = 0) -> list[npt.NDArray[Any]]:
    ctx = Context(no_alloc=True)
    outs = build(ctx)
    g = build_graph(*outs)
    place(ctx, device.buffer_type())
    rng = np.random.default_rng(seed)
    for leaf in g.leafs:
        fill(leaf, rng)
    device.init_backend().graph_compute(g)
    return [o.numpy().astype(np.float64) for o in outs]


def nmse(ref: npt.NDArray[Any], got: npt.NDArray[Any]) -> float:
    if np.isnan(got).any() != np.isnan(ref).any():
        return float("inf")
    fin = np.isfinite(ref)
    if not np.array_equal(fin, np.isfinite(got)) or not np.array_equal(ref[~fin], got[~fin]):
        return float("inf")
    r, g = ref[fin], got[fin]
    den = float((r * r).sum())
    return float(((r - g) ** 2).sum()) / (den if den else 1.0)


def reference_device() -> Device:
    from pyggml.reference.backend import NumpyRegistry

    return NumpyRegistry().devices()[0]
