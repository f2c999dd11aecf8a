"""Thin access to the `vulkan` binding (cffi): `ffi`, `lib`, result checking and small struct helpers.

Importing this module loads libvulkan, so only code that runs after device enumeration imports it; the plugin
entry point never does. Hot paths call `lib.vk*` directly (the binding's Python wrappers are slow).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

import vulkan as _vk

from pyggml.errors import AllocationError, ComputeError, PyGGMLError

log = logging.getLogger(__name__)


class CData(Protocol):
    """A cffi object of the binding: a Vulkan handle, a struct pointer or an array. The binding ships no types, so
    its items and fields (ints, floats or other cffi objects, by the C declaration) are Any; a name typed CData
    says which values are Vulkan objects rather than Python ones."""

    def __getitem__(self, i: int) -> Any: ...
    def __setitem__(self, i: int, v: object) -> None: ...
    def __getattr__(self, name: str) -> Any: ...
    def __setattr__(self, name: str, v: object) -> None: ...
    def __int__(self) -> int: ...
    def __add__(self, n: int) -> CData: ...
    def __call__(self, *args: object) -> Any: ...


class FFI(Protocol):
    """The calls of the binding's cffi `FFI` this plugin makes."""

    NULL: CData

    def new(self, cdecl: str, init: object = ...) -> CData: ...
    def cast(self, cdecl: str, value: object) -> CData: ...
    def buffer(self, cdata: CData, size: int = ...) -> memoryview: ...
    def from_buffer(self, cdecl: str, python_buffer: object) -> CData: ...
    def string(self, cdata: CData) -> bytes: ...
    def callback(self, cdecl: str) -> Callable[[Callable[..., int]], CData]: ...


ffi: FFI = _vk.ffi
lib: Any = _vk.lib
"""The binding's C functions (vk*): hundreds of them, untyped by the binding, called with CData and ints."""
C: Any = _vk
"""The binding's module, for constants (C.VK_SUCCESS, ...)."""

NULL = ffi.NULL
WHOLE_SIZE = 0xFFFFFFFFFFFFFFFF
API_VERSION_1_2 = (1 << 22) | (2 << 12)
OOM = {C.VK_ERROR_OUT_OF_HOST_MEMORY, C.VK_ERROR_OUT_OF_DEVICE_MEMORY}


class VulkanError(PyGGMLError, RuntimeError):
    """A Vulkan call failed."""


class DeviceLostError(ComputeError):
    """VK_ERROR_DEVICE_LOST: the logical device is gone; create a new backend (the device recreates itself)."""


_NAMES: dict[int, str] = {}


def result_name(code: int) -> str:
    if not _NAMES:
        for k in dir(C):
            if (k.startswith("VK_ERROR_") or k in ("VK_SUCCESS", "VK_TIMEOUT", "VK_NOT_READY", "VK_INCOMPLETE")) \
                    and isinstance(getattr(C, k), int):
                _NAMES.setdefault(getattr(C, k), k)
    return _NAMES.get(code, f"VkResult {code}")


def check(code: int, what: str, on_lost: Callable[[], object] | None = None) -> int:
    """Raise the pyggml error matching a failed VkResult (what: the call and its subject)."""
    if code >= 0:
        return code
    name = result_name(code)
    if code == C.VK_ERROR_DEVICE_LOST:
        if on_lost is not None:
            on_lost()
        raise DeviceLostError(f"Vulkan device lost during {what} ({name}); init a new backend to recreate it")
    if code in OOM:
        raise AllocationError(f"Vulkan: out of memory during {what} ({name})")
    raise VulkanError(f"Vulkan call failed: {what}: {name}")


def new(ctype: str, **fields: object) -> CData:
    """A zero-initialised struct pointer `ctype*` with the given fields (keep the returned object alive)."""
    return ffi.new(ctype + "*", fields)


def out(ctype: str) -> CData:
    return ffi.new(ctype + "*")


def cstr(x: CData) -> str:
    return ffi.string(x).decode("utf-8", "replace")
