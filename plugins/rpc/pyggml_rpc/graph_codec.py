"""A pyggml graph as GRAPH_COMPUTE's payload (the client side): every node, and every tensor a node reads, as a
packed `rpc_tensor` with ggml's op number, op_params and source order (`pyggml_rpc.opcodes`).

Sources that are not nodes of this graph are sent as data only (op NONE, no sources of their own): the server
computes only the listed nodes, and their history may hold ops that have no business on this server. Every tensor
must live in a buffer of the server's connection; anything else is refused before a byte is sent, so a server is
never asked to read memory it does not have.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pyggml.errors import UnsupportedOpError
from pyggml.graph import Graph
from pyggml.ops.base import VIEW_OPS, Op
from pyggml.tensor import Tensor, TensorFlag
from pyggml_rpc import opcodes
from pyggml_rpc.wire import MAX_NAME, MAX_SRC, RPC_TENSOR, graph_payload

U32_LIMIT = 1 << 32

Locate = Callable[[Tensor], tuple[int, int] | None]
"""tensor -> (server buffer handle, server data address), or None when its data is not on this server."""


@dataclass(frozen=True, slots=True)
class RPCGraphPlan:
    device: int
    payload: bytes
    n_nodes: int
    buffers: tuple[object, ...] = ()
    """The client buffers the payload names (checked alive before every replay)."""
    node_index: tuple[int, ...] = ()
    """The graph index of each node sent, in the payload's order (what a profile reply's indices refer to)."""


def check_wire_shape(t: Tensor, what: str) -> None:
    """ggml's rpc_tensor carries ne and nb in 32 bits."""
    if any(not 0 <= v < U32_LIMIT for v in (*t.ne, *t.nb)):
        raise UnsupportedOpError(f"{what} '{t.name}' ne={list(t.ne)} nb={list(t.nb)}: ggml's RPC protocol carries "
                                 "dimensions and strides in 32 bits")


def wire_tensors(node: Tensor) -> list[Tensor]:
    """What a payload holding `node` carries: the node, its sources and, through every view among them, the tensor
    it views (a view node travels with its source, recursively) and its data owner. Each must fit the wire
    (`check_wire_shape`): a small view of a view of 2^60 rows fits, but the view it reads through does not."""
    out: list[Tensor] = []
    seen: set[int] = set()
    todo = [node]
    while todo:
        t = todo.pop()
        if id(t) in seen:
            continue
        seen.add(id(t))
        out.append(t)
        if t.view_src is not None:
            todo.append(t.view_src)
        if t is node or t.op in VIEW_OPS:
            todo.extend(s for s in t.src if s is not None)
    return out


def build_plan(graph: Graph, device: int, locate: Locate, server: str) -> RPCGraphPlan:
    """The payload of `graph` for `device`. View nodes of data elsewhere are left out (the scheduler keeps a view
    in the split where it stands, as ggml's does, though nothing reads it there); any other tensor not on this
    server is an error naming it."""
    places: dict[int, tuple[int, int] | None] = {}

    def place(t: Tensor) -> tuple[int, int] | None:
        if id(t) not in places:
            places[id(t)] = locate(t)
        return places[id(t)]

    sent = [i for i, n in enumerate(graph.nodes) if (n.flags & TensorFlag.COMPUTE or n.op is not Op.NONE)
            and not (n.op in VIEW_OPS and place(n) is None)]
    nodes = [graph.nodes[i] for i in sent]
    if not nodes:
        raise UnsupportedOpError("RPC: a graph without nodes cannot be sent (ggml's client asserts n_nodes > 0)")
    node_ids = {id(n) for n in nodes}
    order: list[Tensor] = []
    index: dict[int, int] = {}
    encoded: dict[int, opcodes.WireOp] = {}

    def add(t: Tensor) -> None:
        if id(t) in index:
            return
        index[id(t)] = len(order)
        order.append(t)
        if t.view_src is not None:
            add(t.view_src)

    for n in nodes:
        add(n)
    for n in nodes:
        encoded[id(n)] = wire = opcodes.encode(n)
        for s in wire.srcs:
            if s is not None:
                add(s)
    recs = np.zeros(len(order), dtype=RPC_TENSOR)
    for i, t in enumerate(order):
        rec = recs[i]
        check_wire_shape(t, "tensor")
        where = place(t)
        if where is None:
            raise UnsupportedOpError(f"tensor '{t.name}' is in {t.buffer!r}, not in a buffer of RPC server {server}")
        buffer, data = where
        rec["id"] = id(t)
        rec["type"] = opcodes.ggml_type(t.type)
        rec["buffer"] = buffer
        rec["data"] = data
        rec["ne"] = t.ne
        rec["nb"] = t.nb
        rec["name"] = t.name.encode("utf-8", "replace")[: MAX_NAME - 1]
        if t.view_src is not None:
            rec["view_src"] = id(t.view_src)
            rec["view_offs"] = t.view_offs
        enc = encoded.get(id(t))
        if enc is not None and id(t) in node_ids:
            w = enc
            rec["op"] = w.op
            rec["op_params"] = w.params
            srcs = [id(s) if s is not None else 0 for s in w.srcs]
            rec["src"][: len(srcs)] = srcs[:MAX_SRC]
            rec["flags"] = int(t.flags) | int(TensorFlag.COMPUTE) if t.op is not Op.NONE else int(t.flags)
        else:
            rec["flags"] = int(t.flags) & ~int(TensorFlag.COMPUTE)
        rec["use_count"] = graph.use_count(t)
    ids = np.fromiter((id(n) for n in nodes), dtype=np.uint64, count=len(nodes))
    return RPCGraphPlan(device, graph_payload(device, ids, recs), len(nodes), node_index=tuple(sent))


def support_query(node: Tensor, device: int) -> bytes:
    """SUPPORTS_OP's payload for `node`: the node, its sources as leafs (wire order) and, for a result written in
    place, the tensor it is a view of; no buffers or names, ids by position. Equal nodes (op, params, types,
    shapes, strides, view offset) give equal bytes, so it is also the key under which the client keeps the answer."""
    wire = opcodes.encode(node)
    tensors: list[Tensor | None] = [node, *wire.srcs]
    owner = node.view_src
    if owner is not None and all(s is not owner for s in wire.srcs):
        tensors.append(owner)
    recs = np.zeros(len(tensors), dtype=RPC_TENSOR)
    for i, t in enumerate(tensors):
        if t is None:
            continue
        check_wire_shape(t, "tensor")
        rec = recs[i]
        rec["id"] = i + 1
        rec["type"] = opcodes.ggml_type(t.type)
        rec["ne"] = t.ne
        rec["nb"] = t.nb
        rec["flags"] = int(t.flags) & ~int(TensorFlag.COMPUTE)  # PARAM, LOSS: some shape rules read them
    head = recs[0]
    head["op"] = wire.op
    head["op_params"] = wire.params
    head["flags"] = int(node.flags) | int(TensorFlag.COMPUTE)
    head["src"][: len(wire.srcs)] = [i + 1 if s is not None else 0 for i, s in enumerate(wire.srcs, start=1)]
    if owner is not None:
        head["view_src"] = next(i for i, t in enumerate(tensors) if i and t is owner) + 1
        head["view_offs"] = node.view_offs
    present = recs[[0, *(i for i, t in enumerate(tensors) if i and t is not None)]]
    return graph_payload(device, np.array([1], dtype=np.uint64), present)
