"""`pyggml rpc-server`: any pyggml device served over ggml's RPC protocol, to ggml's client or pyggml's.

Each client gets a thread and a `Session`: its own buffers (freed when it disconnects) and the graph it last sent
for each device (GRAPH_RECOMPUTE). Devices and their backends are shared; a device computes one graph at a time.
A message is checked whole before anything is done with it (sizes first, then every field: `server_tensors`,
`server_graph`); one that breaks the protocol, and a compute that fails, close that client's connection with a log
line. The server itself goes on serving the others.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import math
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pyggml.backend.protocol import Backend, Device
from pyggml.errors import PyGGMLError
from pyggml.ops.base import Op
from pyggml.profile.sink import now_ns
from pyggml_rpc.fnv import fnv1a64
from pyggml_rpc.options import MESSAGE_TIMEOUT
from pyggml_rpc.server_graph import decode_graph
from pyggml_rpc.server_profile import CollectingSink, profile_records, profile_reply
from pyggml_rpc.server_tensors import BufferTable, ProtocolError, make_tensor, region
from pyggml_rpc.wire import (
    CLEAR_REQ,
    CONN_CAPS_SIZE,
    DEVICE_U64,
    HELLO_RSP,
    MAX_GRAPH_NODES,
    MEMSET_TAIL,
    PROTO_VERSION,
    PYGGML_PROFILE_MARK,
    REQUEST_SIZES,
    RPC_TENSOR,
    SET_TENSOR_HEAD,
    SUPPORTS_OP_MAX,
    TENSOR_SIZE,
    TWO_U64,
    U8,
    U32,
    U64,
    Cmd,
)

if TYPE_CHECKING:
    from pyggml.graph import Graph

log = logging.getLogger(__name__)
MIN_RATE = 1 << 20
"""Bytes per second a long message or reply must at least move at: each gets MESSAGE_TIMEOUT + size / MIN_RATE."""
RECV_CHUNK = 1 << 20
"""Bytes received at a time: a payload's memory grows as it arrives, not as its header claims."""
MAX_CLIENTS = 64
"""Connections served at once (`--max-clients`). When all are taken, a new client replaces the connection idle the
longest (one holding no buffers first): idle clients cannot lock a working one out."""
IDLE_TIMEOUT = 300.0
"""Seconds a connection that holds no buffers may stay silent after a message (HELLO included) before it is closed
(`--idle-timeout`; 0: never). One holding buffers is kept however long it idles (llama.cpp's clients keep a model
on the server between requests and cannot reconnect), and goes only to make room for a new client."""
GRAPH_PAYLOAD_MAX = 12 + MAX_GRAPH_NODES * 8 + 2 * MAX_GRAPH_NODES * TENSOR_SIZE


@dataclass
class Served:
    """What all sessions share: the devices, one backend and one compute lock per device, a memory budget."""

    devices: list[Device]
    backends: list[Backend]
    memory_limit: int
    cache_dir: Path | None = None
    locks: list[threading.Lock] = field(default_factory=list)
    allocated: int = 0
    alloc_lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.locks = [threading.Lock() for _ in self.devices]


