"""The backend over the fake driver (kernels compiled by the real nvcc, launches recorded): plans, argument
values, CUDA graph capture and replay, failures, transfers and events."""

from __future__ import annotations

import numpy as np
import pytest

from pyggml import ops
from pyggml.context import Context, init_view
from pyggml.errors import AllocationError, ComputeError, UnsupportedOpError
from pyggml.graph import build_graph
from pyggml.types import GGMLType
from pyggml_cuda.backend import CudaBackend
from pyggml_cuda_testing import needs_nvcc
from pyggml_cuda_testing.fakedriver import State, fakelib

pytestmark = needs_nvcc
T = GGMLType


def _place(ctx: Context, buft, offset: int = 0):  # type: ignore[no-untyped-def]
    owners = [t for t in ctx if t.view_src is None]
    align = buft.alignment
    size, offs = offset, []
    for t in owners:
        offs.append(size)
        size += (t.nbytes() + align - 1) // align * align
    buf = buft.alloc_buffer(size)
    for t, o in zip(owners, offs, strict=True):
        t.buffer, t.offset = buf, o
    for t in ctx:
        if t.view_src is not None:
            init_view(t)
    return buf


def _graph(dev, offset: int = 0):  # type: ignore[no-untyped-def]
    ctx = Context(no_alloc=True)
    w = ctx.new_tensor(T.Q4_0, 64, 40, name="w")
    x = ctx.new_tensor(T.F32, 64, 1, name="x")
    xs = ctx.new_tensor(T.F32, 64, 16, name="xs")
    y = ops.add(ops.mul_mat(w, x), ops.mul_mat(w, x))
    z = ops.soft_max(ops.mul_mat(w, xs))
    g = build_graph(y, z)
    buf = _place(ctx, dev.buffer_type(), offset)
    return g, buf, {t.name: t for t in ctx}


def test_plan_launches_bound_kernels_with_tensor_addresses(fake_devices, gpu_state: State) -> None:  # type: ignore[no-untyped-def]
    dev = fake_devices[0]
    g, buf, ts = _graph(dev)
    be = dev.init_backend()
    be.graph_compute(g)
    names = [la.symbol.split("__")[0] for la in gpu_state.launches]
    # the two MUL_MATs of x share one quantisation of it (LaunchBuilder.derived), the second one's mat-vec adds the
    # first one's result as it stores (the MUL_MAT + ADD fusion)
    assert names == ["k_quantize_act", "k_mmvq", "k_mmvq", "k_quantize_act", "k_mmq", "k_soft_max"]
    assert all(la.symbol.count("__") == 1 and len(la.symbol.split("__")[1]) == 12 for la in gpu_state.launches)
    mmvq = gpu_state.launches[1]
    w = ts["w"]
    assert mmvq.args[:2] == (buf.ptr, w.offset) and tuple(mmvq.args[2:6]) == tuple(w.ne)
    assert (mmvq.grid, mmvq.block) == ((10, 1, 1), (128, 1, 1))
    mmq = gpu_state.launches[4]
    assert (mmq.grid, mmq.block) == ((1, 1, 1), (256, 1, 1))
    assert all(la.stream == be.stream.handle and not la.via_graph for la in gpu_state.launches)
    assert be.plans_built == 1 and gpu_state.stack == []


def test_reused_graph_is_captured_then_replayed(fake_devices, gpu_state: State) -> None:  # type: ignore[no-untyped-def]
    dev = fake_devices[0]
    g, _, _ = _graph(dev)
    be = dev.init_backend()
    be.graph_compute(g)
    n = len(gpu_state.launches)
    be.graph_compute(g)  # second run: captured into a CUDA graph and launched as one
    calls = [c[0] for c in gpu_state.calls if c[0].startswith("cu")]
    assert calls == ["cuStreamBeginCapture_v2", "cuStreamEndCapture", "cuGraphInstantiateWithFlags", "cuGraphLaunch"]
    assert len(gpu_state.launches) == 2 * n and all(la.via_graph for la in gpu_state.launches[n:])
    assert [la.args for la in gpu_state.launches[n:]] == [la.args for la in gpu_state.launches[:n]]
    be.graph_compute(g)
    assert [c[0] for c in gpu_state.calls if c[0].startswith("cu")][4:] == ["cuGraphLaunch"]
    assert (be.plans_built, be.captures, be.graph_launches) == (1, 1, 2)
    be.free()
    assert {"cuGraphExecDestroy", "cuGraphDestroy"} <= {c[0] for c in gpu_state.calls}


