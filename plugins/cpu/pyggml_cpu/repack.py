"""The cpu device's extra buffer type for matmul weights, `cpu_repack` (ggml's CPU_REPACK): Q4_0, Q4_1, Q5_0, Q5_1,
Q8_0, Q4_K, Q5_K and Q6_K matrices whose rows come in groups of eight are kept in the R8 layout (csrc/repack.h:
eight rows interleaved block by block), which the matmul kernels read with one byte dot per eight rows. Any other
tensor placed in such a buffer is stored as is.

The layout is private to the buffer: `set_tensor` repacks, `get_tensor` gives ggml's layout back, so copies to
other devices and reads see the usual bytes. Byte-level access to a repacked range, and any node other than
MUL_MAT reading a repacked tensor, raise an error naming the tensor rather than read the wrong bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np

from pyggml.backend.host import HostBuffer, aligned_empty
from pyggml.backend.protocol import Buffer, BufferType, Bytes, Device
from pyggml.errors import PyGGMLError
from pyggml.tensor import Tensor
from pyggml.types import GGMLType, row_size
from pyggml.weight_cache import CachedLayout
from pyggml_cpu._pgc import ffi, lib

R8_TYPES = frozenset({GGMLType.Q4_0, GGMLType.Q4_1, GGMLType.Q5_0, GGMLType.Q5_1, GGMLType.Q8_0, GGMLType.Q4_K,
                      GGMLType.Q5_K, GGMLType.Q6_K})
R8_ROWS = 8
R8_FLAG = int(lib.PGC_R8)
"""Set on a node descriptor's type of a slot whose data is in the R8 layout."""


def r8_eligible(t: Tensor) -> bool:
    """Whether a tensor placed in a cpu_repack buffer takes the R8 layout: a contiguous tensor of an R8 type
    (R8_TYPES) of its own (no view) whose matrices have a multiple of eight rows."""
    return t.type in R8_TYPES and t.view_src is None and t.ne[1] % R8_ROWS == 0 and t.nelements() > 0 \
        and t.is_contiguous()


def _convert(t: GGMLType, src: Bytes, nrows: int, ne0: int, to_plain: bool, out: Bytes | None = None) -> Bytes:
    """The conversion into `out` (a new array by default; else contiguous bytes of src's size, not overlapping it)."""
    if t not in R8_TYPES or nrows < 0 or ne0 <= 0 or ne0 % t.traits.blck_size:
        raise PyGGMLError(f"cpu_repack: no R8 layout for {nrows} rows of {ne0} {t.name} values")
    need = nrows * row_size(t, ne0)
    if src.size != need:
        raise PyGGMLError(f"cpu_repack: {nrows} rows of {ne0} {t.name} values take {need} bytes, not {src.size}")
    if out is None:
        out = np.empty_like(src)
    elif out.size != src.size or not out.flags.c_contiguous or np.may_share_memory(out, src):
        raise PyGGMLError(f"cpu_repack: cannot convert {src.size} bytes into {out.size} bytes shared or strided")
    rc = lib.pgc_repack_r8(int(t), ffi.from_buffer(src), ffi.from_buffer(out), nrows, ne0, int(to_plain))
    if rc:
        raise PyGGMLError(f"cpu_repack: cannot convert {nrows} rows of {ne0} {t.name} values (error {rc})")
    return out


def to_r8(t: GGMLType, plain: Bytes, nrows: int, ne0: int) -> Bytes:
    """ggml's bytes of nrows x ne0 values of type t (nrows % 8 == 0) in the R8 layout."""
    return _convert(t, np.ascontiguousarray(plain, dtype=np.uint8).reshape(-1), nrows, ne0, False)


def from_r8(t: GGMLType, packed: Bytes, nrows: int, ne0: int) -> Bytes:
    """The inverse of `to_r8`."""
    return _convert(t, np.ascontiguousarray(packed, dtype=np.uint8).reshape(-1), nrows, ne0, True)


@dataclass(frozen=True)
class Repacked:
    """A tensor a RepackBuffer holds in the R8 layout: its byte range and what its conversion needs."""

    tensor: Tensor
    """The tensor placed (its name now, for messages: a loader may rename it after placing it)."""
    type: GGMLType
    offset: int
    nbytes: int
    ne0: int
    nrows: int

    @property
    def name(self) -> str:
        return self.tensor.name

    @property
    def group_bytes(self) -> int:
        return self.nbytes // self.nrows * R8_ROWS


