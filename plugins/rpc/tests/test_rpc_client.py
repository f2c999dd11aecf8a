"""The RPC client against both servers, llama.cpp's `ggml-rpc-server` (ggml's CPU backend behind it) and
`pyggml rpc-server --device cpu`: buffers, transfers, graphs (and their GRAPH_RECOMPUTE replays), errors."""

from __future__ import annotations

import gc
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

import numpy as np
import pytest
from pyggml_rpc.client import RPCBackend, RPCDevice
from pyggml_rpc.connection import Connection, RPCError
from pyggml_rpc.fnv import fnv1a64
from pyggml_rpc.registry import RemoteServer, RPCRegistry

import pyggml as gg
from pyggml import ops
from pyggml.alloc import GraphAllocator, alloc_ctx_tensors
from pyggml.backend.protocol import BufferUsage, Device
from pyggml.backend.registry import get_device, get_registry
from pyggml.errors import AllocationError
from pyggml.types import GGMLType
from pyggml_testing.rpc_servers import start_pyggml_server, stop


@pytest.fixture(params=["ggml", "pyggml"])
def device(request: pytest.FixtureRequest) -> RPCDevice:
    endpoint = request.getfixturevalue(f"{request.param}_server")
    reg = cast(RPCRegistry, get_registry("RPC"))
    return reg.add_server(endpoint)[0]


def test_device_facts(device: RPCDevice) -> None:
    free, total = device.memory()
    assert 0 < free <= total
    buft = device.buffer_type()
    assert buft.alignment >= 16 and buft.alignment & (buft.alignment - 1) == 0
    assert buft.max_size > 1 << 30
    assert device.name.startswith("RPC") and device.server.endpoint in device.description


def test_buffer_bytes(device: RPCDevice) -> None:
    buf = device.buffer_type().alloc_buffer(4096)
    data = np.arange(4096, dtype=np.uint32).astype(np.uint8)
    buf.write(0, data)
    assert np.array_equal(buf.read(0, 4096), data)
    buf.fill(100, 50, 7)
    assert np.all(buf.read(100, 50) == 7) and buf.read(99, 1)[0] == data[99] and buf.read(150, 1)[0] == data[150]
    other = device.buffer_type().alloc_buffer(1024)
    assert other.copy_from(buf, 10, 20, 100)
    assert np.array_equal(other.read(20, 100), buf.read(10, 100))
    buf.clear(3)
    assert np.all(buf.read(0, 4096) == 3)
    with pytest.raises(AllocationError):
        buf.read(4000, 200)
    buf.free()
    with pytest.raises(AllocationError):
        buf.read(0, 1)
    assert np.array_equal(other.read(20, 5), data[10:15])  # the other buffer is still there


def _ffn(device: Device, n_tokens: int) -> tuple[gg.Graph, gg.Tensor, gg.Tensor, GraphAllocator]:
    """A small feed-forward block (Q8_0 weights, so MUL_MAT quantises its activations) with fixed weights."""
    weights = gg.Context(no_alloc=True)
    w = weights.new_tensor(GGMLType.Q8_0, 64, 48, name="w")
    b = weights.new_tensor(gg.F32, 48, name="b")
    buf = alloc_ctx_tensors(weights, device.buffer_type())
    buf.usage = BufferUsage.WEIGHTS
    rng = np.random.default_rng(1)
    w.set(rng.standard_normal((48, 64)).astype(np.float32))
    b.set(rng.standard_normal(48).astype(np.float32))
    with gg.Context(no_alloc=True) as ctx:
        x = ctx.new_tensor(gg.F32, 64, n_tokens, name="x").set_input()
        y = ops.soft_max(ops.add(ops.mul_mat(w, ops.rms_norm(x, 1e-6)), b), scale=0.5).set_name("y")
        graph = gg.build_graph(y)
    galloc = GraphAllocator(device.buffer_type())
    galloc.alloc_graph(graph)
    return graph, x, y, galloc


def test_graph_and_recompute(device: RPCDevice) -> None:
    graph, x, y, _galloc = _ffn(device, 5)
    ref_graph, ref_x, ref_y, _ref_galloc = _ffn(get_device("numpy"), 5)
    backend = device.init_backend()
    assert isinstance(backend, RPCBackend)
    ref_backend = get_device("numpy").init_backend()
    rng = np.random.default_rng(2)
    # the connection is the device's, shared with other modules' buffers: one of theirs freed between two computes
    # (a collection, another thread's last reference) drops the graph the server keeps, and the next compute sends
    # it whole. So the recomputes expected are the computes after the first with no free sent since the one before.
    conn = device.server.conn
    gc.collect()
    conn.ping()  # frees queued by the collection go out now
    expected, seen = 0, None
    for step in range(3):
        xv = rng.standard_normal((5, 64)).astype(np.float32)
        x.set(xv)
        ref_x.set(xv)
        before = conn.generation
        backend.graph_compute(graph)
        expected += int(seen is not None and before == seen)
        seen = conn.generation
        ref_backend.graph_compute(ref_graph)
        got, ref = y.numpy(), ref_y.numpy()
        assert np.sum((got - ref) ** 2) / np.sum(ref**2) < 5e-4, step
    assert backend.plans_built == 1 and backend.recomputes == expected


