"""The cpu backend under the meta device (tensor parallelism over two cpu backends): a replayed split graph
reuses every plan. A meta split hands each device one subgraph per allreduce plus the allreduce's own ADD graphs,
more graphs per compute than a small bounded cache holds; none of them may be planned again on replay."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

import pyggml as gg
from pyggml import ops
from pyggml.alloc import GraphAllocator, alloc_ctx_tensors
from pyggml.backend.meta import MIRRORED, MetaBackend, MetaDevice, SplitState, split, split_shares
from pyggml.backend.protocol import Backend, BufferType, Device
from pyggml.tensor import Tensor

K, M, T = 64, 96, 3
LAYERS = 70
"""Row-parallel layers, one allreduce each: more than 64 (the butterfly's cache of ADD graphs) and far more
graphs per device than 32."""


def _weights(rng: np.random.Generator) -> dict[str, npt.NDArray[np.float32]]:
    return {"w_up": (rng.standard_normal((M, K)) / np.sqrt(K)).astype(np.float32),
            "w_down": (rng.standard_normal((K, M)) / np.sqrt(M)).astype(np.float32),
            "x": rng.standard_normal((T, K)).astype(np.float32)}


def _build(buft: BufferType, values: dict[str, npt.NDArray[np.float32]]) -> tuple[Tensor, dict[str, Tensor],
                                                                                  gg.Graph]:
    ctx = gg.Context(no_alloc=True)
    ts = {name: ctx.new_tensor("f32", *reversed(v.shape), name=name) for name, v in values.items()}
    alloc_ctx_tensors(ctx, buft)
    for name, v in values.items():
        ts[name].set(v)
    with gg.Context(no_alloc=True):
        x = ts["x"]
        for _ in range(LAYERS):  # column parallel up, row parallel down (a partial sum), normalised after the sum
            x = ops.rms_norm(ops.mul_mat(ts["w_down"], ops.gelu(ops.mul_mat(ts["w_up"], x))), 1e-6)
    g = gg.Graph(8192).build_forward_expand(x.set_output())
    ga = GraphAllocator(buft)
    ga.reserve(g)
    ga.alloc_graph(g)
    return x, ts, g


def _states(t: Tensor) -> SplitState:
    cols = split_shares(M, 2, granularity=32)
    return {"w_up": split(1, cols), "w_down": split(0, cols)}.get(t.name, MIRRORED)


def _builds(backend: MetaBackend) -> list[int]:
    return [b.executor.plans.builds for b in backend.backends]  # type: ignore[attr-defined]


def test_a_replayed_meta_split_graph_builds_no_plan(cpu_device: Device, cpu_backend: Backend) -> None:
    values = _weights(np.random.default_rng(7))
    backend = MetaBackend(MetaDevice([cpu_device, cpu_device], _states), "n_threads=1")
    try:
        out, ts, g = _build(backend.device.buffer_type(), values)
        backend.graph_compute(g)
        first = _builds(backend)
        assert backend.last_plan.n_allreduce == LAYERS
        assert all(n > 2 * LAYERS for n in first)  # every subgraph and every ADD graph was planned once ...
        x2 = values["x"] * 2 - 1
        ts["x"].set(x2)
        backend.graph_compute(g)
        backend.graph_compute(g)
        assert _builds(backend) == first  # ... and no graph is planned again
        assert backend.plans_built == 1
        got = out.numpy()
    finally:
        backend.free()
    ref, _, ref_g = _build(cpu_device.buffer_type(), {**values, "x": x2})
    cpu_backend.graph_compute(ref_g)
    want = ref.numpy()
    assert float(((got - want) ** 2).sum() / (want**2).sum()) < 1e-10