def test_new_addresses_make_a_new_plan(fake_devices, gpu_state: State) -> None:  # type: ignore[no-untyped-def]
    dev = fake_devices[0]
    be = dev.init_backend()
    g1, _, _ = _graph(dev)
    g2, _, _ = _graph(dev, offset=512)
    be.graph_compute(g1)
    be.graph_compute(g2)
    assert be.plans_built == 2 and be.captures == 0


def test_graphs_can_be_turned_off_per_backend(fake_devices, gpu_state: State) -> None:  # type: ignore[no-untyped-def]
    dev = fake_devices[0]
    g, _, _ = _graph(dev)
    be = dev.init_backend("graphs=0")
    for _ in range(3):
        be.graph_compute(g)
    assert be.captures == 0 and not any(la.via_graph for la in gpu_state.launches)
    assert dev.init_backend({"graphs": False}).use_graphs is False and dev.init_backend().use_graphs


def test_graphs_off_by_environment(graphs_off, fake_devices) -> None:  # type: ignore[no-untyped-def]
    """PYGGML_CUDA_GRAPHS=0 is read when the devices are enumerated: every backend's default."""
    dev = fake_devices[0]
    assert dev.options().graphs is False and dev.init_backend().use_graphs is False
    assert dev.init_backend("graphs=1").use_graphs


def test_capture_failure_falls_back_to_direct_launches(fake_devices, gpu_state: State) -> None:  # type: ignore[no-untyped-def]
    fakelib(gpu_state).fail.add("cuStreamBeginCapture_v2")
    dev = fake_devices[0]
    g, _, _ = _graph(dev)
    be = dev.init_backend()
    for _ in range(3):
        be.graph_compute(g)
    assert be.captures == 0 and len(gpu_state.launches) == 18
    assert [c[0] for c in gpu_state.calls if c[0].startswith("cu")] == ["cuStreamBeginCapture_v2"]  # tried once


def test_a_failing_launch_names_the_node_and_the_backend_recovers(fake_devices, gpu_state: State) -> None:  # type: ignore[no-untyped-def]
    dev = fake_devices[0]
    g, _, _ = _graph(dev)
    be = dev.init_backend()
    gpu_state.fail_launch = "k_mmq"
    with pytest.raises(ComputeError) as ei:
        be.graph_compute(g)
    msg = str(ei.value)
    assert "CUDA0: launching node" in msg and "MUL_MAT -> f32 [40, 16, 1, 1]" in msg and "k_mmq__" in msg
    assert "too many resources" in msg and gpu_state.stack == []
    gpu_state.fail_launch = None
    be.graph_compute(g)


def test_unsupported_and_foreign_tensors_are_refused(fake_devices) -> None:  # type: ignore[no-untyped-def]
    dev = fake_devices[0]
    ctx = Context(no_alloc=True)
    w = ctx.new_tensor(T.IQ2_XXS, 256, 4, name="w")
    out = ops.mul_mat(w, ctx.new_tensor(T.F32, 256, 1, name="x"))
    out.set_name("out")
    assert not dev.supports_op(out)
    g = build_graph(out)
    _place(ctx, dev.buffer_type())
    with pytest.raises(UnsupportedOpError, match="CUDA0: node 'out' MUL_MAT"):
        dev.init_backend().graph_compute(g)
    ctx = Context(no_alloc=True)
    a = ctx.new_tensor(T.F32, 8, name="a")
    s = ops.scale(a, 2.0)
    g = build_graph(s)
    _place(ctx, dev.host_buffer_type())
    with pytest.raises(ComputeError, match=r"tensor 'a' is in .* which this device cannot read"):
        dev.init_backend().graph_compute(g)


