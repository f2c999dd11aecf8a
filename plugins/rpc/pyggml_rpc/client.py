"""Remote devices: one device per device of each server (`registry.py` lists them), their buffers and backends.

`PYGGML_RPC_SERVERS=host:port,...` names servers at start-up; `get_registry("RPC").add_server("host:port")` adds
one later. Devices are numbered across servers in the order they were added: RPC0, RPC1, ... Each server gets one
connection (`Connection`), shared by its devices, buffers and backends.
"""

from __future__ import annotations

import contextlib
import dataclasses
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from pyggml.backend.plan_cache import PlannedBackend, check_not_freed
from pyggml.backend.protocol import (
    Buffer,
    BufferType,
    BufferUsage,
    Bytes,
    Device,
    DeviceCaps,
    DeviceType,
    Registry,
)
from pyggml.errors import AllocationError, UnsupportedOpError
from pyggml.ops.base import VIEW_OPS, Op
from pyggml.profile.sink import now_ns
from pyggml.types import GGMLType, type_traits
from pyggml_rpc import opcodes
from pyggml_rpc.client_profile import decode_profile, report_profile
from pyggml_rpc.connection import Connection
from pyggml_rpc.fnv import fnv1a64
from pyggml_rpc.ggml_support import ggml_cpu_runs
from pyggml_rpc.graph_codec import RPCGraphPlan, build_plan, check_wire_shape, support_query, wire_tensors
from pyggml_rpc.wire import (
    CLEAR_REQ,
    DEVICE_U64,
    HASH_THRESHOLD,
    MEMSET_TAIL,
    PROFILE_REPLY_MAX,
    SET_TENSOR_HEAD,
    TWO_U64,
    U8,
    U32,
    U64,
    Cmd,
    empty_tensors,
)

if TYPE_CHECKING:
    from pyggml.graph import Graph
    from pyggml.profile.sink import ProfileSink
    from pyggml.tensor import Tensor
    from pyggml_rpc.registry import RemoteServer

SPAN_MAX = (1 << 32) - 1
"""Bytes one wire tensor can span (ne is 32-bit): larger transfers go in pieces."""
_I8 = opcodes.ggml_type(GGMLType.I8)


class RPCDevice(Device):
    def __init__(self, reg: Registry, server: RemoteServer, index: int, name: str) -> None:
        # ids out of range: ggml's server aborts, pyggml's closes the connection; the protocol has no error reply
        super().__init__(reg, name, DeviceType.GPU, DeviceCaps(async_ops=True, checks_indices=False))
        self.server = server
        self.index = index
        self._buft = RPCBufferType(self)
        self._support: dict[bytes, bool] = {}
        """SUPPORTS_OP's answers by query (support_query's bytes)."""

    @property
    def description(self) -> str:
        return f"device {self.index} of RPC server {self.server.endpoint}"

    def details(self) -> dict[str, str]:
        return {"endpoint": self.server.endpoint, "remote device": str(self.index),
                "protocol": ".".join(map(str, self.server.conn.server_version))}

    def memory(self) -> tuple[int, int]:
        rsp = self.server.conn.call(Cmd.GET_DEVICE_MEMORY, U32.pack(self.index), TWO_U64.size)
        free, total = TWO_U64.unpack(rsp)
        return int(free), int(total)

    def new_backend(self) -> RPCBackend:
        return RPCBackend(self)

    def buffer_type(self) -> RPCBufferType:
        return self._buft

    def supports_op(self, op: Tensor) -> bool:
        """What the wire can express, and, unless the server is pyggml's (which computes pyggml's semantics for
        every op it decodes), what ggml's CPU kernels compute: a ggml server aborts on anything else."""
        if not opcodes.supported(op):
            return False
        if not self.server.conn.pyggml_server and not ggml_cpu_runs(op):
            return False
        try:
            for t in wire_tensors(op):
                check_wire_shape(t, "tensor")
        except UnsupportedOpError:
            return False
        if self.server.conn.answers_supports_op and op.op is not Op.NONE and op.op not in VIEW_OPS:
            return self._remote_supports(op)
        return True

    def _remote_supports(self, op: Tensor) -> bool:
        """The server's device's own answer (its op table: types, layouts, sizes), asked once per kind of node."""
        query = support_query(op, self.index)
        known = self._support.get(query)
        if known is None:
            known = self._support[query] = self.server.conn.call(Cmd.SUPPORTS_OP, query, U8.size) == b"\x01"
        return known

    def supports_buft(self, buft: BufferType) -> bool:
        return buft is self._buft


