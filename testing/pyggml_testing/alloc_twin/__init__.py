"""Random graphs built twice, identically: with pyggml's constructors and with ggml's own (libggml-base of
`make llama-cpp-ref`, llama.cpp 0.3.36, through ctypes), so that pyggml's graph allocator can be compared with
ggml's on graphs nobody tuned it for. Used by core/tests/test_alloc_vs_ggml.py (a few hundred graphs) and
benchmarks/bench_alloc_vs_ggml.py (more, with the table per placement mode).

A graph is 20-120 steps over a pool of contiguous F32 tensors, each step one op that both libraries build the same
way; `check_same_graph` holds them to it (type, op, ne, nb, flags, every src slot and the data owner of every leaf
and node, in order). The recipes (elementwise.py, layout.py, model.py) cover every op of ggml's in-place list,
each also through ggml's `_inplace` constructor where it has one (a view of the src with an op), and the other ops
of ggml's forward set that models use, composed ops (the convolutions) and F16 and I32 tensors included. Leafs are
INPUT activations, constants the allocator places, or weights that already have memory (a weights buffer in
pyggml, a context with memory in ggml), which neither allocator places, as in a model. Several tensors are OUTPUT;
every tensor nobody consumes is expanded into the graph, in creation order.

Left out, because pyggml builds them differently from ggml: REPEAT (pyggml keeps the shape tensor as src[1]: it
lives until the REPEAT ran), SET_ROWS (srcs in the order a, b, ids; ggml's is b, ids, a, so the graphs' orders
differ), NONE-op views (ggml_view_tensor: no src and, in ggml's allocator, no hold on the data owner; pyggml's has
both, see docs/allocator.md); and what needs state or callbacks (the SSM scans, RWKV, optimiser steps, custom ops).

Modules: ggml.py (the ctypes binding, the builder of both tensors, the structural check), pool.py (the state of one
graph while it is drawn), the recipes, graphs.py (a graph from a seed), and below: the comparison.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyggml.alloc import GraphAllocator, verify_allocation
from pyggml.backend.host import HostBufferType
from pyggml.backend.protocol import BufferUsage
from pyggml.graph import Graph
from pyggml_testing.alloc_twin.ggml import Ggml, check_same_graph
from pyggml_testing.alloc_twin.graphs import TwinGraph, fill_leafs, open_ggml, random_twin_graph

__all__ = [
    "MODES", "Compared", "Ggml", "TwinGraph", "check_same_graph", "compare", "fill_leafs", "open_ggml",
    "random_twin_graph", "table", "unplace",
]

MODES: dict[str, dict[str, Any]] = {
    "default": {},
    "ggml exact": {"placement": "ggml", "view_inplace": False},
    "ggml + view in-place": {"placement": "ggml"},
    "by_size": {"placement": "by_size"},
}
"""GraphAllocator keyword arguments of each placement mode compared."""


@dataclass
class Compared:
    """One graph: its size, ggml's compute buffer and pyggml's in each mode (bytes)."""

    seed: int
    n_nodes: int
    ggml: int
    pyggml: dict[str, int]


def unplace(graph: Graph) -> None:
    """Forget what a graph allocator placed (tensors in COMPUTE buffers), so that another one plans the graph
    from scratch; weights keep their memory."""
    for t in [*graph.leafs, *graph.nodes, *(s for n in graph.nodes for s in n.src if s is not None)]:
        if t.buffer is not None and t.buffer.usage == BufferUsage.COMPUTE:
            t.buffer, t.offset = None, 0


def compare(ggml: Ggml, seed: int, n_nodes: int | None = None) -> Compared:
    """Build graph `seed` in both libraries, check they are the same graph, reserve it with ggml and with pyggml
    in every mode of MODES; each pyggml plan is placed and checked with verify_allocation (no two tensors that
    are live at once overlap)."""
    tg = random_twin_graph(ggml, seed, n_nodes)
    try:
        check_same_graph(ggml, tg.py, tg.gg)
        sizes = {}
        for mode, kwargs in MODES.items():
            galloc = GraphAllocator(HostBufferType("cpu", alignment=ggml.alignment), **kwargs)
            galloc.reserve(tg.py)
            assert galloc.alloc_graph(tg.py)
            verify_allocation(tg.py)
            sizes[mode] = galloc.buffer_size(0)
            unplace(tg.py)
        return Compared(seed, tg.py.n_nodes, ggml.reserve_size(tg.gg), sizes)
    finally:
        tg.close()


def table(results: list[Compared]) -> dict[str, dict[str, Any]]:
    """Per mode: how many graphs got a bigger buffer than ggml's, total bytes against ggml's, the worst graph."""
    ggml_total = sum(r.ggml for r in results)
    out = {}
    for mode in MODES:
        worst = max(results, key=lambda r: r.pyggml[mode] / r.ggml)
        out[mode] = {
            "graphs_larger_than_ggml": sum(r.pyggml[mode] > r.ggml for r in results),
            "graphs_smaller_than_ggml": sum(r.pyggml[mode] < r.ggml for r in results),
            "total_bytes_vs_ggml": round(sum(r.pyggml[mode] for r in results) / ggml_total, 4),
            "worst_graph_vs_ggml": round(worst.pyggml[mode] / worst.ggml, 4),
            "worst_graph_seed": worst.seed,
        }
    return out
