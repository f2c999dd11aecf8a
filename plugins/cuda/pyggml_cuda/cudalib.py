"""The few CUDA driver entry points PyCUDA does not offer, called through ctypes on libcuda: stream capture into
CUDA graphs (cuStreamBeginCapture ... cuGraphLaunch) and peer copies with explicit contexts (PyCUDA's memcpy_peer
ignores the contexts it is given). Handles are plain ints (PyCUDA's `Stream.handle`, `Context.handle`).
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

from pyggml.errors import ComputeError

CAPTURE_MODE_THREAD_LOCAL = 1
_c = ctypes.c_void_p


class CudaDriverError(ComputeError):
    """A driver call made through ctypes failed; the message names the call and the CUresult."""


class CudaLib:
    def __init__(self, lib: Any = None) -> None:
        self._lib = lib
        self._lock = threading.Lock()

    @property
    def lib(self) -> Any:
        with self._lock:
            if self._lib is None:
                try:
                    self._lib = ctypes.CDLL("libcuda.so.1")
                except OSError as e:
                    raise CudaDriverError(f"libcuda.so.1 cannot be loaded: {e}") from e
            return self._lib

    def error_string(self, code: int) -> str:
        s = ctypes.c_char_p()
        try:
            if self.lib.cuGetErrorString(ctypes.c_int(code), ctypes.byref(s)) == 0 and s.value:
                return s.value.decode(errors="replace")
        except (AttributeError, CudaDriverError):
            pass
        return "unknown error"

    def call(self, fn: str, *args: Any) -> None:
        r = int(getattr(self.lib, fn)(*args))
        if r != 0:
            raise CudaDriverError(f"{fn} failed: {self.error_string(r)} (CUresult {r})")

    # ---- graphs --------------------------------------------------------------------------------------------

    def begin_capture(self, stream: int) -> None:
        self.call("cuStreamBeginCapture_v2", _c(stream), ctypes.c_int(CAPTURE_MODE_THREAD_LOCAL))

    def end_capture(self, stream: int) -> int:
        g = _c()
        self.call("cuStreamEndCapture", _c(stream), ctypes.byref(g))
        if not g.value:
            raise CudaDriverError("cuStreamEndCapture returned no graph (the capture was invalidated)")
        return int(g.value)

    def instantiate(self, graph: int) -> int:
        e = _c()
        self.call("cuGraphInstantiateWithFlags", ctypes.byref(e), _c(graph), ctypes.c_ulonglong(0))
        return int(e.value or 0)

    def graph_launch(self, graph_exec: int, stream: int) -> None:
        self.call("cuGraphLaunch", _c(graph_exec), _c(stream))

    def graph_destroy(self, graph: int) -> None:
        self.call("cuGraphDestroy", _c(graph))

    def graph_exec_destroy(self, graph_exec: int) -> None:
        self.call("cuGraphExecDestroy", _c(graph_exec))

    # ---- copies --------------------------------------------------------------------------------------------

    def memcpy_peer(self, dst: int, dst_ctx: int, src: int, src_ctx: int, size: int) -> None:
        self.call("cuMemcpyPeer", ctypes.c_uint64(dst), _c(dst_ctx), ctypes.c_uint64(src), _c(src_ctx),
                  ctypes.c_size_t(size))

    def memcpy_peer_async(self, dst: int, dst_ctx: int, src: int, src_ctx: int, size: int, stream: int) -> None:
        self.call("cuMemcpyPeerAsync", ctypes.c_uint64(dst), _c(dst_ctx), ctypes.c_uint64(src), _c(src_ctx),
                  ctypes.c_size_t(size), _c(stream))


_LIB = CudaLib()


def cudalib() -> CudaLib:
    return _LIB