class Session:
    """One client's state and its command handlers: `handle(cmd, payload)` -> reply bytes or None (no reply)."""

    def __init__(self, served: Served, peer: str = "client") -> None:
        self.served = served
        self.peer = peer
        self.table = BufferTable()
        self.graphs: dict[int, Graph] = {}

    def max_payload(self, cmd: Cmd) -> int:
        if cmd is Cmd.SET_TENSOR:
            largest = max((sb.size for sb in self.table.by_handle.values()), default=0)
            return TENSOR_SIZE + SET_TENSOR_HEAD.size + largest
        if cmd in (Cmd.GRAPH_COMPUTE, Cmd.GRAPH_COMPUTE_PROFILED):
            return GRAPH_PAYLOAD_MAX
        if cmd is Cmd.SUPPORTS_OP:
            return SUPPORTS_OP_MAX
        size = REQUEST_SIZES[cmd]
        assert size is not None
        return size

    def check_size(self, cmd: Cmd, size: int) -> None:
        fixed = REQUEST_SIZES[cmd]
        if fixed is not None and size != fixed:
            raise ProtocolError(f"{cmd.name}: payload of {size} bytes, expected {fixed}")
        if size > self.max_payload(cmd):
            raise ProtocolError(f"{cmd.name}: payload of {size} bytes exceeds {self.max_payload(cmd)}")

    def _device(self, index: int, what: str) -> Device:
        if index >= len(self.served.devices):
            raise ProtocolError(f"{what}: device {index} of {len(self.served.devices)}")
        return self.served.devices[index]

    def handle(self, cmd: Cmd, p: bytes) -> bytes | None:
        """One request: the reply, or None for commands without one; ProtocolError for a malformed message.
        The payload's size is checked here too (the socket loop checks it before reading it), so no caller can
        hand a handler a payload its unpacking would run past."""
        self.check_size(cmd, len(p))
        return HANDLERS[cmd](self, p)

    # ---- the handlers (HANDLERS below): each gets a payload of its command's checked size ---------------------

    def _hello(self, p: bytes) -> bytes | None:
        raise ProtocolError("HELLO sent twice")

    def _device_count(self, p: bytes) -> bytes | None:
        return U32.pack(len(self.served.devices))

    def _alloc_buffer(self, p: bytes) -> bytes | None:
        index, size = DEVICE_U64.unpack(p)
        return self._alloc(self._device(index, "ALLOC_BUFFER"), index, size)

    def _alignment(self, p: bytes) -> bytes | None:
        return U64.pack(self._device(U32.unpack(p)[0], "GET_ALIGNMENT").buffer_type().alignment)

    def _max_size(self, p: bytes) -> bytes | None:
        return U64.pack(min(self._device(U32.unpack(p)[0], "GET_MAX_SIZE").buffer_type().max_size, (1 << 64) - 1))

    def _device_memory(self, p: bytes) -> bytes | None:
        return TWO_U64.pack(*self._device(U32.unpack(p)[0], "GET_DEVICE_MEMORY").memory())

    def _graph_recompute(self, p: bytes) -> bytes | None:
        index = U32.unpack(p)[0]
        self._compute(index, self._kept_graph(index, "GRAPH_RECOMPUTE"))
        return None

    def _kept_graph(self, index: int, what: str) -> Graph:
        self._device(index, what)
        graph = self.graphs.get(index)
        if graph is None:
            raise ProtocolError(f"{what}: no graph kept for device {index}")
        return graph

    def _graph_compute(self, p: bytes) -> bytes | None:
        index, graph = decode_graph(p, self.served.devices, self.table)
        self.graphs[index] = graph
        self._compute(index, graph)
        return None

    def _graph_compute_profiled(self, p: bytes) -> bytes | None:
        """pyggml's command: GRAPH_COMPUTE's payload, or GRAPH_RECOMPUTE's (4 bytes: the graph kept for a device),
        computed by the backend's `compute_profiled`; the reply holds the nodes' times on this server's clock
        (`server_profile`). The graph is kept for GRAPH_RECOMPUTE as GRAPH_COMPUTE's is."""
        received = now_ns()
        if len(p) == U32.size:
            index = U32.unpack(p)[0]
            graph = self._kept_graph(index, "GRAPH_COMPUTE_PROFILED")
        else:
            index, graph = decode_graph(p, self.served.devices, self.table)
            self.graphs[index] = graph
        sink = CollectingSink()
        self._compute(index, graph, sink)
        return profile_reply(profile_records(graph, sink, received, now_ns()), received)

    def _supports_op(self, p: bytes) -> bytes | None:
        """Whether the device runs the one node of the payload (pyggml's command: a client asks before it places
        a node here, so a graph never holds a node this device refuses)."""
        try:
            index, graph = decode_graph(p, self.served.devices, BufferTable(), placed=False)
        except ProtocolError as e:  # a node this server cannot even decode (a newer client's op, say): not here
            log.warning("rpc-server: %s: SUPPORTS_OP answered no: %s", self.peer, e)
            return U8.pack(0)
        if len(graph.nodes) != 1 or graph.nodes[0].op is Op.NONE:
            raise ProtocolError(f"SUPPORTS_OP: {len(graph.nodes)} nodes; it asks about exactly one op node")
        return U8.pack(int(self.served.devices[index].supports_op(graph.nodes[0])))

    def _buffer_get_base(self, p: bytes) -> bytes | None:
        return U64.pack(self.table.get(U64.unpack(p)[0], "BUFFER_GET_BASE").base)

    def _free_buffer(self, p: bytes) -> bytes | None:
        sb = self.table.pop(U64.unpack(p)[0], "FREE_BUFFER")
        self.graphs.clear()  # they may point into it
        self._release(sb.buffer.size)
        sb.buffer.free()
        return None

    def _buffer_clear(self, p: bytes) -> bytes | None:
        handle, value = CLEAR_REQ.unpack(p)
        self.table.get(handle, "BUFFER_CLEAR").buffer.clear(value)
        return None

    def _set_tensor(self, p: bytes) -> bytes | None:
        if len(p) < TENSOR_SIZE + SET_TENSOR_HEAD.size:
            raise ProtocolError(f"SET_TENSOR: {len(p)} bytes is shorter than its header")
        cache, offset = SET_TENSOR_HEAD.unpack_from(p, TENSOR_SIZE)
        data = np.frombuffer(p, np.uint8, offset=TENSOR_SIZE + SET_TENSOR_HEAD.size)
        sb, start = region(_tensor(p), self.table, offset, data.size, "SET_TENSOR")
        if cache and self.served.cache_dir is not None:
            self._cache_store(data)
        sb.buffer.write(start, data)
        return None

    def _set_tensor_hash(self, p: bytes) -> bytes | None:
        rec = _tensor(p)
        offset, digest = TWO_U64.unpack_from(p, TENSOR_SIZE)
        region(rec, self.table, offset, 0, "SET_TENSOR_HASH")  # before the cache: a bad tensor closes, hit or miss
        cached = self._cache_load(digest)
        if cached is None:
            return U8.pack(0)
        sb, start = region(rec, self.table, offset, cached.size, "SET_TENSOR_HASH")
        sb.buffer.write(start, cached)
        return U8.pack(1)

    def _get_tensor(self, p: bytes) -> bytes | None:
        offset, size = TWO_U64.unpack_from(p, TENSOR_SIZE)
        sb, start = region(_tensor(p), self.table, offset, size, "GET_TENSOR")
        return sb.buffer.read(start, size).tobytes()

    def _memset_tensor(self, p: bytes) -> bytes | None:
        offset, size, value = MEMSET_TAIL.unpack_from(p, TENSOR_SIZE)
        sb, start = region(_tensor(p), self.table, offset, size, "MEMSET_TENSOR")
        sb.buffer.fill(start, size, value)
        return None

    def _copy_tensor(self, p: bytes) -> bytes | None:
        rec, dst_rec = _tensor(p), _tensor(p, TENSOR_SIZE)
        src_sb, src_start = region(rec, self.table, 0, 0, "COPY_TENSOR src")
        n = make_tensor(rec, self.table, "COPY_TENSOR src")[0].nbytes()
        dst_sb, dst_start = region(dst_rec, self.table, 0, n, "COPY_TENSOR dst")
        if not dst_sb.buffer.copy_from(src_sb.buffer, src_start, dst_start, n):
            dst_sb.buffer.write(dst_start, src_sb.buffer.read(src_start, n))
        return U8.pack(1)

    def _init_tensor(self, p: bytes) -> bytes | None:
        region(_tensor(p), self.table, 0, 0, "INIT_TENSOR")
        return None

    def _alloc_size(self, p: bytes) -> bytes | None:
        self._device(U32.unpack_from(p, 0)[0], "GET_ALLOC_SIZE")
        t, _ = make_tensor(_tensor(p, U32.size), self.table, "GET_ALLOC_SIZE")
        return U64.pack(t.nbytes())

    def _compute(self, index: int, graph: Graph, sink: CollectingSink | None = None) -> None:
        """`graph` on device `index`'s backend (one compute at a time per device), profiled into `sink` if given."""
        with self.served.locks[index]:
            if sink is None:
                self.served.backends[index].graph_compute(graph)
            else:
                self.served.backends[index].compute_profiled(graph, sink)

    def _alloc(self, dev: Device, index: int, size: int) -> bytes:
        served = self.served
        with served.alloc_lock:
            if served.allocated + size > served.memory_limit:
                log.warning("rpc-server %s: %d bytes on %s refused (limit %d, %d in use)", self.peer, size,
                            dev.name, served.memory_limit, served.allocated)
                return TWO_U64.pack(0, 0)
            served.allocated += size
        try:
            buf = dev.buffer_type().alloc_buffer(size)
        except (PyGGMLError, MemoryError, ValueError) as e:
            self._release(size)
            log.warning("rpc-server %s: %d bytes on %s failed: %s", self.peer, size, dev.name, e)
            return TWO_U64.pack(0, 0)
        sb = self.table.add(buf, index)
        return TWO_U64.pack(sb.handle, buf.size)

    def _release(self, size: int) -> None:
        with self.served.alloc_lock:
            self.served.allocated -= size

    def _cache_store(self, data: np.ndarray) -> None:
        assert self.served.cache_dir is not None
        path = self.served.cache_dir / f"{fnv1a64(data):016x}"
        tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_bytes(data.tobytes())
        tmp.replace(path)

    def _cache_load(self, digest: int) -> np.ndarray | None:
        if self.served.cache_dir is None:
            return None
        path = self.served.cache_dir / f"{digest:016x}"
        if not path.is_file():
            return None
        data = np.fromfile(path, dtype=np.uint8)
        return data if fnv1a64(data) == digest else None

    def close(self) -> None:
        for sb in list(self.table.by_handle.values()):
            self._release(sb.buffer.size)
            sb.buffer.free()
        self.table.by_handle.clear()
        self.graphs.clear()


