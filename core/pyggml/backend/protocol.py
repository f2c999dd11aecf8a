"""The backend protocol: Registry -> Device -> BufferType -> Buffer, plus Backend (a stream) and Event.

Every device driver implements these classes. Abstract methods are required; every other method has a working
default, and optional abilities are announced by `DeviceCaps` flags (never probed with hasattr). Extensions that go
beyond the protocol are reached through `Registry.get_extension(NAME)` with the names in
`pyggml.backend.extensions`.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from typing import TYPE_CHECKING, ClassVar, Final, Generic, TypeAlias, TypeVar, cast

import numpy as np
import numpy.typing as npt

from pyggml.backend.options import NoOptions, Options
from pyggml.errors import AllocationError, BackendParamsError, ComputeError, UnsupportedOpError
from pyggml.serial import new_serial

if TYPE_CHECKING:
    from pyggml.dlpack import DLPackMemory
    from pyggml.graph import Graph
    from pyggml.profile.sink import ProfileSink
    from pyggml.tensor import Tensor
    from pyggml.types import GGMLType

API_VERSION = 1
"""The backend API this core implements. A plugin declares the version it was written for as the constant
`PYGGML_API_VERSION` of its entry-point module (a literal, not this name); the loader refuses any other."""
Bytes = npt.NDArray[np.uint8]
"""Raw memory as the protocol moves it: a 1-D numpy uint8 array (never `bytes`)."""
BackendParams: TypeAlias = str | Mapping[str, object] | Options | None
"""What `Device.init_backend` takes: None or "" (the device's options), text "name=value,...", a mapping of option
names to text or typed values, or an object of the device's options group (`pyggml.backend.options`)."""
DEFAULT_PRIORITY = 0
"""`Registry.priority` of a plugin with no preference: the default device is then chosen by device type, as ggml's
`ggml_backend_init_best` chooses (`pyggml.backend.choice`)."""
FALLBACK_PRIORITY = -100
"""The priority of a device that should be the default only where nothing else can run: the numpy reference, a
CPU-emulated GPU (Vulkan's llvmpipe, Metal's emulator)."""

if TYPE_CHECKING:  # the default (PEP 696) is the type checker's: Python 3.11's TypeVar takes none
    from typing_extensions import TypeVar as DefaultTypeVar

    O = DefaultTypeVar("O", bound=Options, covariant=True, default=Options)
else:
    O = TypeVar("O", bound=Options, covariant=True)
"""A registry's options group. `Registry` alone stands for `Registry[Options]` (any registry: covariant)."""


class BufferUsage(IntEnum):
    """What a buffer holds (`Buffer.usage`): an op reading a tensor of a WEIGHTS buffer runs, as a rule, on the
    scheduler backend that can use that buffer (pass 1)."""

    ANY = 0
    WEIGHTS = 1
    COMPUTE = 2


class DeviceType(Enum):
    """The kind of device; the scheduler's last backend (the fallback) must be on a CPU device."""

    CPU = "cpu"
    GPU = "gpu"
    IGPU = "igpu"
    ACCEL = "accel"
    META = "meta"


@dataclass(frozen=True, slots=True)
class DeviceCaps:
    """Optional abilities a device announces (they are never probed with hasattr)."""

    async_ops: bool = False
    """set/get/copy_tensor_async really overlap with compute."""
    host_buffer: bool = False
    """`host_buffer_type()` returns a pinned host buffer type."""
    buffer_from_host_ptr: bool = False
    """`buffer_from_host_ptr()` wraps existing host memory (e.g. an mmap) without copying."""
    events: bool = False
    """`event_new()` gives events that really order work between streams."""
    checks_indices: bool = True
    """An id out of range (GET_ROWS, SET_ROWS, MUL_MAT_ID) makes the compute raise ComputeError, and the device
    stays usable. False where that cannot be reported (ggml's RPC protocol has no error reply): such a device must
    only be given ids known to be in range."""


@dataclass(frozen=True, slots=True)
class DeviceProps:
    """What `Device.props()` reports (`pyggml devices` shows it)."""

    name: str
    description: str
    type: DeviceType
    memory_free: int
    memory_total: int
    caps: DeviceCaps
    device_id: str | None = None
    details: dict[str, str] = field(default_factory=dict)
    """Driver facts worth showing (features, driver version, limits)."""


class Registry(ABC, Generic[O]):
    """A plugin's entry: cheap to create; touches no driver until `devices()` is called. Generic in its options
    group `O`, the class it names in `options_type` (`options()` returns one); its name is the class attribute
    `name`, or the first argument of `Registry.__init__`. So a plugin's registry needs no `__init__`:
    `class MyRegistry(LazyRegistry[MyOptions]): name = "My"; options_type = MyOptions`, made as `MyRegistry()` or,
    with its options given in code, `MyRegistry(options=MyOptions(...))`."""

    name: str
    """The registry's name, unique among the loaded registries (its devices are named after it)."""
    options_type: ClassVar[type[Options]] = NoOptions
    """The group of options this registry and its devices take, the class of `O` (`pyggml.backend.options`; none
    by default)."""

    def __init__(self, name: str | None = None, options: O | None = None) -> None:
        if name is not None:
            self.name = name
        if not isinstance(getattr(self, "name", None), str):
            raise TypeError(f"{type(self).__name__}: a registry's name is text, its class attribute `name` or the "
                            f"first argument (options go as options=), got {getattr(self, 'name', None)!r}")
        self._options = None if options is None else self._narrow(options)
        self._options_lock = threading.Lock()

    def options(self) -> O:
        """(optional) This registry's options (an `options_type`): the object it was made with, else read from the
        environment on the first call (at the latest when its devices are enumerated; OptionError names a variable
        whose value does not parse), the same object from then on. Its devices and their backends are given it."""
        with self._options_lock:
            if self._options is None:
                self._options = self._narrow(self.options_type.from_env())
            return self._options

    def _narrow(self, options: Options) -> O:
        """`options` as this registry's group; TypeError when it is another (`Options.narrow`)."""
        return cast(O, self.options_type.narrow(options))

    @abstractmethod
    def devices(self) -> Sequence[Device]:
        """The devices this registry can drive (enumerated lazily, cached); empty without hardware."""

    def unavailable_reason(self) -> str | None:
        """Why `devices()` is empty (no driver, no ICD ...), or None."""
        return None

    def get_extension(self, name: str) -> object | None:
        """A typed extension (see pyggml.backend.extensions) or None when not provided."""
        return None

    @property
    def priority(self) -> int:
        """(optional) How strongly this plugin's devices want to be the default device (`default_device()`,
        `init_best()`), as a JAX plugin's priority: the highest wins before device type is looked at.
        `DEFAULT_PRIORITY` (0): no preference, ggml's order by device type decides; negative: only where nothing
        else is (`FALLBACK_PRIORITY`)."""
        return DEFAULT_PRIORITY

    def __repr__(self) -> str:
        return f"<Registry {self.name}>"


class LazyRegistry(Registry[O]):
    """A registry whose devices are looked for once, on the first `devices()` or `unavailable_reason()` call (under
    a lock, so two threads do not both ask the driver). A subclass implements `_enumerate()`; where it finds no
    device it returns `self._unavailable(reason)`, which `unavailable_reason()` then reports. An exception in
    `_enumerate()` leaves nothing cached: the next call asks again."""

    def __init__(self, name: str | None = None, options: O | None = None) -> None:
        super().__init__(name, options)
        self._devices: list[Device] | None = None
        self._reason: str | None = None
        self._lock = threading.Lock()

    @abstractmethod
    def _enumerate(self) -> Sequence[Device]:
        """Talk to the driver and return the devices (called once)."""

    def _unavailable(self, reason: str) -> list[Device]:
        """No device, and why: the value `_enumerate()` returns when it finds none."""
        self._reason = reason
        return []

    def devices(self) -> Sequence[Device]:
        with self._lock:
            if self._devices is None:
                self._devices = list(self._enumerate())
            return self._devices

    def unavailable_reason(self) -> str | None:
        self.devices()
        return self._reason


class Device(ABC):
    """One device of a registry. What it is does not change while it exists: a subclass passes its registry, name,
    type and caps (default: all off) to `Device.__init__`, which keeps them as the final attributes `reg`, `name`,
    `type` and `caps`."""

    def __init__(self, reg: Registry, name: str, type: DeviceType, caps: DeviceCaps = DeviceCaps()) -> None:
        self.reg: Final = reg
        self.name: Final = name
        self.type: Final = type
        self.caps: Final = caps

    @property
    def description(self) -> str:
        return self.name

    @property
    def priority(self) -> int:
        """(optional) This device's priority for the default device: its registry's (`Registry.priority`) unless
        the device knows better (a CPU-emulated GPU returns `FALLBACK_PRIORITY`)."""
        return self.reg.priority

    @abstractmethod
    def memory(self) -> tuple[int, int]:
        """(free, total) bytes."""

    def props(self) -> DeviceProps:
        free, total = self.memory()
        return DeviceProps(self.name, self.description, self.type, free, total, self.caps, details=self.details())

    def details(self) -> dict[str, str]:
        return {}

    def options(self) -> Options:
        """(optional) The options this device was made with: by default its registry's (`Registry.options()`)."""
        return self.reg.options()

    def init_backend(self, params: BackendParams = None) -> Backend:
        """A new backend (stream) on this device. `params` (`BackendParams`) sets the per-backend options of the
        device's options group over the device's own, checked by `Options.with_params`: an unknown option, one fixed
        when the devices were enumerated or a bad value is a BackendParamsError naming the device and the option.
        This default serves a device whose backends take no options: it checks `params`, then returns
        `new_backend()`. A device with per-backend options overrides it and gives its backend
        `self.options().with_params(params, self.name)`."""
        if self.options().with_params(params, self.name) != self.options():
            raise BackendParamsError(f"{self.name}: {type(self).__name__} declares per-backend options but does not "
                                     f"override init_backend, so it cannot apply {params!r}")
        return self.new_backend()

    def new_backend(self) -> Backend:
        """A new backend with the defaults: what a device whose backends take no options implements (callers use
        `init_backend`). A device that overrides `init_backend` need not."""
        raise NotImplementedError(f"{self.name}: {type(self).__name__} implements neither new_backend() nor "
                                  "init_backend()")

    @abstractmethod
    def buffer_type(self) -> BufferType:
        """The buffer type of this device's own memory (the same object on every call)."""

    def host_buffer_type(self) -> BufferType | None:
        """(optional, caps.host_buffer) a host buffer type fast to copy from/to this device."""
        return None

    def extra_buffer_types(self) -> list[BufferType]:
        """(optional) buffer types keeping matmul weights in a layout of this device's own (ggml's extra buffer
        types, such as the cpu device's cpu_repack). A loader places a weight that only MUL_MAT reads, as its
        matrix, in the first whose `takes_weight` accepts it; [] by default."""
        return []

    def buffer_from_host_ptr(self, array: Bytes, max_tensor_size: int) -> Buffer:
        """(optional, caps.buffer_from_host_ptr) a buffer over existing host memory, no copy."""
        raise UnsupportedOpError(f"device {self.name} cannot wrap host memory")

    def buffer_from_dlpack(self, memory: DLPackMemory, size: int) -> Buffer:
        """(optional) a buffer over `size` bytes of another library's memory (a DLPack import,
        `pyggml.dlpack.buffer_from_dlpack`), used in place and holding `memory.owner`; DLPackError when this device
        cannot use that memory in place (the import then copies, where it may). The default takes host memory on a
        device with `caps.buffer_from_host_ptr`; a GPU whose memory other libraries address (CUDA) overrides it."""
        from pyggml.dlpack import host_array
        from pyggml.errors import DLPackError

        if not (memory.host and self.caps.buffer_from_host_ptr):
            raise DLPackError(f"device {self.name} cannot use memory on DLPack device {memory.device} in place")
        try:
            return self.buffer_from_host_ptr(host_array(memory, size), size)
        except UnsupportedOpError as e:
            raise DLPackError(str(e)) from e

    @abstractmethod
    def supports_op(self, op: Tensor) -> bool:
        """Whether this device can compute node `op` (its op, types, shapes, layouts) correctly."""

    def supports_buft(self, buft: BufferType) -> bool:
        """Whether this device's backends can read and write tensors in buffers of `buft`."""
        return buft.device is self or (self.type is DeviceType.CPU and buft.is_host)

    def offload_op(self, op: Tensor) -> bool:
        """Whether an op whose weights live in host memory is worth running here (scheduler pass 1)."""
        return False

    def event_new(self) -> Event:
        """(optional, caps.events) a new event; the default orders work by synchronising."""
        return SyncEvent()

    def __repr__(self) -> str:
        return f"<Device {self.name}: {self.description}>"


class BufferType(ABC):
    """An allocator of buffers. Its name and device (None: no device's own) are fixed when it is made: a subclass
    passes them to `BufferType.__init__`."""

    def __init__(self, name: str, device: Device | None = None) -> None:
        self._name = name
        self._device = device

    @property
    def name(self) -> str:
        return self._name

    @property
    def device(self) -> Device | None:
        return self._device

    @property
    def alignment(self) -> int:
        return 32

    @property
    def max_size(self) -> int:
        return 1 << 62

    @property
    def is_host(self) -> bool:
        """Buffers are plain host memory that numpy (and C) can address directly."""
        return False

    @property
    def concurrent_set_tensor(self) -> bool:
        """(optional) `set_tensor` of different tensors of one buffer may run at once from several threads (a
        model's weights are then loaded by several threads: `pyggml.gguf.load_weights`). Default False."""
        return False

    def alloc_size(self, tensor: Tensor) -> int:
        return tensor.nbytes()

    def takes_weight(self, type: GGMLType, ne: Sequence[int]) -> bool:
        """For an extra buffer type (`Device.extra_buffer_types`): whether a matmul weight of this type and shape
        gains from it."""
        return False

    @abstractmethod
    def alloc_buffer(self, size: int) -> Buffer:
        """A new buffer of `size` bytes (0 allowed); AllocationError naming the buffer type and size on failure."""

    def __repr__(self) -> str:
        return f"<BufferType {self.name}>"


D = TypeVar("D", bound=Device)


class DeviceBufferType(BufferType, Generic[D]):
    """A buffer type of one plugin device: named after it (plus the class's `suffix`, e.g. "_Host" for the device's
    host-visible kind), the device as the plugin's own class in `dev`. The plugin gives the alignment (a class
    attribute, `alignment = 256`, where it is the driver's constant; a property where the device decides), the
    limit and the allocation."""

    suffix = ""

    def __init__(self, dev: D) -> None:
        super().__init__(dev.name + self.suffix, dev)
        self.dev = dev


class Buffer(ABC):
    """A range of device memory. Byte I/O is abstract; the tensor-level methods check bounds once, here."""

    def __init__(self, buft: BufferType, size: int) -> None:
        self.buft = buft
        self.size = size
        self.usage = BufferUsage.ANY
        self.serial = new_serial()
        """Never reused in this process (`pyggml.serial`): plans key on it, not on `id()`, so a buffer made after
        this one was freed and collected is never taken for it."""

    # -- raw bytes (required) --
    @abstractmethod
    def write(self, offset: int, data: Bytes) -> None:
        """Copy the 1-D uint8 array `data` to bytes [offset, offset + data.size) of the buffer."""

    @abstractmethod
    def read(self, offset: int, size: int) -> Bytes:
        """A new 1-D uint8 array holding bytes [offset, offset + size) of the buffer."""

    def fill(self, offset: int, size: int, value: int) -> None:
        self.write(offset, np.full(size, value, dtype=np.uint8))

    def copy_from(self, src: Buffer, src_offset: int, dst_offset: int, size: int) -> bool:
        """(optional) device-side copy from another buffer; False means 'go through the host'."""
        return False

    def write_from_host(self, src: Buffer, src_offset: int, dst_offset: int, size: int) -> bool:
        """A `copy_from` for a source in host memory: writes straight from its `host_array()` (no staging read);
        False when src has none."""
        host = src.host_array()
        if host is None:
            return False
        self.write(dst_offset, host[src_offset : src_offset + size])
        return True

    def host_array(self) -> Bytes | None:
        """For host buffers: the whole buffer as a writable uint8 array (zero copy); else None."""
        return None

    def dlpack_memory(self, stream: int | None = None) -> DLPackMemory:
        """(optional) The buffer's memory from byte 0 as DLPack exports it (`Tensor.__dlpack__`), ready for work on
        the consumer's `stream` (as `__dlpack__` receives it; None for host memory), holding what keeps it valid.
        The default exports `host_array()` as host memory (kDLCPU) and raises DLPackError for a buffer without one;
        a device whose memory another library can address overrides it. AllocationError after `free()`."""
        from pyggml.dlpack import host_memory
        from pyggml.errors import DLPackError

        host = self.host_array()
        if host is None:
            raise DLPackError(f"{self.buft.name}: the memory of this buffer is not host memory, and its device does "
                              "not export it through DLPack")
        return host_memory(host, self)

    def init_tensor(self, tensor: Tensor) -> None:
        """(optional) called when a tensor (or view) is placed in this buffer."""

    def free(self) -> None:
        """(optional) release the memory now rather than when garbage collected."""

    def check_span(self, offset: int, size: int, what: str = "bytes") -> None:
        """AllocationError naming the buffer type when bytes [offset, offset + size) leave the buffer (for `write`,
        `read`, `fill` and `copy_from` of raw bytes; `what` says which bytes)."""
        if offset < 0 or size < 0 or offset + size > self.size:
            raise AllocationError(f"{self.buft.name}: {what} [{offset}, {offset + size}) are outside the buffer of "
                                  f"{self.size} bytes")

    # -- tensor level (derived) --
    def checked_offset(self, tensor: Tensor, offset: int, size: int) -> int:
        """Where bytes [offset, offset + size) of `tensor` start in this buffer, checked: the tensor is in this
        buffer and the range inside both (AllocationError otherwise). What the tensor-level methods below do first,
        and what a buffer or backend that reaches a tensor's bytes another way (a staged or repacked upload) calls."""
        start = tensor.offset + offset
        if tensor.buffer is not self:
            raise AllocationError(f"tensor '{tensor.name}' is not in buffer {self!r}")
        if offset < 0 or size < 0 or offset + size > tensor.nbytes() or start + size > self.size:
            raise AllocationError(
                f"tensor '{tensor.name}' ({tensor.nbytes()} bytes at {tensor.offset}): range "
                f"[{offset}, {offset + size}) is outside the tensor or buffer of {self.size} bytes"
            )
        return start

    def set_tensor(self, tensor: Tensor, data: Bytes | bytes, offset: int = 0) -> None:
        arr = np.frombuffer(data, dtype=np.uint8) if isinstance(data, bytes | bytearray) else data.view(np.uint8)
        arr = arr.reshape(-1)
        self.write(self.checked_offset(tensor, offset, arr.size), arr)
        tensor.mark_written()

    def get_tensor(self, tensor: Tensor, offset: int = 0, size: int | None = None) -> Bytes:
        n = tensor.nbytes() - offset if size is None else size
        return self.read(self.checked_offset(tensor, offset, n), n)

    def memset_tensor(self, tensor: Tensor, value: int, offset: int = 0, size: int | None = None) -> None:
        n = tensor.nbytes() - offset if size is None else size
        self.fill(self.checked_offset(tensor, offset, n), n, value)
        tensor.mark_written()

    def clear(self, value: int = 0) -> None:
        self.fill(0, self.size, value)

    def __repr__(self) -> str:
        return f"<Buffer {self.buft.name} {self.size} bytes>"


class Event(ABC):
    """A point in a backend's stream of work that other streams (or the host) can wait for."""

    @abstractmethod
    def record(self, backend: Backend) -> None:
        """Mark the current end of `backend`'s queued work."""

    @abstractmethod
    def synchronize(self) -> None:
        """Wait on the host until the recorded work is done."""


class SyncEvent(Event):
    """Event of a synchronous backend: recording waits for the backend, so the event is always complete."""

    def record(self, backend: Backend) -> None:
        backend.synchronize()

    def synchronize(self) -> None:
        pass


class Backend(ABC):
    """A stream of work on one device."""

    def __init__(self, device: Device) -> None:
        self.device = device

    @property
    def name(self) -> str:
        return self.device.name

    @abstractmethod
    def graph_compute(self, graph: Graph) -> None:
        """Compute every node of `graph` that has the COMPUTE flag; all tensors are allocated. Raises
        ComputeError naming the node on failure; the backend stays usable."""

    def graph_compute_async(self, graph: Graph) -> None:
        self.graph_compute(graph)

    def compute_profiled(self, graph: Graph, sink: ProfileSink) -> None:
        """(optional) Compute `graph`, wait for it, and report its times to `sink` (`pyggml.profile`,
        docs/profiling.md). A backend that can time its nodes reports each (`sink.nodes`); this default times the
        whole graph on the host (`sink.graph`, which warns with ProfileWarning once per backend). Profiling costs
        nothing when off: `graph_compute` never looks for a sink."""
        from pyggml.profile.sink import now_ns

        t0 = now_ns()
        self.graph_compute(graph)
        self.synchronize()
        sink.graph(self.name, graph, t0, now_ns())

    def supports_op(self, op: Tensor) -> bool:
        return self.device.supports_op(op)

    def alloc_deps(self, nodes: Sequence[Tensor], uses: Callable[[Tensor], int]) -> list[tuple[Tensor, Tensor]]:
        """(optional) Before the scheduler places `nodes` (a split of this backend, the graph's use counts `uses`):
        (src, node) pairs, each src's memory to be kept from the nodes placed up to and including `node`, which
        reads it later than the graph says (a kernel fusing the nodes up to `node` still reads src while it writes
        `node`'s result: `pyggml.backend.op_table.OpTable.alloc_deps`). None by default."""
        return []

    def set_tensor_async(self, tensor: Tensor, data: Bytes, offset: int = 0) -> None:
        tensor.require_buffer("write into it").set_tensor(tensor, data, offset)

    def get_tensor_async(self, tensor: Tensor, offset: int = 0, size: int | None = None) -> Bytes:
        return tensor.require_buffer("read it").get_tensor(tensor, offset, size)

    def cpy_tensor_async(self, src_backend: Backend, src: Tensor, dst: Tensor) -> bool:
        """(optional) copy src (on src_backend) into dst (on this backend) asynchronously; False: not able."""
        return False

    def synchronize(self) -> None:
        """Wait until all queued work of this stream is done."""

    def event_record(self, event: Event) -> None:
        event.record(self)

    def event_wait(self, event: Event) -> None:
        event.synchronize()

    def free(self) -> None:
        """(optional) Release the stream's queues and caches, after waiting for the work queued on it (from any
        thread). Afterwards `graph_compute` raises ComputeError (`freed_error`: "backend used after free"), a
        second free does nothing, and the device gives new backends as before (docs/backend-protocol.md,
        Threads)."""

    def freed_error(self) -> ComputeError:
        """The error of a compute on this backend after its `free()`, worded the same by every backend."""
        return ComputeError(f"{self.name}: the backend was freed (backend used after free); make a new one with "
                            "device.init_backend()")

    def __repr__(self) -> str:
        return f"<Backend {self.name}>"


def tensor_copy(src: Tensor, dst: Tensor) -> None:
    """Copy src's bytes into dst (same layout), device-side when the buffers allow, else through the host."""
    if src.nbytes() != dst.nbytes():
        raise AllocationError(
            f"cannot copy '{src.name}' ({src.nbytes()} bytes) into '{dst.name}' ({dst.nbytes()} bytes)"
        )
    sb, db = src.buffer, dst.buffer
    if sb is None or db is None:
        raise AllocationError(f"tensor copy '{src.name}' -> '{dst.name}': both tensors need a buffer")
    n = src.nbytes()
    if db.copy_from(sb, src.offset, dst.offset, n):
        dst.mark_written()
        return
    db.set_tensor(dst, sb.get_tensor(src))


def synchronized_copy(src_backend: Backend, dst_backend: Backend, src: Tensor, dst: Tensor) -> bool:
    """cpy_tensor_async for a backend whose queue cannot order a copy by itself (Metal, Vulkan): both backends
    finish their queued work, then the bytes move at once (tensor_copy); always True."""
    src_backend.synchronize()
    dst_backend.synchronize()
    tensor_copy(src, dst)
    return True
