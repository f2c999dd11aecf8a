"""The RPC server's fuzzing kit (tests/test_server_fuzz.py, benchmarks/fuzz_server.py): valid messages of every
command, built against a live in-process `Session`, and mutators that break them byte by byte and field by field.

`Harness` delivers each mutated message to `Session.handle` and judges it. Allowed: the valid thing, or
`ProtocolError` / another `PyGGMLError` (the socket loop closes the connection on those, and so does the harness: it
starts a fresh session). A bug: any other exception, a message slower than SLOW_S, or memory changed that the
message did not address. Memory is watched three ways: every buffer lies between inaccessible pages (a stray read
or write past either end faults at once) with pattern padding checked after each message; sentinel buffers, one
in the fuzzed session and one in another client's, keep a pattern that only a message naming the sentinel's
handle may change; and the server's allocation count must equal what the sessions hold.
"""

from __future__ import annotations

import ctypes
import faulthandler
import logging
import mmap
import random
import socket
import tempfile
import threading
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pyggml_rpc.fnv import fnv1a64
from pyggml_rpc.graph_codec import build_plan
from pyggml_rpc.opcode_table import ENTRIES
from pyggml_rpc.server import Served, Session, serve_connection
from pyggml_rpc.server_tensors import ProtocolError, ServedBuffer
from pyggml_rpc.wire import (
    CLEAR_REQ,
    CONN_CAPS_SIZE,
    DEVICE_U64,
    HEADER,
    MAX_SRC,
    MEMSET_TAIL,
    NO_REPLY,
    RPC_TENSOR,
    SET_TENSOR_HEAD,
    TENSOR_SIZE,
    TWO_U64,
    U32,
    U64,
    Cmd,
    graph_payload,
)

import pyggml as gg
from pyggml import ops
from pyggml.backend.host import HostBuffer, HostBufferType
from pyggml.backend.protocol import Backend, BufferType, Bytes, Device
from pyggml.backend.registry import get_device
from pyggml.errors import AllocationError, PyGGMLError
from pyggml.ops.base import Op
from pyggml.tensor import Tensor, contiguous_strides
from pyggml.types import GGMLType, type_traits

PAGE = mmap.PAGESIZE
GUARD_BYTE = 0xA5
SLOW_S = 5.0
"""Seconds one message may take before it counts as a bug (the templates compute in milliseconds)."""
HANG_S = 120.0
"""Seconds after which a message is taken to hang: the process prints every thread's stack and exits."""
MAIN_SIZE = 64 * 1024
SENTINEL_SIZE = 4096
MEMORY_LIMIT = 8 << 20
RESET_EVERY = 200
"""Messages after which the fuzzed session starts afresh, so state (buffers, stored graphs) stays small."""
SENTINEL = ((np.arange(SENTINEL_SIZE) * 37 + 11) & 0xFF).astype(np.uint8)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
REPLY_SIZES = {Cmd.DEVICE_COUNT: 4, Cmd.ALLOC_BUFFER: 16, Cmd.GET_ALIGNMENT: 8, Cmd.GET_MAX_SIZE: 8,
               Cmd.BUFFER_GET_BASE: 8, Cmd.SET_TENSOR_HASH: 1, Cmd.COPY_TENSOR: 1, Cmd.GET_DEVICE_MEMORY: 16,
               Cmd.GET_ALLOC_SIZE: 8}
"""What ggml's client reads back for each command with a fixed reply (GET_TENSOR: its size field)."""


