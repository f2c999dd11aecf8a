"""NCCL through ctypes: libnccl from the `nvidia-nccl-cu12` / `-cu13` wheel (package `nvidia.nccl`), else from
the system's library path. Only what an in-place sum over one process's devices needs."""

from __future__ import annotations

import ctypes
import ctypes.util
import importlib
import logging
from pathlib import Path
from typing import Any

from pyggml.errors import ComputeError
from pyggml.types import GGMLType

log = logging.getLogger(__name__)

DTYPES = {GGMLType.F32: 7, GGMLType.F16: 6, GGMLType.BF16: 9}
"""ncclFloat32, ncclFloat16, ncclBfloat16"""
SUM = 0


class NcclError(ComputeError):
    """An NCCL call failed; the message names the call and NCCL's error string."""


def find_library() -> str | None:
    """Path of libnccl.so.2 from the nvidia.nccl package, or a system libnccl, or None."""
    try:
        pkg = importlib.import_module("nvidia.nccl")
        for base in list(getattr(pkg, "__path__", [])):
            for cand in sorted((Path(base) / "lib").glob("libnccl.so*")):
                return str(cand)
    except ImportError:
        pass
    return ctypes.util.find_library("nccl")


class Nccl:
    def __init__(self, lib: Any) -> None:
        self.lib = lib

    @staticmethod
    def load() -> Nccl | None:
        """NCCL when it can be loaded, else None (asked only where `CudaOptions.nccl` is on)."""
        path = find_library()
        if path is None:
            return None
        try:
            return Nccl(ctypes.CDLL(path))
        except OSError as e:
            log.warning("NCCL at %s cannot be loaded: %s", path, e)
            return None

    def _check(self, fn: str, r: int) -> None:
        if r != 0:
            try:
                self.lib.ncclGetErrorString.restype = ctypes.c_char_p
                msg = self.lib.ncclGetErrorString(ctypes.c_int(r)).decode(errors="replace")
            except (AttributeError, OSError):
                msg = "unknown error"
            raise NcclError(f"{fn} failed: {msg} (ncclResult {r})")

    def comm_init_all(self, ordinals: list[int]) -> list[int]:
        n = len(ordinals)
        comms = (ctypes.c_void_p * n)()
        devs = (ctypes.c_int * n)(*ordinals)
        self._check("ncclCommInitAll", int(self.lib.ncclCommInitAll(comms, ctypes.c_int(n), devs)))
        return [int(c or 0) for c in comms]

    def all_reduce_sum(self, ptr: int, count: int, dtype: GGMLType, comm: int, stream: int) -> None:
        r = self.lib.ncclAllReduce(ctypes.c_void_p(ptr), ctypes.c_void_p(ptr), ctypes.c_size_t(count),
                                   ctypes.c_int(DTYPES[dtype]), ctypes.c_int(SUM), ctypes.c_void_p(comm),
                                   ctypes.c_void_p(stream))
        self._check("ncclAllReduce", int(r))

    def group_start(self) -> None:
        self._check("ncclGroupStart", int(self.lib.ncclGroupStart()))

    def group_end(self) -> None:
        self._check("ncclGroupEnd", int(self.lib.ncclGroupEnd()))

    def destroy(self, comm: int) -> None:
        self._check("ncclCommDestroy", int(self.lib.ncclCommDestroy(ctypes.c_void_p(comm))))
