"""The blas device: MUL_MAT with many columns through OpenBLAS's sgemm (the `scipy-openblas32` wheel, else the
OpenBLAS that numpy ships). It uses host memory like the cpu device, so the scheduler can move big matmuls to
it without copies (its pass 3 'upgrade'), as ggml's BLAS backend."""

from __future__ import annotations

import glob
import logging
import os
from pathlib import Path

from pyggml.backend.protocol import Backend, BufferType, Device, DeviceType, Registry
from pyggml.tensor import Tensor
from pyggml_cpu import native
from pyggml_cpu._pgc import lib
from pyggml_cpu.backend import ExecutorBackend
from pyggml_cpu.device import CpuDevice
from pyggml_cpu.executor import Executor
from pyggml_cpu.op_table import BLAS_TABLE
from pyggml_cpu.options import BlasOptions, available_cores

log = logging.getLogger(__name__)


def _candidates(named: Path | None) -> list[tuple[str, str, str]]:
    """(library path, sgemm symbol, set-threads symbol) in order of preference: `named` (`BlasOptions.lib`) first."""
    out: list[tuple[str, str, str]] = []
    if named is not None:
        out.append((str(named), "cblas_sgemm", "openblas_set_num_threads"))
    try:
        import scipy_openblas32

        for p in glob.glob(os.path.join(scipy_openblas32.get_lib_dir(), "*.so*")):
            out.append((p, "scipy_cblas_sgemm", "scipy_openblas_set_num_threads"))
    except ImportError:
        pass
    try:
        import numpy

        libs = os.path.join(os.path.dirname(os.path.dirname(numpy.__file__)), "numpy.libs")
        for p in glob.glob(os.path.join(libs, "libscipy_openblas64_*.so*")):
            out.append((p, "scipy_cblas_sgemm64_", "scipy_openblas_set_num_threads64_"))
    except ImportError:
        pass
    return out


def load_blas(options: BlasOptions) -> str | None:
    """Load a BLAS library into the kernels (`options.lib` first), with `options.n_threads` threads; None on
    success, else why not."""
    if lib.pgc_blas_loaded():
        return None
    tried = []
    for path, sym, thr in _candidates(options.lib):
        if lib.pgc_blas_load(path.encode(), sym.encode(), thr.encode()) == 0:
            log.debug("blas: using %s (%s)", path, sym)
            lib.pgc_blas_set_threads(native.cap_threads(options.n_threads, "for OpenBLAS"))
            return None
        tried.append(path)
    return ("no OpenBLAS found (pip install scipy-openblas32, or set PYGGML_BLAS_LIB)" if not tried
            else f"no usable sgemm in {', '.join(tried)}")


def set_blas_threads(n: int) -> None:
    lib.pgc_blas_set_threads(int(n))


class BlasDevice(CpuDevice):
    def __init__(self, reg: Registry, options: BlasOptions) -> None:
        super().__init__(reg, options, "blas", DeviceType.ACCEL)

    def options(self) -> BlasOptions:
        return BlasOptions.narrow(super().options())

    @property
    def description(self) -> str:
        return "OpenBLAS sgemm (MUL_MAT of F32/F16/BF16 with many columns)"

    def details(self) -> dict[str, str]:
        return {"threads": str(min(self.options().n_threads, available_cores()))}

    init_backend = Device.init_backend
    """BLAS backends take no options (not the cpu device's n_threads): the protocol's default, which refuses any."""

    def new_backend(self) -> Backend:
        return BlasBackend(self)

    def supports_op(self, op: Tensor) -> bool:
        return BLAS_TABLE.supports(op)

    def supports_buft(self, buft: BufferType) -> bool:
        return buft.is_host

    def extra_buffer_types(self) -> list[BufferType]:
        return []  # sgemm reads ggml's layout only


class BlasBackend(ExecutorBackend):
    """One C thread widens F16/BF16 operands; OpenBLAS's own threads do the product."""

    def __init__(self, device: Device) -> None:
        super().__init__(device, Executor(BLAS_TABLE, "blas", 1))
