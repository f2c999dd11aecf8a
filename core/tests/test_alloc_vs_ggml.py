"""pyggml's graph allocator against ggml's own (libggml-base of `make llama-cpp-ref`, through ctypes) on random
graphs built identically in both (pyggml_testing.alloc_twin), reserved on a CPU buffer type with ggml's
alignment. Every pyggml plan is placed and checked by verify_allocation.

Goals (issue: graph allocator vs ggml's): `placement="ggml", view_inplace=False` gives ggml's bytes on every
graph; the default placement is never larger than ggml's on any graph and at least 5% smaller in total.
benchmarks/bench_alloc_vs_ggml.py runs more graphs and reports the table per mode, with reserve times.
"""

from __future__ import annotations

import numpy as np
import pytest

from pyggml.alloc import GraphAllocator
from pyggml.backend.host import HostBufferType
from pyggml.ops.base import OPS
from pyggml.reference.backend import compute_node
from pyggml_testing.alloc_twin import Compared, Ggml, compare, fill_leafs, open_ggml, random_twin_graph, table, unplace
from pyggml_testing.llama_cpp_ref import ggml_library

N_GRAPHS = 200


@pytest.fixture(scope="module")
def ggml() -> Ggml:
    path = ggml_library("base")
    if path is None:
        pytest.skip("ggml's libggml-base is not built (make llama-cpp-ref, or PYGGML_GGML_LIB_DIR)")
    return open_ggml(path)


@pytest.fixture(scope="module")
def compared(ggml: Ggml) -> list[Compared]:
    return [compare(ggml, seed) for seed in range(N_GRAPHS)]


def test_the_exact_mode_gives_ggml_bytes_on_every_graph(compared: list[Compared]) -> None:
    assert [r.seed for r in compared if r.pyggml["ggml exact"] != r.ggml] == []


def test_the_default_is_never_larger_than_ggml_and_5_percent_smaller_in_total(compared: list[Compared]) -> None:
    assert [(r.seed, r.pyggml["default"], r.ggml) for r in compared if r.pyggml["default"] > r.ggml] == []
    assert table(compared)["default"]["total_bytes_vs_ggml"] <= 0.95


GGML_OP_COUNT = 101
"""Number of ops of llama.cpp 0.3.36's ggml (enum ggml_op)."""


def test_the_ops_that_may_run_in_place_are_ggml_s(ggml: Ggml) -> None:
    """The allocator's in-place list (OpDef.can_inplace) is the one ggml_op_can_inplace answers: one op more or
    less changes the plan (without CLAMP, clamp(sin(a)) + a needs a third slot where ggml needs two)."""
    names = [ggml.ggml_op_name(i).decode() for i in range(GGML_OP_COUNT)]
    assert names[-1] == "GLU"  # the last op: GGML_OP_COUNT is right
    theirs = {n for i, n in enumerate(names) if ggml.ggml_op_can_inplace(i)}
    ours = {op.name for op, d in OPS.items() if d.can_inplace}
    assert ours == theirs


def test_a_1000_node_graph(ggml: Ggml) -> None:
    r = compare(ggml, 1_000_000, n_nodes=1000)
    assert r.n_nodes >= 1000
    assert r.pyggml["ggml exact"] == r.ggml and r.pyggml["default"] <= r.ggml


def _fill_and_run(ggml: Ggml, seed: int, **kwargs: object) -> list[np.ndarray]:
    """Graph `seed` placed by a GraphAllocator(**kwargs), computed with the numpy reference: every tensor nobody
    consumes (kept to the end, as OUTPUT tensors are)."""
    tg = random_twin_graph(ggml, seed)
    try:
        g = tg.py
        galloc = GraphAllocator(HostBufferType("cpu", alignment=ggml.alignment), **kwargs)  # type: ignore[arg-type]
        assert galloc.alloc_graph(g)
        fill_leafs(tg)
        for node in g.nodes:
            compute_node(node)
        consumed = {id(s) for n in g.nodes for s in n.src if s is not None}
        out = [t.numpy().copy() for t in g.nodes if id(t) not in consumed]
        unplace(g)
        return out
    finally:
        tg.close()


@pytest.mark.parametrize("seed", range(0, 200, 10))
def test_the_default_plan_computes_what_ggml_plan_computes(ggml: Ggml, seed: int) -> None:
    """The in-place rules beyond ggml's (through views, at offsets) and the repacking change no result."""
    ref = _fill_and_run(ggml, seed, placement="ggml", view_inplace=False)
    for kwargs in ({}, {"placement": "ggml"}, {"placement": "by_size"}):
        got = _fill_and_run(ggml, seed, **kwargs)
        assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(got, ref, strict=True)), kwargs
