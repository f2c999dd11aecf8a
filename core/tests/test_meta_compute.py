"""Computing on the meta device: column/row-parallel MUL_MAT on 2 and 3 devices equal one device, allreduces
(butterfly for any count, in-process, a registry's extension with fallback), zero-share devices, delayed reduction,
plan reuse, asynchronous devices, and bad input refused before anything runs."""

from __future__ import annotations

import numpy as np
import pytest

import pyggml as gg
from pyggml import ops
from pyggml.alloc import alloc_ctx_tensors
from pyggml.backend.extensions import COMM_INIT
from pyggml.backend.meta import (
    RULES,
    ButterflyAllreduce,
    InProcessCommunicator,
    MetaBackend,
    MetaDevice,
    SplitRuleError,
    partial,
    split,
    split_shares,
)
from pyggml.errors import UnsupportedOpError, UnsupportedTypeError
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_testing.compare import nmse
from pyggml_testing.devices import FakeDevice, FakeRegistry, fake_device
from pyggml_testing.meta import K, M, T, by_name, leaf, make_meta, mlp, mlp_leafs, mlp_states, on_meta, place, reference


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("wtype", [GGMLType.F32, GGMLType.Q4_1])
def test_column_then_row_parallel_equals_one_device(n: int, wtype: GGMLType) -> None:
    _meta, backend, _ = make_meta(n, mlp_states(n))
    out, _g = on_meta(backend, mlp_leafs(wtype), mlp)
    assert nmse(out.numpy(), reference(mlp_leafs(wtype), mlp)) < 1e-12
    assert backend.last_plan.n_allreduce == 1 and len(backend.last_plan.subgraphs) == 2


@pytest.mark.parametrize("n", [2, 3])
def test_column_parallel_mul_mat_alone(n: int) -> None:
    meta, backend, _devs = make_meta(n, mlp_states(n))

    def col(ts: dict[str, Tensor]) -> Tensor:
        return ops.mul_mat(ts["w_up"], ts["x"])

    out, _ = on_meta(backend, mlp_leafs(), col)
    assert meta.split_state(out).extents() == split_shares(M, n, granularity=32)
    assert nmse(out.numpy(), reference(mlp_leafs(), col)) < 1e-12
    assert backend.last_plan.n_allreduce == 0


@pytest.mark.parametrize("n", [2, 3, 4, 5])
@pytest.mark.parametrize("comm", ["butterfly", "inprocess"])
def test_row_parallel_mul_mat_alone_is_reduced(n: int, comm: str) -> None:
    rows = split_shares(M, n)
    meta, backend, _ = make_meta(n, {"w": split(0, rows), "x": split(0, rows)}, comm=comm)
    leafs = [leaf("w", (M, 7), seed=4), leaf("x", (M, 3), seed=5)]

    def row(ts: dict[str, Tensor]) -> Tensor:
        return ops.mul_mat(ts["w"], ts["x"])

    out, _ = on_meta(backend, leafs, row)
    assert meta.split_state(out, assume_sync=False).axis.name == "PARTIAL"
    assert nmse(out.numpy(), reference(leafs, row)) < 1e-12  # the final partial sum is reduced too
    assert backend.last_plan.n_allreduce == 1
    d = [t.numpy() for t in meta.simple_tensors(out)]
    assert all(np.array_equal(d[0], x) for x in d[1:])  # every device holds the same sums, bit for bit


def test_butterfly_rounds() -> None:
    def rounds(n: int) -> list[list[tuple[int, int]]]:
        return ButterflyAllreduce([fake_device(f"b{j}").init_backend() for j in range(n)]).steps()

    assert rounds(2) == [[(0, 1), (1, 0)]]
    assert rounds(3) == [[(2, 0)], [(0, 1), (1, 0)]]
    assert len(rounds(4)) == 2 and len(rounds(5)) == 3 and len(rounds(8)) == 3 and rounds(1) == []


