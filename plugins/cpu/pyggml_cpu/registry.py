"""The `cpu` and `blas` registries. Cheap to create: the compiled kernels load when devices are enumerated; each
registry's options (`pyggml_cpu.options`) are read from the environment then, once."""

from __future__ import annotations

from collections.abc import Sequence

from pyggml.backend.extensions import CPU_FEATURES, SET_N_THREADS
from pyggml.backend.protocol import Device, LazyRegistry
from pyggml_cpu.options import BlasOptions, CpuOptions


class CpuRegistry(LazyRegistry[CpuOptions]):
    name = "cpu"
    options_type = CpuOptions

    def _enumerate(self) -> Sequence[Device]:
        from pyggml_cpu.device import CpuDevice

        return [CpuDevice(self, self.options())]

    def get_extension(self, name: str) -> object | None:
        if name == SET_N_THREADS:
            from pyggml_cpu.backend import set_n_threads

            return set_n_threads
        if name == CPU_FEATURES:
            from pyggml_cpu.native import cpu_features

            return cpu_features
        return None


class BlasRegistry(LazyRegistry[BlasOptions]):
    """OpenBLAS sgemm for big F32/F16/BF16 matmuls, in the host memory the cpu device uses."""

    name = "blas"
    options_type = BlasOptions

    def _enumerate(self) -> Sequence[Device]:
        from pyggml_cpu.blas import BlasDevice, load_blas

        opts = self.options()
        reason = load_blas(opts)
        return self._unavailable(reason) if reason else [BlasDevice(self, opts)]

    def get_extension(self, name: str) -> object | None:
        if name == SET_N_THREADS:
            from pyggml_cpu.backend import set_n_threads

            return set_n_threads
        return None
