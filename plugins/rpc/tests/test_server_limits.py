"""`pyggml rpc-server` under many connections (issue 33, item 7): idle clients used to lock every other client out
(64 that said HELLO and went quiet held every slot for as long as they stayed). Now a new client evicts the
connection idle the longest (one holding no buffers first, one in the middle of a message never), a connection
holding no buffers is closed after the idle timeout, and both are options of the server API and the CLI.

Each test runs a real server on 127.0.0.1 at a port it picks, in this process on a daemon thread (or, for the CLI
options, as a process), and stops it in a `finally`; every socket has a timeout, so a failing test ends in
seconds and leaves nothing running."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from pyggml_rpc.connection import Connection, RPCError
from pyggml_rpc.server import RPCServer, Served
from pyggml_rpc.wire import CONN_CAPS_SIZE, DEVICE_U64, HEADER, HELLO_RSP, TWO_U64, U32, Cmd

from pyggml.backend.registry import get_device
from pyggml_testing.rpc_servers import start_pyggml_server, stop

WAIT = 5.0
"""Seconds any single step may take before the test fails (nothing here should take a tenth of it)."""
HELLO_FRAME = HEADER.pack(Cmd.HELLO, CONN_CAPS_SIZE) + bytes(CONN_CAPS_SIZE)


@contextmanager
def running_server(**options: Any) -> Iterator[str]:
    """An RPCServer on 127.0.0.1 (a free port) serving the numpy device, on a daemon thread; its endpoint."""
    dev = get_device("numpy")
    server = RPCServer(Served([dev], [dev.init_backend()], 1 << 24), "127.0.0.1", 0, **options)
    t = threading.Thread(target=server.serve_forever, daemon=True, name="test-rpc-server")
    t.start()
    try:
        yield f"127.0.0.1:{server.address[1]}"
    finally:
        server.shutdown()
        t.join(WAIT)


def connect(endpoint: str) -> socket.socket:
    host, _, port = endpoint.rpartition(":")
    return socket.create_connection((host, int(port)), timeout=WAIT)


def idle_client(endpoint: str) -> socket.socket:
    """A client that says HELLO, gets the answer and goes quiet."""
    s = connect(endpoint)
    s.sendall(HELLO_FRAME)
    assert len(read(s, 8 + HELLO_RSP.size)) == 8 + HELLO_RSP.size
    return s


def read(s: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            break
        out += chunk
    return out


def closed(s: socket.socket, within: float = WAIT) -> bool:
    """Whether the server closes the connection within `within` seconds."""
    s.settimeout(within)
    try:
        return s.recv(1) == b""
    except ConnectionError:
        return True
    except TimeoutError:
        return False


def working_client(endpoint: str) -> Connection:
    """A client that gets served: HELLO, then a request answered."""
    conn = Connection(endpoint, timeout=WAIT)
    assert U32.unpack(conn.call(Cmd.DEVICE_COUNT, b"", U32.size))[0] == 1
    return conn


def holding_buffers(endpoint: str) -> Connection:
    """A working client that allocated a buffer on the server (which would lose it if the connection went)."""
    conn = working_client(endpoint)
    handle, size = TWO_U64.unpack(conn.call(Cmd.ALLOC_BUFFER, DEVICE_U64.pack(0, 4096), TWO_U64.size))
    assert handle != 0 and size == 4096
    return conn


def test_idle_clients_do_not_lock_a_working_client_out() -> None:
    """Three clients said HELLO and went quiet on a server of three connections: a fourth is served, and the one
    idle the longest made room for it."""
    with running_server(max_clients=3) as ep:
        idle = [idle_client(ep) for _ in range(3)]
        try:
            conn = working_client(ep)  # refused (closed) before the fix
            assert conn.call(Cmd.DEVICE_COUNT, b"", U32.size)  # and served again
            assert closed(idle[0])
            assert not closed(idle[1], 0.2) and not closed(idle[2], 0.2)
            conn.close()
        finally:
            for s in idle:
                s.close()


def test_a_client_holding_buffers_goes_after_those_holding_none() -> None:
    with running_server(max_clients=2) as ep:
        keeper = holding_buffers(ep)  # idle the longest, but its buffers would be lost
        quiet = idle_client(ep)
        try:
            newcomer = working_client(ep)
            assert closed(quiet)
            assert U32.unpack(keeper.call(Cmd.DEVICE_COUNT, b"", U32.size))[0] == 1
            newcomer.close()
            time.sleep(0.1)
            # at the cap again, with only clients holding buffers: the one idle the longest goes
            other = holding_buffers(ep)
            third = working_client(ep)
            with pytest.raises(RPCError):
                keeper.call(Cmd.DEVICE_COUNT, b"", U32.size)
            assert other.call(Cmd.DEVICE_COUNT, b"", U32.size)
            other.close()
            third.close()
        finally:
            quiet.close()
            keeper.close()


def test_a_client_in_the_middle_of_a_message_is_never_cut() -> None:
    """The only connection is sending a message: a new client is refused, and the message completes."""
    with running_server(max_clients=1) as ep:
        busy = connect(ep)
        try:
            busy.sendall(HELLO_FRAME[:5])  # a HELLO begun, not finished
            time.sleep(0.2)
            late = connect(ep)
            assert closed(late)  # refused: nothing idle to evict
            late.close()
            busy.sendall(HELLO_FRAME[5:])
            assert len(read(busy, 8 + HELLO_RSP.size)) == 8 + HELLO_RSP.size
        finally:
            busy.close()


def test_idle_timeout_closes_connections_holding_no_buffers() -> None:
    with running_server(idle_timeout=0.5) as ep:
        quiet = idle_client(ep)
        keeper = holding_buffers(ep)
        try:
            t0 = time.monotonic()
            assert closed(quiet)  # stayed open for ever before the fix
            assert 0.3 < time.monotonic() - t0 < 3
            time.sleep(0.5)
            assert U32.unpack(keeper.call(Cmd.DEVICE_COUNT, b"", U32.size))[0] == 1  # buffers: kept
        finally:
            quiet.close()
            keeper.close()


@pytest.mark.parametrize("options", [{"max_clients": 0}, {"idle_timeout": -1.0}, {"idle_timeout": float("nan")}])
def test_server_options_are_checked(options: dict[str, Any]) -> None:
    dev = get_device("numpy")
    with pytest.raises(ValueError, match=next(iter(options))):
        RPCServer(Served([dev], [dev.init_backend()], 1 << 20), "127.0.0.1", 0, **options)


def test_cli_options_max_clients_and_idle_timeout() -> None:
    proc, ep = start_pyggml_server("numpy", "--max-clients", "2", "--idle-timeout", "30")
    try:
        idle = [idle_client(ep) for _ in range(2)]
        try:
            working_client(ep).close()
            assert closed(idle[0])
        finally:
            for s in idle:
                s.close()
    finally:
        stop(proc)