class RepackBuffer(HostBuffer):
    """Host memory whose eligible tensors (recorded when placed, `init_tensor`) hold the R8 layout. Not a host
    buffer to others: `host_array()` is None, so no one reads the packed bytes as ggml's."""

    def __init__(self, buft: BufferType, array: Bytes, guard: Callable[[], None] | None = None) -> None:
        super().__init__(buft, array, guard)
        self.repacked: dict[int, Repacked] = {}
        """By offset."""

    def writable(self) -> Bytes:
        """The memory, for a write: PyGGMLError where it is a read-only mapping (of the weight cache's file)."""
        arr = self.array
        if not arr.flags.writeable:
            raise PyGGMLError(f"{self.buft.name}: this buffer maps a weight cache file read-only; its tensors "
                              "cannot be written (load without the cache, PYGGML_REPACK_CACHE=0, to change weights)")
        return arr

    def host_array(self) -> None:  # type: ignore[override]
        return None

    def init_tensor(self, tensor: Tensor) -> None:
        if r8_eligible(tensor):
            self.repacked[tensor.offset] = Repacked(tensor, tensor.type, tensor.offset, tensor.nbytes(),
                                                    tensor.ne[0], tensor.nrows())

    def layout_of(self, tensor: Tensor) -> Repacked | None:
        """The R8 record of exactly this tensor (same place and size), else None."""
        rec = self.repacked.get(tensor.offset)
        return rec if rec is not None and rec.nbytes == tensor.nbytes() else None

    def overlapping(self, offset: int, size: int) -> Repacked | None:
        for rec in self.repacked.values():
            if offset < rec.offset + rec.nbytes and rec.offset < offset + size:
                return rec
        return None

    def _raw(self, offset: int, size: int, what: str) -> None:
        rec = self.overlapping(offset, size)
        if rec is not None:
            raise PyGGMLError(f"{self.buft.name}: {what} of bytes [{offset}, {offset + size}) would touch tensor "
                              f"'{rec.name}', which is kept repacked: use set_tensor / get_tensor")

    # -- raw bytes: only outside repacked tensors --
    def write(self, offset: int, data: Bytes) -> None:
        self._raw(offset, data.size, "a raw write")
        self.writable()[self._span(offset, data.size)] = data

    def read(self, offset: int, size: int) -> Bytes:
        self._raw(offset, size, "a raw read")
        return super().read(offset, size)

    def fill(self, offset: int, size: int, value: int) -> None:
        self._raw(offset, size, "a raw fill")
        self.writable()[self._span(offset, size)] = value

    def copy_from(self, src: Buffer, src_offset: int, dst_offset: int, size: int) -> bool:
        return False  # through set_tensor, which repacks

    def clear(self, value: int = 0) -> None:
        """Every byte `value`, as ggml's clear: a repacked tensor reads back as that many `value` bytes (its groups
        are written through the conversion, since R8 stores Q8_0's values plus 128)."""
        self.writable()[:] = value
        for rec in self.repacked.values():
            rows = rec.nrows
            self.array[rec.offset : rec.offset + rec.nbytes] = to_r8(rec.type, np.full(rec.nbytes, value, np.uint8),
                                                                     rows, rec.ne0)

    # -- tensors: converted --
    def _groups(self, rec: Repacked, offset: int, size: int) -> tuple[int, int]:
        g = rec.group_bytes
        return offset // g * g, -(-(offset + size) // g) * g

    def set_tensor(self, tensor: Tensor, data: Bytes | bytes, offset: int = 0) -> None:
        rec = self.layout_of(tensor)
        if rec is None:
            self.writable()
            super().set_tensor(tensor, data, offset)
            return
        arr = np.frombuffer(data, dtype=np.uint8) if isinstance(data, bytes | bytearray) else data.view(np.uint8)
        arr = arr.reshape(-1)
        self.checked_offset(tensor, offset, arr.size)
        lo, hi = self._groups(rec, offset, arr.size)
        rows = (hi - lo) // rec.group_bytes * R8_ROWS
        if lo == offset and hi == offset + arr.size:
            plain = arr
        else:  # a partial write: the groups it touches, unpacked, patched, packed again
            plain = from_r8(rec.type, self.array[rec.offset + lo : rec.offset + hi], rows, rec.ne0)
            plain[offset - lo : offset - lo + arr.size] = arr
        plain = np.ascontiguousarray(plain, dtype=np.uint8)
        _convert(rec.type, plain, rows, rec.ne0, False, out=self.writable()[rec.offset + lo : rec.offset + hi])

    def get_tensor(self, tensor: Tensor, offset: int = 0, size: int | None = None) -> Bytes:
        rec = self.layout_of(tensor)
        if rec is None:
            return super().get_tensor(tensor, offset, size)
        n = tensor.nbytes() - offset if size is None else size
        self.checked_offset(tensor, offset, n)
        lo, hi = self._groups(rec, offset, n)
        rows = (hi - lo) // rec.group_bytes * R8_ROWS
        plain = from_r8(rec.type, self.array[rec.offset + lo : rec.offset + hi], rows, rec.ne0)
        return plain[offset - lo : offset - lo + n].copy()

    def memset_tensor(self, tensor: Tensor, value: int, offset: int = 0, size: int | None = None) -> None:
        rec = self.layout_of(tensor)
        if rec is None:
            super().memset_tensor(tensor, value, offset, size)
            return
        n = tensor.nbytes() - offset if size is None else size
        self.set_tensor(tensor, np.full(n, value, dtype=np.uint8), offset)


