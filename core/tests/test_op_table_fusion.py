"""OpTable fusions: runs of consecutive compute nodes built as one where every result but the last is read inside the
run only (graph-wide use counts), never where one is read elsewhere or is an output, or no use counts are given;
the longest run first."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from pyggml import ops
from pyggml.backend.op_table import OpTable, RuleSet
from pyggml.context import Context
from pyggml.errors import ComputeError
from pyggml.graph import Graph, build_graph
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType as T


@dataclass
class Recorder:
    node: Tensor | None = None
    work: list[str] = field(default_factory=list)


rules: RuleSet[Recorder] = RuleSet()


@rules.rule(Op.RMS_NORM, Op.MUL, Op.ADD)
def _one(node: Tensor, b: Recorder) -> None:
    assert b.node is node
    b.work.append(node.op.name)


@rules.fusion(Op.RMS_NORM, Op.MUL, accepts=lambda run: run[1].src[0] is run[0])
@rules.fusion(Op.RMS_NORM, Op.MUL, Op.ADD, accepts=lambda run: run[1].src[0] is run[0] and run[2].src[0] is run[1])
def _fused(run: tuple[Tensor, ...], b: Recorder) -> None:
    assert b.node is run[-1]
    if run[-1].name == "explode":
        raise ValueError("boom")
    b.work.append("+".join(n.op.name for n in run))


TABLE = OpTable("test", rules)


def _graph(keep_norm: bool = False, norm_twice: bool = False, weight_first: bool = False, bias: bool = False
           ) -> Graph:
    ctx = Context(no_alloc=True)
    x, w = ctx.new_tensor(T.F32, 8, 3, name="x"), ctx.new_tensor(T.F32, 8, name="w")
    y = ops.rms_norm(x, 1e-5)
    out = ops.mul(ops.rms_norm(ctx.new_tensor(T.F32, 8, 3), 1e-5), y) if weight_first else ops.mul(y, w)
    if keep_norm:
        y.set_output()
    if norm_twice:
        out = ops.add(y, out)  # y read outside the RMS_NORM + MUL run too
    if bias:
        out = ops.add(out, ctx.new_tensor(T.F32, 8, name="b"))
    return build_graph(out)


def test_a_norm_feeding_only_its_mul_is_fused() -> None:
    g, b = _graph(), Recorder()
    assert TABLE.build(g.nodes, b, "dev", g.use_count) == [n for n in g.nodes if n.op is not Op.NONE]
    assert b.work == ["RMS_NORM+MUL"]


@pytest.mark.parametrize("case", ["no use counts", "norm is an output", "norm read twice", "not accepted"])
def test_no_fusion_where_the_first_result_is_needed_or_refused(case: str) -> None:
    g = _graph(keep_norm=case == "norm is an output", norm_twice=case == "norm read twice",
               weight_first=case == "not accepted")
    b = Recorder()
    TABLE.build(g.nodes, b, "dev", None if case == "no use counts" else g.use_count)
    assert "RMS_NORM+MUL" not in b.work and b.work.count("RMS_NORM") >= 1


def test_the_longest_run_is_fused() -> None:
    g, b = _graph(bias=True), Recorder()
    TABLE.build(g.nodes, b, "dev", g.use_count)
    assert b.work == ["RMS_NORM+MUL+ADD"]


def test_a_failing_fusion_names_the_node() -> None:
    g = _graph()
    g.nodes[-1].set_name("explode")
    with pytest.raises(ComputeError, match=r"dev: preparing node .* \(RMS_NORM\) fused with node 'explode' "
                                           r"\(MUL\) failed: ValueError: boom"):
        TABLE.build(g.nodes, Recorder(), "dev", g.use_count)


def test_two_fusions_for_one_run_in_a_family_are_refused() -> None:
    with pytest.raises(ValueError, match="RMS_NORM \\+ MUL has two fusions"):
        rules.fusion(Op.RMS_NORM, Op.MUL, accepts=lambda run: True)(_fused)
    with pytest.raises(ValueError, match="two nodes or more"):
        rules.fusion(Op.RMS_NORM, accepts=lambda run: True)(_fused)


def test_alloc_deps_name_each_runs_outside_srcs_until_its_last_node() -> None:
    g = _graph(bias=True)
    deps = TABLE.alloc_deps(g.nodes, g.use_count)
    last = g.nodes[-1]
    assert {s.name for s, until in deps} == {"x", "w", "b"} and all(until is last for _, until in deps)
    kept = _graph(keep_norm=True)
    assert TABLE.alloc_deps(kept.nodes, kept.use_count) == []  # no run: nothing to keep


def test_the_scheduler_places_a_backends_alloc_deps_after_their_node(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A dependency node reading the src follows the run's last node in the allocation graph, so the allocator
    frees the src only after it has placed that node."""
    from pyggml.backend.sched import Scheduler
    from pyggml_testing.devices import fake_device, numpy_backend

    gpu = fake_device("gpu").init_backend()
    g = _graph()
    x = next(s for n in g.nodes for s in n.src if s is not None and s.name == "x")
    monkeypatch.setattr(gpu, "alloc_deps", lambda nodes, uses: [(x, nodes[-1])])
    plan = Scheduler([gpu, numpy_backend()]).split_graph(g)
    names = [n.name for n in plan.alloc_graph.nodes]
    assert names[names.index(g.nodes[-1].name) + 1] == "x (dep)"
