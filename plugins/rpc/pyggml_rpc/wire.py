"""ggml's RPC wire format, version 7.0.0 (llama.cpp as vendored in llama-cpp-python 0.3.36): commands, message
layouts and the packed 296-byte `rpc_tensor`. Everything is little-endian and packed; the numbers are wire format.

A request is `u8 command | u64 payload size | payload`; a reply `u64 size | payload`. HELLO comes first on every
connection. SET_TENSOR, GRAPH_COMPUTE, GRAPH_RECOMPUTE, FREE_BUFFER, BUFFER_CLEAR, INIT_TENSOR and MEMSET_TENSOR get
no reply: a server that cannot carry one out closes the connection, which the client sees at its next reply.
"""

from __future__ import annotations

import struct
from enum import IntEnum

import numpy as np

PROTO_VERSION = (7, 0, 0)
CONN_CAPS_SIZE = 24
"""Transport capabilities exchanged in HELLO (RDMA negotiation); all zero means plain TCP."""
MAX_DIMS = 4
MAX_SRC = 10
MAX_OP_PARAMS = 16
MAX_NAME = 64
HASH_THRESHOLD = 10 * 1024 * 1024
"""Weights larger than this are offered by FNV-1a hash first (SET_TENSOR_HASH), as ggml's client does."""
FLAG_COMPUTE = 16
"""ggml's GGML_TENSOR_FLAG_COMPUTE: ggml's CPU backend skips graph nodes without it."""


class Cmd(IntEnum):
    ALLOC_BUFFER = 0
    GET_ALIGNMENT = 1
    GET_MAX_SIZE = 2
    BUFFER_GET_BASE = 3
    FREE_BUFFER = 4
    BUFFER_CLEAR = 5
    SET_TENSOR = 6
    SET_TENSOR_HASH = 7
    GET_TENSOR = 8
    COPY_TENSOR = 9
    GRAPH_COMPUTE = 10
    GET_DEVICE_MEMORY = 11
    INIT_TENSOR = 12
    GET_ALLOC_SIZE = 13
    HELLO = 14
    DEVICE_COUNT = 15
    GRAPH_RECOMPUTE = 16
    MEMSET_TENSOR = 17
    SUPPORTS_OP = 0x70
    """pyggml's own (not ggml's): whether the server's device runs one node; sent only to a server whose HELLO
    reply carries PYGGML_SUPPORTS_OP_MARK or PYGGML_PROFILE_MARK. `u32 device | u32 1 | u64 node id | u32 n |
    rpc_tensor * n` (GRAPH_COMPUTE's layout, one node, no buffers) -> `u8` 1 or 0."""
    GRAPH_COMPUTE_PROFILED = 0x71
    """pyggml's own: GRAPH_COMPUTE's payload (or GRAPH_RECOMPUTE's, `u32 device`: the graph kept for it) computed
    by the device's backend's `compute_profiled`; sent only to a server whose HELLO reply carries
    PYGGML_PROFILE_MARK. Reply: PROFILE_HEAD, then PROFILE_RECORD * n (the nodes' times on the server's clock)."""


NO_REPLY = frozenset({Cmd.SET_TENSOR, Cmd.GRAPH_COMPUTE, Cmd.GRAPH_RECOMPUTE, Cmd.FREE_BUFFER, Cmd.BUFFER_CLEAR,
                      Cmd.INIT_TENSOR, Cmd.MEMSET_TENSOR})

RPC_TENSOR = np.dtype([
    ("id", "<u8"), ("type", "<u4"), ("buffer", "<u8"), ("ne", "<u4", (MAX_DIMS,)), ("nb", "<u4", (MAX_DIMS,)),
    ("op", "<u4"), ("op_params", "<i4", (MAX_OP_PARAMS,)), ("flags", "<i4"), ("src", "<u8", (MAX_SRC,)),
    ("view_src", "<u8"), ("view_offs", "<u8"), ("data", "<u8"), ("name", "S64"), ("use_count", "<i4"),
])
"""ggml's `rpc_tensor`: id is the client's handle, buffer the server's buffer handle, data a server address."""
TENSOR_SIZE = RPC_TENSOR.itemsize
assert TENSOR_SIZE == 296

