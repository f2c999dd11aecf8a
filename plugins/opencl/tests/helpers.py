"""Test helpers: place a context's tensors in one buffer, run a graph on a backend."""

from __future__ import annotations

from collections.abc import Iterable

from pyggml.backend.protocol import Backend, Buffer, BufferType
from pyggml.context import Context, init_view
from pyggml.graph import Graph, build_graph
from pyggml.tensor import Tensor


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
