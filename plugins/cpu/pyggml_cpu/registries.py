"""The `cpu` and `blas` registries. Cheap to create: the compiled kernels load when devices are enumerated."""

from __future__ import annotations

from collections.abc import Sequence

from pyggml.backend.extensions import CPU_FEATURES, SET_N_THREADS
from pyggml.backend.protocol import Device, Registry


class CpuRegistry(Registry):
    def __init__(self) -> None:
        self._devices: list[Device] | None = None

    @property
    def name(self) -> str:
        return "cpu"

    def devices(self) -> Sequence[Device]:
        if self._devices is None:
            from pyggml_cpu.device import CpuDevice

            self._devices = [CpuDevice(self)]
        return self._devices

    def get_extension(self, name: str) -> object | None:
        if name == SET_N_THREADS:
            from pyggml_cpu.device import set_n_threads

            return set_n_threads
        if name == CPU_FEATURES:
            from pyggml_cpu.kernels import cpu_features

            return cpu_features
        return None


class BlasRegistry(CpuRegistry):
    """OpenBLAS sgemm for big F32/F16/BF16 matmuls, in the host memory the cpu device uses."""

    def __init__(self) -> None:
        super().__init__()
        self._reason: str | None = None

    @property
    def name(self) -> str:
        return "blas"

    def devices(self) -> Sequence[Device]:
        if self._devices is None:
            from pyggml_cpu.blas import BlasDevice, load_blas

            self._reason = load_blas()
            self._devices = [] if self._reason else [BlasDevice(self)]
        return self._devices

    def unavailable_reason(self) -> str | None:
        return self._reason

    def get_extension(self, name: str) -> object | None:
        return super().get_extension(name) if name == SET_N_THREADS else None