def test_async_transfers_and_events(fake_devices, gpu_state: State) -> None:  # type: ignore[no-untyped-def]
    d0, d1 = fake_devices
    b0, b1 = d0.init_backend(), d1.init_backend()
    assert isinstance(b0, CudaBackend)
    ctx = Context(no_alloc=True)
    a = ctx.new_tensor(T.F32, 16, name="a")
    c = ctx.new_tensor(T.F32, 16, name="c")
    _place(ctx, d0.buffer_type())
    ctx2 = Context(no_alloc=True)
    d = ctx2.new_tensor(T.F32, 16, name="d")
    _place(ctx2, d1.buffer_type())
    x = np.arange(16, dtype=np.float32)
    b0.set_tensor_async(a, x.view(np.uint8))
    b0.synchronize()
    assert np.array_equal(a.buffer.get_tensor(a).view(np.float32), x)
    assert b1.cpy_tensor_async(b0, a, d)
    assert np.array_equal(d.buffer.get_tensor(d).view(np.float32), x)
    assert ("cuMemcpyPeerAsync",) in gpu_state.calls
    assert any(c[0] == "wait_for_event" and c[1] == b1.stream.handle for c in gpu_state.calls)
    assert b0.cpy_tensor_async(b0, a, c)  # same device: a device-side copy on the stream
    ev = d0.event_new()
    b0.event_record(ev)
    b1.event_wait(ev)
    ev.synchronize()
    assert ("event_sync", ev.event.handle) in gpu_state.calls


def _get_rows(dev):  # type: ignore[no-untyped-def]
    ctx = Context(no_alloc=True)
    table = ctx.new_tensor(T.F32, 8, 5, name="table")
    ids = ctx.new_tensor(T.I32, 3, name="ids")
    out = ops.get_rows(table, ids)
    out.set_name("rows")
    g = build_graph(out)
    _place(ctx, dev.buffer_type())
    return g


def test_an_index_a_kernel_refuses_is_reported_at_synchronize(fake_devices, gpu_state: State) -> None:  # type: ignore[no-untyped-def]
    dev = fake_devices[0]
    be = dev.init_backend()
    g = _get_rows(dev)
    be.graph_compute(g)
    (la,) = gpu_state.launches
    status, code = la.args[-2], la.args[-1]  # ERR_ARGS: the backend's status word and this node's code
    assert status == be.status.buffer.at(0) and code >= 1
    mem, off = gpu_state.find(status, 4)
    be.graph_compute_async(g)
    mem[off : off + 4] = np.array([code], np.int32).view(np.uint8)  # what the kernel does for a bad id
    with pytest.raises(ComputeError, match=r"CUDA0: node 'rows' \(GET_ROWS.*a row id outside 0\.\.4"):
        be.synchronize()
    be.synchronize()  # cleared: the backend goes on
    be.graph_compute(g)


def test_two_streams_of_one_device_keep_their_status_apart(fake_devices, gpu_state: State) -> None:  # type: ignore[no-untyped-def]
    """Each backend (stream) owns its status word: one's synchronize neither raises nor clears the other's error."""
    dev = fake_devices[0]
    be1, be2 = dev.init_backend(), dev.init_backend()
    g = _get_rows(dev)
    be1.graph_compute(g)
    be2.graph_compute(g)
    words = {la.args[-2] for la in gpu_state.launches}
    assert words == {be1.status.buffer.at(0), be2.status.buffer.at(0)}  # two words, one per stream
    be1.graph_compute_async(g)
    mem, off = gpu_state.find(be1.status.buffer.at(0), 4)
    mem[off : off + 4] = np.array([gpu_state.launches[0].args[-1]], np.int32).view(np.uint8)  # be1's kernel
    be2.graph_compute(g)  # be2's stream is clean
    with pytest.raises(ComputeError, match=r"CUDA0: node 'rows' \(GET_ROWS"):
        be1.synchronize()
    be1.synchronize()


def test_a_freed_buffer_is_refused_not_written(fake_devices, gpu_state: State) -> None:  # type: ignore[no-untyped-def]
    """A compute, an upload or a read over a freed buffer raises AllocationError (its address may be another
    allocation's by then); the free waits for the device's queued work and returns the bytes to the tally."""
    dev = fake_devices[0]
    g, buf, ts = _graph(dev)
    be = dev.init_backend()
    be.graph_compute(g)
    held = dev.allocations.bytes
    buf.free()
    assert buf.freed and ("context_sync", 0) in gpu_state.calls and dev.allocations.bytes == held - buf.size
    launches = len(gpu_state.launches)
    with pytest.raises(AllocationError, match="used after free"):
        be.graph_compute(g)
    with pytest.raises(AllocationError, match="used after free"):
        ts["x"].set(np.zeros(64, np.float32))
    with pytest.raises(AllocationError, match="used after free"):
        ts["x"].numpy()
    assert len(gpu_state.launches) == launches
    buf.free()  # a second free does nothing
    be.free()
