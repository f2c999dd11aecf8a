"""Valid messages of every command for the fuzzing kit (see fuzz.py), built against a live `World`: transfers
that address real buffers, and GRAPH_COMPUTE payloads of real pyggml graphs serialised by the client's codec."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from pyggml_rpc.fnv import fnv1a64
from pyggml_rpc.graph_codec import build_plan
from pyggml_rpc.opcode_table import ENTRIES
from pyggml_rpc.wire import (
    CLEAR_REQ,
    CONN_CAPS_SIZE,
    DEVICE_U64,
    MAX_SRC,
    MEMSET_TAIL,
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
from pyggml.backend.host import HostBufferType
from pyggml.backend.protocol import Bytes
from pyggml.ops.base import Op
from pyggml.tensor import Tensor, contiguous_strides
from pyggml.types import GGMLType, type_traits
from pyggml_rpc_testing.fuzz_world import MAIN_SIZE, PAGE, World, alloc

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


def g_supports(w: World, r: random.Random, t: list[Template]) -> Msg:
    """SUPPORTS_OP: one node of a template graph with everything it reads (sources, view sources), no buffers."""
    tpl = r.choice(t)
    by_id = {int(rec["id"]): i for i, rec in enumerate(tpl.recs)}
    node = int(r.choice([n for n in tpl.nodes.tolist() if int(tpl.recs[by_id[n]]["op"]) != 0]))
    keep, todo = set(), [node]
    while todo:
        tid = todo.pop()
        if tid in keep:
            continue
        keep.add(tid)
        rec = tpl.recs[by_id[tid]]
        todo += [int(x) for x in (*rec["src"], rec["view_src"]) if int(x) and int(x) in by_id]
    recs = tpl.recs[sorted(by_id[i] for i in keep)].copy()
    recs["buffer"] = 0
    recs["data"] = 0
    msg = graph_msg(r.randrange(w.n_devices), np.array([node], dtype=np.uint64), recs)
    return Msg(Cmd.SUPPORTS_OP, msg.payload, msg.scalars, msg.tensors)


def g_recompute(w: World, r: random.Random, t: list[Template]) -> Msg:
    device = r.randrange(w.n_devices)
    if device not in w.a.graphs:
        w.a.handle(Cmd.GRAPH_COMPUTE, g_graph(w, r, t, device).payload)
    return Msg(Cmd.GRAPH_RECOMPUTE, U32.pack(device), [(0, 4)])


def g_profiled(w: World, r: random.Random, t: list[Template]) -> Msg:
    """GRAPH_COMPUTE_PROFILED: a whole graph (GRAPH_COMPUTE's layout), or a replay of the one kept (4 bytes)."""
    if r.random() < 0.7:
        msg = g_graph(w, r, t)
        return Msg(Cmd.GRAPH_COMPUTE_PROFILED, msg.payload, msg.scalars, msg.tensors)
    return Msg(Cmd.GRAPH_COMPUTE_PROFILED, g_recompute(w, r, t).payload, [(0, 4)])


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
    Cmd.SUPPORTS_OP: g_supports,
    Cmd.GRAPH_COMPUTE_PROFILED: g_profiled,
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

