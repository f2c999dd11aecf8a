"""The GGUF container, read from one read-only memory map: header, key/values (every value type, arrays nested
up to a depth limit), tensor infos, alignment and the start of the data section.

Arrays of numbers are decoded in one numpy call each and arrays of strings in a tight loop, so a 128k-token
vocabulary opens in a fraction of a second. Every count is checked against the bytes left before anything is
sized from it; every problem is a GGUFError naming the file, the key or tensor, and what is wrong."""

from __future__ import annotations

import dataclasses
import mmap
import os
import struct
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import Any, TypeAlias

import numpy as np

from pyggml.backend.host import MappedFile
from pyggml.errors import GGUFError
from pyggml.tensor import MAX_DIMS

MAGIC = b"GGUF"
VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
MAX_NESTING = 8
"""Arrays of arrays deeper than this are refused (llama.cpp reads none; bounds the recursion on forged files)."""

HEADER = struct.Struct("<4sIQQ")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")

GGUFValue: TypeAlias = "int | float | bool | str | list[GGUFValue]"


class ValueType(IntEnum):
    UINT8 = 0
    INT8 = 1
    UINT16 = 2
    INT16 = 3
    UINT32 = 4
    INT32 = 5
    FLOAT32 = 6
    BOOL = 7
    STRING = 8
    ARRAY = 9
    UINT64 = 10
    INT64 = 11
    FLOAT64 = 12


_SCALAR_FORMATS = {
    ValueType.UINT8: "B", ValueType.INT8: "b", ValueType.UINT16: "H", ValueType.INT16: "h",
    ValueType.UINT32: "I", ValueType.INT32: "i", ValueType.FLOAT32: "f", ValueType.BOOL: "B",  # non-zero is true
    ValueType.UINT64: "Q", ValueType.INT64: "q", ValueType.FLOAT64: "d",
}
_STRUCT = {vt: struct.Struct("<" + f) for vt, f in _SCALAR_FORMATS.items()}
_DTYPE: dict[ValueType, np.dtype[Any]] = {vt: np.dtype("<" + f) for vt, f in _SCALAR_FORMATS.items()}
_MIN_SIZE = {**{vt: st.size for vt, st in _STRUCT.items()}, ValueType.STRING: 8, ValueType.ARRAY: 12}
"""The fewest bytes one element of each type takes: bounds a forged count before anything is allocated."""

# a tensor info takes >= 8 (name length) + 4 (n_dims) + 4 (type) + 8 (offset) bytes, a key/value >= 8 (key length)
# + 4 (type) + 1 (value)
_MIN_TENSOR_INFO = 24
_MIN_KV = 13


@dataclass(frozen=True, slots=True)
class RawTensorInfo:
    """One tensor info as stored: dims innermost first, the type id unchecked, offset relative to the data."""

    name: str
    dims: tuple[int, ...]
    type_id: int
    offset: int


@dataclass(frozen=True, slots=True)
class GGUFContainer:
    path: Path
    version: int
    metadata: dict[str, GGUFValue]
    tensors: dict[str, RawTensorInfo]
    alignment: int
    data_start: int
    """Absolute offset of the data section (after the tensor infos, aligned up)."""
    mapped: np.ndarray[Any, np.dtype[np.uint8]]
    """The whole file, read-only; tensors placed in host buffers view it without copying."""
    file: MappedFile | None = None
    """The mapped file, kept open: `file.check()` raises GGUFError once it is shorter than the mapping (truncated
    by another process: reading the mapping past its end would kill the process with SIGBUS)."""


def read_container(path: str | os.PathLike[str]) -> GGUFContainer:
    path = Path(path)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < HEADER.size:
                raise GGUFError(f"{path}: {size} bytes is too short for a GGUF header")
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            file = MappedFile(path, os.dup(f.fileno()), len(mm), GGUFError)
    except OSError as e:
        raise GGUFError(f"{path}: cannot open: {e}") from e
    try:
        return dataclasses.replace(_Parser(path, mm).parse(), file=file)
    except GGUFError:
        mm.close()
        file.close()
        raise


