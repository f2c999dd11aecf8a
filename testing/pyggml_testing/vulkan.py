"""Helpers of the Vulkan tests: place a graph's tensors in one buffer, run a graph on the Vulkan backend and on the
numpy reference with the same inputs, compare by NMSE."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from pyggml.backend.protocol import Backend, BufferType
from pyggml.context import Context, init_view
from pyggml.graph import Graph, build_graph
from pyggml.tensor import Tensor
from pyggml_testing.compare import nmse
from pyggml_testing.devices import numpy_backend

Build = Callable[[Context], tuple[list[Tensor], Tensor]]


def place(graph: Graph, buft: BufferType) -> Any:
    """One buffer holding every data owner of the graph (aligned, in order); views placed after."""
    owners: list[Tensor] = []
    seen: set[int] = set()
    for t in [*graph.leafs, *graph.nodes]:
        for x in (t, *(s for s in t.src if s is not None)):
            o = x.data_owner
            if id(o) not in seen:
                seen.add(id(o))
                owners.append(o)
    al = buft.alignment
    offs = []
    size = 0
    for o in owners:
        offs.append(size)
        size += -(-max(o.nbytes(), 1) // al) * al
    buf = buft.alloc_buffer(size)
    for o, off in zip(owners, offs, strict=True):
        o.buffer, o.offset = buf, off
    for t in [*graph.leafs, *graph.nodes]:
        if t.view_src is not None:
            init_view(t)
    return buf


def run_separately(backend: Backend, out: Tensor, inputs: dict[Tensor, np.ndarray]) -> np.ndarray:
    """out computed on backend, each data owner of its graph in its own buffer: lavapipe binds at most 128 MiB, so
    the long-row tests cannot share one buffer as place() does. The buffers are freed before returning."""
    g = build_graph(out)
    buft = backend.device.buffer_type()
    bufs = []
    for t in [*g.leafs, *g.nodes]:
        if t.view_src is None and t.buffer is None:
            bufs.append(buft.alloc_buffer(max(t.nbytes(), 1)))
            t.buffer, t.offset = bufs[-1], 0
    for t, x in inputs.items():
        t.set(x)
    backend.graph_compute(g)
    res = out.numpy()
    for b in bufs:
        b.free()
    return res


def run(build: Build, backend: Backend, data: dict[str, np.ndarray]) -> np.ndarray:
    ctx = Context(no_alloc=True)
    inputs, out = build(ctx)
    g = build_graph(out)
    place(g, backend.device.buffer_type())
    for t in inputs:
        if t.name in data:
            t.set(data[t.name])
    backend.graph_compute(g)
    return out.numpy()


def compare(build: Build, backend: Backend, data: dict[str, np.ndarray], tol: float = 1e-7) -> float:
    got = run(build, backend, data)
    ref = run(build, numpy_backend(), data)
    assert got.shape == ref.shape
    err = nmse(got, ref)
    assert err <= tol, f"NMSE {err:.3e} > {tol:.0e}"
    return err


def rand(*shape: int, seed: int = 0, scale: float = 1.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)
