"""Plans: built once per graph and reused on replay, re-built when placement changes; errors name the node."""

from __future__ import annotations

import numpy as np
import pytest

import pyggml.ops as O
from pyggml.backend.protocol import Backend
from pyggml.context import Context
from pyggml.errors import ComputeError, UnsupportedOpError
from pyggml.graph import build_graph
from pyggml.tensor import TensorFlag
from pyggml_testing.graphs import scale_chain


def _inputs(ctx: Context) -> tuple[object, object, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    a = ctx.new_tensor("f32", 64, 8, name="a")
    w = ctx.new_tensor("f32", 64, 32, name="w")
    av = rng.standard_normal((8, 64)).astype(np.float32)
    wv = rng.standard_normal((32, 64)).astype(np.float32)
    a.set(av)
    w.set(wv)
    return a, w, av, wv


def test_replay_reuses_the_plan(cpu_backend: Backend) -> None:
    ctx = Context(8 << 20)
    a, w, av, wv = _inputs(ctx)
    out = O.silu(O.mul_mat(w, a))  # type: ignore[arg-type]
    g = build_graph(out)
    ex = cpu_backend.executor  # type: ignore[attr-defined]
    cpu_backend.graph_compute(g)
    cpu_backend.graph_compute(g)
    assert ex.plans.builds == 1
    ref = av @ wv.T
    np.testing.assert_allclose(out.numpy(), ref / (1 + np.exp(-ref)), rtol=1e-4, atol=1e-4)
    a.set(av * 2)  # new input data, same places: same plan, new numbers
    cpu_backend.graph_compute(g)
    assert ex.plans.builds == 1
    ref2 = (2 * av) @ wv.T
    np.testing.assert_allclose(out.numpy(), ref2 / (1 + np.exp(-ref2)), rtol=1e-4, atol=1e-4)


def test_moved_tensor_replans(cpu_backend: Backend) -> None:
    ctx = Context(8 << 20)
    a, w, av, wv = _inputs(ctx)
    out = O.mul_mat(w, a)  # type: ignore[arg-type]
    g = build_graph(out)
    cpu_backend.graph_compute(g)
    other = Context(8 << 20)
    a2 = other.new_tensor("f32", 64, 8)
    a2.set(av * 3)
    a.buffer, a.offset = a2.buffer, a2.offset  # type: ignore[attr-defined]
    cpu_backend.graph_compute(g)
    assert cpu_backend.executor.plans.builds == 2  # type: ignore[attr-defined]
    np.testing.assert_allclose(out.numpy(), (3 * av) @ wv.T, rtol=1e-4, atol=1e-3)


def test_nodes_without_compute_flag_are_skipped(cpu_backend: Backend) -> None:
    ctx = Context(8 << 20)
    a = _inputs(ctx)[0]
    out = O.scale(a, 2.0)  # type: ignore[arg-type]
    g = build_graph(out)
    out.set(np.zeros((8, 64), np.float32))
    out.flags &= ~TensorFlag.COMPUTE
    cpu_backend.graph_compute(g)
    assert not out.numpy().any()


def test_bad_row_id_names_the_node(cpu_backend: Backend) -> None:
    ctx = Context(8 << 20)
    _, w, _, wv = _inputs(ctx)
    ids = ctx.new_tensor("i32", 3, name="ids")
    ids.set(np.array([0, 40, 1], np.int32))
    rows = O.get_rows(w, ids).set_name("picked")  # type: ignore[arg-type]
    with pytest.raises(ComputeError, match=r"picked.*GET_ROWS.*index out of range"):
        cpu_backend.graph_compute(build_graph(rows))
    ids.set(np.array([0, 31, 1], np.int32))  # the backend stays usable
    g = build_graph(rows)
    cpu_backend.graph_compute(g)
    np.testing.assert_array_equal(rows.numpy(), wv[[0, 31, 1]])


def test_unsupported_node_is_refused_before_c(cpu_backend: Backend) -> None:
    ctx = Context(8 << 20)
    src = ctx.new_tensor("f32", 256, 2, name="src")
    dst = ctx.new_tensor("i16", 256, 2, name="dst")  # no float -> i16 conversion in the kernels
    node = O.cpy(src, dst)
    assert not cpu_backend.supports_op(node)
    with pytest.raises(UnsupportedOpError, match=r"CPY -> i16 .* not supported by the cpu backend"):
        cpu_backend.graph_compute(build_graph(node))


def test_tensor_outside_its_buffer_is_refused(cpu_backend: Backend) -> None:
    ctx = Context(1 << 20)
    a = ctx.new_tensor("f32", 16, name="a")
    out = O.scale(a, 2.0)
    assert out.buffer is not None
    out.offset = out.buffer.size - 8
    with pytest.raises(ComputeError, match="outside its buffer"):
        cpu_backend.graph_compute(build_graph(out))


def test_replay_overhead_of_a_big_graph_is_small(cpu_backend: Backend) -> None:
    """Not a timing assertion: the replay path must not re-plan (`bench.py --only replay` times it)."""
    g = scale_chain(1000)
    for _ in range(3):
        cpu_backend.graph_compute(g)
    assert cpu_backend.executor.plans.builds == 1  # type: ignore[attr-defined]
    assert len(g.nodes) == 1000
