"""MUL_MATs of one plan that share a src1 quantise it once (LaunchBuilder.derived), and quantise it again where a
node between them wrote over it: an in-place ADD into the src1 after the first MUL_MAT and before the second one."""

from __future__ import annotations

import numpy as np

from pyggml import ops
from pyggml.context import Context
from pyggml.graph import Graph
from pyggml.quants import dequantize, quantize
from pyggml.types import GGMLType as T
from pyggml_conformance.placement import GuardedArena


def test_shared_src1_is_quantised_once_and_again_after_a_write(dev, backend) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(3)
    ctx = Context(no_alloc=True)
    x = ctx.new_tensor(T.F32, 64, 3, name="x")
    ws = [ctx.new_tensor(T.Q8_0, 64, 40, name=f"w{i}") for i in range(3)]
    shift = ctx.new_tensor(T.F32, 64, 3, name="shift")
    y0, y1 = ops.mul_mat(ws[0], x), ops.mul_mat(ws[1], x)       # one quantisation of x
    bumped = ops.add(x, shift, inplace=True)                     # writes over x
    y2 = ops.mul_mat(ws[2], x)                                   # reads x as the graph order leaves it: bumped
    g = Graph()
    for t in (y0, y1, bumped, y2):
        g.build_forward_expand(t)
    assert [n.op.name for n in g.nodes if n.op.name != "NONE"] == ["MUL_MAT", "MUL_MAT", "ADD", "MUL_MAT"]
    pl = GuardedArena(g, dev.buffer_type())
    try:
        xv = rng.standard_normal((3, 64)).astype(np.float32)
        sv = np.full((3, 64), 3.0, np.float32)
        for w in ws:
            q = quantize(rng.standard_normal((40, 64)).astype(np.float32), T.Q8_0)
            w.buffer.set_tensor(w, q)
        wv = [dequantize(np.frombuffer(w.buffer.get_tensor(w), np.uint8), T.Q8_0).reshape(40, 64) for w in ws]
        x.buffer.set_tensor(x, xv.view(np.uint8))
        shift.buffer.set_tensor(shift, sv.view(np.uint8))
        backend.graph_compute(g)
        got = [np.frombuffer(y.buffer.get_tensor(y), np.float32).reshape(3, 40) for y in (y0, y1, y2)]
    finally:
        pl.free()
    for y, w, xin in zip(got, wv, (xv, xv, xv + sv), strict=True):
        np.testing.assert_allclose(y, xin @ w.T, rtol=0.02, atol=0.05 * float(np.abs(xin).max()))
    quantisations = [la for la in backend.last_plan.launches if "quantize" in la.kernel.function_name]
    assert len(quantisations) == 2


def _nodes_and_uses():  # type: ignore[no-untyped-def]
    from pyggml.graph import build_graph

    ctx = Context(no_alloc=True)
    x = ops.scale(ctx.new_tensor(T.F32, 64, 2), 0.5).set_name("x")
    w = [ctx.new_tensor(T.F16, 64, 32) for _ in range(2)]
    g = build_graph(ops.swiglu(ops.mul_mat(w[0], x), ops.mul_mat(w[1], x)))
    return g.nodes, g.use_count


def test_the_scheduler_keeps_a_fused_runs_inputs_apart(dev, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """gate, up and their SWIGLU run as one mat-vec, which reads x while it writes the result. x's last reader in
    the graph is up, so the allocator could give x's memory to the SWIGLU's result; the backend's alloc_deps keep it
    apart, so the fusion applies (without them it may be refused; the numbers are right either way)."""
    from pyggml.alloc import alloc_ctx_tensors
    from pyggml.backend.sched import Scheduler
    from pyggml.graph import build_graph
    from pyggml_testing.devices import numpy_backend

    def run(deps: bool) -> tuple[list[str], np.ndarray, np.ndarray]:
        backend = dev.init_backend()
        if not deps:
            monkeypatch.setattr(backend, "alloc_deps", lambda nodes, uses: [])
        ctx = Context(no_alloc=True)
        w = [ctx.new_tensor(T.F16, 64, 32, name=n) for n in ("wg", "wu")]
        x0 = ctx.new_tensor(T.F32, 64, 2, name="x0")
        x = ops.scale(x0, 0.5).set_name("x")                    # computed on the device, dead after up
        out = ops.swiglu(ops.mul_mat(w[0], x), ops.mul_mat(w[1], x))
        g = build_graph(out)
        buf = alloc_ctx_tensors(ctx, dev.buffer_type())
        assert buf is not None
        rng = np.random.default_rng(5)
        vals = [rng.standard_normal((32, 64)).astype(np.float16) for _ in w]
        for t, v in zip(w, vals, strict=True):
            t.set(v.astype(np.float32))
        xv = rng.standard_normal((2, 64)).astype(np.float32)
        x0.set(xv)
        s = Scheduler([backend, numpy_backend()])
        s.alloc_graph(g)
        s.graph_compute(g)
        kernels = [la.kernel.function_name for la in backend.last_plan.launches]
        xs = (xv * 0.5).astype(np.float16).astype(np.float64)
        gate, up = xs @ vals[0].astype(np.float64).T, xs @ vals[1].astype(np.float64).T
        return kernels, out.numpy().reshape(2, 32), gate / (1 + np.exp(-gate)) * up

    kernels, got, want = run(True)
    assert kernels == ["k_unary", "k_mul_mat_vec_short"]  # SCALE, then gate, up and SWIGLU as one
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)
    deps = dev.init_backend().alloc_deps(*_nodes_and_uses())
    assert ("x", "GLU") in [(s.name, until.op.name) for s, until in deps]  # x kept until the SWIGLU's result
    kernels, got, want = run(False)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)
