"""Fake devices that make the scheduler's (and the meta device's) job real without hardware.

`fake_device(name, ...)` makes a device that runs the numpy reference kernels but
- supports only a chosen subset of ops (`ops=` / `exclude=`), so fallbacks and splits happen;
- keeps its data in private "device" memory (`memory="device"`, the default) that the host and other devices cannot
  address: kernels see it only while this device computes, so a tensor the scheduler forgot to copy fails loudly;
  or in a host buffer type of its own (`memory="host"`);
- refuses, with a ComputeError, any node whose tensors live in a buffer it cannot use or whose op it does not
  support (the scheduler must never hand it one);
- optionally runs asynchronously (`async_ops=True`): a worker thread executes queued computes and copies in order,
  events really order work between streams, and `gate` can hold the stream to prove overlap.
Every computed node name is appended to `device.computed`. `numpy_device()` / `numpy_backend()`: the reference
on a registry of its own, so buffers and backends are not shared with the hub's. `devices_or_skip(reg, what)`: a
plugin's devices for its tests, or a skip that gives the registry's reason.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager

import numpy as np
import pytest

from pyggml.backend.host import ArrayBuffer, HostBufferType
from pyggml.backend.op_table import FREE_OPS, needs_kernel
from pyggml.backend.protocol import (
    Backend,
    Buffer,
    BufferType,
    Bytes,
    Device,
    DeviceCaps,
    DeviceType,
    Event,
    Registry,
    SyncEvent,
)
from pyggml.errors import ComputeError, PyGGMLError, UnsupportedOpError
from pyggml.graph import Graph
from pyggml.ops.base import Op
from pyggml.reference.backend import NumpyRegistry, compute_node
from pyggml.reference.table import TABLE
from pyggml.tensor import Tensor

_active = threading.local()


@contextmanager
def _computing(device: Device) -> Iterator[None]:
    prev = getattr(_active, "device", None)
    _active.device = device
    try:
        yield
    finally:
        _active.device = prev


class FakeRegistry(Registry):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._devices: list[Device] = []

    def devices(self) -> Sequence[Device]:
        return self._devices


class DeviceBuffer(ArrayBuffer):
    """Private device memory (core's ArrayBuffer: byte I/O goes 'through the driver'); copies go device-side between
    buffers of this device only, and kernels address it only while its device computes on the current thread."""

    def __init__(self, buft: BufferType, size: int) -> None:
        super().__init__(buft, np.zeros(size, dtype=np.uint8))

    def _source_array(self, src: Buffer) -> Bytes | None:
        return src.array if isinstance(src, DeviceBuffer) and src.buft.device is self.buft.device else None

    def host_array(self) -> Bytes | None:
        return self.array if getattr(_active, "device", None) is self.buft.device else None


class DeviceBufferType(BufferType):
    def __init__(self, device: FakeDevice) -> None:
        super().__init__(f"{device.name}_mem", device)

    def alloc_buffer(self, size: int) -> Buffer:
        return DeviceBuffer(self, size)


class FakeDevice(Device):
    def __init__(self, reg: FakeRegistry, name: str, *, ops: Collection[Op] | None = None,
                 exclude: Collection[Op] = (), memory: str = "device", dev_type: DeviceType = DeviceType.GPU,
                 async_ops: bool = False, offload: Collection[Op] = (), reads_host: bool = False) -> None:
        if memory not in ("device", "host"):
            raise ValueError(f"memory must be 'device' or 'host', got {memory!r}")
        super().__init__(reg, name, dev_type, DeviceCaps(async_ops=async_ops, events=async_ops))
        self.ops = None if ops is None else frozenset(ops)
        self.exclude = frozenset(exclude)
        self.offload = frozenset(offload)
        self.async_ops = async_ops
        self.reads_host = reads_host
        self._buft: BufferType = DeviceBufferType(self) if memory == "device" else HostBufferType(f"{name}_host", self)
        self.computed: list[str] = []
        self.fail_on: str | None = None
        """Name of a node whose compute raises ComputeError (failure injection)."""
        self.delay = 0.0
        """Seconds slept after each computed graph (widens race windows of async devices)."""
        self.dry = False
        """Skip checks and kernels (benchmarks time the scheduler alone)."""

    def memory(self) -> tuple[int, int]:
        return (1 << 34, 1 << 34)

    def new_backend(self) -> Backend:
        return AsyncFakeBackend(self) if self.async_ops else FakeBackend(self)

    def buffer_type(self) -> BufferType:
        return self._buft

    def supports_op(self, op: Tensor) -> bool:
        o = op.op
        if o in FREE_OPS:
            return True
        if o in self.exclude or (self.ops is not None and o not in self.ops):
            return False
        return TABLE.supports(op)

    def supports_buft(self, buft: BufferType) -> bool:
        return buft is self._buft or (buft.is_host and (self.type is DeviceType.CPU or self.reads_host))

    def offload_op(self, op: Tensor) -> bool:
        return op.op in self.offload

    def event_new(self) -> Event:
        return FakeEvent() if self.async_ops else SyncEvent()


def devices_or_skip(reg: Registry, what: str) -> list[Device]:
    """The registry's devices, or a pytest skip saying `what` is missing and why (the registry's own reason: no
    driver, no ICD, an environment variable hiding them...), so a machine without the hardware skips, not fails."""
    devs = list(reg.devices())
    if not devs:
        pytest.skip(f"{what}: {reg.unavailable_reason()}")
    return devs


def numpy_device() -> Device:
    """The numpy reference device of a new registry."""
    return NumpyRegistry().devices()[0]


def numpy_backend() -> Backend:
    """A numpy backend on a device (and host buffer type) of its own."""
    return numpy_device().init_backend()


def fake_device(name: str, **kw: object) -> FakeDevice:
    """A FakeDevice in a registry of its own (see FakeDevice for the keywords)."""
    reg = FakeRegistry(name)
    dev = FakeDevice(reg, name, **kw)  # type: ignore[arg-type]
    reg._devices.append(dev)
    return dev


class FakeBackend(Backend):
    device: FakeDevice

    def __init__(self, device: FakeDevice) -> None:
        super().__init__(device)
        self.n_graphs = 0

    def graph_compute(self, graph: Graph) -> None:
        self._run(self._prepare(graph))

    def _prepare(self, graph: Graph) -> list[Tensor]:
        """Check every node now and return those to compute."""
        self.n_graphs += 1
        dev = self.device
        todo: list[Tensor] = []
        if dev.dry:
            return todo
        for node in graph.nodes:
            if not needs_kernel(node):
                continue
            if not dev.supports_op(node):
                raise UnsupportedOpError(f"{dev.name}: node '{node.name}' has op {node.op.name}, not supported here")
            for t in (node, *node.src):
                if t is None:
                    continue
                buf = t.buffer
                if buf is None:
                    raise ComputeError(f"{dev.name}: tensor '{t.name}' of node '{node.name}' is not allocated")
                if not dev.supports_buft(buf.buft):
                    raise ComputeError(f"{dev.name}: tensor '{t.name}' of node '{node.name}' is in buffer type "
                                       f"'{buf.buft.name}', which this device cannot use")
            todo.append(node)
        return todo

    def _run(self, nodes: list[Tensor]) -> None:
        dev = self.device
        with _computing(dev):
            for node in nodes:
                if dev.fail_on is not None and node.name == dev.fail_on:
                    raise ComputeError(f"{dev.name}: injected failure at node '{node.name}'")
                compute_node(node)
                dev.computed.append(node.name)
        if dev.delay:
            time.sleep(dev.delay)


def _mirror(t: Tensor, srcs: tuple[Tensor | None, ...] = ()) -> Tensor:
    m = Tensor(t.type, t.ne, t.nb, op=t.op, params=t.params, src=srcs)
    m.buffer, m.offset, m.flags, m.name = t.buffer, t.offset, t.flags, t.name
    return m


class FakeEvent(Event):
    """Records are numbered; a wait (host or stream) waits for the last record made before the wait was issued,
    as a CUDA event does. Never recorded: complete."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._recorded = 0
        self._reached = 0

    def record(self, backend: Backend) -> None:
        if not isinstance(backend, AsyncFakeBackend):
            backend.synchronize()
            return
        with self._cv:
            self._recorded += 1
            gen = self._recorded
        backend.submit(lambda: self._reach(gen))

    def _reach(self, gen: int) -> None:
        with self._cv:
            self._reached = max(self._reached, gen)
            self._cv.notify_all()

    def waiter(self) -> Callable[[], None]:
        """A wait for the records made so far, to run later (on a stream)."""
        gen = self._recorded
        return lambda: self._wait(gen)

    def _wait(self, gen: int) -> None:
        with self._cv:
            self._cv.wait_for(lambda: self._reached >= gen)

    def synchronize(self) -> None:
        self._wait(self._recorded)


