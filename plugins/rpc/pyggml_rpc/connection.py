"""The client end of one connection to an RPC server (ggml's `ggml-rpc-server` or `pyggml rpc-server`).

One connection per server endpoint, shared by all of its devices: the server keeps buffers per connection, so a
buffer is only valid on the connection that allocated it. Requests go out in order under a lock; commands without a
reply are not waited for (ggml's own client does the same), so a server that failed one closes the connection and
the next reply-bearing request reports it. Every socket operation has a timeout (`RPCOptions.timeout`:
PYGGML_RPC_TIMEOUT seconds, default 120): a server that dies or stalls becomes an `RPCError` naming it, never a
hang. A broken connection stays broken: the buffers it held are gone on the server, and pretending otherwise would
return wrong numbers.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Sequence

import numpy as np

from pyggml.errors import PyGGMLError
from pyggml_rpc.options import DEFAULT_TIMEOUT
from pyggml_rpc.wire import (
    CONN_CAPS_SIZE,
    HEADER,
    HELLO_RSP,
    NO_REPLY,
    PROTO_VERSION,
    PYGGML_MARKS,
    PYGGML_PROFILE_MARK,
    PYGGML_SUPPORTS_OP_MARK,
    U64,
    Cmd,
)

log = logging.getLogger(__name__)
CONNECT_TIMEOUT = 10.0


class RPCError(PyGGMLError, ConnectionError):
    """A server could not be reached, broke the protocol, or closed the connection."""


def parse_endpoint(endpoint: str) -> tuple[str, int]:
    host, sep, port = endpoint.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise RPCError(f"RPC server '{endpoint}': expected host:port")
    return host.strip("[]"), int(port)


class Connection:
    """A socket to one server after a successful HELLO. Thread-safe; every method raises RPCError on failure."""

    def __init__(self, endpoint: str, timeout: float = DEFAULT_TIMEOUT) -> None:
        """`timeout`: seconds each socket operation may take (the registry gives `RPCOptions.timeout`)."""
        self.endpoint = endpoint
        self.timeout = timeout
        host, port = parse_endpoint(endpoint)
        self._lock: threading.RLock = threading.RLock()
        self._broken: str | None = None
        self.unacknowledged = 0
        """Commands without a reply sent since the last reply (what `ping` confirms)."""
        self.generation = 0
        """Bumped whenever the server drops its stored graphs (FREE_BUFFER): GRAPH_RECOMPUTE is then invalid."""
        self._to_free: list[int] = []
        """Handles of buffers garbage-collected since the last request: a finalizer may run in the middle of a
        send on this very thread, so it only notes the handle and the next request frees it."""
        self._depth = 0
        self.bytes_sent = 0
        """Everything sent so far, headers included (what a transfer or a graph costs on the wire)."""
        try:
            self._sock = socket.create_connection((host, port), timeout=min(CONNECT_TIMEOUT, self.timeout))
        except OSError as e:
            raise RPCError(f"RPC server {endpoint}: cannot connect ({e})") from e
        self._sock.settimeout(self.timeout)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        rsp = self.call(Cmd.HELLO, bytes(CONN_CAPS_SIZE), HELLO_RSP.size)
        major, minor, patch, mark, _caps = HELLO_RSP.unpack(rsp)
        if major != PROTO_VERSION[0] or minor > PROTO_VERSION[1]:
            self.close(f"protocol {major}.{minor}.{patch}")
            raise RPCError(f"RPC server {endpoint} speaks protocol {major}.{minor}.{patch}; this client speaks "
                           f"{'.'.join(map(str, PROTO_VERSION))}")
        self.server_version = (major, minor, patch)
        self.pyggml_server = mark in PYGGML_MARKS
        self.answers_supports_op = mark in (PYGGML_SUPPORTS_OP_MARK, PYGGML_PROFILE_MARK)
        """A pyggml server that says which nodes its devices run (SUPPORTS_OP)."""
        self.profiles_nodes = mark == PYGGML_PROFILE_MARK
        """A pyggml server that times a graph's nodes (GRAPH_COMPUTE_PROFILED)."""

    # ---- requests ---------------------------------------------------------------------------------------------

    def send(self, cmd: Cmd, *parts: bytes | memoryview | np.ndarray) -> None:
        """A command without a reply."""
        assert cmd in NO_REPLY
        with self._lock:
            self._send(cmd, parts)
            self.unacknowledged += 1

    def call(self, cmd: Cmd, payload: bytes | memoryview, reply_size: int) -> bytes:
        """A command whose reply has exactly `reply_size` bytes."""
        out = np.empty(reply_size, np.uint8)
        self.call_into(cmd, (payload,), out)
        return out.tobytes()

    def call_into(self, cmd: Cmd, parts: Sequence[bytes | memoryview | np.ndarray], out: np.ndarray) -> None:
        """A command whose reply is read straight into `out` (uint8, exactly the reply's size)."""
        with self._lock:
            self._send(cmd, parts)
            self._reply_size(cmd, out.nbytes, out.nbytes)
            self._recv_into(out.data.cast("B"), cmd)
            self.unacknowledged = 0

    def call_sized(self, cmd: Cmd, parts: Sequence[bytes | memoryview | np.ndarray], max_size: int) -> bytes:
        """A command whose reply has a size of its own, at most `max_size` bytes: a larger claim closes the
        connection (its bytes are never read, or allocated)."""
        with self._lock:
            self._send(cmd, parts)
            out = np.empty(self._reply_size(cmd, 0, max_size), np.uint8)
            self._recv_into(out.data.cast("B"), cmd)
            self.unacknowledged = 0
            return out.tobytes()

    def _reply_size(self, cmd: Cmd, least: int, most: int) -> int:
        """The size a reply announces; one outside [least, most] closes the connection (RPCError)."""
        size: int = U64.unpack(self._recv_exact(U64.size, cmd))[0]
        if not least <= size <= most:
            self.close(f"reply of {size} bytes to {cmd.name}")
            expected = f"expected {most}" if least == most else f"at most {most} expected"
            raise RPCError(f"RPC server {self.endpoint}: {cmd.name} replied {size} bytes, {expected}")
        return size

    def free_buffer(self, handle: int) -> None:
        """FREE_BUFFER; the server then drops the graphs it kept for GRAPH_RECOMPUTE."""
        if self._broken is None:
            self.send(Cmd.FREE_BUFFER, U64.pack(handle))
            self.generation += 1

    def defer_free(self, handle: int) -> None:
        self._to_free.append(handle)

    def send_deferred_frees(self) -> None:
        """Send the frees queued by finalizers now (each drops the graphs the server keeps): a caller about to
        decide on GRAPH_RECOMPUTE by `generation` calls this first, under `lock`, so no queued free goes out
        between its decision and its command."""
        with self._lock:
            self._check()
            self._send_queued_frees()

    def ping(self) -> None:
        """Wait until the server has carried out everything sent so far (a DEVICE_COUNT round trip)."""
        with self._lock:
            if self.unacknowledged:
                self.call(Cmd.DEVICE_COUNT, b"", 4)

    # ---- socket -------------------------------------------------------------------------------------------------

    @property
    def lock(self) -> threading.RLock:
        """Held for one request; callers hold it too to check-and-send atomically (a buffer's liveness)."""
        return self._lock

    @property
    def broken(self) -> str | None:
        return self._broken

    def _check(self) -> None:
        if self._broken is not None:
            raise RPCError(f"RPC server {self.endpoint}: connection lost earlier ({self._broken}); its buffers are "
                           "gone on the server (add_server() again reconnects the devices)")

    def _send_queued_frees(self) -> None:
        if self._to_free and self._depth == 0:
            self._depth += 1
            try:
                while self._to_free:
                    self._send(Cmd.FREE_BUFFER, (U64.pack(self._to_free.pop()),))
                    self.unacknowledged += 1
                    self.generation += 1
            finally:
                self._depth -= 1

    def _send(self, cmd: Cmd, parts: Sequence[bytes | memoryview | np.ndarray]) -> None:
        self._check()
        self._send_queued_frees()
        views = [p.data.cast("B") if isinstance(p, np.ndarray) else memoryview(p).cast("B") for p in parts]
        size = sum(v.nbytes for v in views)
        views.insert(0, memoryview(HEADER.pack(int(cmd), size)))
        try:
            while views:
                sent = self._sock.sendmsg(views[:64])
                self.bytes_sent += sent
                while sent and views:
                    n = views[0].nbytes
                    if sent >= n:
                        sent -= n
                        views.pop(0)
                    else:
                        views[0] = views[0][sent:]
                        sent = 0
                while views and views[0].nbytes == 0:
                    views.pop(0)
        except (OSError, TimeoutError) as e:
            self._fail(f"sending {cmd.name}", e)

    def _recv_exact(self, n: int, cmd: Cmd) -> bytes:
        buf = np.empty(n, np.uint8)
        self._recv_into(buf.data.cast("B"), cmd)
        return buf.tobytes()

    def _recv_into(self, view: memoryview, cmd: Cmd) -> None:
        got = 0
        try:
            while got < view.nbytes:
                n = self._sock.recv_into(view[got:])
                if n == 0:
                    break
                got += n
        except (OSError, TimeoutError) as e:
            self._fail(f"waiting for the reply to {cmd.name}", e)
        if got < view.nbytes:
            self._fail(f"waiting for the reply to {cmd.name}", None)

    def _fail(self, doing: str, err: BaseException | None) -> None:
        if isinstance(err, TimeoutError | socket.timeout):
            why = f"no answer within {self.timeout:g} s while {doing} (PYGGML_RPC_TIMEOUT)"
        elif err is None:
            why = f"the server closed the connection while {doing} (see the server's log)"
        else:
            why = f"{type(err).__name__} while {doing}: {err}"
        self.close(why)
        raise RPCError(f"RPC server {self.endpoint}: {why}")

    def close(self, why: str = "closed") -> None:
        with self._lock:
            if self._broken is None:
                self._broken = why
                log.debug("RPC %s: %s", self.endpoint, why)
            with contextlib.suppress(OSError):
                self._sock.close()

    def __repr__(self) -> str:
        return f"<RPC connection {self.endpoint}{' (broken)' if self._broken else ''}>"
