"""Helpers of the meta device tests: N distinct fake devices with private memory, leafs placed on a meta device,
graphs run there and on one numpy device, and a small MLP split column- then row-parallel."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

import pyggml as gg
from pyggml import ops
from pyggml.alloc import GraphAllocator, alloc_ctx_tensors
from pyggml.backend.meta import MIRRORED, MetaBackend, MetaDevice, SplitState, SplitStateFn, split, split_shares
from pyggml.backend.protocol import Backend, BufferType
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_testing.devices import FakeDevice, fake_device, numpy_backend

Arrays = dict[str, npt.NDArray[np.float32]]


def devices(n: int, **kw: object) -> list[FakeDevice]:
    """n distinct devices with private memory: a tensor read on the wrong device fails loudly."""
    return [fake_device(f"dev{j}", **kw) for j in range(n)]


def by_name(table: dict[str, SplitState]) -> SplitStateFn:
    return lambda t: table.get(t.name, MIRRORED)


def make_meta(n: int, states: dict[str, SplitState] | SplitStateFn | None = None,
              comm: str | None = None, **kw: object) -> tuple[MetaDevice, MetaBackend, list[FakeDevice]]:
    devs = devices(n, **kw)
    fn = by_name(states) if isinstance(states, dict) else states
    meta = MetaDevice(devs, fn)
    backend = MetaBackend(meta, comm=comm)
    return meta, backend, devs


@dataclass
class Leaf:
    name: str
    type: GGMLType
    ne: tuple[int, ...]
    value: npt.NDArray[np.float32]


def leaf(name: str, ne: tuple[int, ...], ttype: GGMLType = GGMLType.F32, seed: int = 0,
         value: npt.ArrayLike | None = None) -> Leaf:
    shape = tuple(reversed(ne))
    v = np.random.default_rng(seed).standard_normal(shape) if value is None else np.asarray(value)
    return Leaf(name, ttype, ne, v.astype(np.float32).reshape(shape))


Builder = Callable[[dict[str, Tensor]], Tensor]


def place(leafs: Sequence[Leaf], buft: BufferType) -> dict[str, Tensor]:
    ctx = gg.Context(no_alloc=True)
    ts = {lf.name: ctx.new_tensor(lf.type, *lf.ne, name=lf.name) for lf in leafs}
    alloc_ctx_tensors(ctx, buft)
    for lf in leafs:
        ts[lf.name].set(lf.value)
    return ts


def run(backend: Backend, buft: BufferType, leafs: Sequence[Leaf], build: Builder) -> tuple[Tensor, gg.Graph]:
    """Place the leafs in `buft`, build the graph, allocate it there and compute it. Tensors the builder lists
    in build.first (a list attribute) enter the graph before the output (llama.cpp expands MoE expert views first)."""
    ts = place(leafs, buft)
    with gg.Context(no_alloc=True):
        out = build(ts)
    g = gg.Graph()
    for t in getattr(build, "first", []):
        g.build_forward_expand(t)
    g = g.build_forward_expand(out.set_output())
    ga = GraphAllocator(buft)
    ga.reserve(g)
    ga.alloc_graph(g)
    backend.graph_compute(g)
    return out, g


def reference(leafs: Sequence[Leaf], build: Builder) -> npt.NDArray[np.float32]:
    b = numpy_backend()
    out, _ = run(b, b.device.buffer_type(), leafs, build)
    return out.numpy()


def on_meta(backend: MetaBackend, leafs: Sequence[Leaf], build: Builder) -> tuple[Tensor, gg.Graph]:
    return run(backend, backend.device.buffer_type(), leafs, build)


# ---- a small MLP: column parallel, then row parallel -----------------------------------------------------------

K, M, T = 64, 96, 5
"""The MLP's input width, hidden width (three 32-element units per device of three) and token count."""


def mlp_leafs(wtype: GGMLType = GGMLType.F32) -> list[Leaf]:
    return [leaf("w_up", (K, M), wtype, seed=1), leaf("w_down", (M, K), wtype, seed=2), leaf("x", (K, T), seed=3)]


def mlp(ts: dict[str, Tensor]) -> Tensor:
    h = ops.gelu(ops.mul_mat(ts["w_up"], ts["x"]))  # column parallel: h split by rows
    return ops.scale(ops.mul_mat(ts["w_down"], h), 0.5)  # row parallel: partial sums, then one allreduce


def mlp_states(n: int, ratios: Sequence[float] | None = None) -> dict[str, SplitState]:
    """w_up split by columns and w_down by rows alike, in 32-element units."""
    cols = split_shares(M, n, ratios, granularity=32)
    return {"w_up": split(1, cols), "w_down": split(0, cols)}