class RPCBufferType(BufferType):
    def __init__(self, dev: RPCDevice) -> None:
        super().__init__(f"{dev.name}[{dev.server.endpoint}]", dev)
        self.dev = dev
        self._alignment: int | None = None
        self._max_size: int | None = None

    @property
    def alignment(self) -> int:
        if self._alignment is None:
            self._alignment = self.dev.server.query_u64(Cmd.GET_ALIGNMENT, self.dev.index)
        return self._alignment

    @property
    def max_size(self) -> int:
        if self._max_size is None:
            self._max_size = self.dev.server.query_u64(Cmd.GET_MAX_SIZE, self.dev.index)
        return self._max_size

    def alloc_buffer(self, size: int) -> RPCBuffer:
        server = self.dev.server
        rsp = server.conn.call(Cmd.ALLOC_BUFFER, DEVICE_U64.pack(self.dev.index, size), TWO_U64.size)
        handle, remote_size = TWO_U64.unpack(rsp)
        if handle == 0:
            raise AllocationError(f"RPC server {server.endpoint} could not allocate {size} bytes on "
                                  f"{self.dev.name}")
        base = U64.unpack(server.conn.call(Cmd.BUFFER_GET_BASE, U64.pack(handle), U64.size))[0]
        return RPCBuffer(self, server, int(handle), int(base), int(remote_size))


class RPCBuffer(Buffer):
    """Server memory: every transfer addresses a byte span as a one-dimensional I8 wire tensor."""

    def __init__(self, buft: RPCBufferType, server: RemoteServer, handle: int, base: int, size: int) -> None:
        super().__init__(buft, size)
        self.server = server
        self.handle = handle
        self.base = base
        self._freed = False
        self._finalizer = weakref.finalize(self, server.conn.defer_free, handle)

    @property
    def freed(self) -> bool:
        return self._freed

    @contextlib.contextmanager
    def _live(self) -> Iterator[Connection]:
        """The connection, locked, while this buffer is known alive: a free from another thread cannot come
        between the check and the request (the server would then see a stale handle and drop the connection)."""
        conn = self.server.conn
        with conn.lock:
            if self._freed:
                raise AllocationError(f"{self!r} was freed: used after free")
            yield conn

    def span(self, offset: int, size: int) -> np.ndarray:
        if self._freed:
            raise AllocationError(f"{self!r} was freed")
        rec = empty_tensors(1)
        rec["id"] = self.handle + offset + 1
        rec["type"] = _I8
        rec["buffer"] = self.handle
        rec["data"] = self.base + offset
        rec["ne"] = (size, 1, 1, 1)
        rec["nb"] = (1, size, size, size)
        return rec

    def _pieces(self, offset: int, size: int) -> list[tuple[int, int]]:
        self.check_span(offset, size)
        return [(o, min(SPAN_MAX, offset + size - o)) for o in range(offset, offset + size, SPAN_MAX)]

    def write(self, offset: int, data: Bytes) -> None:
        data = np.ascontiguousarray(data, dtype=np.uint8).reshape(-1)
        with self._live() as conn:
            self._write(conn, offset, data)

    def _write(self, conn: Connection, offset: int, data: Bytes) -> None:
        for o, n in self._pieces(offset, data.size):
            piece = data[o - offset : o - offset + n]
            cache = 0
            if n > HASH_THRESHOLD and self.usage == BufferUsage.WEIGHTS:
                req = self.span(o, n).tobytes() + TWO_U64.pack(0, fnv1a64(piece))
                if conn.call(Cmd.SET_TENSOR_HASH, req, 1) == b"\x01":
                    continue
                cache = 1
            conn.send(Cmd.SET_TENSOR, self.span(o, n), SET_TENSOR_HEAD.pack(cache, 0), piece)

    def read(self, offset: int, size: int) -> Bytes:
        out = np.empty(size, np.uint8)
        with self._live() as conn:
            for o, n in self._pieces(offset, size):
                req = self.span(o, n).tobytes() + TWO_U64.pack(0, n)
                conn.call_into(Cmd.GET_TENSOR, (req,), out[o - offset : o - offset + n])
        return out

    def fill(self, offset: int, size: int, value: int) -> None:
        with self._live() as conn:
            for o, n in self._pieces(offset, size):
                conn.send(Cmd.MEMSET_TENSOR, self.span(o, n), MEMSET_TAIL.pack(0, n, value & 0xFF))

    def clear(self, value: int = 0) -> None:
        with self._live() as conn:
            conn.send(Cmd.BUFFER_CLEAR, CLEAR_REQ.pack(self.handle, value & 0xFF))

    def copy_from(self, src: Buffer, src_offset: int, dst_offset: int, size: int) -> bool:
        if not isinstance(src, RPCBuffer) or src.server is not self.server or size > SPAN_MAX:
            return False
        with self._live() as conn, src._live():
            req = src.span(src_offset, size).tobytes() + self.span(dst_offset, size).tobytes()
            return conn.call(Cmd.COPY_TENSOR, req, 1) == b"\x01"

    def init_tensor(self, tensor: Tensor) -> None:
        """As ggml's client: quantised rows not a multiple of 512 are announced (a CUDA server pads them)."""
        tr = type_traits(tensor.type)
        if tr.is_quantized and tensor.ne[0] % 512 and tensor.view_src is None:
            rec = self.span(tensor.offset, tensor.nbytes())
            rec["type"] = opcodes.ggml_type(tensor.type)
            rec["ne"], rec["nb"] = tensor.ne, tensor.nb
            with self._live() as conn:
                conn.send(Cmd.INIT_TENSOR, rec)

    def free(self) -> None:
        with self.server.conn.lock:
            if not self._freed:
                self._freed = True
                self._finalizer.detach()
                self.server.conn.free_buffer(self.handle)

    def locate(self, offset: int) -> tuple[int, int]:
        if self._freed:
            raise AllocationError(f"{self!r} was freed")
        return self.handle, self.base + offset

    def __repr__(self) -> str:
        return f"<RPCBuffer {self.buft.name} {self.size} bytes>"