class CountingComm:
    def __init__(self, answer: bool) -> None:
        self.answer, self.calls = answer, 0

    def allreduce_tensor(self, tensors: list[Tensor]) -> bool:
        self.calls += 1
        if self.answer:
            InProcessCommunicator([t.buffer.buft.device.init_backend() for t in tensors]).allreduce(tensors)
        return self.answer


@pytest.mark.parametrize("answer", [True, False])
def test_registry_comm_extension_and_per_call_fallback(answer: bool) -> None:
    ctx = CountingComm(answer)

    class CommRegistry(FakeRegistry):
        def get_extension(self, name: str) -> object | None:
            return (lambda backends: ctx) if name == COMM_INIT else None

    reg = CommRegistry("comm")
    devs = [FakeDevice(reg, "c0"), fake_device("c1"), fake_device("c2")]
    meta = MetaDevice(devs, by_name(mlp_states(3)))
    backend = MetaBackend(meta)
    assert backend.comm.name == "extension"
    out, _ = on_meta(backend, mlp_leafs(), mlp)
    assert nmse(out.numpy(), reference(mlp_leafs(), mlp)) < 1e-12
    assert ctx.calls == 1 and backend.stats.fallbacks == (0 if answer else 1)


@pytest.mark.parametrize("ratios", [[3, 1], [1, 0], [0, 1], [1, 0, 2]])
def test_uneven_and_zero_shares(ratios: list[float]) -> None:
    n = len(ratios)
    _meta, backend, devs = make_meta(n, mlp_states(n, ratios))
    out, _ = on_meta(backend, mlp_leafs(), mlp)
    assert nmse(out.numpy(), reference(mlp_leafs(), mlp)) < 1e-12
    for j, r in enumerate(ratios):
        if r == 0:  # nothing of this device's is computed; its zeroed partial sum still joins the allreduce
            assert [name for name in devs[j].computed if "allreduce" not in name] == ["node_3"]


def test_plans_are_reused_and_rebuilt_when_srcs_change() -> None:
    _meta, backend, _ = make_meta(2, mlp_states(2))
    _out, g = on_meta(backend, mlp_leafs(), mlp)
    backend.graph_compute(g)
    backend.graph_compute(g)
    assert backend.plans_built == 1 and backend.stats.computes == 3 and backend.stats.allreduces == 3



def test_butterfly_keeps_the_add_graphs_of_many_tensor_sets_until_a_temporary_moves() -> None:
    devs = [fake_device(f"bf{j}") for j in range(2)]
    bf = ButterflyAllreduce([d.init_backend() for d in devs])

    def sets(n: int, k: int) -> list[list[Tensor]]:
        return [[place([leaf("t", (k,), seed=10 * i + j)], d.buffer_type())["t"] for j, d in enumerate(devs)]
                for i in range(n)]

    many = sets(70, 8)  # more sets than the old cache of 64 held: a cycle through them used to rebuild every graph
    for ts in many:
        bf.allreduce(ts)
    graphs = [bf._prepared(ts)[0][0][1] for ts in many]
    for ts in many:
        bf.allreduce(ts)
    assert all(bf._prepared(ts)[0][0][1] is g for ts, g in zip(many, graphs, strict=True))
    small, big = many[0], sets(1, 64)[0]
    bf.allreduce(big)  # the temporaries grow: the small set's ADD graphs read a freed buffer, so they are rebuilt
    want = small[0].numpy() * 2
    bf.allreduce(small)
    assert bf._prepared(small)[0][0][1] is not graphs[0]
    assert all(np.array_equal(t.numpy(), want) for t in small)

def test_asynchronous_devices() -> None:
    _meta, backend, devs = make_meta(3, mlp_states(3), async_ops=True)
    for d in devs:
        d.delay = 0.002
    out, _g = on_meta(backend, mlp_leafs(), mlp)
    assert nmse(out.numpy(), reference(mlp_leafs(), mlp)) < 1e-12


