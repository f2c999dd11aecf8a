"""Random F32 graphs built twice, identically: with pyggml's constructors and with ggml's own (libggml-base of
`make llama-cpp-ref`, through ctypes), so that pyggml's graph allocator can be compared with ggml's on graphs
nobody tuned it for. Used by core/tests/test_alloc_vs_ggml.py (a few hundred graphs) and
benchmarks/bench_alloc_vs_ggml.py (more, with the table per placement mode).

A graph is 20-120 nodes of: element-wise chains (unary, scale, binary with a same-shaped or broadcast second
operand, some of them explicitly in place; the rest are in-place candidates for the allocator), matmuls against
weights or against other intermediates, transposes made contiguous, row views, reshapes, soft_max (some with a
mask and a scale), rms_norm. Leafs are INPUT activations, constants the allocator places, or weights that already
have memory (a weights buffer in pyggml, a context with memory in ggml), which neither allocator places, as in a
model. Several tensors are OUTPUT; every tensor nobody consumes is expanded into the graph, in creation order.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pyggml import ops
from pyggml.alloc import GraphAllocator, alloc_ctx_tensors, verify_allocation
from pyggml.backend.host import HostBufferType
from pyggml.backend.protocol import BufferUsage
from pyggml.context import Context
from pyggml.graph import Graph
from pyggml.tensor import Tensor
from pyggml.types import GGMLType

GRAPH_SIZE = 2048
_P = ctypes.c_void_p
_OFF_NE, _OFF_NB, _OFF_OP = 16, 48, 80
"""Offsets of ne, nb and op in ggml's struct ggml_tensor (x86-64)."""
_OFF_N_LEAFS = 8
"""Offset of n_leafs in ggml's struct ggml_cgraph."""


class _InitParams(ctypes.Structure):
    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p), ("no_alloc", ctypes.c_bool)]


_SIGS: dict[str, tuple[Any, list[Any]]] = {
    "ggml_init": (_P, [_InitParams]),
    "ggml_free": (None, [_P]),
    "ggml_tensor_overhead": (ctypes.c_size_t, []),
    "ggml_graph_overhead_custom": (ctypes.c_size_t, [ctypes.c_size_t, ctypes.c_bool]),
    "ggml_new_tensor_4d": (_P, [_P, ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64]),
    "ggml_set_input": (None, [_P]),
    "ggml_set_output": (None, [_P]),
    "ggml_new_graph_custom": (_P, [_P, ctypes.c_size_t, ctypes.c_bool]),
    "ggml_build_forward_expand": (None, [_P, _P]),
    "ggml_graph_n_nodes": (ctypes.c_int, [_P]),
    "ggml_graph_node": (_P, [_P, ctypes.c_int]),
    "ggml_op_name": (ctypes.c_char_p, [ctypes.c_int]),
    "ggml_backend_cpu_buffer_type": (_P, []),
    "ggml_backend_buft_get_alignment": (ctypes.c_size_t, [_P]),
    "ggml_gallocr_new": (_P, [_P]),
    "ggml_gallocr_free": (None, [_P]),
    "ggml_gallocr_reserve": (ctypes.c_bool, [_P, _P]),
    "ggml_gallocr_get_buffer_size": (ctypes.c_size_t, [_P, ctypes.c_int]),
    "ggml_mul_mat": (_P, [_P, _P, _P]),
    "ggml_transpose": (_P, [_P, _P]),
    "ggml_cont": (_P, [_P, _P]),
    "ggml_view_2d": (_P, [_P, _P, ctypes.c_int64, ctypes.c_int64, ctypes.c_size_t, ctypes.c_size_t]),
    "ggml_reshape_1d": (_P, [_P, _P, ctypes.c_int64]),
    "ggml_reshape_2d": (_P, [_P, _P, ctypes.c_int64, ctypes.c_int64]),
    "ggml_reshape_3d": (_P, [_P, _P, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64]),
    "ggml_soft_max_ext": (_P, [_P, _P, _P, ctypes.c_float, ctypes.c_float]),
    "ggml_scale": (_P, [_P, _P, ctypes.c_float]),
    "ggml_scale_inplace": (_P, [_P, _P, ctypes.c_float]),
    "ggml_rms_norm": (_P, [_P, _P, ctypes.c_float]),
    "ggml_rms_norm_inplace": (_P, [_P, _P, ctypes.c_float]),
}
_UNARY = ("silu", "gelu", "tanh", "neg", "sqr", "sqrt", "soft_max")
_BINARY = ("add", "sub", "mul", "div")
for _name in (*_UNARY, *_BINARY):
    for _suffix in ("", "_inplace"):
        _SIGS[f"ggml_{_name}{_suffix}"] = (_P, [_P, _P] + ([_P] if _name in _BINARY else []))