def _tensor(p: bytes, at: int = 0) -> Any:
    """The packed rpc_tensor at byte `at` of a payload (its size was checked)."""
    return np.frombuffer(p, dtype=RPC_TENSOR, count=1, offset=at)[0]


HANDLERS: dict[Cmd, Callable[[Session, bytes], bytes | None]] = {
    Cmd.HELLO: Session._hello,
    Cmd.DEVICE_COUNT: Session._device_count,
    Cmd.ALLOC_BUFFER: Session._alloc_buffer,
    Cmd.GET_ALIGNMENT: Session._alignment,
    Cmd.GET_MAX_SIZE: Session._max_size,
    Cmd.GET_DEVICE_MEMORY: Session._device_memory,
    Cmd.BUFFER_GET_BASE: Session._buffer_get_base,
    Cmd.FREE_BUFFER: Session._free_buffer,
    Cmd.BUFFER_CLEAR: Session._buffer_clear,
    Cmd.SET_TENSOR: Session._set_tensor,
    Cmd.SET_TENSOR_HASH: Session._set_tensor_hash,
    Cmd.GET_TENSOR: Session._get_tensor,
    Cmd.MEMSET_TENSOR: Session._memset_tensor,
    Cmd.COPY_TENSOR: Session._copy_tensor,
    Cmd.INIT_TENSOR: Session._init_tensor,
    Cmd.GET_ALLOC_SIZE: Session._alloc_size,
    Cmd.GRAPH_COMPUTE: Session._graph_compute,
    Cmd.GRAPH_RECOMPUTE: Session._graph_recompute,
    Cmd.SUPPORTS_OP: Session._supports_op,
    Cmd.GRAPH_COMPUTE_PROFILED: Session._graph_compute_profiled,
}
"""Every command's handler: one table, so a command without one cannot reach the session."""
assert set(HANDLERS) == set(Cmd)


