"""One OpenCL device: its facts (from CL queries), its in-order queue, its programs, buffer types and events."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyggml.backend.accounting import AllocationTally
from pyggml.backend.protocol import Backend, BufferType, Bytes, DeviceCaps, DeviceType, Event, Registry
from pyggml.errors import UnsupportedOpError
from pyggml_dialect.backend import DialectDevice
from pyggml_opencl.buffer import OpenCLBufferType, OpenCLHostBuffer, OpenCLHostBufferType
from pyggml_opencl.options import OpenCLOptions
from pyggml_opencl.programs import BUILD_OPTIONS, EXACT_DIV_SQRT, ProgramCache

if TYPE_CHECKING:
    import pyopencl as cl

    from pyggml.tensor import Tensor


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """What the plugin needs to know about a device, read once from CL queries."""

    name: str
    vendor: str
    platform: str
    version: str
    driver_version: str
    cl_type: str
    global_mem: int
    max_alloc: int
    max_work_group: int
    local_mem: int
    alignment: int
    compute_units: int
    fp16: bool
    fp64: bool
    subgroups: bool
    unified_memory: bool
    exact_div_sqrt: bool
    """Float division and sqrt can be compiled correctly rounded (CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT)."""

    @property
    def device_type(self) -> DeviceType:
        if self.cl_type == "GPU":
            return DeviceType.IGPU if self.unified_memory else DeviceType.GPU
        return DeviceType.ACCEL

    @staticmethod
    def query(d: cl.Device) -> DeviceInfo:
        import pyopencl as cl

        ext = d.extensions.split()
        t = d.type
        cl_type = ("GPU" if t & cl.device_type.GPU else "CPU" if t & cl.device_type.CPU
                   else "ACCELERATOR" if t & cl.device_type.ACCELERATOR else "OTHER")
        try:
            unified = bool(d.host_unified_memory)
        except cl.Error:
            unified = cl_type == "CPU"
        return DeviceInfo(
            name=d.name.strip(), vendor=d.vendor.strip(), platform=d.platform.name.strip(), version=d.version,
            driver_version=d.driver_version, cl_type=cl_type, global_mem=int(d.global_mem_size),
            max_alloc=int(d.max_mem_alloc_size), max_work_group=int(d.max_work_group_size),
            local_mem=int(d.local_mem_size), alignment=max(int(d.mem_base_addr_align) // 8, 64),
            compute_units=int(d.max_compute_units), fp16="cl_khr_fp16" in ext,
            fp64="cl_khr_fp64" in ext or bool(getattr(d, "double_fp_config", 0)),
            subgroups="cl_khr_subgroups" in ext or "cl_intel_subgroups" in ext, unified_memory=unified,
            exact_div_sqrt=bool(int(d.single_fp_config) & int(cl.device_fp_config.CORRECTLY_ROUNDED_DIVIDE_SQRT)),
        )


class OpenCLEvent(Event):
    """A marker in a device queue; other queues of the same context wait on it device-side."""

    def __init__(self, dev: OpenCLDevice) -> None:
        self.dev = dev
        self.cl_event: cl.Event | None = None

    def record(self, backend: Backend) -> None:
        import pyopencl as cl

        self.cl_event = cl.enqueue_marker(self.dev.queue if not isinstance(backend.device, OpenCLDevice)
                                          else backend.device.queue)

    def synchronize(self) -> None:
        if self.cl_event is not None:
            self.cl_event.wait()


class OpenCLDevice(DialectDevice):
    def __init__(self, reg: Registry, ctx: cl.Context, cl_device: cl.Device, name: str,
                 options: OpenCLOptions) -> None:
        import pyopencl as cl

        info = DeviceInfo.query(cl_device)
        unified = info.unified_memory
        super().__init__(reg, name, info.device_type,
                         DeviceCaps(async_ops=True, host_buffer=unified, buffer_from_host_ptr=unified, events=True))
        self.ctx = ctx
        self.cl_device = cl_device
        self.info = info
        self._options = options
        self.queue: cl.CommandQueue = cl.CommandQueue(ctx, cl_device)
        """The device's one in-order queue: buffer transfers and every backend of the device use it."""
        build = f"{BUILD_OPTIONS} {EXACT_DIV_SQRT}" if self.info.exact_div_sqrt else BUILD_OPTIONS
        self.programs = ProgramCache(ctx, cl_device, name, (("PYGGML_FP64", str(int(self.info.fp64))),), build,
                                     cache_dir=options.cache_dir)
        self._buft = OpenCLBufferType(self)
        self._host_buft = OpenCLHostBufferType(self) if self.info.unified_memory else None
        self.allocations = AllocationTally()
        """Bytes this plugin's live buffers hold: `memory()` reports the rest as free."""

    # ---- identity and facts -----------------------------------------------------------------------------------

    def options(self) -> OpenCLOptions:
        return self._options

    @property
    def description(self) -> str:
        return f"{self.info.name} ({self.info.platform})"

    def memory(self) -> tuple[int, int]:
        return self.allocations.memory(self.info.global_mem)

    def details(self) -> dict[str, str]:
        i = self.info
        return {
            "cl_device": i.name, "vendor": i.vendor, "platform": i.platform, "cl_type": i.cl_type,
            "version": i.version, "driver_version": i.driver_version, "max_alloc": str(i.max_alloc),
            "max_work_group": str(i.max_work_group), "local_mem": str(i.local_mem),
            "compute_units": str(i.compute_units), "fp16": str(i.fp16), "fp64": str(i.fp64),
            "subgroups": str(i.subgroups), "unified_memory": str(i.unified_memory),
            "exact_div_sqrt": str(i.exact_div_sqrt),
        }

    # ---- buffers ----------------------------------------------------------------------------------------------

    def buffer_type(self) -> BufferType:
        return self._buft

    def host_buffer_type(self) -> BufferType | None:
        return self._host_buft

    def buffer_from_host_ptr(self, array: Bytes, max_tensor_size: int) -> OpenCLHostBuffer:
        if self._host_buft is None:
            raise UnsupportedOpError(f"{self.name}: device memory is not shared with the host")
        return self._host_buft.wrap(array)

    def supports_buft(self, buft: BufferType) -> bool:
        return buft is self._buft or (buft is self._host_buft and buft is not None)

    # ---- ops, backends, events ------------------------------------------------------------------------------

    def supports_op(self, op: Tensor) -> bool:
        from pyggml_opencl.op_table import TABLE

        return TABLE.supports(op)

    def offload_op(self, op: Tensor) -> bool:
        from pyggml.ops.base import Op

        return op.op in (Op.MUL_MAT, Op.MUL_MAT_ID) and op.ne[1] >= 32

    def new_backend(self) -> Backend:
        from pyggml_opencl.backend import OpenCLBackend

        return OpenCLBackend(self)

    def event_new(self) -> Event:
        return OpenCLEvent(self)