class Ggml:
    """ggml's base library with the signatures this module calls."""

    def __init__(self, path: Path) -> None:
        self.lib = ctypes.CDLL(str(path))
        for name, (restype, argtypes) in _SIGS.items():
            fn = getattr(self.lib, name)
            fn.restype, fn.argtypes = restype, argtypes
        self.cpu_buft = int(self.lib.ggml_backend_cpu_buffer_type())
        self.alignment = int(self.lib.ggml_backend_buft_get_alignment(self.cpu_buft))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.lib, name)

    def reserve_size(self, graph: int) -> int:
        """ggml_gallocr_reserve of `graph` on the CPU buffer type; the compute buffer's size."""
        galloc = self.lib.ggml_gallocr_new(self.cpu_buft)
        try:
            if not self.lib.ggml_gallocr_reserve(galloc, graph):
                raise RuntimeError("ggml_gallocr_reserve failed")
            return int(self.lib.ggml_gallocr_get_buffer_size(galloc, 0))
        finally:
            self.lib.ggml_gallocr_free(galloc)


@dataclass(frozen=True)
class Twin:
    """One tensor in both libraries."""

    py: Tensor
    gg: int


WEIGHT_BYTES = 16 << 20
"""Memory of the ggml weights context; weights beyond it are made as constants instead."""


class TwinBuilder:
    """Builds the same tensors in pyggml and in ggml: compute tensors in no_alloc contexts, weights in a ggml
    context with memory and in a pyggml context that `finish` places in a weights buffer."""

    def __init__(self, ggml: Ggml) -> None:
        self.g = ggml
        overhead = ggml.ggml_tensor_overhead()
        mem = overhead * 4096 + ggml.ggml_graph_overhead_custom(GRAPH_SIZE, False)
        self.gctx = int(ggml.ggml_init(_InitParams(mem, None, True)))
        self.wctx = int(ggml.ggml_init(_InitParams(WEIGHT_BYTES + overhead * 1024, None, False)))
        self.weight_bytes = 0
        self.pctx = Context(no_alloc=True)
        self.pwctx = Context(no_alloc=True)

    def close(self) -> None:
        self.g.ggml_free(self.gctx)
        self.g.ggml_free(self.wctx)

    def finish(self, alignment: int) -> None:
        """Give the pyggml weights their memory (usage WEIGHTS: pre-allocated for the graph allocator)."""
        alloc_ctx_tensors(self.pwctx, HostBufferType("weights", alignment=alignment))

    def call(self, name: str, *args: object) -> int:
        """ggml_<name>(ctx, *args) with Twin arguments passed as their ggml tensors."""
        fn = getattr(self.g, f"ggml_{name}")
        return int(fn(self.gctx, *(a.gg if isinstance(a, Twin) else a for a in args)))

    def leaf(self, ne: tuple[int, int, int], name: str, kind: str) -> Twin:
        """kind: "input" (INPUT, placed by the allocator), "const" (placed by the allocator) or "weight" (has
        memory already; a const when the weights context is full)."""
        nbytes = 4 * ne[0] * ne[1] * ne[2]
        if kind == "weight" and self.weight_bytes + nbytes + 64 <= WEIGHT_BYTES:
            self.weight_bytes += nbytes + 64
            return Twin(self.pwctx.new_tensor(GGMLType.F32, *ne, name=name),
                        int(self.g.ggml_new_tensor_4d(self.wctx, int(GGMLType.F32), *ne, 1)))
        t = Twin(self.pctx.new_tensor(GGMLType.F32, *ne, name=name),
                 self.call("new_tensor_4d", int(GGMLType.F32), *ne, 1))
        if kind == "input":
            t.py.set_input()
            self.g.ggml_set_input(t.gg)
        return t

    def set_output(self, t: Twin) -> None:
        t.py.set_output()
        self.g.ggml_set_output(t.gg)

    def unary(self, a: Twin, op: str, inplace: bool) -> Twin:
        suffix = "_inplace" if inplace else ""
        if op == "scale":
            return Twin(ops.scale(a.py, 0.5, inplace=inplace), self.call(f"scale{suffix}", a, 0.5))
        if op == "rms_norm":
            return Twin(ops.rms_norm(a.py, 1e-6, inplace=inplace), self.call(f"rms_norm{suffix}", a, 1e-6))
        return Twin(getattr(ops, op)(a.py, inplace=inplace), self.call(f"{op}{suffix}", a))

    def binary(self, a: Twin, b: Twin, op: str, inplace: bool) -> Twin:
        suffix = "_inplace" if inplace else ""
        return Twin(getattr(ops, op)(a.py, b.py, inplace=inplace), self.call(f"{op}{suffix}", a, b))

    def mul_mat(self, a: Twin, b: Twin) -> Twin:
        return Twin(ops.mul_mat(a.py, b.py), self.call("mul_mat", a, b))

    def cont_transpose(self, a: Twin) -> Twin:
        t = Twin(ops.transpose(a.py), self.call("transpose", a))
        return Twin(ops.cont(t.py), self.call("cont", t))

    def rows(self, a: Twin, first: int, n: int) -> Twin:
        """Rows first..first+n of a 2-D contiguous tensor (a contiguous view at an offset)."""
        ne0, nb1 = a.py.ne[0], a.py.nb[1]
        return Twin(ops.view(a.py, (ne0, n), (nb1,), first * nb1), self.call("view_2d", a, ne0, n, nb1, first * nb1))

    def reshape(self, a: Twin, ne: tuple[int, ...]) -> Twin:
        return Twin(ops.reshape(a.py, *ne), self.call(f"reshape_{len(ne)}d", a, *ne))

    def soft_max_ext(self, a: Twin, mask: Twin | None, scale: float) -> Twin:
        return Twin(ops.soft_max(a.py, None if mask is None else mask.py, scale, 0.0),
                    self.call("soft_max_ext", a, None if mask is None else mask.gg, scale, 0.0))


