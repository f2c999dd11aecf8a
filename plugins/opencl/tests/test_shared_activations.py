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