# ---- delayed reduction ------------------------------------------------------------------------------------------


def test_a_mul_by_a_mirrored_value_joins_the_partial_sum() -> None:
    _meta, backend, _ = make_meta(2, {"w": split(0, (40, 56)), "x": split(0, (40, 56))})
    leafs = [leaf("w", (M, 8), seed=1), leaf("x", (M, 3), seed=2), leaf("g", (8, 3), seed=3),
             leaf("r", (8, 3), seed=4)]

    def build(ts: dict[str, Tensor]) -> Tensor:
        y = ops.mul_mat(ts["w"], ts["x"]).set_name("y")
        return ops.add(ops.mul(y, ts["g"]).set_name("scaled"), ts["r"])

    out, g = on_meta(backend, leafs, build)
    p = backend.plan(g)
    assert p.n_allreduce == 1 and p.subgraphs[0].graphs[0].nodes[-1].name == "scaled"
    assert nmse(out.numpy(), reference(leafs, build)) < 1e-12
    with pytest.raises(UnsupportedOpError, match="partial sum"):
        g.get_tensor("y").numpy()  # type: ignore[union-attr]


@pytest.mark.parametrize("rows", [(40, 56), (96, 0), (0, 96)])
def test_delayed_reduction_with_an_idle_device(rows: tuple[int, int]) -> None:
    _, backend, devs = make_meta(2, {"w": split(0, rows), "x": split(0, rows)})
    leafs = [leaf("w", (M, 8), seed=1), leaf("x", (M, 3), seed=2), leaf("g", (8, 3), seed=3),
             leaf("h", (8, 3), seed=5), leaf("r", (8, 3), seed=4)]

    def build(ts: dict[str, Tensor]) -> Tensor:
        y = ops.mul_mat(ts["w"], ts["x"])
        scaled = ops.mul(ops.mul(y, ts["g"]), ts["h"]).set_name("scaled")
        return ops.add(scaled, ts["r"])

    out, g = on_meta(backend, leafs, build)
    assert backend.plan(g).n_allreduce == 1
    assert nmse(out.numpy(), reference(leafs, build)) < 1e-12
    for j, n in enumerate(rows):
        if n == 0:  # the product and the MULs joining it are not computed; their zeroed sum joins the allreduce
            assert not any(name.startswith(("node_0", "node_1", "scaled")) and "allreduce" not in name
                           for name in devs[j].computed)


def test_moe_views_and_adds_are_reduced_once() -> None:
    n_exp, n_used, n_tok, d_in, d_out = 4, 3, 2, 64, 8
    rows = (32, 32)
    _meta, backend, _ = make_meta(2, {"experts": split(0, rows), "acts": split(0, rows)})
    ids = np.array([[0, 2, 3], [1, 0, 2]], dtype=np.float32)
    leafs = [leaf("experts", (d_in, d_out, n_exp), seed=1), leaf("acts", (d_in, n_used, n_tok), seed=2),
             leaf("ids", (n_used, n_tok), GGMLType.I32, value=ids)]

    def build(ts: dict[str, Tensor]) -> Tensor:
        y = ops.mul_mat_id(ts["experts"], ts["acts"], ts["ids"])  # [d_out, n_used, n_tok], partial
        views = [ops.view(y, (d_out, n_tok), (y.nb[2],), k * y.nb[1]) for k in range(n_used)]
        build.first = views  # type: ignore[attr-defined]
        acc = ops.add(views[0], views[1])
        for v in views[2:]:
            acc = ops.add(acc, v)
        return ops.scale(acc, 2.0)

    out, g = on_meta(backend, leafs, build)
    p = backend.plan(g)
    assert p.n_allreduce == 1 and p.subgraphs[0].graphs[0].nodes[-1].op is Op.ADD
    assert nmse(out.numpy(), reference(leafs, build)) < 1e-12