DIMS0 = (4, 12, 16, 32, 33, 48, 64, 96, 128, 256)
"""Row lengths: some are not a multiple of the 32-byte alignment."""
DIMS1 = (1, 2, 3, 4, 5, 8, 16, 24, 32)
MAX_ELEMENTS = 1 << 15
"""No tensor grows beyond this (chains of matmuls would otherwise multiply their sizes)."""


@dataclass
class TwinGraph:
    """A random graph in both libraries (the pyggml graph and the ggml cgraph pointer); `close` frees ggml's
    contexts."""

    builder: TwinBuilder
    py: Graph
    gg: int

    def close(self) -> None:
        self.builder.close()


class _Gen:
    """Interprets random draws into ops on a pool of contiguous F32 tensors (Twins)."""

    def __init__(self, b: TwinBuilder, rng: np.random.Generator) -> None:
        self.b, self.rng = b, rng
        self.pool: list[Twin] = []
        self.consumed: set[int] = set()
        self.n_nodes = 0
        self.n_leafs = 0

    def leaf(self, ne: tuple[int, int, int], kinds: tuple[str, ...], p: tuple[float, ...]) -> Twin:
        kind = str(self.rng.choice(kinds, p=p))
        self.n_leafs += 1
        return self.b.leaf(ne, f"leaf{self.n_leafs}", kind)

    def pick(self) -> Twin:
        """Mostly the newest tensor (deep chains); else one that nothing consumes yet (branches join again, as in
        a model: few dead ends) or any (long lifetimes, several consumers)."""
        rng, pool = self.rng, self.pool
        r = rng.random()
        if r < 0.6:
            return pool[-1]
        open_ = [t for t in pool[:-1] if id(t.py) not in self.consumed]
        if r < 0.85 and open_:
            return open_[int(rng.integers(0, len(open_)))]
        return pool[int(rng.integers(0, len(pool)))]

    def add(self, t: Twin, *used: Twin, nodes: int = 1) -> None:
        self.consumed.update(id(u.py) for u in used)
        self.pool.append(t)
        self.n_nodes += nodes

    def step(self) -> None:
        rng, b = self.rng, self.b
        a = self.pick()
        ne = a.py.ne
        r = rng.random()
        inplace = rng.random() < 0.15
        if r < 0.25:
            op = ("silu", "gelu", "tanh", "neg", "sqr", "sqrt", "scale")[int(rng.integers(0, 7))]
            self.add(b.unary(a, op, inplace), a)
        elif r < 0.47:
            kind = rng.random()
            if kind < 0.45:
                same = [t for t in self.pool if t.py.ne == ne and t is not a]
                other = (same[int(rng.integers(0, len(same)))] if same
                         else self.leaf((ne[0], ne[1], ne[2]), ("input", "const"), (0.5, 0.5)))
            else:
                bne = (ne[0], 1, 1) if kind < 0.75 else (ne[0], ne[1], 1)
                other = self.leaf(bne, ("weight", "input", "const"), (0.6, 0.2, 0.2))
            self.add(b.binary(a, other, _BINARY[int(rng.integers(0, 4))], inplace), a, other)
        elif r < 0.62:
            rows = a.py.nrows()
            peers = [t for t in self.pool if t.py.ne[0] == ne[0] and t.py.ne[2] in (1, ne[2]) and t is not a
                     and t.py.ne[1] * rows <= MAX_ELEMENTS] if rng.random() < 0.3 else []
            if peers:
                w = peers[int(rng.integers(0, len(peers)))]
            else:
                fits = [k for k in DIMS0 if k * max(rows, ne[0]) <= MAX_ELEMENTS] or [1]
                w = self.leaf((ne[0], int(rng.choice(fits)), 1), ("weight", "const"), (0.85, 0.15))
            self.add(b.mul_mat(w, a), a, w)
        elif r < 0.70:
            self.add(b.cont_transpose(a), a, nodes=2)
        elif r < 0.78 and ne[2] == 1 and ne[1] > 1:
            first = int(rng.integers(0, ne[1]))
            self.add(b.rows(a, first, int(rng.integers(1, ne[1] - first + 1))), a)
        elif r < 0.85:
            n0, n1, n2, _ = ne
            shapes: list[tuple[int, ...]] = [(n0 * n1 * n2,), (n0 * n1, n2), (n0, n1 * n2)]
            if n1 % 2 == 0:
                shapes.append((n0, n1 // 2, 2 * n2))
            self.add(b.reshape(a, shapes[int(rng.integers(0, len(shapes)))]), a)
        elif r < 0.93:
            mask = self.leaf((ne[0], ne[1], 1), ("input",), (1.0,)) if rng.random() < 0.4 else None
            if mask is None and rng.random() < 0.5:
                self.add(b.unary(a, "soft_max", inplace), a)
            else:
                self.add(b.soft_max_ext(a, mask, 0.125), a, *([mask] if mask else []))
        else:
            self.add(b.unary(a, "rms_norm", inplace), a)
        if rng.random() < 0.08:
            b.set_output(self.pool[-1])


def random_twin_graph(ggml: Ggml, seed: int, n_nodes: int | None = None) -> TwinGraph:
    """A random graph of about `n_nodes` nodes (20-120 when not given) in both libraries, reproducible from
    `seed`."""
    rng = np.random.default_rng(seed)
    target = int(rng.integers(20, 121)) if n_nodes is None else n_nodes
    b = TwinBuilder(ggml)
    gen = _Gen(b, rng)
    with b.pctx:
        for _ in range(int(rng.integers(1, 4))):
            ne = (int(rng.choice(DIMS0)), int(rng.choice(DIMS1)), int(rng.choice((1, 1, 2, 4))))
            gen.pool.append(gen.leaf(ne, ("input",), (1.0,)))
        while gen.n_nodes < target:
            gen.step()
    b.finish(ggml.alignment)
    sinks = [t for t in gen.pool if id(t.py) not in gen.consumed]
    b.set_output(sinks[-1])
    py = Graph(GRAPH_SIZE)
    gg = int(ggml.ggml_new_graph_custom(b.gctx, GRAPH_SIZE, False))
    for t in sinks:
        py.build_forward_expand(t.py)
        ggml.ggml_build_forward_expand(gg, t.gg)
    return TwinGraph(b, py, gg)


def _i64(addr: int, n: int) -> tuple[int, ...]:
    return tuple((ctypes.c_int64 * n).from_address(addr))


def check_same_graph(ggml: Ggml, tg: TwinGraph) -> None:
    """Raise AssertionError unless both graphs have the same leaf count and the same nodes (op, ne, nb) in the
    same order: the allocators then see the same problem."""
    n = int(ggml.ggml_graph_n_nodes(tg.gg))
    n_leafs = ctypes.c_int.from_address(tg.gg + _OFF_N_LEAFS).value
    assert (n, n_leafs) == (tg.py.n_nodes, tg.py.n_leafs), (n, n_leafs, tg.py.n_nodes, tg.py.n_leafs)
    for i, node in enumerate(tg.py.nodes):
        g = int(ggml.ggml_graph_node(tg.gg, i))
        op = ggml.ggml_op_name(ctypes.c_int.from_address(g + _OFF_OP).value).decode()
        got = (op, _i64(g + _OFF_NE, 4), _i64(g + _OFF_NB, 4))
        assert got == (node.op.name, node.ne, node.nb), f"node {i}: ggml {got}, pyggml {node.op.name} {node.ne}"


# ---- pyggml's allocator against ggml's ------------------------------------------------------------------------

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
        check_same_graph(ggml, tg)
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
