"""MetalSim0, the emulator as a device: barriers, bad indices, buffer lifetimes on the real path (numerics of every
op are the conformance suite's: make conformance-metal)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from pyggml import ops
from pyggml.backend.protocol import Device
from pyggml.context import Context
from pyggml.errors import ComputeError
from pyggml.graph import build_graph
from pyggml_metal_sim.registry import MetalSimRegistry
from pyggml_testing.buffers import check_free_during_compute, check_use_after_free
from pyggml_testing.on_device import place_graph

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the emulator (g++, ucontext fibers) is built and "
                                "checked on Linux; on a Mac, Metal0 is the device")


@pytest.fixture(scope="module")
def sim() -> Device:
    mp = pytest.MonkeyPatch()
    mp.setenv("PYGGML_METAL_SIM", "1")
    try:
        devs = [d for d in MetalSimRegistry().devices() if d.name == "MetalSim0"]
    finally:
        mp.undo()
    assert devs, "PYGGML_METAL_SIM=1 gives MetalSim0"
    return devs[0]


def _soft_max(dev: Device, rows: int = 5, n: int = 1000):  # type: ignore[no-untyped-def]
    ctx = Context(no_alloc=True)
    x = ctx.new_tensor("f32", n, rows, name="x")
    y = ops.soft_max(x)
    g = build_graph(y)
    buf = place_graph(g, dev.buffer_type())
    xv = np.random.default_rng(1).standard_normal((rows, n)).astype(np.float32) * 4
    x.set(xv)
    return xv, y, g, buf


def test_threadgroup_reductions_match_numpy(sim: Device) -> None:
    """SOFT_MAX reduces a row in threadgroup memory across barriers (128 fibers per group)."""
    xv, y, g, _buf = _soft_max(sim)
    be = sim.init_backend()
    be.graph_compute(g)
    e = np.exp(xv - xv.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y.numpy(), e / e.sum(axis=1, keepdims=True), rtol=2e-5, atol=1e-9)
    be.graph_compute(g)  # replayed
    assert be.plans_built == 1  # type: ignore[attr-defined]


def test_bad_index_raises_naming_the_node(sim: Device) -> None:
    ctx = Context(no_alloc=True)
    rows = ctx.new_tensor("f32", 8, 4, name="rows")
    idx = ctx.new_tensor("i32", 2, name="idx")
    y = ops.get_rows(rows, idx).set_name("picked")
    g = build_graph(y)
    place_graph(g, sim.buffer_type())
    rows.set(np.ones((4, 8), np.float32))
    idx.set(np.array([1, 9], np.int32))
    be = sim.init_backend()
    with pytest.raises(ComputeError, match="MetalSim0: node 'picked'"):
        be.graph_compute(g)
    idx.set(np.array([1, 3], np.int32))
    be.graph_compute(g)
    assert np.all(y.numpy() == 1)


def test_use_after_free_and_free_during_compute(sim: Device) -> None:
    _xv, y, g, buf = _soft_max(sim)
    be = sim.init_backend()
    be.graph_compute(g)
    check_use_after_free(be, g, y, buf)
    check_free_during_compute(be, lambda: _soft_max(sim)[2:])


def test_profiled_compute_times_each_node(sim: Device, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 35: each node's dispatches in a command buffer of their own, timed by its (emulated) GPU start and end:
    one event per computing node, in order, no whole-graph fallback; the normal compute stays one command buffer."""
    from pyggml.ops.base import VIEW_OPS
    from pyggml.profile import Profile
    from pyggml_testing.profiling import check_node_profile, profile_graph

    be = sim.init_backend()
    check_node_profile(be)
    g, _, _ = profile_graph()
    place_graph(g, sim.buffer_type())
    commits: list[object] = []
    commit = be.device.commit  # type: ignore[attr-defined]

    def counted(cb: object) -> object:
        commits.append(cb)
        return commit(cb)

    monkeypatch.setattr(be.device, "commit", counted)
    be.graph_compute(g)
    assert len(commits) == 1
    with Profile() as prof:
        prof.compute(be, g)
    assert len(commits) == 1 + len([n for n in g.nodes if n.op not in VIEW_OPS]) == 1 + len(prof.node_events())