class AsyncFakeBackend(FakeBackend):
    """A stream: a worker thread runs queued work in order. Work is bound to tensor placements when queued (as a
    GPU captures pointers), so later changes to the graph do not affect it. An error in queued work drops the rest
    of the queue and is raised by the next synchronize()."""

    def __init__(self, device: FakeDevice) -> None:
        super().__init__(device)
        self._q: queue.Queue[Callable[[], None]] = queue.Queue()
        self._error: BaseException | None = None
        self.n_async_copies = 0
        self.gate = threading.Event()
        """Cleared: the stream holds queued work (tests use it to show that the host ran ahead)."""
        self.gate.set()
        threading.Thread(target=self._worker, name=f"pyggml-fake-{device.name}", daemon=True).start()

    def _worker(self) -> None:
        while True:
            fn = self._q.get()
            try:
                self.gate.wait()
                if self._error is None:
                    fn()
            except BaseException as e:
                self._error = e
            finally:
                self._q.task_done()

    def submit(self, fn: Callable[[], None]) -> None:
        self._q.put(fn)

    def graph_compute_async(self, graph: Graph) -> None:
        bound = [_mirror(n, tuple(None if s is None else _mirror(s) for s in n.src)) for n in self._prepare(graph)]
        self.submit(lambda: self._run(bound))

    def graph_compute(self, graph: Graph) -> None:
        self.graph_compute_async(graph)
        self.synchronize()

    def synchronize(self) -> None:
        self._q.join()
        err, self._error = self._error, None
        if err is not None:
            if isinstance(err, PyGGMLError):
                raise ComputeError(f"{self.device.name} (queued work): {err}") from err
            raise ComputeError(f"{self.device.name} (queued work) failed: {type(err).__name__}: {err}") from err

    def set_tensor_async(self, tensor: Tensor, data: Bytes, offset: int = 0) -> None:
        buf = tensor.buffer
        if buf is None:
            super().set_tensor_async(tensor, data, offset)
            return
        start, payload = buf.checked_offset(tensor, offset, data.size), np.array(data, dtype=np.uint8).reshape(-1)
        self.submit(lambda: buf.write(start, payload))
        tensor.mark_written()

    def get_tensor_async(self, tensor: Tensor, offset: int = 0, size: int | None = None) -> Bytes:
        self.synchronize()
        return super().get_tensor_async(tensor, offset, size)

    def cpy_tensor_async(self, src_backend: Backend, src: Tensor, dst: Tensor) -> bool:
        """Device to device between async fakes only: the copy runs on the source stream (after the work that
        produced src, before anything that may overwrite it) and this stream waits for it."""
        sb, db = src.buffer, dst.buffer
        if not (isinstance(src_backend, AsyncFakeBackend) and isinstance(sb, DeviceBuffer)
                and isinstance(db, DeviceBuffer)):
            return False
        so, do, n = src.offset, dst.offset, src.nbytes()
        src_backend.submit(lambda: db.write(do, sb.read(so, n)))
        self.n_async_copies += 1
        done = FakeEvent()
        done.record(src_backend)
        self.event_wait(done)
        return True

    def event_wait(self, event: Event) -> None:
        self.submit(event.waiter() if isinstance(event, FakeEvent) else event.synchronize)
