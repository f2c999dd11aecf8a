"""What DLPack exchanges, in pyggml's terms: where memory is (`DLDevice`), a range of it with what keeps it valid
(`DLPackMemory`, what `Buffer.dlpack_memory` returns and `Device.buffer_from_dlpack` takes), numpy views of host
memory, and the element types both sides can name."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from pyggml.errors import DLPackError
from pyggml.types import GGMLType

if TYPE_CHECKING:
    from pyggml.backend.protocol import Bytes


class DLDeviceType(IntEnum):
    """DLPack's device types (dlpack.h's DLDeviceType)."""

    CPU = 1
    CUDA = 2
    CUDA_HOST = 3
    OPENCL = 4
    VULKAN = 7
    METAL = 8
    VPI = 9
    ROCM = 10
    ROCM_HOST = 11
    EXT_DEV = 12
    CUDA_MANAGED = 13
    ONE_API = 14
    WEBGPU = 15
    HEXAGON = 16
    MAIA = 17


class DLDevice(NamedTuple):
    """Where memory is, as `__dlpack_device__` says it: (device type, device number)."""

    type: int
    id: int

    @property
    def host(self) -> bool:
        """Whether the host addresses this memory directly (a type in HOST_TYPES)."""
        return self.type in HOST_TYPES

    def __str__(self) -> str:
        name = DLDeviceType(self.type).name if self.type in DLDeviceType._value2member_map_ else str(self.type)
        return f"{name}:{self.id}"


CPU_DEVICE = DLDevice(DLDeviceType.CPU, 0)
HOST_TYPES = frozenset({DLDeviceType.CPU, DLDeviceType.CUDA_HOST, DLDeviceType.ROCM_HOST, DLDeviceType.CUDA_MANAGED})
"""Device types whose memory the host addresses directly."""


@dataclass(frozen=True)
class DLPackMemory:
    """Memory as DLPack hands it between libraries: for `Buffer.dlpack_memory` the whole buffer from its byte 0,
    for an import the array's first element."""

    address: int
    """Where the memory starts, as the consumer addresses it (a host pointer, a CUDA device pointer)."""
    device: DLDevice
    owner: object
    """What keeps the memory valid: every export (and every buffer over an import) holds it."""
    readonly: bool = False

    @property
    def host(self) -> bool:
        return self.device.host


def host_memory(array: Bytes, holder: object = None) -> DLPackMemory:
    """The `DLPackMemory` of host memory held in a numpy uint8 array (a host buffer's `host_array()`); `holder`
    (the buffer, say) is held with it."""
    return DLPackMemory(int(array.ctypes.data), CPU_DEVICE, (array, holder), not array.flags.writeable)


class _Span:
    """Exposes host memory to numpy (`__array_interface__`) and holds its owner for as long as numpy holds this."""

    def __init__(self, memory: DLPackMemory, size: int) -> None:
        self.owner = memory.owner
        self.__array_interface__ = {"shape": (size,), "typestr": "|u1", "version": 3,
                                    "data": (memory.address, memory.readonly)}


def host_array(memory: DLPackMemory, size: int) -> Bytes:
    """A 1-D uint8 numpy array over `size` bytes of host `memory`, holding its owner while the array lives."""
    if not memory.host:
        raise DLPackError(f"memory on {memory.device} is not host memory; numpy cannot address it")
    if size == 0:
        return np.zeros(0, dtype=np.uint8)
    arr: Bytes = np.asarray(_Span(memory, size))
    return arr


class ExportPins:
    """A buffer's live DLPack exports of memory that its `free()` would otherwise unmap (Vulkan's mapped memory):
    `pin()` goes into each export's owner, and `release_when_unused(release)` runs `release` at once, or when the
    last export is gone."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0
        self._release: Callable[[], None] | None = None

    def pin(self) -> object:
        token = _Token()
        with self._lock:
            self._count += 1
        weakref.finalize(token, self._unpin)
        return token

    def _unpin(self) -> None:
        with self._lock:
            self._count -= 1
            release, self._release = (self._release, None) if self._count == 0 else (None, self._release)
        if release is not None:
            release()

    def release_when_unused(self, release: Callable[[], None]) -> bool:
        """Run `release` now (True) when no export holds the memory, else when the last one goes (False)."""
        with self._lock:
            if self._count:
                self._release = release
                return False
        release()
        return True


class _Token:
    """One export's pin (see ExportPins)."""


# ---- element types ---------------------------------------------------------------------------------------------

class DLDataTypeCode(IntEnum):
    INT = 0
    UINT = 1
    FLOAT = 2
    OPAQUE_HANDLE = 3
    BFLOAT = 4
    COMPLEX = 5
    BOOL = 6


_DL_TYPES: dict[GGMLType, tuple[int, int]] = {
    GGMLType.F32: (DLDataTypeCode.FLOAT, 32), GGMLType.F16: (DLDataTypeCode.FLOAT, 16),
    GGMLType.F64: (DLDataTypeCode.FLOAT, 64), GGMLType.BF16: (DLDataTypeCode.BFLOAT, 16),
    GGMLType.I8: (DLDataTypeCode.INT, 8), GGMLType.I16: (DLDataTypeCode.INT, 16),
    GGMLType.I32: (DLDataTypeCode.INT, 32), GGMLType.I64: (DLDataTypeCode.INT, 64),
}
_GGML_TYPES = {v: k for k, v in _DL_TYPES.items()}


def dl_dtype(ttype: GGMLType) -> tuple[int, int] | None:
    """DLPack's (type code, bits) of a ggml type; None for the block-quantised types, which DLPack cannot say."""
    return _DL_TYPES.get(ttype)


def ggml_type(code: int, bits: int) -> GGMLType | None:
    """The ggml type of DLPack's (type code, bits), or None (unsigned, bool and complex have none)."""
    return _GGML_TYPES.get((code, bits))
