"""llama.cpp's own RPC client (libggml-rpc) driven through ctypes, for `bench_rpc.py`'s transfer measurement.

Why ctypes and not a llama.cpp tool: no llama.cpp program times a bare SET_TENSOR / GET_TENSOR, and going through
the library's public API (`ggml_backend_rpc_buffer_type` -> `ggml_backend_alloc_ctx_tensors_from_buft` ->
`ggml_backend_tensor_set/get`) is exactly the path llama.cpp takes when it uploads weights or reads logits, so the
figures compare client with client.

ggml keeps one connection per endpoint for the life of the process (its dispatcher is cached behind the buffer
type), and `ggml-rpc-server` serves one client at a time: use this from a process of its own that exits when done.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

GGML_TYPE_I8 = 24
"""ggml.h `enum ggml_type`: one byte per element, so a tensor of n elements spans n bytes."""


class GGMLInitParams(ctypes.Structure):
    """ggml.h `struct ggml_init_params` (passed by value to `ggml_init`)."""

    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p), ("no_alloc", ctypes.c_bool)]


class GGMLRPCLib:
    """libggml-base and libggml-rpc of one build, with the signatures this benchmark calls."""

    def __init__(self, libdir: Path) -> None:
        # base first and global: libggml-rpc's DT_NEEDED libggml-base.so.0 then resolves to it by soname, whatever
        # RUNPATH the build left behind.
        self.base = ctypes.CDLL(str(libdir / "libggml-base.so.0"), mode=ctypes.RTLD_GLOBAL)
        self.rpc = ctypes.CDLL(str(libdir / "libggml-rpc.so.0"), mode=ctypes.RTLD_GLOBAL)
        vp, sz = ctypes.c_void_p, ctypes.c_size_t
        b, r = self.base, self.rpc
        r.ggml_backend_rpc_buffer_type.argtypes = [ctypes.c_char_p, ctypes.c_uint32]
        r.ggml_backend_rpc_buffer_type.restype = vp
        b.ggml_tensor_overhead.argtypes = []
        b.ggml_tensor_overhead.restype = sz
        b.ggml_init.argtypes = [GGMLInitParams]
        b.ggml_init.restype = vp
        b.ggml_free.argtypes = [vp]
        b.ggml_free.restype = None
        b.ggml_new_tensor_1d.argtypes = [vp, ctypes.c_int, ctypes.c_int64]
        b.ggml_new_tensor_1d.restype = vp
        b.ggml_backend_alloc_ctx_tensors_from_buft.argtypes = [vp, vp]
        b.ggml_backend_alloc_ctx_tensors_from_buft.restype = vp
        b.ggml_backend_buffer_get_size.argtypes = [vp]
        b.ggml_backend_buffer_get_size.restype = sz
        b.ggml_backend_buffer_free.argtypes = [vp]
        b.ggml_backend_buffer_free.restype = None
        for name in ("ggml_backend_tensor_set", "ggml_backend_tensor_get"):
            fn = getattr(b, name)
            fn.argtypes = [vp, vp, sz, sz]
            fn.restype = None


class RemoteBytes:
    """One I8 tensor of `size` bytes in a buffer on an RPC server, allocated the way llama.cpp allocates weights
    (a no_alloc context, then one buffer for all its tensors from the RPC buffer type)."""

    def __init__(self, lib: GGMLRPCLib, endpoint: str, size: int, device: int = 0) -> None:
        self.lib = lib
        self.size = size
        b = lib.base
        buft = lib.rpc.ggml_backend_rpc_buffer_type(endpoint.encode(), device)  # connects (aborts if it cannot)
        if not buft:
            raise RuntimeError(f"ggml_backend_rpc_buffer_type({endpoint!r}, {device}) returned NULL")
        self.ctx = b.ggml_init(GGMLInitParams(b.ggml_tensor_overhead() * 2, None, True))
        if not self.ctx:
            raise RuntimeError("ggml_init failed")
        self.tensor = b.ggml_new_tensor_1d(self.ctx, GGML_TYPE_I8, size)
        self.buffer = b.ggml_backend_alloc_ctx_tensors_from_buft(self.ctx, buft)
        if not self.buffer:
            b.ggml_free(self.ctx)
            raise RuntimeError(f"{endpoint} could not allocate {size} bytes")

    def set(self, data: np.ndarray, offset: int = 0) -> None:
        """ggml_backend_tensor_set: returns once ggml's dispatcher thread has sent the bytes (no server ack)."""
        assert data.dtype == np.uint8 and data.flags.c_contiguous
        self.lib.base.ggml_backend_tensor_set(self.tensor, data.ctypes.data, offset, data.nbytes)

    def get_into(self, out: np.ndarray, offset: int = 0) -> None:
        """ggml_backend_tensor_get into a caller's array (a GET_TENSOR round trip)."""
        assert out.dtype == np.uint8 and out.flags.c_contiguous and out.flags.writeable
        self.lib.base.ggml_backend_tensor_get(self.tensor, out.ctypes.data, offset, out.nbytes)

    def free(self) -> None:
        if self.buffer:
            self.lib.base.ggml_backend_buffer_free(self.buffer)
            self.buffer = None
        if self.ctx:
            self.lib.base.ggml_free(self.ctx)
            self.ctx = None
