"""A minimal GGUF encoder, independent of pyggml's reader and of the gguf package: the reader's tests build
well-formed and malformed files byte by byte with it."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from pyggml.gguf_reader import ValueType

V = ValueType
_FMT = {V.UINT8: "B", V.INT8: "b", V.UINT16: "H", V.INT16: "h", V.UINT32: "I", V.INT32: "i", V.FLOAT32: "f",
        V.BOOL: "?", V.UINT64: "Q", V.INT64: "q", V.FLOAT64: "d"}


def s(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(raw)) + raw


def val(vt: V, v: Any) -> bytes:
    """The payload of one value of type vt (no type tag); arrays are (element type, items)."""
    if vt is V.STRING:
        return s(v)
    if vt is V.ARRAY:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(val(et, x) for x in items)
    return struct.pack("<" + _FMT[vt], v)


def kv(key: str | bytes, vt: V | int, v: Any = None, payload: bytes | None = None) -> bytes:
    body = payload if payload is not None else val(V(vt), v)
    return s(key) + struct.pack("<I", vt) + body


def tinfo(name: str, dims: tuple[int, ...], type_id: int = 0, offset: int = 0) -> bytes:
    return s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims) + \
        struct.pack("<IQ", type_id, offset)


def gguf_bytes(kvs: list[bytes], tensors: Sequence[bytes] = (), data: bytes = b"", alignment: int = 32,
               version: int = 3) -> bytes:
    head = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs)) + b"".join(kvs) + b"".join(tensors)
    return head + bytes(-len(head) % alignment) + data


ARCH = kv("general.architecture", V.STRING, "llama")
"""The one key every file needs."""