LAYOUT_VERSION = 1
"""Part of `layout_id`, with a fingerprint of the conversion itself (`layout_fingerprint`), which changes by itself
whenever csrc/repack.c converts differently."""


@cache
def layout_fingerprint() -> str:
    """SHA-256 (16 hex digits) of the R8 conversion of fixed pseudo-random bytes: three groups of eight rows of four
    blocks of every R8 type. The conversion is plain C, the same at every SIMD level."""
    rng = np.random.default_rng(20240601)
    h = hashlib.sha256()
    for t in sorted(R8_TYPES):
        ne0 = 4 * t.traits.blck_size
        plain = rng.integers(0, 256, 3 * R8_ROWS * row_size(t, ne0), dtype=np.uint8)
        h.update(f"{t.name}:".encode())
        h.update(to_r8(t, plain, 3 * R8_ROWS, ne0).tobytes())
    return h.hexdigest()[:16]


class RepackBufferType(CachedLayout):
    """`cpu_repack`: buffers for weights that only MUL_MAT reads (see the module docstring). Only its device (the
    cpu device) can use them. Its layout is cached across loads by `pyggml.weight_cache` (`CachedLayout`)."""

    def __init__(self, device: Device) -> None:
        super().__init__("cpu_repack", device)

    @property
    def alignment(self) -> int:
        return 64

    @property
    def concurrent_set_tensor(self) -> bool:
        return True  # tensors' conversions write disjoint bytes; the C conversion runs without the GIL

    def alloc_buffer(self, size: int) -> RepackBuffer:
        from pyggml.backend.accounting import check_size
        from pyggml.backend.sysinfo import host_memory_total

        size = check_size(self.name, size, host_memory_total())
        return RepackBuffer(self, aligned_empty(max(size, 1))[:size])

    @property
    def layout_id(self) -> str:
        return f"pgc-r8/{LAYOUT_VERSION}/{layout_fingerprint()}"

    def wrap_layout(self, array: Bytes, guard: Callable[[], None] | None = None) -> RepackBuffer:
        if array.dtype != np.uint8 or array.ndim != 1:
            raise PyGGMLError(f"{self.name}: a buffer wraps a 1-D uint8 array, not {array.dtype} {array.shape}")
        if array.size and array.ctypes.data % self.alignment:
            raise PyGGMLError(f"{self.name}: memory at {array.ctypes.data:#x} is not {self.alignment}-byte aligned")
        return RepackBuffer(self, array, guard)

    def takes_weight(self, type: GGMLType, ne: Sequence[int]) -> bool:
        """Whether a contiguous tensor of this type and shape is held repacked, and gains from it: the kernel level
        in use has a SIMD R8 kernel for the type (x86; elsewhere the portable one would be slower than the
        level's own plain kernels, NEON's say)."""
        return (type in R8_TYPES and len(ne) >= 2 and ne[1] % R8_ROWS == 0 and ne[0] > 0
                and bool(lib.pgc_r8_simd(int(type))))
