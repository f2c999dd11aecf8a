"""The server's view of a client: its buffers, and the checks every wire tensor passes before it is used.

Buffers are named to the client by random 64-bit handles and live at made-up addresses (`base`), far apart, so a
wire tensor's `data` address resolves to one buffer and an offset in it, or to nothing. Every field of an
`rpc_tensor` is checked here: its type, that its row length holds whole blocks, that `data` and the whole extent of
the tensor (its strides included, `span`) lie inside the buffer it names, that a tensor without a buffer has no data.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from pyggml.backend.protocol import Buffer
from pyggml.errors import PyGGMLError
from pyggml.ops.base import Op
from pyggml.tensor import Tensor, TensorFlag
from pyggml.types import type_traits
from pyggml_rpc import opcodes

ADDRESS_BASE = 1 << 44
ADDRESS_GAP = 1 << 32
"""Made-up buffer addresses start here and leave at least this much between buffers."""
SIZE_LIMIT = 1 << 64
"""Tensor extents a wire tensor may have (ggml's size_t): GET_ALLOC_SIZE replies with one in a u64."""
FLAGS_MASK = int(TensorFlag.INPUT | TensorFlag.OUTPUT | TensorFlag.PARAM | TensorFlag.LOSS | TensorFlag.COMPUTE)


class ProtocolError(PyGGMLError):
    """A client message that breaks the protocol or points outside its memory: the connection is closed."""


@dataclass(slots=True)
class ServedBuffer:
    handle: int
    base: int
    buffer: Buffer
    device: int

    @property
    def size(self) -> int:
        return self.buffer.size


class BufferTable:
    """The buffers one client allocated, by handle and by address."""

    def __init__(self) -> None:
        self.by_handle: dict[int, ServedBuffer] = {}
        self._next_base = ADDRESS_BASE

    def add(self, buffer: Buffer, device: int) -> ServedBuffer:
        handle = secrets.randbits(63) | 1
        while handle in self.by_handle:
            handle = secrets.randbits(63) | 1
        base = self._next_base
        self._next_base += -(-max(buffer.size, 1) // ADDRESS_GAP) * ADDRESS_GAP + ADDRESS_GAP
        sb = ServedBuffer(handle, base, buffer, device)
        self.by_handle[handle] = sb
        return sb

    def get(self, handle: int, what: str) -> ServedBuffer:
        sb = self.by_handle.get(handle)
        if sb is None:
            raise ProtocolError(f"{what}: no buffer with handle {handle:#x}")
        return sb

    def pop(self, handle: int, what: str) -> ServedBuffer:
        sb = self.get(handle, what)
        del self.by_handle[handle]
        return sb

    def total(self) -> int:
        return sum(sb.size for sb in self.by_handle.values())


def wire_name(rec: Any) -> str:
    return bytes(rec["name"]).split(b"\0", 1)[0].decode("utf-8", "replace")


def make_tensor(rec: Any, table: BufferTable, what: str, op: Op = Op.NONE) -> tuple[Tensor, ServedBuffer | None]:
    """A pyggml tensor for a wire tensor, placed in its buffer (op, params and sources are set by the caller)."""
    name = wire_name(rec)
    label = f"{what} '{name}'" if name else what
    try:
        ttype = opcodes.pyggml_type(int(rec["type"]))
    except opcodes.OpcodeError as e:
        raise ProtocolError(f"{label}: {e}") from None
    tr = type_traits(ttype)
    ne = tuple(int(v) for v in rec["ne"])
    nb = tuple(int(v) for v in rec["nb"])
    if ne[0] % tr.blck_size:
        raise ProtocolError(f"{label}: {ttype} rows of {ne[0]} elements are not whole blocks of {tr.blck_size}")
    t = Tensor(ttype, (ne[0], ne[1], ne[2], ne[3]), (nb[0], nb[1], nb[2], nb[3]), op=op)
    t.name = name
    t.flags = TensorFlag(int(rec["flags"]) & FLAGS_MASK)
    size = span(t)
    if size >= SIZE_LIMIT:  # 32-bit ne and nb can span up to ~2**66 bytes: no buffer holds it, no size_t says it
        raise ProtocolError(f"{label} ({ttype} ne={list(ne)} nb={list(nb)}) spans {size} bytes, more than 64 bits "
                            "can count")
    handle, data = int(rec["buffer"]), int(rec["data"])
    if handle == 0:
        if data != 0:
            raise ProtocolError(f"{label}: data address {data:#x} without a buffer")
        return t, None
    sb = table.get(handle, label)
    offset = data - sb.base
    if offset < 0 or offset > sb.size or size > sb.size - offset:
        raise ProtocolError(f"{label} ({ttype} ne={list(ne)} nb={list(nb)}, {size} bytes at {data:#x}) lies "
                            f"outside its buffer [{sb.base:#x}, {sb.base + sb.size:#x})")
    t.buffer = sb.buffer
    t.offset = offset
    return t, sb


def span(t: Tensor) -> int:
    """Bytes from a tensor's first byte to one past its last, whatever its strides. That is ggml_nbytes, except
    for a block type whose nb[0] is less than a block: ggml_nbytes counts dimension 0 as ne0/blck blocks of nb[0]
    bytes, but the last block is still read whole (numpy's block views do), so its missing tail is added (a
    crafted Q8_0 source with nb[0] = 0 at a buffer's end made the numpy device read past the buffer)."""
    n = t.nbytes()
    tr = type_traits(t.type)
    if n and tr.blck_size > 1 and t.nb[0] < tr.type_size:
        n += tr.type_size - t.nb[0]
    return n


def region(rec: Any, table: BufferTable, offset: int, size: int, what: str) -> tuple[ServedBuffer, int]:
    """The buffer and byte offset of [data + offset, data + offset + size) of a wire tensor, checked in bounds
    (of the tensor's buffer; as ggml's server, transfers may address any part of it)."""
    t, sb = make_tensor(rec, table, what)
    if sb is None:
        raise ProtocolError(f"{what} '{t.name}': no buffer")
    start = t.offset + offset
    if offset < 0 or size < 0 or start > sb.size or size > sb.size - start:
        raise ProtocolError(f"{what} '{t.name}': bytes [{offset}, {offset + size}) from {int(rec['data']):#x} lie "
                            f"outside its buffer of {sb.size} bytes")
    return sb, start