def hello_reply() -> bytes:
    return HELLO_RSP.pack(*PROTO_VERSION, PYGGML_PROFILE_MARK, bytes(CONN_CAPS_SIZE))


class IdleTimeout(TimeoutError):
    """A client holding no buffers sent nothing for the server's idle timeout."""


class Slot:
    """One connection as the server's table sees it: whether it is in the middle of a message (never evicted
    then), since when it has been idle, whether it holds buffers, and whether the server evicted it. Its lock
    guards that state: the connection's thread marks each message's start (`begin`) and end (`end`), the accepting
    thread evicts (`evict`), so a message that has begun is never cut."""

    def __init__(self, sock: socket.socket, peer: str) -> None:
        self.sock = sock
        self.peer = peer
        self.lock = threading.Lock()
        self.idle_since = time.monotonic()
        self.busy = False
        self.holds_buffers = False
        self.evicted = False
        self.done = False

    def begin(self) -> bool:
        """A message started arriving: busy until `end`. False: the server evicted this connection already."""
        with self.lock:
            self.busy = not self.evicted
            return self.busy

    def end(self, holds_buffers: bool) -> None:
        with self.lock:
            self.busy = False
            self.holds_buffers = holds_buffers
            self.idle_since = time.monotonic()

    def evict(self) -> bool:
        """End the connection if it is idle; False if it is in the middle of a message. Only its reading side is
        shut: its thread sees the end of the stream at its next read, after a reply it may still be sending (the
        client gets the whole answer to its last request), and closes the connection."""
        with self.lock:
            if self.busy or self.done:
                return False
            self.evicted = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RD)
        return True