class GuardedBuffer(HostBuffer):
    """Host memory whose last byte (for sizes a multiple of 64, else the padding's) touches an inaccessible page,
    with another such page before the padding in front: an access past either end faults instead of going
    unnoticed, and a write into the padding shows in `guards_intact()`."""

    def __init__(self, buft: BufferType, size: int) -> None:
        padded = -(-size // 64) * 64
        body = max(-(-padded // PAGE) * PAGE, PAGE)
        self._map = mmap.mmap(-1, body + 2 * PAGE)
        whole = np.frombuffer(self._map, np.uint8)
        addr = int(whole.ctypes.data)
        for at in (addr, addr + PAGE + body):
            if _libc.mprotect(at, PAGE, 0):  # PROT_NONE
                raise OSError(ctypes.get_errno(), "mprotect failed")
        start = PAGE + body - padded
        self._pads = (whole[PAGE:start], whole[start + size : PAGE + body])
        for pad in self._pads:
            pad[:] = GUARD_BYTE
        super().__init__(buft, whole[start : start + size])

    def guards_intact(self) -> bool:
        return all(bool(np.all(pad == GUARD_BYTE)) for pad in self._pads)


class GuardedBufferType(HostBufferType):
    def alloc_buffer(self, size: int) -> HostBuffer:
        try:
            return GuardedBuffer(self, size)
        except (OSError, ValueError, OverflowError) as e:
            raise AllocationError(f"guarded buffer of {size} bytes: {e}") from e


class GuardedDevice(Device):
    """A pyggml device whose buffers are `GuardedBuffer`s; compute, op support and memory are the device's."""

    def __init__(self, inner: Device) -> None:
        super().__init__(inner.reg, inner.name, inner.type, inner.caps)
        self.inner = inner
        self._buft = GuardedBufferType(f"guarded {inner.name}", self)

    def memory(self) -> tuple[int, int]:
        return self.inner.memory()

    def init_backend(self, params: str | None = None) -> Backend:
        return self.inner.init_backend(params)

    def buffer_type(self) -> BufferType:
        return self._buft

    def supports_op(self, op: Tensor) -> bool:
        return self.inner.supports_op(op)


def make_served(devices: tuple[str, ...], cache_dir: Path | None) -> Served:
    devs: list[Device] = [GuardedDevice(get_device(n)) for n in devices]
    return Served(devs, [d.init_backend("n_threads=1") for d in devs], MEMORY_LIMIT, cache_dir)


def alloc(session: Session, device: int, size: int) -> ServedBuffer:
    handle = TWO_U64.unpack(session.handle(Cmd.ALLOC_BUFFER, DEVICE_U64.pack(device, size)) or b"")[0]
    if not handle:
        raise AllocationError(f"setup: {size} bytes on device {device} refused")
    return session.table.by_handle[handle]


class World:
    """The fuzzed session `a` (main buffer: where valid messages point; sentinel; scratch buffers to free) and a
    bystander client `b` whose sentinel no message of `a` may change."""

    def __init__(self, served: Served, graph_init: Bytes, cache_blobs: list[Bytes]) -> None:
        self.served = served
        self.n_devices = len(served.devices)
        self.graph_init = graph_init
        self.cache_blobs = cache_blobs
        self.b = Session(served, "bystander")
        self.sent_b = alloc(self.b, 0, SENTINEL_SIZE)
        self.sent_b.buffer.write(0, SENTINEL)
        self.a = Session(served, "fuzzed")
        self.reset()

    def reset(self) -> None:
        self.a.close()
        self.a = Session(self.served, "fuzzed")
        self.main = alloc(self.a, 0, MAIN_SIZE)
        self.main.buffer.write(0, np.zeros(MAIN_SIZE, np.uint8))
        self.sent_a = alloc(self.a, self.n_devices - 1, SENTINEL_SIZE)
        self.sent_a.buffer.write(0, SENTINEL)
        self.age = 0

    def handles(self) -> list[int]:
        return [self.main.handle, self.sent_a.handle, self.sent_b.handle]

    def verify(self, payload: bytes) -> tuple[list[str], bool]:
        """(what went wrong, whether the fuzzed session must start afresh) after one message."""
        problems: list[str] = []
        for who, s in (("fuzzed", self.a), ("bystander", self.b)):
            for sb in s.table.by_handle.values():
                if isinstance(sb.buffer, GuardedBuffer) and not sb.buffer.guards_intact():
                    problems.append(f"{who} buffer {sb.handle:#x}: guard bytes changed")
        if self.b.table.by_handle.get(self.sent_b.handle) is not self.sent_b:
            problems.append("bystander's sentinel buffer is gone")
        elif not np.array_equal(self.sent_b.buffer.read(0, SENTINEL_SIZE), SENTINEL):
            problems.append("bystander's sentinel buffer changed")
        named = U64.pack(self.sent_a.handle) in payload
        if self.sent_a.handle not in self.a.table.by_handle:
            if not named:
                problems.append("sentinel buffer freed by a message that does not name it")
        elif not np.array_equal(self.sent_a.buffer.read(0, SENTINEL_SIZE), SENTINEL):
            if not named:
                problems.append("sentinel buffer changed by a message that does not name it")
            self.sent_a.buffer.write(0, SENTINEL)
        main_gone = self.main.handle not in self.a.table.by_handle
        if main_gone and U64.pack(self.main.handle) not in payload:
            problems.append("main buffer freed by a message that does not name it")
        held = self.a.table.total() + self.b.table.total()
        if self.served.allocated != held:
            problems.append(f"server counts {self.served.allocated} bytes allocated, sessions hold {held}")
        return problems, main_gone or self.sent_a.handle not in self.a.table.by_handle


# ---- valid messages ------------------------------------------------------------------------------------------

GRAPH_AREA = 32 * 1024
"""Main buffer bytes [0, GRAPH_AREA) hold the graph templates' tensors; transfers address the rest."""
TYPES = (GGMLType.F32, GGMLType.F16, GGMLType.BF16, GGMLType.I8, GGMLType.I32, GGMLType.Q8_0, GGMLType.Q4_0,
         GGMLType.Q4_K)
CPY_CODE = ENTRIES[Op.CPY].code


@dataclass
class Msg:
    cmd: Cmd
    payload: bytes
    scalars: list[tuple[int, int]] = field(default_factory=list)
    """(offset, width) of the integer fields outside rpc_tensors."""
    tensors: list[int] = field(default_factory=list)
    """Offsets of the rpc_tensor records."""
    framed: bool = False
    """Whole requests (headers and all) for the socket loop, not a payload."""


@dataclass
class Template:
    nodes: np.ndarray
    recs: np.ndarray
    """rpc_tensors with `data` relative to the main buffer's base (GRAPH_COMPUTE as `build_plan` made it)."""


def tensor_rec(ttype: GGMLType, ne: tuple[int, int, int, int], buffer: int, data: int, tid: int) -> np.ndarray:
    r = np.zeros(1, RPC_TENSOR)
    r["id"], r["type"], r["buffer"], r["data"], r["name"] = tid, int(ttype), buffer, data, b"fuzz"
    r["ne"], r["nb"] = ne, contiguous_strides(ttype, ne)
    return r


def typed(w: World, r: random.Random, lo: int, hi: int, ttype: GGMLType | None = None,
          ne: tuple[int, int, int, int] | None = None) -> tuple[np.ndarray, int]:
    """A random contiguous tensor in the main buffer's [lo, hi), and its byte size."""
    tt = ttype if ttype is not None else r.choice(TYPES)
    tr = type_traits(tt)
    ne = ne or (tr.blck_size * r.randint(1, 2 if tr.blck_size > 32 else 8), r.randint(1, 4), r.randint(1, 2), 1)
    size = contiguous_strides(tt, ne)[3] * ne[3]
    at = lo + 64 * r.randrange(max((hi - lo - size) // 64, 1))
    return tensor_rec(tt, ne, w.main.handle, w.main.base + at, r.getrandbits(63) | 1), size


def _device(cmd: Cmd) -> Callable[[World, random.Random, list[Template]], Msg]:
    return lambda w, r, t: Msg(cmd, U32.pack(r.randrange(w.n_devices)), [(0, 4)])


def _rec_tail(cmd: Cmd, rec: np.ndarray, tail: bytes, widths: tuple[int, ...]) -> Msg:
    at, scalars = TENSOR_SIZE, []
    for width in widths:
        scalars.append((at, width))
        at += width
    return Msg(cmd, rec.tobytes() + tail, scalars, [0])


def g_set(w: World, r: random.Random, t: list[Template]) -> Msg:
    rec, n = typed(w, r, GRAPH_AREA, MAIN_SIZE)
    off = r.randrange(n)
    data = r.randbytes(r.randint(0, n - off))
    return _rec_tail(Cmd.SET_TENSOR, rec, SET_TENSOR_HEAD.pack(r.random() < 0.2, off) + data, (1, 8))


def g_hash(w: World, r: random.Random, t: list[Template]) -> Msg:
    blob = r.choice(w.cache_blobs)
    rec, n = typed(w, r, GRAPH_AREA, MAIN_SIZE, GGMLType.I8, (blob.size + r.randrange(64), 1, 1, 1))
    digest = fnv1a64(blob) if r.random() < 0.75 else r.getrandbits(64)
    return _rec_tail(Cmd.SET_TENSOR_HASH, rec, TWO_U64.pack(r.randrange(n - blob.size + 1), digest), (8, 8))


def g_get(w: World, r: random.Random, t: list[Template]) -> Msg:
    rec, n = typed(w, r, GRAPH_AREA, MAIN_SIZE)
    off = r.randrange(n)
    return _rec_tail(Cmd.GET_TENSOR, rec, TWO_U64.pack(off, r.randint(0, n - off)), (8, 8))


def g_memset(w: World, r: random.Random, t: list[Template]) -> Msg:
    rec, n = typed(w, r, GRAPH_AREA, MAIN_SIZE)
    off = r.randrange(n)
    return _rec_tail(Cmd.MEMSET_TENSOR, rec, MEMSET_TAIL.pack(off, r.randint(0, n - off), r.randrange(256)),
                     (8, 8, 1))


def g_copy(w: World, r: random.Random, t: list[Template]) -> Msg:
    src, _ = typed(w, r, GRAPH_AREA, 48 * 1024)
    tt = GGMLType(int(src["type"][0]))
    dst, _ = typed(w, r, 48 * 1024, MAIN_SIZE, tt, tuple(int(v) for v in src["ne"][0]))  # type: ignore[arg-type]
    return Msg(Cmd.COPY_TENSOR, src.tobytes() + dst.tobytes(), [], [0, TENSOR_SIZE])


def g_alloc_size(w: World, r: random.Random, t: list[Template]) -> Msg:
    rec, _ = typed(w, r, GRAPH_AREA, MAIN_SIZE)
    if r.random() < 0.5:
        rec["buffer"], rec["data"] = 0, 0
    body = U32.pack(r.randrange(w.n_devices)) + rec.tobytes() + bytes(MAX_SRC * TENSOR_SIZE)
    # mutations hit the tensor asked about, mostly, and its (ignored) sources now and then
    return Msg(Cmd.GET_ALLOC_SIZE, body, [(0, 4)], [4, 4, 4, 4 + TENSOR_SIZE * r.randint(1, MAX_SRC)])


def g_graph(w: World, r: random.Random, t: list[Template], device: int | None = None) -> Msg:
    tpl = r.choice(t)
    recs = tpl.recs.copy()
    recs["buffer"] = w.main.handle
    recs["data"] += np.uint64(w.main.base)
    w.main.buffer.write(0, w.graph_init)
    return graph_msg(r.randrange(w.n_devices) if device is None else device, tpl.nodes, recs)


def graph_msg(device: int, nodes: np.ndarray, recs: np.ndarray) -> Msg:
    at = 8 + 8 * len(nodes)
    return Msg(Cmd.GRAPH_COMPUTE, graph_payload(device, nodes, recs),
               [(0, 4), (4, 4), (at, 4), *((8 + 8 * i, 8) for i in range(len(nodes)))],
               [at + 4 + TENSOR_SIZE * i for i in range(len(recs))])


def g_recompute(w: World, r: random.Random, t: list[Template]) -> Msg:
    device = r.randrange(w.n_devices)
    if device not in w.a.graphs:
        w.a.handle(Cmd.GRAPH_COMPUTE, g_graph(w, r, t, device).payload)
    return Msg(Cmd.GRAPH_RECOMPUTE, U32.pack(device), [(0, 4)])


def g_free(w: World, r: random.Random, t: list[Template]) -> Msg:
    return Msg(Cmd.FREE_BUFFER, U64.pack(alloc(w.a, r.randrange(w.n_devices), r.choice((0, 64, 1000))).handle),
               [(0, 8)])


GENERATORS: dict[Cmd, Callable[[World, random.Random, list[Template]], Msg]] = {
    Cmd.HELLO: lambda w, r, t: Msg(Cmd.HELLO, bytes(CONN_CAPS_SIZE), [(0, 8), (8, 8), (16, 8)]),
    Cmd.DEVICE_COUNT: lambda w, r, t: Msg(Cmd.DEVICE_COUNT, b""),
    Cmd.ALLOC_BUFFER: lambda w, r, t: Msg(Cmd.ALLOC_BUFFER, DEVICE_U64.pack(
        r.randrange(w.n_devices), r.choice((0, 1, 64, 1000, 4096, 3 * PAGE))), [(0, 4), (4, 8)]),
    Cmd.GET_ALIGNMENT: _device(Cmd.GET_ALIGNMENT),
    Cmd.GET_MAX_SIZE: _device(Cmd.GET_MAX_SIZE),
    Cmd.GET_DEVICE_MEMORY: _device(Cmd.GET_DEVICE_MEMORY),
    Cmd.BUFFER_GET_BASE: lambda w, r, t: Msg(Cmd.BUFFER_GET_BASE, U64.pack(r.choice(w.handles()[:2])), [(0, 8)]),
    Cmd.FREE_BUFFER: g_free,
    Cmd.BUFFER_CLEAR: lambda w, r, t: Msg(Cmd.BUFFER_CLEAR, CLEAR_REQ.pack(w.main.handle, r.randrange(256)),
                                          [(0, 8), (8, 1)]),
    Cmd.SET_TENSOR: g_set,
    Cmd.SET_TENSOR_HASH: g_hash,
    Cmd.GET_TENSOR: g_get,
    Cmd.COPY_TENSOR: g_copy,
    Cmd.GRAPH_COMPUTE: g_graph,
    Cmd.GRAPH_RECOMPUTE: g_recompute,
    Cmd.INIT_TENSOR: lambda w, r, t: Msg(Cmd.INIT_TENSOR, typed(w, r, GRAPH_AREA, MAIN_SIZE)[0].tobytes(), [], [0]),
    Cmd.GET_ALLOC_SIZE: g_alloc_size,
    Cmd.MEMSET_TENSOR: g_memset,
}


def _templates(ctx: gg.Context) -> list[tuple[list[Tensor], dict[int, list[int]]]]:
    """Small graphs over the ops ggml clients send most: (outputs, index tensors' values) each."""
    T, new = GGMLType, ctx.new_tensor
    x, w, b = new(T.F32, 32, 4), new(T.Q8_0, 32, 16), new(T.F32, 16)
    ffn = ops.soft_max(ops.add(ops.mul_mat(w, ops.rms_norm(x, 1e-6)), b), scale=0.5)
    a, d = new(T.F32, 8, 6), new(T.F16, 6, 8)
    half = ops.scale(ops.cont(ops.view(a, (4, 6), (32,), 16)), 0.5)
    layout = [ops.cpy(ops.cont(ops.transpose(a)), d), ops.cont(ops.permute(ops.reshape(a, 4, 2, 6), 1, 0, 2, 3)),
              ops.concat(half, half, 1), ops.repeat(new(T.F32, 4, 1), half)]
    tab, ids, dst, ids2 = new(T.F32, 16, 10), new(T.I32, 4), new(T.F16, 16, 12), new(T.I64, 4)
    q4, ids3, q8 = new(T.Q4_0, 32, 8), new(T.I32, 3), new(T.Q8_0, 32, 2)
    rows = [ops.concat(q8, q8, 1), ops.set_rows(dst, ops.silu(ops.get_rows(tab, ids)), ids2), ops.get_rows(q4, ids3)]
    p, s, q, pos = new(T.F32, 16, 4), new(T.F32, 16, 4), new(T.F32, 8, 2, 3), new(T.I32, 3)
    inplace = [ops.norm(ops.mul(ops.add(p, s, inplace=True), s)), ops.rope(q, pos, 8)]
    qa, k, v = new(T.F32, 16, 3, 2), new(T.F16, 16, 8, 2), new(T.F16, 16, 8, 2)
    attn = [ops.sum_rows(ops.flash_attn_ext(qa, k, v, scale=0.25))]
    index = {id(ids): [1, 3, 5, 9], id(ids2): [0, 11, 2, 7], id(ids3): [7, 0, 2], id(pos): [0, 1, 2]}
    return [([ffn, ops.sum(new(T.F32, 8, 4))], index), (layout, index), (rows, index), (inplace, index), (attn, index)]


def graph_templates() -> tuple[list[Template], Bytes]:
    """The GRAPH_COMPUTE templates (tensors placed in [0, GRAPH_AREA) of the main buffer) and those bytes."""
    host = HostBufferType("fuzz templates").alloc_buffer(GRAPH_AREA)
    host.array[:] = 0
    rng = np.random.default_rng(7)
    cursor = 0
    out = []
    for outputs, index in _templates(gg.Context(no_alloc=True)):
        graph = gg.build_graph(*outputs)
        placed: dict[int, Tensor] = {}
        stack = list(graph.nodes)
        while stack:  # sources and view sources first
            t = stack[-1]
            todo = [s for s in (*t.src, t.view_src) if s is not None and id(s) not in placed]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            if id(t) in placed:
                continue
            placed[id(t)] = t
            t.buffer = host
            if t.view_src is not None:
                t.offset = t.view_src.offset + t.view_offs
                continue
            t.offset, cursor = cursor, cursor + -(-max(t.nbytes(), 1) // 64) * 64
            if t.op is Op.NONE:
                t.set(index.get(id(t)) or rng.standard_normal(t.nelements()))
        assert cursor <= GRAPH_AREA
        plan = build_plan(graph, 0, lambda t: (1, t.offset), "fuzz")
        n_nodes = U32.unpack_from(plan.payload, 4)[0]
        nodes = np.frombuffer(plan.payload, "<u8", n_nodes, 8).copy()
        out.append(Template(nodes, np.frombuffer(plan.payload, RPC_TENSOR, offset=12 + 8 * n_nodes).copy()))
    return out, host.array.copy()


# ---- mutators ------------------------------------------------------------------------------------------------

EDGES = (0, 1, 2, 3, 0x7F, 0x80, 0xFF, 0x100, 0xFFFF, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF, 1 << 32,
         (1 << 32) + 1, 1 << 62, (1 << 63) - 1, 1 << 63, (1 << 64) - 1, (1 << 64) - 2)
FIELDS = [(f"{name}[{i}]" if dt.shape else name, off + i * dt.base.itemsize, dt.base.itemsize)
          for name, (dt, off, *_) in (RPC_TENSOR.fields or {}).items() if name != "name"
          for i in range(dt.shape[0] if dt.shape else 1)]
"""(name, offset, width) of every integer of an rpc_tensor, array elements one by one."""
OFFSETS = {name: off for name, (_, off, *_) in (RPC_TENSOR.fields or {}).items()}


def _get(buf: bytearray, at: int, width: int) -> int:
    return int.from_bytes(buf[at : at + width], "little")


def _put(buf: bytearray, at: int, width: int, value: int) -> None:
    buf[at : at + width] = (value & ((1 << 8 * width) - 1)).to_bytes(width, "little")


def _value(r: random.Random, width: int, old: int, likely: list[int]) -> int:
    c = r.random()
    if c < 0.4:
        return r.choice(EDGES)
    if c < 0.6:
        return old + r.choice((-1, 1, -2, 2, -64, 64, -4096, 4096, old))
    if c < 0.85 and likely:
        return r.choice(likely)
    return r.getrandbits(8 * width)


def _likely(name: str, buf: bytearray, msg: Msg, w: World) -> list[int]:
    """Values that pass some checks and not others: ids of the message, live handles, addresses near buffers."""
    if name.startswith(("id", "src", "view_src")):
        return [0] + [_get(buf, at, 8) for at in msg.tensors]
    if name == "buffer":
        return [0, *w.handles()]
    if name == "data":
        m = w.main.base
        return [0, m, m - 1, m + MAIN_SIZE - 1, m + MAIN_SIZE, m + MAIN_SIZE + 1, w.sent_a.base, w.sent_b.base]
    if name == "type":
        return list(range(45))
    if name == "op":
        return list(range(102))
    return [0, 1, 2, 4, 16, 31, 32, 33, 64, 256, 1024]


def _field(msg: Msg, buf: bytearray, r: random.Random, w: World) -> str:
    if not msg.tensors and not msg.scalars:
        return _bytes(msg, buf, r, w)
    if msg.tensors and (not msg.scalars or r.random() < 0.75):
        at = r.choice(msg.tensors)
        c = r.random()
        if c < 0.04:
            buf[at + OFFSETS["name"] :][:64] = b"\xff" * 64
            return "tensor.name"
        if c < 0.1:
            return _at_end(buf, at, r, w)
        if c < 0.16:  # every dimension and stride at once: extents past 2**64, overflowing products
            mode = r.choice(("big", "mixed", "virtual"))  # virtual: huge ne over zero strides, a few bytes
            for name, off, width in FIELDS:
                if name.startswith("ne") or (name.startswith("nb") and mode != "virtual"):
                    _put(buf, at + off, width, r.choice((0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF) if mode != "mixed"
                                                        else (0, 1, 2, 3, 64, 0x8000_0000, 0xFFFF_FFFF)))
                elif name.startswith("nb"):
                    _put(buf, at + off, width, 0)
            return "tensor.shape"
        name, off, width = r.choice(FIELDS)
        _put(buf, at + off, width, _value(r, width, _get(buf, at + off, width), _likely(name, buf, msg, w)))
        return f"tensor.{name}"
    at, width = r.choice(msg.scalars)
    _put(buf, at, width, _value(r, width, _get(buf, at, width), [0, *w.handles()]))
    return f"field@{at}"


def _at_end(buf: bytearray, at: int, r: random.Random, w: World) -> str:
    """The tensor (a stride shrunk, maybe) moved so that ggml_nbytes of it ends at the main buffer's last byte,
    which touches an inaccessible page: a kernel reading past what the server checked faults."""
    if len(buf) < at + TENSOR_SIZE:  # cut short by an earlier mutation
        return "tensor.at_end (truncated)"
    rec = np.frombuffer(bytes(buf[at : at + TENSOR_SIZE]), RPC_TENSOR)[0]
    ne, nb = tuple(int(v) for v in rec["ne"]), [int(v) for v in rec["nb"]]
    c = r.random()
    if c < 0.4:
        nb[r.randrange(4)] = r.choice((0, 1, 2, 4, nb[0] // 2))
    elif c < 0.8:  # rows spread apart, elements (blocks) squeezed: no overlap, an extent easy to miscount
        nb = [r.randrange(nb[0] + 1), *(2 * v + 64 for v in nb[1:])]
    try:
        n = Tensor(GGMLType(int(rec["type"])), ne, tuple(nb), op=Op.NONE).nbytes()  # type: ignore[arg-type]
    except (ValueError, KeyError, ZeroDivisionError):
        return "tensor.at_end (no type)"
    for k in range(4):
        _put(buf, at + OFFSETS["nb"] + 4 * k, 4, nb[k])
    _put(buf, at + OFFSETS["buffer"], 8, w.main.handle)
    _put(buf, at + OFFSETS["data"], 8, w.main.base + MAIN_SIZE - n)
    return "tensor.at_end"


def _swap(msg: Msg, buf: bytearray, r: random.Random, w: World) -> str:
    if len(msg.tensors) > 1 and r.random() < 0.3:
        i, j = r.sample(msg.tensors, 2)
        buf[i : i + TENSOR_SIZE], buf[j : j + TENSOR_SIZE] = buf[j : j + TENSOR_SIZE], buf[i : i + TENSOR_SIZE]
        return "swap tensors"
    if msg.tensors:
        at = r.choice(msg.tensors)
        (n1, o1, _), (n2, o2, _) = r.sample([f for f in FIELDS if f[2] == 8], 2)
        a, b = _get(buf, at + o1, 8), _get(buf, at + o2, 8)
        _put(buf, at + o1, 8, b)
        _put(buf, at + o2, 8, a)
        return f"swap tensor.{n1}/{n2}"
    return _field(msg, buf, r, w) if msg.scalars else "none"


def _bits(msg: Msg, buf: bytearray, r: random.Random, w: World) -> str:
    for _ in range(r.randint(1, 8)):
        if buf:
            buf[r.randrange(len(buf))] ^= 1 << r.randrange(8)
    return "bit flips"


def _bytes(msg: Msg, buf: bytearray, r: random.Random, w: World) -> str:
    for _ in range(r.randint(1, 4)):
        if buf:
            buf[r.randrange(len(buf))] = r.choice((0, 0xFF, 0x7F, 0x80, r.randrange(256)))
    return "byte overwrites"


def _graph(msg: Msg, r: random.Random, w: World) -> tuple[Msg, str]:
    """A structural change to a GRAPH_COMPUTE: ids pointing at nothing, cycles, self-reference, repeated or
    missing tensors, a ggml_cast, a leaf turned node, a source squeezed against the buffer's end, or a graph of
    thousands of nodes."""
    p = msg.payload
    n = U32.unpack_from(p, 4)[0]
    nodes = np.frombuffer(p, "<u8", n, 8).copy()
    recs = np.frombuffer(p, RPC_TENSOR, offset=12 + 8 * n).copy()
    ids = [int(v) for v in recs["id"]]
    i = r.randrange(len(recs))
    kind = r.choice(("node", "nodes+", "no nodes", "self src", "self view", "cycle", "dangling", "dup id", "zero id",
                     "drop", "dup rec", "shuffle", "cast", "leaf op", "view of", "many", "squeeze", "squeeze",
                     "node op", "node op", "inflate", "inflate"))
    if kind == "node":
        nodes[r.randrange(len(nodes))] = r.choice((0, r.getrandbits(64), r.choice(ids), int(nodes[0])))
    elif kind == "nodes+":
        nodes = np.concatenate([nodes, np.array([r.choice(ids) for _ in range(r.randint(1, 5))], np.uint64)])
    elif kind == "no nodes":
        nodes = nodes[:0]
    elif kind in ("self src", "dangling"):
        recs[i]["src"][r.randrange(3)] = ids[i] if kind == "self src" else r.getrandbits(64) | 1
    elif kind == "self view":
        recs[i]["view_src"] = ids[i]
    elif kind == "cycle":  # a node's source (or view source) now depends on the node
        users = [j for j in range(len(recs)) if recs[j]["src"][0]]
        j = r.choice(users or [i])
        dep = ids.index(int(recs[j]["src"][0])) if recs[j]["src"][0] in ids else i
        recs[dep]["src" if r.random() < 0.7 else "view_src"].flat[0] = ids[j]
    elif kind in ("dup id", "zero id"):
        recs[i]["id"] = r.choice(ids) if kind == "dup id" else 0
    elif kind == "drop":
        recs = np.delete(recs, i)
    elif kind == "dup rec":
        recs = np.concatenate([recs, recs[i : i + 1]])
    elif kind == "shuffle":
        recs = recs[r.sample(range(len(recs)), len(recs))]
    elif kind == "cast":
        cpys = [j for j in range(len(recs)) if recs[j]["op"] == CPY_CODE] or [i]
        j = r.choice(cpys)
        recs[j]["src"][1], recs[j]["view_src"] = ids[j], 0
    elif kind == "inflate":  # a source of ~2**32 elements per dimension over a few bytes (zero strides)
        j = r.choice([j for j in range(len(recs)) if recs[j]["op"] == 0] or [i])
        for k in r.sample(range(4), r.randint(1, 4)):
            recs[j]["ne"][k], recs[j]["nb"][k] = r.choice((1 << 16, 0x7FFF_FFFF, 0xFFFF_FFFF)), 0
    elif kind == "node op":  # another op over the same sources, params words edge values: opcodes and shape rules
        j = r.choice([j for j in range(len(recs)) if recs[j]["op"]] or [i])
        recs[j]["op"] = r.randrange(1, 101)
        for k in r.sample(range(16), r.randint(0, 6)):
            recs[j]["op_params"][k] = r.choice((0, 1, 2, 3, -1, 0x3F800000, 0x7FC00000, 0x7F800000, r.getrandbits(31)))
    elif kind == "leaf op":
        recs[i]["op"], recs[i]["src"][0] = r.randrange(1, 101), r.choice(ids)
    elif kind == "squeeze":  # a source, block-typed if there is one, with a stride shrunk, at the buffer's end
        leaves = [j for j in range(len(recs)) if recs[j]["op"] == 0]
        blocks = [j for j in leaves if type_traits(GGMLType(int(recs[j]["type"]))).blck_size > 1]
        j = r.choice(blocks if blocks and r.random() < 0.7 else leaves or [i])
        buf = bytearray(recs.tobytes())
        _at_end(buf, j * TENSOR_SIZE, r, w)
        recs = np.frombuffer(bytes(buf), RPC_TENSOR).copy()
    elif kind == "view of":
        recs[i]["view_src"] = r.choice(ids)
    else:  # a big graph: one computed node repeated under fresh ids
        j = r.choice([j for j in range(len(recs)) if int(recs[j]["id"]) in set(nodes.tolist())] or [i])
        extra = np.repeat(recs[j : j + 1], r.choice((100, 1000, 3000)))
        extra["id"] = np.arange(1, len(extra) + 1, dtype=np.uint64) + np.uint64(1 << 40)
        recs, nodes = np.concatenate([recs, extra]), np.concatenate([nodes, extra["id"]])
    return graph_msg(U32.unpack_from(p, 0)[0], nodes, recs), f"graph {kind}"


MUTATORS = ((_field, 5), (_bits, 2), (_bytes, 2), (_swap, 1))


def mutate(msg: Msg, r: random.Random, w: World) -> tuple[Cmd, bytes, str]:
    """One to three stacked mutations of a valid message: (command to send, payload, what was done)."""
    done = []
    if msg.cmd is Cmd.GRAPH_COMPUTE and not msg.framed and r.random() < 0.4:
        msg, how = _graph(msg, r, w)
        done.append(how)
        if r.random() < 0.5:
            return msg.cmd, msg.payload, how
    buf = bytearray(msg.payload)
    cmd = msg.cmd
    for _ in range(1 + (r.random() < 0.3) + (r.random() < 0.1)):
        c = r.random()
        if c < 0.07 and buf:
            del buf[r.randrange(len(buf)) :]
            done.append("truncated")
        elif c < 0.12:
            buf += r.choice((r.randbytes(r.randint(1, 64)), bytes(TENSOR_SIZE)))
            done.append("extended")
        elif c < 0.15:
            cmd = Cmd(r.choice(list(Cmd)))
            done.append(f"sent as {cmd.name}")
        else:
            fn = r.choices([m for m, _ in MUTATORS], [k for _, k in MUTATORS])[0]
            done.append(fn(msg, buf, r, w))
    return cmd, bytes(buf), ", ".join(done)


@dataclass
class Finding:
    cmd: str
    mutation: str
    outcome: str
    detail: str
    payload: str


class LogRecorder(logging.Handler):
    """The server's log lines, kept: how the socket loop closed a connection, and any last-resort error."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def frame(code: int, payload: bytes, size: int | None = None) -> bytes:
    return HEADER.pack(code, len(payload) if size is None else size) + payload


HELLO_FRAME = frame(Cmd.HELLO, bytes(CONN_CAPS_SIZE))
STREAM_SHARE = 0.05
"""Part of each command's cases sent as bytes to the socket loop (header mutations: command byte, size field)."""


def framed(msg: Msg) -> Msg:
    """`msg` framed after a valid HELLO (HELLO itself: framed, then DEVICE_COUNT), its header's fields mutable."""
    if msg.cmd is Cmd.HELLO:
        return Msg(msg.cmd, HELLO_FRAME + frame(Cmd.DEVICE_COUNT, b""), [(0, 1), (1, 8), (9, 8), (33, 1), (34, 8)],
                   framed=True)
    at = len(HELLO_FRAME) + HEADER.size
    return Msg(msg.cmd, HELLO_FRAME + frame(msg.cmd, msg.payload), [(at - 9, 1), (at - 8, 8)] * 3 +
               [(at + o, k) for o, k in msg.scalars], [at + o for o in msg.tensors], framed=True)


@dataclass
class Harness:
    """Runs campaigns: `run(cmd, n)` fuzzes n mutated messages of one command; counts land in `outcomes`."""

    seed: int = 0
    devices: tuple[str, ...] = ("cpu", "numpy")
    outcomes: dict[str, Counter[str]] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    slowest: dict[str, float] = field(default_factory=dict)
    """Seconds of the slowest case per command."""

    def __post_init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="rpc-fuzz-")
        cache = Path(self._tmp.name)
        self.served = make_served(self.devices, cache)
        rng = np.random.default_rng(self.seed)
        blobs = [rng.integers(0, 256, n, dtype=np.uint8) for n in (1, 64, 300, 1000)]
        for blob in blobs:
            (cache / f"{fnv1a64(blob):016x}").write_bytes(blob.tobytes())
        self.templates, graph_init = graph_templates()
        self.world = World(self.served, graph_init, blobs)
        self.rng = random.Random(self.seed)
        self.log = LogRecorder()
        self._logger = logging.getLogger("pyggml_rpc.server")
        self._saved = (self._logger.level, self._logger.propagate)
        self._logger.setLevel(logging.INFO)
        self._logger.propagate = False
        self._logger.addHandler(self.log)

    def close(self) -> None:
        self.world.a.close()
        self.world.b.close()
        self._logger.removeHandler(self.log)
        self._logger.setLevel(self._saved[0])
        self._logger.propagate = self._saved[1]
        self._tmp.cleanup()

    def run(self, cmd: Cmd, n: int) -> Counter[str]:
        counts = self.outcomes.setdefault(cmd.name, Counter())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # the numpy device computing garbage inputs
            for _ in range(n):
                w = self.world
                if w.age >= RESET_EVERY:
                    w.reset()
                w.age += 1
                msg = GENERATORS[cmd](w, self.rng, self.templates)
                streamed = cmd is Cmd.HELLO or self.rng.random() < STREAM_SHARE
                send, payload, how = mutate(framed(msg) if streamed else msg, self.rng, w)
                faulthandler.dump_traceback_later(HANG_S, exit=True)  # a hang ends the run, loudly
                t0 = time.perf_counter()
                try:
                    outcome, detail = self.stream(payload) if streamed else self.deliver(send, payload)
                finally:
                    faulthandler.cancel_dump_traceback_later()
                self.slowest[cmd.name] = max(self.slowest.get(cmd.name, 0.0), time.perf_counter() - t0)
                counts[outcome] += 1
                if outcome.startswith("bug") and len(self.findings) < 50:
                    self.findings.append(Finding(cmd.name, how, outcome, detail, payload[:400].hex()))
        return counts

    def deliver(self, cmd: Cmd, payload: bytes) -> tuple[str, str]:
        """One message to the fuzzed session's `handle`, judged (see the module's docstring)."""
        w = self.world
        t0 = time.perf_counter()
        detail = ""
        try:
            reply = w.a.handle(cmd, payload)
            outcome = "ok"
            want = REPLY_SIZES.get(cmd)
            if cmd is Cmd.GET_TENSOR:
                want = TWO_U64.unpack_from(payload, TENSOR_SIZE)[1]
            if (reply is None) != (cmd in NO_REPLY) or (want is not None and reply is not None
                                                         and len(reply) != want):
                outcome, detail = "bug:reply", f"{cmd.name} replied {None if reply is None else len(reply)} bytes"
        except ProtocolError:
            outcome = "refused"
        except PyGGMLError as e:
            outcome = f"error:{type(e).__name__}"
        except Exception as e:  # the whole point: nothing else may escape a handler
            outcome, detail = f"bug:{type(e).__name__}", traceback.format_exc(limit=-4) + str(e)
        elapsed = time.perf_counter() - t0
        if elapsed > SLOW_S:
            outcome, detail = "bug:slow", f"{elapsed:.1f} s"
        problems, fresh = w.verify(payload)
        if problems:
            outcome, detail = "bug:memory", "; ".join(problems)
        if fresh or outcome != "ok":
            w.reset()
        return outcome, detail

    def stream(self, data: bytes) -> tuple[str, str]:
        """Bytes to a new connection's socket loop (`serve_connection` over a socketpair), then end of stream.
        Allowed: replies, then the server closing with a log line (warning: refused; info: the client went
        away). A bug: no close within SLOW_S, a last-resort error logged, memory not given back."""
        before = self.served.allocated
        mark = len(self.log.records)
        ours, theirs = socket.socketpair()
        t = threading.Thread(target=serve_connection, args=(theirs, self.served, "stream"), daemon=True)
        t.start()
        ours.settimeout(SLOW_S)
        try:
            ours.sendall(data)
            ours.shutdown(socket.SHUT_WR)
            while ours.recv(1 << 16):
                pass
        except OSError:  # the server closed first: its end reset ours
            pass
        finally:
            ours.close()
        t.join(SLOW_S)
        lines = self.log.records[mark:]
        if t.is_alive():
            return "bug:hang", "the socket loop did not close the connection"
        if any(r.levelno >= logging.ERROR for r in lines):
            return "bug:logged", "\n".join(r.getMessage() for r in lines)
        if self.served.allocated != before:
            return "bug:memory", f"{self.served.allocated - before} bytes left allocated after the connection"
        if any(r.levelno == logging.WARNING for r in lines):
            return "stream:refused", ""
        return ("stream:eof" if lines else "stream:ok"), ""


def bugs(h: Harness) -> int:
    return sum(n for c in h.outcomes.values() for k, n in c.items() if k.startswith("bug"))
