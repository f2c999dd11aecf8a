"""One CUDA device: its facts (read once from the driver), its primary context, buffer types, compiled modules and
events. Every driver call of this plugin runs inside `CudaDevice.active()`, which makes the device's context
current on the calling thread for the call's duration, so several devices work from one thread."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyggml.backend.accounting import AllocationTally
from pyggml.backend.protocol import Backend, BackendParams, Buffer, BufferType, DeviceCaps, DeviceType, Event, Registry
from pyggml.dlpack import DLDevice, DLDeviceType, DLPackMemory
from pyggml.errors import DLPackError
from pyggml_cuda.buffer import ALIGNMENT, CudaBufferType, CudaForeignBuffer, CudaHostBufferType, drv
from pyggml_cuda.compile import KernelBuildError, KernelCache, Toolchain, toolchain
from pyggml_cuda.options import CudaOptions
from pyggml_dialect.backend import DialectDevice

if TYPE_CHECKING:
    from pyggml.tensor import Tensor
    from pyggml_cuda.modules import Modules

log = logging.getLogger(__name__)
MIN_CC = (7, 5)
"""Oldest compute capability served (CUDA 13's nvcc targets sm_75 and newer); dp4a needs 6.1."""


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    name: str
    ordinal: int
    cc: tuple[int, int]
    total_memory: int
    multiprocessors: int
    max_threads_per_block: int
    shared_per_block: int
    pci_bus_id: str
    unified_addressing: bool

    @staticmethod
    def query(d: Any, ordinal: int) -> DeviceInfo:
        cuda = drv()
        a = d.get_attributes()
        attr = cuda.device_attribute
        try:
            bus = str(d.pci_bus_id())
        except cuda.Error:
            bus = "?"
        cc = d.compute_capability()
        return DeviceInfo(
            name=str(d.name()), ordinal=ordinal, cc=(int(cc[0]), int(cc[1])), total_memory=int(d.total_memory()),
            multiprocessors=int(a.get(attr.MULTIPROCESSOR_COUNT, 0)),
            max_threads_per_block=int(a.get(attr.MAX_THREADS_PER_BLOCK, 1024)),
            shared_per_block=int(a.get(attr.MAX_SHARED_MEMORY_PER_BLOCK, 49152)),
            pci_bus_id=bus, unified_addressing=bool(a.get(attr.UNIFIED_ADDRESSING, 1)),
        )

    @property
    def arch(self) -> str:
        return f"{self.cc[0]}{self.cc[1]}"


def toolchain_for(info: DeviceInfo, nvcc: str | None = None) -> Toolchain:
    """nvcc targets for a device: the default set covers 8.x (sm_80 code) and 9.0+ (sm_90 code, compute_90 PTX);
    an older device gets its own machine code added. `nvcc`: `CudaOptions.nvcc`."""
    tc = toolchain(nvcc)
    return tc.with_arch(info.arch) if info.cc < (8, 0) else tc


class CudaEvent(Event):
    """A CUDA event; other streams wait on it on the device (`Backend.event_wait`)."""

    def __init__(self, dev: CudaDevice) -> None:
        self.dev = dev
        with dev.active():
            self.event: Any = drv().Event()
        self.recorded = False

    def record(self, backend: Backend) -> None:
        from pyggml_cuda.backend import CudaBackend

        if not isinstance(backend, CudaBackend):
            backend.synchronize()
            return
        with backend.dev.active():
            self.event.record(backend.stream)
        self.recorded = True

    def synchronize(self) -> None:
        if self.recorded:
            with self.dev.active():
                self.event.synchronize()


class CudaDevice(DialectDevice):
    def __init__(self, reg: Registry, cu_device: Any, ordinal: int, name: str, options: CudaOptions) -> None:
        super().__init__(reg, name, DeviceType.GPU,
                         DeviceCaps(async_ops=True, host_buffer=True, buffer_from_host_ptr=False, events=True))
        self._options = options
        self.cu_device = cu_device
        self.info = DeviceInfo.query(cu_device, ordinal)
        self._ctx: Any = None
        self._lock = threading.RLock()
        self.allocations = AllocationTally()
        """Bytes this plugin's live buffers hold (for `memory()` when the driver cannot say)."""
        self._peers: set[int] = set()
        self._buft = CudaBufferType(self)
        self._host_buft = CudaHostBufferType(self)
        self._modules: Modules | None = None
        self.kernel_cache: KernelCache | None = None
        """Where compiled kernels come from (default: the cache in `CudaOptions.cache_dir`, compiled by its nvcc)."""

    # ---- context -------------------------------------------------------------------------------------------

    @property
    def ctx(self) -> Any:
        """The device's primary context (retained on first use)."""
        with self._lock:
            if self._ctx is None:
                self._ctx = self.cu_device.retain_primary_context()
            return self._ctx

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """Make this device's context current for the enclosed driver calls."""
        ctx = self.ctx
        ctx.push()
        try:
            yield
        finally:
            drv().Context.pop()

    def enable_peer(self, other: CudaDevice) -> bool:
        """Let this device's kernels and copies reach `other`'s memory directly (once per pair); False when the
        devices cannot (copies are then staged by the driver)."""
        key = other.info.ordinal
        if key in self._peers or other is self:
            return True
        cuda = drv()
        if not self.cu_device.can_access_peer(other.cu_device):
            return False
        with self.active():
            try:
                cuda.Context.enable_peer_access(other.ctx)
            except cuda.Error as e:  # already enabled by someone else is fine
                log.debug("%s -> %s peer access: %s", self.name, other.name, e)
        self._peers.add(key)
        return True

    # ---- identity and facts ----------------------------------------------------------------------------------

    def options(self) -> CudaOptions:
        return self._options

    @property
    def description(self) -> str:
        return f"{self.info.name} (sm_{self.info.arch})"

    def memory(self) -> tuple[int, int]:
        cuda = drv()
        try:
            with self.active():
                free, total = cuda.mem_get_info()
            return int(free), int(total)
        except cuda.Error:
            return self.allocations.memory(self.info.total_memory)

    def details(self) -> dict[str, str]:
        i = self.info
        return {"compute_capability": f"{i.cc[0]}.{i.cc[1]}", "multiprocessors": str(i.multiprocessors),
                "pci_bus_id": i.pci_bus_id, "ordinal": str(i.ordinal), "total_memory": str(i.total_memory),
                "shared_per_block": str(i.shared_per_block)}

    # ---- buffers -------------------------------------------------------------------------------------------

    def buffer_type(self) -> BufferType:
        return self._buft

    def host_buffer_type(self) -> BufferType | None:
        return self._host_buft

    def buffer_from_dlpack(self, memory: DLPackMemory, size: int) -> Buffer:
        """CUDA memory of this GPU (another library's, through DLPack: a torch or CuPy tensor) used in place, holding
        the producer's export; memory elsewhere, or not at the buffer type's alignment, raises DLPackError (the
        import then copies)."""
        mine = DLDevice(DLDeviceType.CUDA, self.info.ordinal)
        if memory.device != mine:
            raise DLPackError(f"{self.name} uses in place only the memory of CUDA device {self.info.ordinal} "
                              f"({mine}), not {memory.device}")
        if memory.address % ALIGNMENT:
            raise DLPackError(f"{self.name}: the memory at {memory.address:#x} is not {ALIGNMENT}-byte aligned, as "
                              "the device's kernels expect their tensors")
        return CudaForeignBuffer(self._buft, memory.address, size, memory.owner)

    def supports_buft(self, buft: BufferType) -> bool:
        return buft is self._buft

    # ---- ops, modules, backends, events ------------------------------------------------------------------------

    def supports_op(self, op: Tensor) -> bool:
        from pyggml_cuda.op_table import supports

        return supports(op)

    def offload_op(self, op: Tensor) -> bool:
        from pyggml.ops.base import Op

        return op.op in (Op.MUL_MAT, Op.MUL_MAT_ID) and op.ne[1] >= 32

    @property
    def modules(self) -> Modules:
        """Compiled kernels loaded into this device's context."""
        with self._lock:
            if self._modules is None:
                from pyggml_cuda.modules import Modules

                kc = self.kernel_cache
                if kc is None:
                    opts = self._options
                    try:
                        kc = KernelCache(opts.cache_dir, tc=toolchain_for(self.info, opts.nvcc))
                    except KernelBuildError:  # no nvcc: only what is cached on disk can load
                        kc = KernelCache(opts.cache_dir, nvcc=opts.nvcc)
                self._modules = Modules(self, kc)
            return self._modules

    def init_backend(self, params: BackendParams = None) -> Backend:
        """A backend (stream) with the device's options, `graphs` as `params` say (`CudaOptions`)."""
        from pyggml_cuda.backend import CudaBackend

        return CudaBackend(self, self._options.with_params(params, self.name))

    def event_new(self) -> Event:
        return CudaEvent(self)
