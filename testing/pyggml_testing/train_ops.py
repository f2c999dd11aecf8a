"""Checks of a device backend's training ops beyond the conformance suite's one-shot comparisons, shared by the
cpu, OpenCL and Vulkan tests (each runs them as TrainOpsTests on its device): the ops the allocator may run in
place give the same result when the destination is a source's memory; an optimiser step recorded once and
replayed with new hyper-parameters and gradients follows the numpy reference step after step (parameter and
moments); sums without atomics give the same bits on every run; a bad row id of GET_ROWS_BACK raises an error
naming the node."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pytest

from pyggml import ops
from pyggml.backend.protocol import Device
from pyggml.context import Context
from pyggml.errors import ComputeError
from pyggml.graph import Graph, build_graph
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_testing.compare import nmse
from pyggml_testing.devices import numpy_device
from pyggml_testing.on_device import place

F32 = GGMLType.F32
InPlaceBuild = Callable[[Context], tuple[Tensor, Tensor, Tensor]]
"""Builds (node, src0, src1) of an op that may run in place."""


def _rope_back(c: Context) -> tuple[Tensor, Tensor, Tensor]:
    a, pos = c.new_tensor(F32, 16, 3, 5), c.new_tensor(GGMLType.I32, 5)
    return ops.rope_back(a, pos, ops.RopeParams(12, 2, n_ctx_orig=4096, freq_scale=0.25, ext_factor=1.0)), a, pos


IN_PLACE: dict[str, InPlaceBuild] = {
    "silu_back": lambda c: _pair(c, lambda g, x: ops.silu_back(g, x)),
    "rms_norm_back": lambda c: _pair(c, lambda g, x: ops.rms_norm_back(g, x, 1e-5)),
    "soft_max_back": lambda c: _pair(c, lambda g, y: ops.soft_max_ext_back(g, y, 0.7)),
    "rope_back": _rope_back,
}
"""The training ops core lets the allocator run in place (can_inplace)."""
IN_PLACE_CASES = [(name, alias) for name in IN_PLACE for alias in (0, 1) if (name, alias) != ("rope_back", 1)]
"""(op, the src the destination takes the memory of): every F32 src of the same size (ROPE_BACK's src1 is the
I32 positions)."""


def _pair(c: Context, op: Callable[[Tensor, Tensor], Tensor]) -> tuple[Tensor, Tensor, Tensor]:
    g, x = c.new_tensor(F32, 300, 4, 3), c.new_tensor(F32, 300, 4, 3)
    return op(g, x), g, x


def _inputs(srcs: tuple[Tensor, Tensor], seed: int) -> list[npt.NDArray[np.generic]]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 100, s.nelements()).astype(np.int32) if s.type == GGMLType.I32
            else rng.standard_normal(s.nelements()).astype(np.float32) for s in srcs]


def _compute(device: Device, build: InPlaceBuild, alias: int | None, seed: int) -> npt.NDArray[np.float64]:
    ctx = Context(no_alloc=True)
    node, *srcs = build(ctx)
    g = build_graph(node)
    place(ctx, device.buffer_type())
    if alias is not None:  # the destination in the source's memory, as the allocator's in-place reuse leaves it
        node.buffer, node.offset = srcs[alias].buffer, srcs[alias].offset
    for s, v in zip(srcs, _inputs((srcs[0], srcs[1]), seed), strict=True):
        s.set(v)
    device.init_backend().graph_compute(g)
    if alias is not None:
        assert np.array_equal(srcs[alias].numpy(), node.numpy())  # the source's memory holds the result
    return node.numpy().astype(np.float64)


# ---- optimiser steps replayed ------------------------------------------------------------------------------

class _Steps:
    """One AdamW (or SGD) step as a graph on a device, computed again for every step with new inputs."""

    def __init__(self, device: Device, adamw: bool, shape: tuple[int, ...]) -> None:
        ctx = Context(no_alloc=True)
        self.param = ctx.new_tensor(F32, *shape).set_param()
        self.grad = ctx.new_tensor(F32, *shape)
        self.m, self.v = ctx.new_tensor(F32, *shape), ctx.new_tensor(F32, *shape)
        self.hp = ctx.new_tensor(F32, 7 if adamw else 2)
        out = (ops.opt_step_adamw(self.param, self.grad, self.m, self.v, self.hp) if adamw
               else ops.opt_step_sgd(self.param, self.grad, self.hp))
        self.graph: Graph = build_graph(out)
        place(ctx, device.buffer_type())
        self.backend = device.init_backend()
        self.adamw = adamw

    def run(self, n_steps: int, seed: int) -> list[npt.NDArray[np.float64]]:
        rng = np.random.default_rng(seed)
        shape = self.param.nelements()
        self.param.set(rng.standard_normal(shape).astype(np.float32))
        self.m.set(np.zeros(shape, np.float32))
        self.v.set(np.zeros(shape, np.float32))
        for t in range(1, n_steps + 1):
            alpha, beta1, beta2 = 1e-2 / t, 0.9, 0.999
            hp = ([alpha, beta1, beta2, 1e-8, 0.1, 1 / (1 - beta1 ** t), 1 / (1 - beta2 ** t)] if self.adamw
                  else [alpha, 0.1])
            self.hp.set(np.array(hp, np.float32))
            self.grad.set(rng.standard_normal(shape).astype(np.float32))
            self.backend.graph_compute(self.graph)  # the same graph object: the plan is replayed
        return [t.numpy().astype(np.float64) for t in (self.param, self.m, self.v)]


# ---- determinism --------------------------------------------------------------------------------------------

def _sums(c: Context) -> list[Tensor]:
    rows = c.new_tensor(GGMLType.I32, 600, name="rows")
    logits, labels = c.new_tensor(F32, 1000, 64), c.new_tensor(F32, 1000, 64)
    return [ops.get_rows_back(c.new_tensor(F32, 40, 600), rows, c.new_tensor(F32, 40, 3)),
            ops.cross_entropy_loss(logits, labels), ops.cross_entropy_loss_back(c.new_tensor(F32, 1), logits, labels),
            ops.repeat_back(c.new_tensor(F32, 30, 64, 8), c.new_tensor(F32, 30, 1, 1))]


class TrainOpsTests:
    """The checks as pytest tests, for a device plugin's test module to subclass (`class TestTrainOps(
    TrainOpsTests)`); they run on the module's `device` fixture."""

    @pytest.mark.parametrize(("name", "alias"), IN_PLACE_CASES)
    def test_in_place(self, device: Device, name: str, alias: int) -> None:
        """IN_PLACE[name] with its destination over src `alias` matches the reference computed out of place."""
        build = IN_PLACE[name]
        ref = _compute(numpy_device(), build, None, 1)
        got = _compute(device, build, alias, 1)
        assert nmse(got, ref) < 1e-10, f"{name} in place over src{alias}: NMSE {nmse(got, ref):.3g}"

    @pytest.mark.parametrize("adamw", [True, False], ids=["adamw", "sgd"])
    def test_optimiser_steps_replayed(self, device: Device, adamw: bool) -> None:
        """Five steps of one recorded graph, hyper-parameters and gradients rewritten between them, equal the
        reference's five steps: the kernels read the hyper-parameters on the device and update m and v in
        place."""
        shape = (37, 5, 2)
        ref = _Steps(numpy_device(), adamw, shape).run(5, 7)
        got = _Steps(device, adamw, shape).run(5, 7)
        for what, g, r in zip(("param", "m", "v"), got, ref, strict=True):
            if adamw or what == "param":
                assert nmse(g, r) < 1e-10, f"{what} after 5 steps: NMSE {nmse(g, r):.3g}"

    def test_sums_are_deterministic(self, device: Device) -> None:
        """The reductions without atomics (GET_ROWS_BACK with ids repeated 200 times, the loss, its gradient,
        REPEAT_BACK) give the same bits on two runs."""
        ctx = Context(no_alloc=True)
        outs = _sums(ctx)
        g = build_graph(*outs)
        place(ctx, device.buffer_type())
        rng = np.random.default_rng(3)
        for leaf in g.leafs:
            n = leaf.nelements()
            leaf.set(rng.integers(0, 3, n).astype(np.int32) if leaf.type == GGMLType.I32
                     else rng.standard_normal(n).astype(np.float32))
        backend = device.init_backend()
        runs = []
        for _ in range(2):
            backend.graph_compute(g)
            runs.append([o.numpy().copy() for o in outs])
        for a, b in zip(*runs, strict=True):
            assert np.array_equal(a.view(np.uint32), b.view(np.uint32))

    def test_bad_row_id_names_the_node(self, device: Device) -> None:
        """A row id outside the result's rows: ComputeError naming the node and the range."""
        ctx = Context(no_alloc=True)
        rows, grad = ctx.new_tensor(GGMLType.I32, 3), ctx.new_tensor(F32, 8, 3)
        out = ops.get_rows_back(grad, rows, ctx.new_tensor(F32, 8, 5))
        out.set_name("grad_rows")
        g = build_graph(out)
        place(ctx, device.buffer_type())
        rows.set(np.array([0, 5, 1], np.int32))
        grad.set(np.ones(24, np.float32))
        with pytest.raises(ComputeError, match=r"node 'grad_rows' \(GET_ROWS_BACK.*a row id outside 0\.\.4"):
            backend = device.init_backend()
            backend.graph_compute(g)
            backend.synchronize()
