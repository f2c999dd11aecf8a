"""Running graphs on any device in tests and benchmarks (several plugins' tests use these: OpenCL, Vulkan, Metal, and
the shared suites `conv_graphs`, `train_ops`): place a context's or a graph's tensors in one buffer of a device, run
a graph there with random inputs, and compare it with the numpy reference by NMSE."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from pyggml.backend.protocol import Backend, Buffer, BufferType, Device
from pyggml.context import Context, init_view
from pyggml.graph import Graph, build_graph
from pyggml.tensor import Tensor, TensorFlag
from pyggml.types import GGMLType
from pyggml_testing.compare import nmse
from pyggml_testing.devices import numpy_backend

# ---- placing tensors in one buffer ------------------------------------------------------------------------------


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


def place_graph(graph: Graph, buft: BufferType) -> Any:
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


def run(backend: Backend, *outs: Tensor) -> Graph:
    g = build_graph(*outs)
    backend.graph_compute(g)
    return g


def run_separately(backend: Backend, out: Tensor, inputs: dict[Tensor, np.ndarray]) -> np.ndarray:
    """out computed on backend, each data owner of its graph in its own buffer: lavapipe binds at most 128 MiB, so
    the long-row tests cannot share one buffer as place_graph() does. The buffers are freed before returning."""
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


# ---- one graph on a device with random inputs ------------------------------------------------------------------

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
    for leaf in [*g.leafs, *(n for n in g.nodes if n.flags & TensorFlag.PARAM)]:  # parameters are graph nodes
        fill(leaf, rng)
    device.init_backend().graph_compute(g)
    return [o.numpy().astype(np.float64) for o in outs]


# ---- one graph on a backend and on the numpy reference, with the same named inputs ---------------------------------

BuildWithInputs = Callable[[Context], tuple[list[Tensor], Tensor]]
"""Builds a graph: (its inputs, set by name from the data given; its output)."""


def run_built(build: BuildWithInputs, backend: Backend, data: dict[str, np.ndarray]) -> np.ndarray:
    ctx = Context(no_alloc=True)
    inputs, out = build(ctx)
    g = build_graph(out)
    place_graph(g, backend.device.buffer_type())
    for t in inputs:
        if t.name in data:
            t.set(data[t.name])
    backend.graph_compute(g)
    return out.numpy()


def compare(build: BuildWithInputs, backend: Backend, data: dict[str, np.ndarray], tol: float = 1e-7) -> float:
    got = run_built(build, backend, data)
    ref = run_built(build, numpy_backend(), data)
    assert got.shape == ref.shape
    err = nmse(got, ref)
    assert err <= tol, f"NMSE {err:.3e} > {tol:.0e}"
    return err


def rand(*shape: int, seed: int = 0, scale: float = 1.0) -> np.ndarray:
    """Random float32 values in numpy order (graphs.rand is the same, as float64)."""
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)