def fake_server(version: int, then: Callable[[socket.socket], None]) -> tuple[str, threading.Thread]:
    """A one-client server that answers HELLO with protocol `version`.0.0 and then does `then`."""
    listener = socket.create_server(("127.0.0.1", 0))

    def run() -> None:
        s, _ = listener.accept()
        s.recv(1 + 8 + 24)
        s.sendall((28).to_bytes(8, "little") + bytes([version, 0, 0, 0]) + bytes(24))
        then(s)
        s.close()
        listener.close()

    t = threading.Thread(target=run)
    t.start()
    return f"127.0.0.1:{listener.getsockname()[1]}", t


def test_server_gone_is_a_clear_error() -> None:
    endpoint, t = fake_server(7, lambda s: s.recv(9))  # reads DEVICE_COUNT, closes without answering
    with pytest.raises(RPCError, match=f"{endpoint}: the server closed the connection while waiting for the reply "
                       "to DEVICE_COUNT"):
        RemoteServer(endpoint)
    t.join()


def test_wrong_protocol_version() -> None:
    endpoint, t = fake_server(6, lambda s: None)
    with pytest.raises(RPCError, match=r"speaks protocol 6\.0\.0"):
        Connection(endpoint)
    t.join()


def test_stalled_server_times_out() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    t0 = time.monotonic()
    with pytest.raises(RPCError, match=f"127.0.0.1:{port}: no answer within 0.5 s"):
        Connection(f"127.0.0.1:{port}", timeout=0.5)  # the listener accepts (backlog) but never answers HELLO
    assert time.monotonic() - t0 < 5
    listener.close()


def test_nobody_listening() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(RPCError, match=f"127.0.0.1:{port}: cannot connect"):
        Connection(f"127.0.0.1:{port}")




def test_weights_by_hash_from_the_server_cache(tmp_path: Path) -> None:
    """Weights over 10 MiB go as SET_TENSOR_HASH first; a server with a cache stores them on the first upload and
    takes them from there on the next (a new connection, as a model reload is)."""
    cache = tmp_path / "cache"
    proc, endpoint = start_pyggml_server("cpu", "--cache", str(cache))
    try:
        data = np.random.default_rng(3).integers(0, 256, 11 << 20, dtype=np.uint8)
        for attempt in range(2):
            server = RemoteServer(endpoint)
            dev = RPCDevice(get_registry("RPC"), server, 0, "RPCx")
            buf = dev.buffer_type().alloc_buffer(data.size)
            buf.usage = BufferUsage.WEIGHTS
            sent = _bytes_sent(server.conn, lambda: buf.write(0, data))  # noqa: B023
            assert np.array_equal(buf.read(0, data.size), data)
            files = list(cache.iterdir())
            assert [f.name for f in files] == [f"{fnv1a64(data):016x}"]
            assert (sent > data.size) if attempt == 0 else (sent < 4096), (attempt, sent)
            server.conn.close()
    finally:
        stop(proc)


def _bytes_sent(conn: Connection, action: Callable[[], None]) -> int:
    before = conn.bytes_sent
    action()
    conn.ping()
    return conn.bytes_sent - before


def test_add_server_again_reconnects_after_a_lost_connection() -> None:
    proc, endpoint = start_pyggml_server("cpu")
    try:
        reg = RPCRegistry()
        dev = reg.add_server(endpoint)[0]
        old = dev.buffer_type().alloc_buffer(64)
        dev.server.conn.close("cut by the test")
        with pytest.raises(RPCError, match="add_server\\(\\) again reconnects"):
            old.read(0, 8)
        assert reg.add_server(endpoint) == [dev]
        buf = dev.buffer_type().alloc_buffer(64)
        buf.write(0, np.arange(64, dtype=np.uint8))
        assert np.array_equal(buf.read(0, 64), np.arange(64, dtype=np.uint8))
        with pytest.raises(RPCError):
            old.read(0, 8)  # its memory went with the old connection
    finally:
        stop(proc)


def test_a_free_queued_by_a_finalizer_goes_out_before_the_recompute_decision(device: RPCDevice) -> None:
    """A buffer dropped without free() is freed by its finalizer, queued and sent before the next command. Sent in
    the middle of a replay, after the client chose GRAPH_RECOMPUTE, it would drop the graph that command names:
    the replay sends the queue first, then decides (here: the whole graph again), and the results stay right."""
    graph, x, y, _galloc = _ffn(device, 3)
    ref_graph, ref_x, ref_y, _ref_galloc = _ffn(get_device("numpy"), 3)
    backend = device.init_backend()
    assert isinstance(backend, RPCBackend)
    ref_backend = get_device("numpy").init_backend()
    conn = device.server.conn
    xv = np.random.default_rng(3).standard_normal((3, 64)).astype(np.float32)
    for step in range(2):
        x.set(xv)
        ref_x.set(xv)
        if step:
            dropped = device.buffer_type().alloc_buffer(64)
            del dropped  # its finalizer queues the free: nothing is sent yet
            gc.collect()
            before = backend.recomputes
        backend.graph_compute(graph)
        ref_backend.graph_compute(ref_graph)
        got, ref = y.numpy(), ref_y.numpy()
        assert np.sum((got - ref) ** 2) / np.sum(ref**2) < 5e-4, step  # as test_graph_and_recompute
    assert backend.recomputes == before  # the queued free went out first: the graph was sent whole
    assert conn.broken is None
