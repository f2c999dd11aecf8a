"""GRAPH_COMPUTE's payload as a pyggml graph (the server side), checked as untrusted input.

Beyond the tensor checks of `server_tensors`: counts are capped and must match the payload's size exactly; ids are
unique and nonzero; no tensor has more elements than the bytes it spans hold (overlapping strides would let a few
bytes stand for unbounded work); every source and view source named is in the message (no cycles); each node's op
number and op_params decode to a pyggml op (`opcodes.decode`) whose shape rule accepts its sources and gives exactly
the node's type and shape; a node's strides are contiguous unless it is a view or writes into a source (CPY,
SET_ROWS, in-place results: then its layout and address are that source's); every computed node and its sources
have memory the computing device can use; and the device supports the op. Only then does a kernel see it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pyggml.backend.protocol import Device
from pyggml.errors import PyGGMLError
from pyggml.graph import Graph
from pyggml.ops.base import OPS, VIEW_OPS, Op
from pyggml.tensor import Tensor, contiguous_strides
from pyggml.types import GGMLType, type_traits
from pyggml_rpc import opcodes
from pyggml_rpc.opcode_table import ENTRIES
from pyggml_rpc.server_tensors import BufferTable, ProtocolError, make_tensor, span, wire_name
from pyggml_rpc.wire import MAX_GRAPH_NODES, RPC_TENSOR, TENSOR_SIZE, U32


def decode_graph(payload: bytes, devices: list[Device], table: BufferTable, placed: bool = True) -> tuple[int, Graph]:
    """(device index, graph) of a GRAPH_COMPUTE payload; ProtocolError for anything out of place. placed=False
    (SUPPORTS_OP's node, which has no buffers yet) leaves out the checks of where the nodes' tensors are."""
    if len(payload) < 12:
        raise ProtocolError(f"GRAPH_COMPUTE: {len(payload)} bytes is shorter than its header")
    device, n_nodes = U32.unpack_from(payload, 0)[0], U32.unpack_from(payload, 4)[0]
    if device >= len(devices):
        raise ProtocolError(f"GRAPH_COMPUTE: device {device} of {len(devices)}")
    if n_nodes > MAX_GRAPH_NODES:
        raise ProtocolError(f"GRAPH_COMPUTE: {n_nodes} nodes (at most {MAX_GRAPH_NODES})")
    at = 8 + 8 * n_nodes
    if len(payload) < at + 4:
        raise ProtocolError(f"GRAPH_COMPUTE: {len(payload)} bytes cannot hold {n_nodes} node ids")
    node_ids = np.frombuffer(payload, dtype="<u8", count=n_nodes, offset=8)
    n_tensors = U32.unpack_from(payload, at)[0]
    if n_tensors > 2 * MAX_GRAPH_NODES or len(payload) != at + 4 + n_tensors * TENSOR_SIZE:
        raise ProtocolError(f"GRAPH_COMPUTE: {len(payload)} bytes do not hold {n_nodes} nodes and {n_tensors} "
                            "tensors exactly")
    recs = np.frombuffer(payload, dtype=RPC_TENSOR, count=n_tensors, offset=at + 4)
    by_id: dict[int, int] = {}
    for i, tid in enumerate(recs["id"].tolist()):
        if tid == 0 or tid in by_id:
            raise ProtocolError(f"GRAPH_COMPUTE: tensor {i} has id {tid:#x}, zero or repeated")
        by_id[tid] = i
    builder = _Builder(recs, by_id, table, placed)
    graph = Graph(max(n_nodes, 1))
    dev = devices[device]
    for tid in node_ids.tolist():
        if tid == 0:
            continue
        if tid not in by_id:
            raise ProtocolError(f"GRAPH_COMPUTE: node id {tid:#x} is not among the tensors sent")
        node = builder.tensor(tid)
        if id(node) in builder.noded:
            continue
        builder.noded.add(id(node))
        if node.op is not Op.NONE and placed:
            _check_node(node, dev)
        graph.nodes.append(node)
        graph.use_counts[id(node)] = max(int(recs[by_id[tid]]["use_count"]), 0)
    return device, graph


def _check_node(node: Tensor, dev: Device) -> None:
    if node.op in VIEW_OPS:
        return
    for t in (node, *node.src):
        if t is not None and t.buffer is None:
            raise ProtocolError(f"GRAPH_COMPUTE: node '{node.name}' ({node.op.name}) reads or writes "
                                f"'{t.name}', which has no buffer")
        if t is not None and t.buffer is not None and not dev.supports_buft(t.buffer.buft):
            # a buffer of another served device (a host buffer handed to a GPU's kernels, say): each session's
            # buffers are its own, but a session may hold buffers on every device the server serves
            raise ProtocolError(f"GRAPH_COMPUTE: node '{node.name}' ({node.op.name}) on {dev.name} reads or "
                                f"writes '{t.name}', which is in a buffer of {t.buffer.buft.name}")
    if not dev.supports_op(node):
        raise ProtocolError(f"GRAPH_COMPUTE: {dev.name} does not support node '{node.name}' ({node.op.name}, "
                            f"{node.type} ne={list(node.ne)})")


class _Builder:
    """Makes each wire tensor once, sources first, without recursion (graphs can be thousands deep)."""

    def __init__(self, recs: Any, by_id: dict[int, int], table: BufferTable, placed: bool = True) -> None:
        self.recs = recs
        self.placed = placed
        """False: tensors without buffers (SUPPORTS_OP), so views are taken at their word."""
        self.by_id = by_id
        self.table = table
        self.made: dict[int, Tensor] = {}
        self.noded: set[int] = set()

    def _deps(self, rec: Any) -> list[int]:
        ids = [int(s) for s in rec["src"] if s and int(s) != int(rec["id"])]  # ggml_cast names itself: see _make
        if rec["view_src"]:
            ids.append(int(rec["view_src"]))
        for d in ids:
            if d not in self.by_id:
                raise ProtocolError(f"GRAPH_COMPUTE: tensor '{wire_name(rec)}' refers to id {d:#x}, not sent")
        return ids

    def tensor(self, root: int) -> Tensor:
        if root in self.made:
            return self.made[root]
        stack: list[tuple[int, bool]] = [(root, False)]
        on_path: set[int] = set()
        while stack:
            tid, ready = stack.pop()
            if tid in self.made:
                continue
            rec = self.recs[self.by_id[tid]]
            if ready:
                on_path.discard(tid)
                self.made[tid] = self._make(rec)
                continue
            if tid in on_path:
                raise ProtocolError(f"GRAPH_COMPUTE: tensor '{wire_name(rec)}' depends on itself")
            on_path.add(tid)
            stack.append((tid, True))
            for d in self._deps(rec):
                if d not in self.made:
                    if d in on_path:
                        raise ProtocolError(f"GRAPH_COMPUTE: tensor '{wire_name(rec)}' depends on itself")
                    stack.append((d, False))
        return self.made[root]

    def _make(self, rec: Any) -> Tensor:
        t, _ = make_tensor(rec, self.table, "GRAPH_COMPUTE: tensor")
        tr = type_traits(t.type)
        if t.nelements() // tr.blck_size * tr.type_size > span(t):
            # Strides that make elements share bytes (nb = 0, rows overlapping): a few bytes can then stand for
            # ~2**128 elements, and a SUM over them would hold the device for ever. ggml's clients make no such
            # layouts; refused, a graph's work stays bounded by the memory its tensors really span.
            raise ProtocolError(f"GRAPH_COMPUTE: tensor '{t.name}' ({t.type} ne={list(t.ne)} nb={list(t.nb)}) "
                                f"has more elements than its {span(t)} bytes hold")
        if rec["view_src"]:
            owner = self.made[int(rec["view_src"])]
            if not self.placed:
                if owner.view_src is not None:
                    raise ProtocolError(f"GRAPH_COMPUTE: view '{t.name}': its source must own its data")
                t.offset = owner.offset + int(rec["view_offs"])
            elif owner.view_src is not None or owner.buffer is not t.buffer or t.buffer is None:
                raise ProtocolError(f"GRAPH_COMPUTE: view '{t.name}' must be in its view source's buffer, and "
                                    "that source must own its data")
            if self.placed and int(rec["view_offs"]) != t.offset - owner.offset:
                raise ProtocolError(f"GRAPH_COMPUTE: view '{t.name}' sits at offset {t.offset}, not at its "
                                    f"source's {owner.offset} + view_offs {int(rec['view_offs'])}")
            t.view_src = owner
            t.view_offs = int(rec["view_offs"])
        op_id = int(rec["op"])
        if op_id == 0:
            if any(int(s) for s in rec["src"]):
                raise ProtocolError(f"GRAPH_COMPUTE: leaf '{t.name}' has sources")
            return t
        own = int(rec["id"])
        if own in (int(s) for s in rec["src"]):
            if op_id != ENTRIES[Op.CPY].code or [int(s) for s in rec["src"]].index(own) != 1 or rec["view_src"]:
                raise ProtocolError(f"GRAPH_COMPUTE: node '{t.name}' is its own source")
            # ggml_cast: a CPY into a tensor of its own (src1 is the node). pyggml's CPY writes into a destination
            # it is a view of: that destination is a leaf at the node's own place.
            dst = Tensor(t.type, t.ne, t.nb, op=Op.NONE)
            dst.name, dst.buffer, dst.offset = f"{t.name} (cast destination)", t.buffer, t.offset
            self.made[own] = dst
            t.view_src, t.view_offs = dst, 0
        srcs = tuple(self.made[int(s)] if s else None for s in rec["src"])
        while srcs and srcs[-1] is None:
            srcs = srcs[:-1]
        try:
            op, params, psrcs = opcodes.decode(op_id, np.array(rec["op_params"]), srcs, t.type, t.ne)
        except opcodes.OpcodeError as e:
            raise ProtocolError(f"GRAPH_COMPUTE: node '{t.name}': {e}") from None
        t.op, t.params, t.src = op, params, psrcs
        self.made.pop(own, None)
        if op is Op.REPEAT and psrcs[1] is not None and psrcs[1].buffer is None:
            # the target-shape stand-in of opcodes (ggml sends no src1): backends want memory behind every
            # source, so it sits on the result's own bytes (same type and shape; it is never read)
            psrcs[1].buffer, psrcs[1].offset = t.buffer, t.offset
        if op not in VIEW_OPS:
            self._check_result(t)
        return t

    def _check_result(self, t: Tensor) -> None:
        d = OPS[t.op]
        try:
            if d.infer is None:  # a generator (ARANGE): opcodes checked its length against ne[0]
                ttype, ne = GGMLType.F32, (t.ne[0], 1, 1, 1)
            else:
                ttype, ne = d.infer(t.src, t.params)
        except PyGGMLError as e:
            raise ProtocolError(f"GRAPH_COMPUTE: node '{t.name}': {e}") from None
        except Exception as e:  # a shape rule given inputs no constructor would make
            raise ProtocolError(f"GRAPH_COMPUTE: node '{t.name}' ({t.op.name}): {type(e).__name__}: {e}") from None
        if (ttype, ne) != (t.type, t.ne):
            raise ProtocolError(f"GRAPH_COMPUTE: node '{t.name}' ({t.op.name}) is {t.type} ne={list(t.ne)}, but its "
                                f"sources and params give {ttype} ne={list(ne)}")
        if t.view_src is None:
            if t.nb != contiguous_strides(t.type, t.ne):
                raise ProtocolError(f"GRAPH_COMPUTE: node '{t.name}' ({t.op.name}) has strides {list(t.nb)}; a "
                                    "result of its own must be contiguous")
            return
        aliased = [s for s in t.src if s is not None and s.buffer is t.buffer and s.offset == t.offset
                   and s.nb == t.nb and s.type == t.type and s.ne == t.ne]
        if not aliased:
            raise ProtocolError(f"GRAPH_COMPUTE: node '{t.name}' ({t.op.name}) writes into '{t.view_src.name}' "
                                "but has the layout and address of none of its sources")