class RPCBackend(PlannedBackend[RPCGraphPlan]):
    """A stream on a remote device. Graphs go out as GRAPH_COMPUTE once and as GRAPH_RECOMPUTE (a few bytes)
    while the server still holds the same graph for this device."""

    def __init__(self, device: RPCDevice) -> None:
        super().__init__(device, self._build)
        self.rpc_device = device
        self.recomputes = 0

    def _build(self, graph: Graph) -> RPCGraphPlan:
        server = self.rpc_device.server

        held: dict[int, RPCBuffer] = {}

        def locate(t: Tensor) -> tuple[int, int] | None:
            buf = t.buffer
            if not isinstance(buf, RPCBuffer) or buf.server is not server:
                return None
            held[id(buf)] = buf
            return buf.locate(t.offset)

        plan = build_plan(graph, self.rpc_device.index, locate, f"{server.endpoint} ({self.name})")
        return dataclasses.replace(plan, buffers=tuple(held.values()))

    def _server_keeps(self, plan: RPCGraphPlan) -> bool:
        """Whether the server still keeps `plan`'s graph (a 4-byte replay does), with its buffers checked alive and
        the frees finalizers queued sent first, so none goes out between this answer and the command. Called under
        the connection's lock: no free from another thread between the check and the send."""
        server = self.rpc_device.server
        check_not_freed((b for b in plan.buffers if isinstance(b, RPCBuffer)), self.name)
        server.conn.send_deferred_frees()
        stored = server.stored.get(plan.device)
        return stored is not None and stored[1] is plan and stored[0] == server.conn.generation

    def replay(self, plan: RPCGraphPlan) -> None:
        server = self.rpc_device.server
        conn = server.conn
        with conn.lock:
            if self._server_keeps(plan):
                conn.send(Cmd.GRAPH_RECOMPUTE, U32.pack(plan.device))
                self.recomputes += 1
            else:
                conn.send(Cmd.GRAPH_COMPUTE, plan.payload)
                server.stored[plan.device] = (conn.generation, plan)

    def compute_profiled(self, graph: Graph, sink: ProfileSink) -> None:
        """Per node, the server's own times, where the server announced GRAPH_COMPUTE_PROFILED (pyggml's, from the
        version that has it): the graph goes out as that command (a 4-byte replay while the server keeps it), its
        reply's times are moved onto this host's clock (`client_profile`) and reported on the lanes "server thread
        N" (or "server queue N"). Against any other server (llama.cpp's, an older pyggml one) the protocol's
        default: the whole graph timed here, with its ProfileWarning."""
        server = self.rpc_device.server
        if not server.conn.profiles_nodes:
            super().compute_profiled(graph, sink)
            return
        with self.lock:
            if self.freed:
                raise self.freed_error()
            plan = self.plan(graph)
            conn = server.conn
            with conn.lock:
                again = self._server_keeps(plan)
                conn.ping()  # earlier commands carried out: the round trip below is this graph's alone
                sent = now_ns()
                reply = conn.call_sized(Cmd.GRAPH_COMPUTE_PROFILED, (U32.pack(plan.device) if again else plan.payload,),
                                        PROFILE_REPLY_MAX)
                arrived = now_ns()
                server.stored[plan.device] = (conn.generation, plan)
            self.stats.computes += 1
            self.recomputes += int(again)
        prof = decode_profile(reply, plan.n_nodes, server.endpoint)
        report_profile(sink, self.name, graph, plan.node_index, prof, sent, arrived)

    def synchronize(self) -> None:
        """Nothing to wait for here, as in ggml's client: a send returns once the kernel holds the bytes (the
        caller's host memory is free at once), and the server carries out one connection's commands in order, so
        any later read of a result already waits for the work before it. A round trip here cost ~70 us, five
        times a decoded token (the scheduler synchronises before each input copy). `Connection.ping()` is the
        explicit wait."""
