"""A fake Metal driver (the `pyggml_metal.driver` interface, recording what the host code asks of it) and devices
over it: the host code of buffer.py, device.py and backend.py runs unchanged on it, as on PyObjC's Metal."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pytest

from pyggml_metal import mslgen
from pyggml_metal.driver import Binding, CommandBufferError, KernelLayout, MetalError, Spec, layouts
from pyggml_metal.options import MetalOptions
from pyggml_metal.registry import MetalRegistry


class FakeBuffer:
    def __init__(self, memory: npt.NDArray[np.uint8], log: list[str]) -> None:
        self.memory: npt.NDArray[np.uint8] | None = memory
        self.length = memory.size
        self.log = log

    def contents(self) -> npt.NDArray[np.uint8]:
        if self.memory is None:
            raise MetalError("fake: released buffer used")
        return self.memory

    def release(self) -> None:
        self.log.append(f"release {self.length}")
        self.memory = None


@dataclass(frozen=True)
class FakePipeline:
    layout: KernelLayout
    spec: Spec

    @property
    def threads(self) -> tuple[int, int, int]:
        return self.layout.threads(self.spec)


@dataclass
class FakeEvent:
    value: int = 0

    def signaled_value(self) -> int:
        return self.value

    def wait_host(self, value: int) -> None:
        assert self.value >= value, "fake: host waits for an event value never signalled"


@dataclass
class FakeCommandBuffer:
    device: FakeDevice
    ops: list[tuple[object, ...]] = field(default_factory=list)
    committed: bool = False
    waited: bool = False

    def dispatch(self, pipeline: FakePipeline, bindings: Sequence[Binding | None], groups: tuple[int, int, int]
                 ) -> None:
        assert not self.committed, "fake: encoding into a committed command buffer"
        self.ops.append(("dispatch", pipeline, tuple(bindings), groups))

    def encode_wait(self, event: FakeEvent, value: int) -> None:
        self.ops.append(("wait", event, value))

    def encode_signal(self, event: FakeEvent, value: int) -> None:
        self.ops.append(("signal", event, value))

    def commit(self) -> None:
        assert not self.committed, "fake: command buffer committed twice"
        self.committed = True
        self.device.committed.append(self)
        for op in self.ops:
            if op[0] == "signal":
                ev, value = op[1], op[2]
                assert isinstance(ev, FakeEvent) and isinstance(value, int)
                ev.value = value
        if self.device.on_commit is not None:
            self.device.on_commit(self)

    def wait(self) -> None:
        assert self.committed, "fake: waiting for an uncommitted command buffer"
        self.waited = True
        if self.device.fail_next:
            self.device.fail_next = False
            raise CommandBufferError("fake: GPU fault (kIOGPUCommandBufferCallbackErrorPageFault)")

    def gpu_times(self) -> tuple[int, int]:
        """The fake's device clock: its place in the device's commit order (1 ns a command buffer)."""
        assert self.waited, "fake: GPU times of a command buffer not waited for"
        i = self.device.committed.index(self)
        return i, i + 1


@dataclass
class FakeDevice:
    name: str = "Fake Apple M2"
    unified_memory: bool = True
    max_buffer_length: int = 1 << 30
    working_set_bytes: int = 4 << 30
    log: list[str] = field(default_factory=list)
    buffers: list[FakeBuffer] = field(default_factory=list)
    pipelines: list[FakePipeline] = field(default_factory=list)
    committed: list[FakeCommandBuffer] = field(default_factory=list)
    fail_next: bool = False
    on_commit: object = None

    def allocated_bytes(self) -> int:
        return sum(b.length for b in self.buffers if b.memory is not None)

    def new_buffer(self, size: int) -> FakeBuffer:
        if size > self.max_buffer_length:
            raise MetalError(f"fake: newBufferWithLength({size}) returned nil")
        b = FakeBuffer(np.zeros(size, np.uint8), self.log)
        self.buffers.append(b)
        return b

    def buffer_no_copy(self, memory: npt.NDArray[np.uint8]) -> FakeBuffer:
        b = FakeBuffer(memory, self.log)
        self.log.append(f"no-copy {memory.size}")
        return b

    def pipeline(self, kernel: str, spec: Spec) -> FakePipeline:
        lay = layouts(mslgen.msl_dir(MetalOptions.from_env().cache_dir)).get(kernel)
        if lay is None:
            raise MetalError(f"fake: no kernel {kernel}")
        p = FakePipeline(lay, spec)
        self.pipelines.append(p)
        return p

    def command_buffer(self) -> FakeCommandBuffer:
        return FakeCommandBuffer(self)

    def new_event(self) -> FakeEvent:
        return FakeEvent()


@dataclass
class FakeDriver:
    devices_: list[FakeDevice] = field(default_factory=lambda: [FakeDevice()])
    name: str = "Metal"

    def devices(self) -> list[FakeDevice]:
        return self.devices_

    def add(self, name: str, unified_memory: bool = True) -> FakeDevice:
        d = FakeDevice(name=name, unified_memory=unified_memory)
        self.devices_.append(d)
        return d


@pytest.fixture
def fake_driver(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeDriver]:
    """The registry sees a Mac whose PyObjC driver is the fake (sys.platform and ObjCDriver replaced)."""
    import sys
    import types

    drv = FakeDriver()
    mod = types.ModuleType("pyggml_metal.objc_driver")
    mod.ObjCDriver = lambda options: drv  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pyggml_metal.objc_driver", mod)
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.delenv("PYGGML_METAL_SIM", raising=False)
    monkeypatch.delenv("PYGGML_METAL_DEVICES", raising=False)
    yield drv


@pytest.fixture
def fake_device(fake_driver: FakeDriver):  # type: ignore[no-untyped-def]
    """Metal0 over the fake driver's first device."""
    devs = list(MetalRegistry().devices())
    assert devs, "the fake driver gives one device"
    return devs[0]
