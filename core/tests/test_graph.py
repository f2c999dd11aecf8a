"""Graph building: ggml's post-order DFS, dedupe, use counts, leafs vs nodes, COMPUTE flags, size limit."""

from __future__ import annotations

import pytest

import pyggml as gg
from pyggml import ops
from pyggml.errors import GraphError
from pyggml.ops import Op
from pyggml.tensor import TensorFlag


@pytest.fixture
def ctx() -> gg.Context:
    return gg.Context(no_alloc=True)


def test_post_order_and_dedupe(ctx: gg.Context) -> None:
    a = ctx.new_tensor(gg.F32, 8, 4, name="a")
    b = ctx.new_tensor(gg.F32, 8, 4, name="b")
    s = ops.add(a, b).set_name("s")
    m = ops.mul(s, s).set_name("m")          # s used twice by one node
    out = ops.sub(m, a).set_name("out")
    g = gg.build_graph(out)
    assert [t.name for t in g.leafs] == ["a", "b"]
    assert [t.name for t in g.nodes] == ["s", "m", "out"]
    assert g.use_count(s) == 2                # a src in two slots counts twice
    assert g.use_count(a) == 2                # used by s and out
    assert g.use_count(out) == 0
    assert all(t.flags & TensorFlag.COMPUTE for t in g.nodes)
    assert not a.flags & TensorFlag.COMPUTE


def test_auto_names_and_views_are_nodes(ctx: gg.Context) -> None:
    a = ctx.new_tensor(gg.F32, 6, 4)
    r = ops.reshape(a, 4, 6)
    t = ops.transpose(r)
    c = ops.cont(t)
    g = gg.build_graph(c)
    assert g.leafs[0].name == "leaf_0"
    assert [n.op for n in g.nodes] == [Op.RESHAPE, Op.TRANSPOSE, Op.CONT]
    assert t.view_src is a and r.view_src is a  # views point at the root data owner


def test_expand_twice_keeps_use_counts(ctx: gg.Context) -> None:
    a = ctx.new_tensor(gg.F32, 4)
    x = ops.sqr(a)
    y = ops.sqrt(x)
    g = gg.Graph()
    g.build_forward_expand(x)
    g.build_forward_expand(y)
    assert [n.op for n in g.nodes] == [Op.SQR, Op.SQRT]
    assert g.use_count(x) == 1


def test_forward_order_does_not_mark_compute(ctx: gg.Context) -> None:
    a = ctx.new_tensor(gg.F32, 4)
    x = ops.sqr(a)
    g = gg.Graph().build_forward_order(x)
    assert not x.flags & TensorFlag.COMPUTE
    g.build_forward_expand(x)                 # a later expand sets COMPUTE on revisit
    assert x.flags & TensorFlag.COMPUTE


def test_param_tensor_is_a_node(ctx: gg.Context) -> None:
    w = ctx.new_tensor(gg.F32, 4).set_param()
    g = gg.build_graph(ops.sqr(w))
    assert w in g.nodes and w not in g.leafs


def test_graph_size_limit(ctx: gg.Context) -> None:
    x = ctx.new_tensor(gg.F32, 4)
    for _ in range(5):
        x = ops.sqr(x)
    with pytest.raises(GraphError, match="graph is full: 3 nodes"):
        gg.Graph(size=3).build_forward_expand(x)


def test_deep_chain_does_not_recurse(ctx: gg.Context) -> None:
    x = ctx.new_tensor(gg.F32, 4)
    for _ in range(5000):
        x = ops.scale(x, 1.0)
    g = gg.Graph(size=6000).build_forward_expand(x)
    assert g.n_nodes == 5000


def test_set_output_marks_view_chain(ctx: gg.Context) -> None:
    a = ctx.new_tensor(gg.F32, 4, 4)
    v = ops.view(a, (4,), offset=16)
    v.set_output()
    assert a.flags & TensorFlag.OUTPUT and v.flags & TensorFlag.OUTPUT


def test_graph_view_shares_use_counts(ctx: gg.Context) -> None:
    a = ctx.new_tensor(gg.F32, 4)
    x = ops.sqr(a)
    y = ops.add(x, x)
    g = gg.build_graph(y)
    sub = g.view(1, 2)
    assert sub.nodes == [y] and sub.use_count(x) == 2


def test_to_dot_names_every_node(ctx: gg.Context) -> None:
    a = ctx.new_tensor(gg.F32, 4, name="weights|x")
    g = gg.build_graph(ops.silu(a).set_name("act"))
    dot = g.to_dot()
    assert dot.startswith("digraph") and "UNARY" in dot and "act" in dot and "weights/x" in dot