def serve_connection(sock: socket.socket, served: Served, peer: str, slot: Slot | None = None,
                     idle_timeout: float | None = None, message_timeout: float = MESSAGE_TIMEOUT) -> None:
    """Serve one client until it disconnects, breaks the protocol, idles past `idle_timeout` seconds holding no
    buffers (None: no limit), takes more than `message_timeout` over a message, or the server evicts it (`slot`)."""
    session = Session(served, peer)
    try:
        _serve(sock, session, message_timeout, slot=slot, idle_timeout=idle_timeout)
    except ProtocolError as e:
        log.warning("rpc-server: closing %s: %s", peer, e)
    except IdleTimeout as e:
        log.info("rpc-server: closing %s: %s", peer, e)
    except (ConnectionError, TimeoutError, EOFError) as e:
        log.info("rpc-server: %s went away: %s", peer, e or type(e).__name__)
    except PyGGMLError as e:
        log.warning("rpc-server: closing %s: %s: %s", peer, type(e).__name__, e)
    except Exception:
        log.exception("rpc-server: closing %s after an unexpected error", peer)
    finally:
        if slot is not None:
            with slot.lock:
                slot.done = True
        session.close()
        with contextlib.suppress(OSError):
            sock.close()


def _recv(sock: socket.socket, n: int, deadline: float, idle: float) -> bytes:
    """n bytes, all of them before `deadline` (time.monotonic()) and none more than `idle` seconds after the last.
    Read in pieces of at most RECV_CHUNK: a header claiming a huge payload costs memory only as the bytes come (it
    used to allocate the claimed size at once), and the deadline covers the whole message (the timeout used to be
    per recv, so a byte a minute kept a client, and its claimed payload's memory, for ever)."""
    chunks: list[bytes] = []
    got = 0
    while got < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"{n - got} of {n} bytes still missing at the message's deadline")
        sock.settimeout(min(left, idle))
        chunk = sock.recv(min(n - got, RECV_CHUNK))
        if not chunk:
            raise EOFError("connection closed")
        chunks.append(chunk)
        got += len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _serve(sock: socket.socket, session: Session, timeout: float = MESSAGE_TIMEOUT, slot: Slot | None = None,
           idle_timeout: float | None = None) -> None:
    first = True
    while True:
        # HELLO within the message timeout; then a client may idle between messages: for ever while it holds
        # buffers (only eviction ends it), up to idle_timeout while it holds nothing
        idle = timeout if first else None if session.table.by_handle else idle_timeout
        sock.settimeout(idle)
        try:
            first_byte = sock.recv(1)
        except TimeoutError:
            if first:
                raise
            raise IdleTimeout(f"idle for {idle:g} s holding no buffers (--idle-timeout)") from None
        if not first_byte or (slot is not None and not slot.begin()):
            return
        deadline = time.monotonic() + timeout
        code = first_byte[0]
        size = U64.unpack(_recv(sock, U64.size, deadline, timeout))[0]
        try:
            cmd = Cmd(code)
        except ValueError:
            raise ProtocolError(f"unknown command {code}") from None
        if first != (cmd is Cmd.HELLO):
            raise ProtocolError("HELLO must come first, and only once" if not first else
                                f"{cmd.name} before HELLO")
        session.check_size(cmd, size)
        payload = _recv(sock, size, deadline + size / MIN_RATE, timeout) if size else b""
        reply = hello_reply() if first else session.handle(cmd, payload)
        first = False
        if slot is not None:  # idle from here: an eviction now lets the reply go out whole (`Slot.evict`)
            slot.end(bool(session.table.by_handle))
        if reply is not None:
            sock.settimeout(timeout + len(reply) / MIN_RATE)  # sendall's timeout bounds the whole reply
            sock.sendall(U64.pack(len(reply)) + reply)


