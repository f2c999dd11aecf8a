"""FNV-1a, 64 bits: ggml's RPC names cached weights by it (SET_TENSOR_HASH) and its servers store them under it."""

from __future__ import annotations

import numpy as np

OFFSET_BASIS = 0xCBF29CE484222325
PRIME = 0x100000001B3
MASK = (1 << 64) - 1


def fnv1a64_py(data: bytes | np.ndarray, h: int = OFFSET_BASIS) -> int:
    """The definition, in Python (slow: for tests and as the fallback)."""
    for b in bytes(data):
        h = ((h ^ b) * PRIME) & MASK
    return h


def fnv1a64(data: np.ndarray, h: int = OFFSET_BASIS) -> int:
    """FNV-1a of a contiguous uint8 array, in C when the extension was built."""
    try:
        from pyggml_rpc._fnv import ffi, lib  # type: ignore[import-not-found]  # built at install
    except ImportError:  # pragma: no cover - only where the extension could not be compiled
        return fnv1a64_py(data, h)
    arr = np.ascontiguousarray(data, dtype=np.uint8)
    return int(lib.pyggml_rpc_fnv1a64(ffi.from_buffer("uint8_t[]", arr), arr.size, h))
