"""Replay and host/device ordering stress: a recorded command buffer is replayed only where every dispatch would
read and write the same bytes (pipeline slots rewire a node's srcs to per-slot input copies while the nodes stay
the same), and host access to mapped memory waits for submitted work that uses the buffer."""

from __future__ import annotations

import numpy as np
import pytest

import pyggml as gg
from pyggml import ops
from pyggml.alloc import alloc_ctx_tensors
from pyggml.backend.protocol import BufferUsage
from pyggml.backend.sched import Scheduler
from pyggml.reference.backend import NumpyRegistry
from pyggml_testing.on_device import rand


def _host_input_graph(device, k: int = 64, m: int = 48, n: int = 5):  # type: ignore[no-untyped-def]
    """Weights in Vulkan memory; an INPUT on the host side (copied per pipeline slot into Vulkan memory)."""
    wctx = gg.Context(no_alloc=True)
    w = wctx.new_tensor("f32", k, m, name="w")
    wbuf = alloc_ctx_tensors(wctx, device.buffer_type(), BufferUsage.WEIGHTS)
    w.set(rand(m, k, seed=99))
    ctx = gg.Context(no_alloc=True)
    x = ctx.new_tensor("f32", k, n, name="x").set_input()
    y = ops.rms_norm(ops.mul_mat(w, ops.scale(x, 2.0)), 1e-6)
    y.set_output()
    return wbuf, w, x, y, gg.Graph().build_forward_expand(y)


@pytest.mark.parametrize("sync", [True, False])
def test_pipeline_slots_reusing_one_graph_read_their_own_inputs(device, sync):
    """One graph computed again and again with parallel=True: each call uses the next pipeline slot, whose split
    graph has the same nodes but srcs rewired to that slot's input copy. Replaying slot 0's recording for slot 1
    would read slot 0's (stale or concurrently rewritten) input."""
    _keep, w, x, y, g = _host_input_graph(device)
    cpu = NumpyRegistry().devices()[0].init_backend()
    s = Scheduler([device.init_backend(), cpu], parallel=True)
    wv = w.numpy().astype(np.float64)
    for i in range(9):
        xi = rand(5, 64, seed=i)
        s.alloc_graph(g)
        x.set(xi)
        if sync:
            s.graph_compute(g)
        else:
            s.graph_compute_async(g)
            s.synchronize()
        z = (2.0 * xi.astype(np.float64)) @ wv.T
        ref = z / np.sqrt((z * z).mean(-1, keepdims=True) + 1e-6)
        assert np.allclose(y.numpy(), ref, rtol=1e-4, atol=1e-5), f"call {i} (slot {s.cur_copy})"


def _slow_graph(device):  # type: ignore[no-untyped-def]
    """A graph that runs for a while on lavapipe, so host access right after the submit overlaps it."""
    from pyggml_testing.on_device import place_graph

    ctx = gg.Context(no_alloc=True)
    a = ctx.new_tensor("f32", 1024, 512, name="a")
    x = ctx.new_tensor("f32", 1024, 64, name="x")
    at = ops.cont(ops.transpose(a))
    y = ops.mul_mat(a, x)                # [512, 64]
    for _ in range(3):
        y = ops.mul_mat(a, ops.mul_mat(at, y))
    g = gg.Graph().build_forward_expand(y)
    place_graph(g, device.buffer_type())
    return a, x, y, g


def test_host_access_waits_for_the_graph_that_binds_the_buffer(device):
    """tensor.set() right after graph_compute_async must not change what the running graph reads, and
    tensor.numpy() must see the finished result (the mapped memory of lavapipe is read and written directly)."""
    be = device.init_backend()
    a, x, y, g = _slow_graph(device)
    a.set(rand(512, 1024, seed=1, scale=0.03))
    xs = [rand(64, 1024, seed=2 + i) for i in range(3)]
    want = []
    for xi in xs:
        x.set(xi)
        be.graph_compute(g)
        want.append(y.numpy())
    for xi, wi in zip(xs, want, strict=True):
        x.set(xi)
        be.graph_compute_async(g)
        x.set(np.zeros_like(xi))
        assert np.array_equal(y.numpy(), wi)
    be.synchronize()
    be.free()


def test_kv_cache_write_then_view_read_is_behind_a_barrier(device):
    """SET_ROWS into a cache and a view of the cache read later in the same command buffer: the reader waits for
    the write (byte ranges overlap), an unrelated dispatch in between does not."""
    from pyggml_testing.on_device import place_graph

    be = device.init_backend()
    ctx = gg.Context(no_alloc=True)
    cache = ctx.new_tensor("f16", 64, 32, name="cache")
    rows = ctx.new_tensor("f32", 64, 3, name="rows")
    idx = ctx.new_tensor("i64", 3, name="idx")
    q = ctx.new_tensor("f32", 64, 2, name="q")
    stored = ops.set_rows(cache, rows, idx)
    other = ops.scale(q, 3.0)                                   # independent of the cache
    view = ops.view(stored, (64, 8), (stored.nb[1],))          # the first 8 cache rows
    out = ops.add(ops.mul_mat(view, other), ops.sum_rows(other))
    g = gg.Graph().build_forward_expand(out)
    place_graph(g, device.buffer_type())
    cache.set(np.zeros((32, 64), np.float32))
    r = rand(3, 64)
    rows.set(r)
    idx.set(np.array([0, 5, 7], np.int64))
    q.set(rand(2, 64, seed=1))
    be.graph_compute(g)
    rec = be.plan(g)  # the recording just submitted, replayed
    i_set, i_mm = rec.names.index(stored.name), rec.names.index(out.src[0].name)
    assert any(i_set < b <= i_mm for b in rec.barrier_before)
    assert rec.names.index(other.name) not in rec.barrier_before
    kv = np.zeros((8, 64), np.float32)
    kv[[0, 5, 7]] = r.astype(np.float16)
    want = (3.0 * q.numpy().astype(np.float64)) @ kv.T.astype(np.float64)
    want = want + (3.0 * q.numpy().astype(np.float64)).sum(-1, keepdims=True)
    assert np.allclose(out.numpy(), want, rtol=1e-3, atol=1e-3)
    be.free()