def test_two_partial_branches_added_are_reduced_once() -> None:
    rows = (48, 48)
    _meta, backend, _ = make_meta(2, {"w1": split(0, rows), "w2": split(0, rows), "x": split(0, rows)})
    leafs = [leaf("w1", (M, 8), seed=1), leaf("w2", (M, 8), seed=2), leaf("x", (M, 3), seed=3)]

    def build(ts: dict[str, Tensor]) -> Tensor:
        return ops.sqr(ops.add(ops.mul_mat(ts["w1"], ts["x"]), ops.mul_mat(ts["w2"], ts["x"])))

    out, g = on_meta(backend, leafs, build)
    assert backend.plan(g).n_allreduce == 1
    assert nmse(out.numpy(), reference(leafs, build)) < 1e-12


def test_partial_leafs_sum_through_linear_ops() -> None:
    _meta, backend, _ = make_meta(3, {"a": partial(), "b": partial([1, 0, 1])})
    leafs = [leaf("a", (6, 2), seed=1), leaf("b", (6, 2), seed=2)]

    def build(ts: dict[str, Tensor]) -> Tensor:
        return ops.scale(ops.add(ts["a"], ts["b"]), 3.0)

    out, _ = on_meta(backend, leafs, build)
    assert nmse(out.numpy(), reference(leafs, build)) < 1e-12


# ---- bad input ----------------------------------------------------------------------------------------------


def test_unsupported_states_are_refused_before_any_compute() -> None:
    _meta, backend, devs = make_meta(2, {"w": split(1, (48, 48))})
    leafs = [leaf("w", (K, M)), leaf("x", (K, T))]

    def build(ts: dict[str, Tensor]) -> Tensor:
        return ops.rms_norm(ops.mul_mat(ts["w"], ts["x"]), 1e-5)  # rows split across devices

    with pytest.raises(SplitRuleError, match=r"RMS_NORM node .* rows are processed whole"):
        on_meta(backend, leafs, build)
    assert all(not d.computed for d in devs)


def test_partial_sums_of_a_type_that_cannot_be_summed_are_refused_before_compute() -> None:
    _, backend, devs = make_meta(2, {"p": partial(), "q": partial()})
    leafs = [leaf("p", (32, 4), seed=1)]

    def build(ts: dict[str, Tensor]) -> Tensor:
        dst = gg.Context(no_alloc=True).new_tensor(GGMLType.Q8_0, 32, 4, name="q")
        alloc_ctx_tensors(dst.ctx, ts["p"].buffer.buft)  # type: ignore[arg-type, union-attr]
        return ops.cpy(ts["p"], dst)  # quantising partial sums: their sum is not a Q8_0 sum

    with pytest.raises(UnsupportedTypeError, match="q8_0 partial sums"):
        on_meta(backend, leafs, build)
    assert not devs[0].computed and not devs[1].computed


def test_an_op_without_rule_or_device_support_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    devs = [fake_device("u0"), fake_device("u1", exclude={Op.SQR})]
    meta = MetaDevice(devs)
    backend = MetaBackend(meta)
    x = leaf("x", (8, 2))
    with pytest.raises(UnsupportedOpError, match=r"device 'u1' cannot compute its slice of node .*SQR"):
        on_meta(backend, [x], lambda ts: ops.sqr(ops.scale(ts["x"], 2.0)))
    assert not devs[0].computed and not devs[1].computed
    monkeypatch.delitem(RULES, Op.CLAMP)
    with pytest.raises(SplitRuleError, match="has no split rule"):
        on_meta(backend, [x], lambda ts: ops.clamp(ts["x"], -1.0, 1.0))
    probe = ops.clamp(ops.scale(place([leaf("p", (4,))], meta.buffer_type())["p"], 1.0), -1.0, 1.0)
    assert not meta.supports_op(probe)