class RPCServer:
    """A listening socket and a thread per client; `serve_forever()` until `shutdown()`.

    At most `max_clients` connections are served at once; when all are taken, a new client evicts the connection
    idle the longest (those holding no buffers first; one in the middle of a message never), and is refused only
    when every connection is busy. A connection holding no buffers is closed after `idle_timeout` seconds without a
    message (None or 0: never); a client has `message_timeout` seconds for each message (`RPCOptions`)."""

    def __init__(self, served: Served, host: str = "127.0.0.1", port: int = 50052, *,
                 max_clients: int = MAX_CLIENTS, idle_timeout: float | None = IDLE_TIMEOUT,
                 message_timeout: float = MESSAGE_TIMEOUT) -> None:
        if max_clients < 1:
            raise ValueError(f"max_clients must be at least 1, got {max_clients}")
        if idle_timeout is not None and not idle_timeout >= 0:
            raise ValueError(f"idle_timeout must be a number of seconds >= 0 (0: never), got {idle_timeout}")
        self.served = served
        self.message_timeout = message_timeout
        self.max_clients = max_clients
        self.idle_timeout = idle_timeout if idle_timeout and math.isfinite(idle_timeout) else None
        self.listener = socket.create_server((host, port), reuse_port=False)
        self.address = self.listener.getsockname()[:2]
        self._lock = threading.Lock()
        self._slots: set[Slot] = set()
        self._stop = threading.Event()

    def serve_forever(self) -> None:
        self.listener.settimeout(0.5)
        while not self._stop.is_set():
            try:
                sock, addr = self.listener.accept()
            except TimeoutError:
                continue
            except OSError as e:
                if self._stop.is_set():
                    break
                if e.errno not in _ACCEPT_TRANSIENT:
                    raise
                log.warning("rpc-server: accepting a connection failed: %s", e)  # out of descriptors, say
                time.sleep(0.1)
                continue
            peer = f"{addr[0]}:{addr[1]}"
            if not self._make_room(peer):
                log.warning("rpc-server: refusing %s: all %d connections are in the middle of a message "
                            "(--max-clients)", peer, self.max_clients)
                sock.close()
                continue
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            slot = Slot(sock, peer)
            t = threading.Thread(target=serve_connection,
                                 args=(sock, self.served, peer, slot, self.idle_timeout, self.message_timeout),
                                 daemon=True, name=f"rpc-client-{peer}")
            with self._lock:
                self._slots.add(slot)
            log.info("rpc-server: client %s connected", peer)
            t.start()

    def _make_room(self, peer: str) -> bool:
        """Whether a new connection fits: it does below the cap; at the cap the connection idle the longest (one
        holding no buffers first) is evicted for it; False when every connection is busy."""
        with self._lock:
            self._slots = {s for s in self._slots if not s.done}
            if len(self._slots) < self.max_clients:
                return True
            candidates = sorted(self._slots, key=lambda s: (s.holds_buffers, s.idle_since))
        now = time.monotonic()
        for victim in candidates:
            if victim.evict():
                with self._lock:
                    self._slots.discard(victim)
                log.warning("rpc-server: closing %s, idle for %.1f s%s, to admit %s: %d connections at most "
                            "(--max-clients)", victim.peer, now - victim.idle_since,
                            " holding buffers" if victim.holds_buffers else "", peer, self.max_clients)
                return True
        return False

    def shutdown(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self.listener.close()


_ACCEPT_TRANSIENT = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM, errno.ECONNABORTED, errno.EPROTO,
                     errno.EPERM}
"""accept() failures that concern one connection or a passing shortage, not the listener: logged, and it goes on."""
