"""Helpers for the meta device tests (N distinct fake devices with private memory, graphs run on a meta device and
on one numpy device), and the meta device's own props: memory summed, caps AND-ed, buffer type limits."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pytest

import pyggml as gg
from pyggml.alloc import GraphAllocator, alloc_ctx_tensors
from pyggml.backend.meta import MIRRORED, MetaBackend, MetaDevice, SplitState, SplitStateFn
from pyggml.backend.protocol import Backend, BufferType, DeviceCaps, DeviceType
from pyggml.backend.sched.testing import FakeDevice, fake_device
from pyggml.errors import PyGGMLError
from pyggml.reference.backend import NumpyRegistry
from pyggml.tensor import Tensor
from pyggml.types import GGMLType

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


def nmse(a: npt.ArrayLike, b: npt.ArrayLike) -> float:
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(((x - y) ** 2).sum() / max((y**2).sum(), 1e-300))


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


def numpy_backend() -> Backend:
    return NumpyRegistry().devices()[0].init_backend()


def reference(leafs: Sequence[Leaf], build: Builder) -> npt.NDArray[np.float32]:
    b = numpy_backend()
    out, _ = run(b, b.device.buffer_type(), leafs, build)
    return out.numpy()


def on_meta(backend: MetaBackend, leafs: Sequence[Leaf], build: Builder) -> tuple[Tensor, gg.Graph]:
    return run(backend, backend.device.buffer_type(), leafs, build)


# ---- the device and its buffer type ---------------------------------------------------------------------------


def test_device_props_sum_memory_and_and_caps() -> None:
    devs = [fake_device("a", async_ops=True), fake_device("b", async_ops=True), fake_device("c")]
    meta = MetaDevice(devs)
    p = meta.props()
    assert p.type is DeviceType.META
    assert p.name == "Meta(a,b,c)"
    assert (p.memory_free, p.memory_total) == (3 << 34, 3 << 34)
    assert p.caps == DeviceCaps(async_ops=False)
    assert MetaDevice(devs[:2]).caps == DeviceCaps(async_ops=True)  # events and host buffers stay off
    assert meta.reg.devices() == [meta]


def test_buffer_type_alignment_max_alloc_size_and_full_size_per_device() -> None:
    meta = MetaDevice(devices(3))
    buft = meta.buffer_type()
    assert buft.device is meta and not buft.is_host
    assert buft.alignment == max(b.alignment for b in buft.simple_bufts)
    assert buft.max_size == min(b.max_size for b in buft.simple_bufts)
    buf = buft.alloc_buffer(1000)
    assert [p.size for p in buf.parts] == [1000] * 3
    assert meta.supports_buft(buft) and not meta.supports_buft(buft.simple_bufts[0])
    with pytest.raises(PyGGMLError, match="no flat bytes"):
        buf.read(0, 4)


def test_device_count_and_nesting_are_checked() -> None:
    with pytest.raises(PyGGMLError, match="1 to 16"):
        MetaDevice([])
    with pytest.raises(PyGGMLError, match="1 to 16"):
        MetaDevice(devices(17))
    with pytest.raises(PyGGMLError, match="another meta device"):
        MetaDevice([MetaDevice(devices(2))])