class _Parser:
    def __init__(self, path: Path, buf: mmap.mmap) -> None:
        self.path = path
        self.buf = buf
        self.size = len(buf)
        self.pos = 0

    def fail(self, what: str) -> GGUFError:
        return GGUFError(f"{self.path}: {what}")

    def need(self, n: int, what: str) -> None:
        if self.pos + n > self.size:
            raise self.fail(f"truncated: {what} needs {n} bytes at offset {self.pos}, the file has {self.size}")

    def u32(self, what: str) -> int:
        self.need(4, what)
        (v,) = _U32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return int(v)

    def u64(self, what: str) -> int:
        self.need(8, what)
        (v,) = _U64.unpack_from(self.buf, self.pos)
        self.pos += 8
        return int(v)

    def string(self, what: str) -> str:
        n = self.u64(f"the length of {what}")
        self.need(n, f"{what} ({n} bytes)")
        raw = self.buf[self.pos : self.pos + n]
        try:
            s = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise self.fail(f"{what} is not valid UTF-8: {e}") from None
        self.pos += n
        return s

    # ---- header, key/values, tensor infos ------------------------------------------------------------------

    def parse(self) -> GGUFContainer:
        magic, version, n_tensors, n_kv = HEADER.unpack_from(self.buf, 0)
        if magic != MAGIC:
            raise self.fail(f"not a GGUF file (magic {magic!r})")
        if version not in VERSIONS:
            raise self.fail(f"GGUF version {version} is not supported (2 or 3)")
        self.pos = HEADER.size
        if n_tensors * _MIN_TENSOR_INFO + n_kv * _MIN_KV > self.size - self.pos:
            raise self.fail(f"header claims {n_tensors} tensors and {n_kv} key/values, more than "
                            f"{self.size} bytes can hold")
        metadata: dict[str, GGUFValue] = {}
        for i in range(n_kv):
            key = self.string(f"key {i}")
            if key in metadata:
                raise self.fail(f"metadata key {key!r} appears twice")
            metadata[key] = self.value(self.value_type(f"metadata key {key!r}"), f"metadata key {key!r}", 0)
        tensors: dict[str, RawTensorInfo] = {}
        for i in range(n_tensors):
            info = self.tensor_info(i)
            if info.name in tensors:
                raise self.fail(f"tensor {info.name!r} appears twice")
            tensors[info.name] = info
        alignment = self.alignment(metadata)
        data_start = -(-self.pos // alignment) * alignment
        for info in tensors.values():
            if info.offset % alignment:
                raise self.fail(f"tensor {info.name!r}: data offset {info.offset} is not a multiple of the "
                                f"alignment {alignment}")
        mapped: np.ndarray[Any, np.dtype[np.uint8]] = np.frombuffer(self.buf, dtype=np.uint8)
        return GGUFContainer(self.path, version, metadata, tensors, alignment, data_start, mapped)

    def tensor_info(self, i: int) -> RawTensorInfo:
        name = self.string(f"the name of tensor {i}")
        n_dims = self.u32(f"tensor {name!r}: n_dims")
        if n_dims > MAX_DIMS:
            raise self.fail(f"tensor {name!r} has {n_dims} dims, more than {MAX_DIMS}")
        dims = tuple(self.u64(f"tensor {name!r}: dim {d}") for d in range(n_dims))
        type_id = self.u32(f"tensor {name!r}: type")
        offset = self.u64(f"tensor {name!r}: offset")
        return RawTensorInfo(name, dims, type_id, offset)

    def alignment(self, metadata: dict[str, GGUFValue]) -> int:
        if "general.alignment" not in metadata:
            return DEFAULT_ALIGNMENT
        a = metadata["general.alignment"]
        # stored as UINT32 by every writer; the parsed value is an int either way, bool is not one
        if not isinstance(a, int) or isinstance(a, bool) or a <= 0 or a & (a - 1):
            raise self.fail(f"general.alignment = {a!r} is not a power of two")
        return a

    # ---- values ---------------------------------------------------------------------------------------------

    def value_type(self, what: str) -> ValueType:
        raw = self.u32(f"{what}: value type")
        try:
            return ValueType(raw)
        except ValueError:
            raise self.fail(f"{what}: bad value type {raw}") from None

    def value(self, vt: ValueType, what: str, depth: int) -> GGUFValue:
        if vt is ValueType.STRING:
            return self.string(what)
        if vt is ValueType.ARRAY:
            return self.array(what, depth + 1)
        st = _STRUCT[vt]
        self.need(st.size, what)
        (v,) = st.unpack_from(self.buf, self.pos)
        self.pos += st.size
        return v != 0 if vt is ValueType.BOOL else v  # type: ignore[no-any-return]

    def array(self, what: str, depth: int) -> list[GGUFValue]:
        if depth > MAX_NESTING:
            raise self.fail(f"{what}: arrays nested deeper than {MAX_NESTING}")
        et = self.value_type(f"{what}: array element")
        n = self.u64(f"{what}: array length")
        left = self.size - self.pos
        if n * _MIN_SIZE[et] > left:
            raise self.fail(f"truncated: {what} claims {n} elements of {et.name}, more than the {left} bytes "
                            f"left hold")
        if et is ValueType.STRING:
            return self.strings(n, what)  # type: ignore[return-value]
        if et is ValueType.ARRAY:
            return [self.array(f"{what}[{i}]", depth + 1) for i in range(n)]
        dt = _DTYPE[et]
        arr = np.frombuffer(self.buf, dtype=dt, count=n, offset=self.pos)
        self.pos += n * dt.itemsize
        return (arr != 0).tolist() if et is ValueType.BOOL else arr.tolist()  # type: ignore[no-any-return]

    def strings(self, n: int, what: str) -> list[str]:
        """n length-prefixed strings, decoded in one tight loop (vocabularies hold hundreds of thousands)."""
        buf, pos, size, unpack = self.buf, self.pos, self.size, _U64.unpack_from
        out: list[str] = []
        append = out.append
        i = 0
        try:
            for i in range(n):
                if pos + 8 > size:
                    raise self.fail(f"truncated: {what}: the length of string {i} at offset {pos}")
                (ln,) = unpack(buf, pos)
                pos += 8
                end = pos + ln
                if end > size:
                    raise self.fail(f"truncated: {what}: string {i} ({ln} bytes at offset {pos}) runs past the end "
                                    f"of the file ({size} bytes)")
                append(buf[pos:end].decode("utf-8"))
                pos = end
        except UnicodeDecodeError as e:
            raise self.fail(f"{what}: string {i} is not valid UTF-8: {e}") from None
        self.pos = pos
        return out
