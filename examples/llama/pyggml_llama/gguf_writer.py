"""A small GGUF (version 3) writer for what the example saves: string, uint32 and float32 metadata and F32
tensors (a LoRA adapter). pyggml itself only reads GGUF (pyggml.gguf); the layout written here is the one that
reader, the `gguf` package and llama.cpp read: header, key/values, tensor infos, padding to the alignment, then
each tensor's data at an aligned offset."""

from __future__ import annotations

import os
import struct
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from pyggml.gguf_reader import ValueType
from pyggml.types import GGMLType

ALIGNMENT = 32
"""general.alignment's default: every tensor's data starts at a multiple of it."""
Value = str | int | float


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def _value(key: str, v: Value) -> bytes:
    if isinstance(v, bool):
        raise TypeError(f"GGUF key {key!r}: booleans are not written by this writer")
    if isinstance(v, str):
        return struct.pack("<I", ValueType.STRING) + _string(v)
    if isinstance(v, int):
        if not 0 <= v < 2**32:
            raise ValueError(f"GGUF key {key!r}: {v} does not fit a uint32")
        return struct.pack("<II", ValueType.UINT32, v)
    return struct.pack("<If", ValueType.FLOAT32, float(v))


def write_gguf(path: str | os.PathLike[str], metadata: Mapping[str, Value],
               tensors: Mapping[str, tuple[tuple[int, ...], npt.NDArray[np.float32]]]) -> None:
    """Write `metadata` (str -> string, int -> uint32, float -> float32) and F32 `tensors` (name -> (ne, values);
    values in ggml order, i.e. a numpy array of shape reversed(ne) or any array with that many elements)."""
    infos, blobs, offset = [], [], 0
    for name, (ne, values) in tensors.items():
        data = np.ascontiguousarray(values, dtype=np.float32).reshape(-1)
        if data.size != int(np.prod(ne)):
            raise ValueError(f"GGUF tensor {name!r}: ne={list(ne)} holds {int(np.prod(ne))} values, got {data.size}")
        infos.append(_string(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
                     + struct.pack("<IQ", GGMLType.F32, offset))
        raw = data.tobytes()
        pad = -len(raw) % ALIGNMENT
        blobs.append(raw + b"\0" * pad)
        offset += len(raw) + pad
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(metadata))
    head += b"".join(_string(k) + _value(k, v) for k, v in metadata.items()) + b"".join(infos)
    head += b"\0" * (-len(head) % ALIGNMENT)
    with open(path, "wb") as f:
        f.write(head)
        for b in blobs:
            f.write(b)
