"""The C side of DLPack: dlpack.h's structures through ctypes, and the PyCapsule protocol around them.

Capsules pyggml exports are made by numpy's `ndarray.__dlpack__` over a numpy view of the memory (which holds what
keeps the memory valid), so their destructors and deleters are numpy's C code: safe from any thread and while an
exception is being raised, which a Python callback is not. `amend` then says what numpy cannot (CUDA memory, BF16
elements, a copy) in the managed tensor before it is handed out. `consume` takes a producer's capsule, renames it
"used_..." as the protocol says, and returns what it describes with a holder that calls the producer's deleter when
pyggml lets go of it.
"""

from __future__ import annotations

import ctypes as c
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyggml.dlpack.memory import DLDevice
from pyggml.errors import DLPackError

if TYPE_CHECKING:
    from typing_extensions import CapsuleType


class _Version(c.Structure):
    _fields_ = [("major", c.c_uint32), ("minor", c.c_uint32)]


class _Device(c.Structure):
    _fields_ = [("device_type", c.c_int32), ("device_id", c.c_int32)]


class _DType(c.Structure):
    _fields_ = [("code", c.c_uint8), ("bits", c.c_uint8), ("lanes", c.c_uint16)]


class _DLTensor(c.Structure):
    _fields_ = [("data", c.c_void_p), ("device", _Device), ("ndim", c.c_int32), ("dtype", _DType),
                ("shape", c.POINTER(c.c_int64)), ("strides", c.POINTER(c.c_int64)), ("byte_offset", c.c_uint64)]


_Deleter = c.CFUNCTYPE(None, c.c_void_p)


class _Managed(c.Structure):
    """DLManagedTensor: capsule "dltensor"."""

    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", c.c_void_p), ("deleter", _Deleter)]


class _ManagedVersioned(c.Structure):
    """DLManagedTensorVersioned: capsule "dltensor_versioned"."""

    _fields_ = [("version", _Version), ("manager_ctx", c.c_void_p), ("deleter", _Deleter), ("flags", c.c_uint64),
                ("dl_tensor", _DLTensor)]


FLAG_READ_ONLY = 1
FLAG_IS_COPIED = 2
VERSION = (1, 0)
"""The DLPack version pyggml asks producers for (and reads: major 1)."""

_NAMES = {k: c.create_string_buffer(k.encode()) for k in
          ("dltensor", "dltensor_versioned", "used_dltensor", "used_dltensor_versioned")}
"""Capsule names, alive as long as the process: a capsule keeps a pointer to its name."""
_api = c.pythonapi
_capsule_is = c.PYFUNCTYPE(c.c_int, c.py_object, c.c_void_p)(("PyCapsule_IsValid", _api))
_capsule_get = c.PYFUNCTYPE(c.c_void_p, c.py_object, c.c_void_p)(("PyCapsule_GetPointer", _api))
_capsule_rename = c.PYFUNCTYPE(c.c_int, c.py_object, c.c_void_p)(("PyCapsule_SetName", _api))


def _name(key: str) -> int:
    return c.addressof(_NAMES[key])


def _managed(capsule: object) -> tuple[Any, bool]:
    """The managed tensor of an unconsumed DLPack capsule and whether it is versioned; DLPackError for anything
    else."""
    for key, struct, versioned in (("dltensor_versioned", _ManagedVersioned, True), ("dltensor", _Managed, False)):
        if _capsule_is(capsule, _name(key)):
            ptr = _capsule_get(capsule, _name(key)) or 0
            return c.cast(ptr, c.POINTER(struct)).contents, versioned
    raise DLPackError(f"{type(capsule).__name__} {capsule!r} is not an unconsumed DLPack capsule")


def amend(capsule: CapsuleType, *, device: DLDevice | None = None, code: int | None = None,
          flags: int = 0) -> CapsuleType:
    """Say in a capsule made here what numpy could not: the memory's device, DLPack's element type code, flags
    (versioned capsules only). Returns the capsule."""
    m, versioned = _managed(capsule)
    if device is not None:
        m.dl_tensor.device = _Device(int(device.type), int(device.id))
    if code is not None:
        m.dl_tensor.dtype.code = code
    if versioned:
        m.flags |= flags
    return capsule


@dataclass(frozen=True)
class Described:
    """What a consumed capsule says (`consume`)."""

    address: int
    """The first element: `data + byte_offset`."""
    device: DLDevice
    code: int
    bits: int
    lanes: int
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None
    """In elements; None: compact row-major."""
    readonly: bool
    holder: object
    """Calls the producer's deleter once garbage collected: hold it while the memory is in use."""


class _Held:
    """A consumed managed tensor: its producer's deleter runs when this is garbage collected (not at interpreter
    exit, when the producer may be gone)."""

    def __init__(self, ptr: int, deleter: object) -> None:
        if deleter:
            weakref.finalize(self, deleter, ptr).atexit = False  # type: ignore[arg-type]


def consume(capsule: object, what: str) -> Described:
    """Take the managed tensor of a producer's capsule (`what` names the producer in errors): DLPackError for
    anything but an unconsumed DLPack capsule of major version 1 or less."""
    try:
        m, versioned = _managed(capsule)
    except DLPackError:
        raise DLPackError(f"{what}.__dlpack__() returned {type(capsule).__name__}, not an unconsumed DLPack "
                          "capsule") from None
    if versioned and m.version.major > VERSION[0]:
        raise DLPackError(f"{what} exports DLPack {m.version.major}.{m.version.minor}; pyggml reads DLPack "
                          f"{VERSION[0]}.x")
    dl = m.dl_tensor
    n = int(dl.ndim)
    shape = tuple(int(dl.shape[i]) for i in range(n))
    strides = tuple(int(dl.strides[i]) for i in range(n)) if dl.strides else None
    address = int(dl.data or 0) + int(dl.byte_offset)
    device = DLDevice(int(dl.device.device_type), int(dl.device.device_id))
    readonly = versioned and bool(m.flags & FLAG_READ_ONLY)
    held = _Held(c.addressof(m), m.deleter)
    _capsule_rename(capsule, _name("used_dltensor_versioned" if versioned else "used_dltensor"))
    return Described(address, device, int(dl.dtype.code), int(dl.dtype.bits), int(dl.dtype.lanes), shape, strides,
                     readonly, held)
