"""Thin typed access to the compiled kernels: CPU features, SIMD level, row (de)quantisation, thread pools."""

from __future__ import annotations

import logging
import weakref
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from pyggml.errors import ComputeError, UnsupportedTypeError
from pyggml.types import GGMLType, row_size
from pyggml_cpu._pgc import ffi, lib
from pyggml_cpu.options import available_cores

if TYPE_CHECKING:
    from pyggml_cpu._pgc import CData

log = logging.getLogger(__name__)

PORTABLE_ENV = "PYGGML_CPU_PORTABLE"
"""Set to 1 before import to run the portable C kernels instead of the SIMD ones: read by the C kernels when they
load (csrc/dot_portable.c), so not an option of the devices (docs/options.md)."""

_FEATURES = ["sse3", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "avx512_bf16",
             "neon", "arm_dotprod", "avx512vl"]
SIMD_LEVELS = {0: "portable", 1: "avx2+fma+f16c", 2: "avx2+fma+f16c+avx-vnni", 3: "avx512", 4: "avx512+vnni",
               5: "neon", 6: "neon+dotprod"}

ERRORS = {lib.PGC_E_OP: "unsupported op", lib.PGC_E_TYPE: "unsupported type", lib.PGC_E_SHAPE: "bad shape",
          lib.PGC_E_NOMEM: "out of memory for work data",
          lib.PGC_E_INDEX: "index out of range (a row or expert id outside its tensor)",
          lib.PGC_E_BLAS: "no BLAS library loaded"}
"""The text of each error code of csrc/pgc.h (the codes come from the compiled extension)."""


def cpu_features() -> dict[str, bool]:
    bits = int(lib.pgc_cpu_features())
    return {name: bool(bits & (1 << i)) for i, name in enumerate(_FEATURES)}


def simd_level() -> str:
    return SIMD_LEVELS.get(int(lib.pgc_simd_level()), "?")


def set_simd_level(level: int | str) -> str:
    """Force a kernel level (a SIMD_LEVELS key or name; -1, or one this CPU lacks, for the best it has); returns
    the level in use."""
    if isinstance(level, str):
        level = {v: k for k, v in SIMD_LEVELS.items()}.get(level, -1)
    lib.pgc_set_simd_level(int(level))
    return simd_level()


def cap_threads(n: int, source: str = "requested") -> int:
    """n, at most the available cores, with a warning when capped: threads beyond the cores only wait for each
    other at every node's barrier (32 threads on 2 cores made a decode 8x slower, 1000 threads 30x)."""
    cores = available_cores()
    if n > cores:
        log.warning("cpu: %d threads %s, but this process can use %d cores: using %d", n, source, cores, cores)
        return cores
    return n


class Pool:
    """A persistent pthread pool in C of at most as many threads as cores (`cap_threads`); freed with this
    object."""

    def __init__(self, n_threads: int) -> None:
        if n_threads < 1:
            raise ValueError(f"thread count {n_threads} must be at least 1")
        n_threads = cap_threads(n_threads)
        self.ptr = lib.pgc_pool_new(n_threads)
        if self.ptr == ffi.NULL:
            raise ComputeError("cpu: could not create the thread pool")
        self.n_threads = int(lib.pgc_pool_n_threads(self.ptr))
        self._fin = weakref.finalize(self, lib.pgc_pool_free, self.ptr)
        self._failed = ffi.new("int *")

    def run(self, ptr: CData, n: int, stamps: CData | None = None) -> tuple[int, int]:
        """Run n descriptors; (error code, failing descriptor index). stamps: profiling, an int64 cffi array of
        2 * n * n_threads entries for each descriptor's start and end per thread (`pyggml_cpu.profiling.Stamps`),
        or None (no clock is read)."""
        if not self._fin.alive:
            raise ComputeError("cpu: the backend's thread pool was freed (backend used after free)")
        rc = lib.pgc_graph_compute(self.ptr, ptr, n, self._failed, ffi.NULL if stamps is None else stamps)
        return int(rc), int(self._failed[0])

    def free(self) -> None:
        self._fin()


def _check_block_type(t: GGMLType, ne0: int) -> int:
    if not t.traits.is_quantized:
        raise UnsupportedTypeError(f"{t} is not a block type")
    return row_size(t, ne0)


def quantize(values: npt.ArrayLike, t: GGMLType) -> npt.NDArray[np.uint8]:
    """Rows of float values (last axis = row) -> ggml blocks of type t, by the C kernels."""
    x = np.ascontiguousarray(values, dtype=np.float32)
    ne0 = x.shape[-1]
    nrows = x.size // max(ne0, 1)
    rs = _check_block_type(t, ne0)
    out = np.empty(nrows * rs, dtype=np.uint8)
    rc = lib.pgc_quantize_rows(int(t), ffi.from_buffer("float[]", x), ffi.from_buffer(out), nrows, ne0)
    if rc:
        raise UnsupportedTypeError(f"cpu kernels cannot quantise to {t}")
    return out


def dequantize(data: npt.NDArray[np.uint8], t: GGMLType, ne0: int) -> npt.NDArray[np.float32]:
    """ggml blocks of type t (rows of ne0 elements) -> float32 rows, by the C kernels."""
    rs = _check_block_type(t, ne0)
    raw = np.ascontiguousarray(data, dtype=np.uint8)
    nrows = raw.size // rs
    out = np.empty((nrows, ne0), dtype=np.float32)
    rc = lib.pgc_dequantize_rows(int(t), ffi.from_buffer(raw), ffi.from_buffer("float[]", out), nrows, ne0)
    if rc:
        raise UnsupportedTypeError(f"cpu kernels cannot dequantise {t}")
    return out


def vec_dot(t: GGMLType, x: npt.NDArray[Any], y: npt.NDArray[Any], n: int) -> float:
    """One row dot product of type t with its partner row (raw bytes), as the matmul kernels compute it."""
    out = ffi.new("float *")
    xb = np.ascontiguousarray(x)
    yb = np.ascontiguousarray(y)
    rc = lib.pgc_vec_dot(int(t), n, ffi.from_buffer(xb), ffi.from_buffer(yb), out)
    if rc:
        raise UnsupportedTypeError(f"cpu kernels have no dot product for {t}")
    return float(out[0])


def read_bandwidth(n_threads: int, size: int = 1 << 30, reps: int = 5,
                   buffer: npt.NDArray[np.uint8] | None = None) -> float:
    """The machine's memory read bandwidth in bytes/s: n_threads threads streaming `size` bytes (far beyond the
    caches) at once, the best of `reps` passes (the limit a memory-bound decode step is measured against). `buffer`:
    stream that array (C-contiguous, its pages written) instead of a new one, for a caller that probes again and
    again (a new gigabyte each time costs more than the pass)."""
    if buffer is None:
        buffer = np.ones(size, dtype=np.uint8)  # written once, so every page is really there
    elif not buffer.flags.c_contiguous:
        raise ValueError("read_bandwidth: the buffer must be C-contiguous")
    size = buffer.nbytes
    bw = float(lib.pgc_read_bandwidth(ffi.from_buffer(buffer), size, n_threads, reps))
    if bw <= 0:
        raise ValueError(f"read_bandwidth: bad arguments (n_threads={n_threads}, size={size}, reps={reps})")
    return bw