U8 = struct.Struct("<B")
U32 = struct.Struct("<I")
U64 = struct.Struct("<Q")
HEADER = struct.Struct("<BQ")
"""command, payload size"""
HELLO_RSP = struct.Struct(f"<BBBB{CONN_CAPS_SIZE}s")
"""major, minor, patch, padding, transport caps"""
PYGGML_SERVER_MARK = 0x70
"""What `pyggml rpc-server` puts in HELLO's padding byte (ggml leaves it 0 and ggml's client ignores it): a pyggml
client then knows the server computes pyggml's op semantics, not only what ggml's CPU kernels take."""
PYGGML_SUPPORTS_OP_MARK = 0x71
"""The mark of a pyggml server that also answers SUPPORTS_OP (ggml's clients ignore the byte either way; its
capability bytes stay ggml's, all zero: they negotiate RDMA)."""
PYGGML_PROFILE_MARK = 0x72
"""The mark of a pyggml server that answers SUPPORTS_OP and GRAPH_COMPUTE_PROFILED (what `pyggml rpc-server`
sends now). The marks are levels: each one's server carries out the commands of the marks below it."""
PYGGML_MARKS = (PYGGML_SERVER_MARK, PYGGML_SUPPORTS_OP_MARK, PYGGML_PROFILE_MARK)
DEVICE_U64 = struct.Struct("<IQ")
"""ALLOC_BUFFER request: device, size"""
TWO_U64 = struct.Struct("<QQ")
"""ALLOC_BUFFER reply (remote handle, size), GET_DEVICE_MEMORY reply (free, total), GET_TENSOR tail (offset, size),
SET_TENSOR_HASH tail (offset, hash)"""
CLEAR_REQ = struct.Struct("<QB")
MEMSET_TAIL = struct.Struct("<QQB")
SET_TENSOR_HEAD = struct.Struct("<BQ")
"""after the rpc_tensor: cache flag, offset; the data follows"""

MAX_GRAPH_NODES = 1 << 20
"""Node and tensor counts a server accepts in one GRAPH_COMPUTE."""

REQUEST_SIZES: dict[Cmd, int | None] = {
    Cmd.ALLOC_BUFFER: DEVICE_U64.size,
    Cmd.GET_ALIGNMENT: U32.size,
    Cmd.GET_MAX_SIZE: U32.size,
    Cmd.BUFFER_GET_BASE: U64.size,
    Cmd.FREE_BUFFER: U64.size,
    Cmd.BUFFER_CLEAR: CLEAR_REQ.size,
    Cmd.SET_TENSOR: None,
    Cmd.SET_TENSOR_HASH: TENSOR_SIZE + TWO_U64.size,
    Cmd.GET_TENSOR: TENSOR_SIZE + TWO_U64.size,
    Cmd.COPY_TENSOR: 2 * TENSOR_SIZE,
    Cmd.GRAPH_COMPUTE: None,
    Cmd.GET_DEVICE_MEMORY: U32.size,
    Cmd.INIT_TENSOR: TENSOR_SIZE,
    Cmd.GET_ALLOC_SIZE: U32.size + (1 + MAX_SRC) * TENSOR_SIZE,
    Cmd.HELLO: CONN_CAPS_SIZE,
    Cmd.DEVICE_COUNT: 0,
    Cmd.GRAPH_RECOMPUTE: U32.size,
    Cmd.MEMSET_TENSOR: TENSOR_SIZE + MEMSET_TAIL.size,
    Cmd.SUPPORTS_OP: None,
    Cmd.GRAPH_COMPUTE_PROFILED: None,
}
"""Exact payload size of each command's request; None: variable (SET_TENSOR, GRAPH_COMPUTE, SUPPORTS_OP,
GRAPH_COMPUTE_PROFILED)."""
SUPPORTS_OP_MAX = 4 + 4 + 8 + 4 + (1 + MAX_SRC) * TENSOR_SIZE
"""A SUPPORTS_OP payload: the node and at most MAX_SRC sources."""


PROFILE_HEAD = struct.Struct("<QQI")
"""GRAPH_COMPUTE_PROFILED's reply header: the server's monotonic clock (ns) when the request had arrived and when
the reply was ready, and the number of records that follow."""
PROFILE_RECORD = np.dtype([("index", "<u4"), ("kind", "<u2"), ("lane", "<u2"), ("start", "<u8"), ("end", "<u8")])
"""One node's run on one lane of the server's backend: its index among the graph's nodes as sent (the node ids'
order; PROFILE_WHOLE_GRAPH: the whole graph, from a backend that cannot time its nodes), the lane's kind (an index
into PROFILE_LANE_KINDS) and number, its start and end on the server's clock, inside the header's two times."""
assert PROFILE_RECORD.itemsize == 24
PROFILE_LANE_KINDS = ("thread", "queue")
PROFILE_WHOLE_GRAPH = 0xFFFF_FFFF
PROFILE_RECORDS_MAX = 1 << 20
"""Records one reply holds at most: a server with more (many threads times many nodes) sends one per node."""
PROFILE_REPLY_MAX = PROFILE_HEAD.size + PROFILE_RECORDS_MAX * PROFILE_RECORD.itemsize


def empty_tensors(n: int) -> np.ndarray:
    return np.zeros(n, dtype=RPC_TENSOR)


def graph_payload(device: int, nodes: np.ndarray, tensors: np.ndarray) -> bytes:
    """GRAPH_COMPUTE: `u32 device | u32 n_nodes | u64 node ids | u32 n_tensors | rpc_tensor * n_tensors`."""
    return b"".join((U32.pack(device), U32.pack(len(nodes)), nodes.astype("<u8").tobytes(),
                     U32.pack(len(tensors)), tensors.tobytes()))
