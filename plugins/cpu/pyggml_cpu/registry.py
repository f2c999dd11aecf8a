"""The `cpu` and `blas` registries. Cheap to create: the compiled kernels load when devices are enumerated."""

from __future__ import annotations

from collections.abc import Sequence

from pyggml.backend.extensions import CPU_FEATURES, SET_N_THREADS
from pyggml.backend.protocol import Device, LazyRegistry


class CpuRegistry(LazyRegistry):
    def __init__(self, name: str = "cpu") -> None:
        super().__init__(name)

    def _enumerate(self) -> Sequence[Device]:
        from pyggml_cpu.device import CpuDevice

        return [CpuDevice(self)]

    def get_extension(self, name: str) -> object | None:
        if name == SET_N_THREADS:
            from pyggml_cpu.backend import set_n_threads

            return set_n_threads
        if name == CPU_FEATURES:
            from pyggml_cpu.native import cpu_features

            return cpu_features
        return None


class BlasRegistry(CpuRegistry):
    """OpenBLAS sgemm for big F32/F16/BF16 matmuls, in the host memory the cpu device uses."""

    def __init__(self) -> None:
        super().__init__("blas")

    def _enumerate(self) -> Sequence[Device]:
        from pyggml_cpu.blas import BlasDevice, load_blas

        reason = load_blas()
        return self._unavailable(reason) if reason else [BlasDevice(self)]

    def get_extension(self, name: str) -> object | None:
        return super().get_extension(name) if name == SET_N_THREADS else None
