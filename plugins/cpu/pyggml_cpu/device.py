"""The cpu device (its backend is in backend.py). Memory is core's host memory (shared with the numpy and blas
backends); a buffer can also wrap an existing mapping (a GGUF file's weights, without copying)."""

from __future__ import annotations

import logging
import os
from typing import cast

import numpy as np

from pyggml.backend.host import HostBuffer, HostBufferType, MappedFile
from pyggml.backend.protocol import Backend, BackendParams, BufferType, Bytes, Device, DeviceCaps, DeviceType, Registry
from pyggml.backend.sysinfo import cpu_model
from pyggml.errors import AllocationError
from pyggml.tensor import Tensor
from pyggml_cpu import native
from pyggml_cpu.backend import CpuBackend
from pyggml_cpu.op_table import TABLE
from pyggml_cpu.options import CpuOptions, available_cores
from pyggml_cpu.repack import RepackBufferType

log = logging.getLogger(__name__)


def map_file(buft: HostBufferType, path: str, offset: int = 0, size: int | None = None) -> HostBuffer:
    """A host buffer over a private (copy-on-write) memory map of `path`: tensors placed in it read the file's
    bytes without a copy, as llama.cpp's mmap loading does. The file stays open: a compute or read over the buffer
    raises AllocationError once the file is shorter than the mapped range (`MappedFile`), where reading the
    mapping would kill the process with SIGBUS."""
    try:
        with open(path, "rb") as f:
            mm = np.memmap(f, dtype=np.uint8, mode="c", offset=offset, shape=size)
            watch = MappedFile(path, os.dup(f.fileno()), offset + mm.size)
    except (OSError, ValueError) as e:
        raise AllocationError(f"cannot map {path!r} (offset {offset}, size {size}): {e}") from e
    return buft.wrap(cast(Bytes, mm.reshape(-1)), guard=watch.check)


class CpuDevice(Device):
    def __init__(self, reg: Registry, options: CpuOptions, name: str = "cpu",
                 type: DeviceType = DeviceType.CPU) -> None:
        super().__init__(reg, name, type, DeviceCaps(host_buffer=True, buffer_from_host_ptr=True))
        self._options = options
        self._buft = HostBufferType(name, self)
        self._repack = RepackBufferType(self)

    def options(self) -> CpuOptions:
        return self._options

    @property
    def description(self) -> str:
        return cpu_model()

    def memory(self) -> tuple[int, int]:
        from pyggml.backend.sysinfo import host_memory

        return host_memory()

    def details(self) -> dict[str, str]:
        feats = [k for k, v in native.cpu_features().items() if v]
        return {"features": " ".join(feats) or "none", "kernels": native.simd_level(),
                "threads": str(min(self._options.n_threads, available_cores()))}

    def init_backend(self, params: BackendParams = None) -> Backend:
        """A backend with the device's thread count, or the one `params` gives (`CpuOptions.n_threads`: "4",
        "n_threads=4", {"n_threads": 4}); BackendParamsError names any other option or a bad count."""
        return CpuBackend(self, self._options.with_params(params, self.name).n_threads)

    def buffer_type(self) -> BufferType:
        return self._buft

    def host_buffer_type(self) -> BufferType:
        return self._buft

    def extra_buffer_types(self) -> list[BufferType]:
        return [self._repack]

    def buffer_from_host_ptr(self, array: Bytes, max_tensor_size: int) -> HostBuffer:
        return self._buft.wrap(array)

    def map_file(self, path: str, offset: int = 0, size: int | None = None) -> HostBuffer:
        return map_file(self._buft, path, offset, size)

    def supports_op(self, op: Tensor) -> bool:
        return TABLE.supports(op)
