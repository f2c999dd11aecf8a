"""objc_driver.py over a stand-in for PyObjC's `Metal` module (the calls and return shapes PyObjC documents:
selectors with underscores, (result, error) pairs for NSError** arguments, varlist.as_buffer for contents). It
proves the driver's Python runs and calls Metal in a valid order; whether PyObjC and Metal agree is mac_check.sh's."""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

import numpy as np
import pytest

from pyggml import ops
from pyggml.context import Context
from pyggml.graph import build_graph
from pyggml_metal.driver import layouts
from pyggml_metal.mslgen import msl_dir
from pyggml_metal.options import MetalOptions
from pyggml_metal.registry import MetalRegistry
from pyggml_testing.on_device import place_graph


class Log(list[tuple[Any, ...]]):
    pass


class _Contents:
    def __init__(self, mem: bytearray) -> None:
        self.mem = mem

    def as_buffer(self, n: int) -> memoryview:
        return memoryview(self.mem)[:n]


class _Buffer:
    def __init__(self, n: int) -> None:
        self.mem = bytearray(n)

    def contents(self) -> _Contents:
        return _Contents(self.mem)


class _Encoder:
    def __init__(self, log: Log) -> None:
        self.log = log

    def setComputePipelineState_(self, s: Any) -> None:
        self.log.append(("pipeline", s.source_has_constants))

    def setBuffer_offset_atIndex_(self, b: Any, off: int, i: int) -> None:
        assert isinstance(b, _Buffer)
        self.log.append(("buffer", i, off))

    def dispatchThreadgroups_threadsPerThreadgroup_(self, g: tuple[int, ...], t: tuple[int, ...]) -> None:
        assert len(g) == 3 and len(t) == 3
        self.log.append(("dispatch", tuple(g), tuple(t)))

    def endEncoding(self) -> None:
        self.log.append(("end",))


class _CommandBuffer:
    def __init__(self, log: Log) -> None:
        self.log = log
        self.open: _Encoder | None = None
        self.committed = False

    def computeCommandEncoderWithDispatchType_(self, t: int) -> _Encoder:
        assert t == FakeMetal.MTLDispatchTypeSerial
        self.log.append(("encoder",))
        return _Encoder(self.log)

    def encodeSignalEvent_value_(self, e: Any, v: int) -> None:
        self.log.append(("signal", v))
        e.value = v

    def encodeWaitForEvent_value_(self, e: Any, v: int) -> None:
        self.log.append(("wait", v))

    def commit(self) -> None:
        assert self.log[-1][0] in ("end", "signal", "wait"), "an encoder was still open at commit"
        self.log.append(("commit",))

    def waitUntilCompleted(self) -> None:
        self.log.append(("completed",))

    def status(self) -> int:
        return 4

    def error(self) -> None:
        return None


class _Event:
    value = 0

    def signaledValue(self) -> int:
        return self.value


class _State:
    def __init__(self, source_has_constants: bool) -> None:
        self.source_has_constants = source_has_constants

    def maxTotalThreadsPerThreadgroup(self) -> int:
        return 1024


class _Function:
    def __init__(self, src: str) -> None:
        self.src = src


class _Library:
    def __init__(self, src: str) -> None:
        self.src = src

    def newFunctionWithName_(self, name: str) -> _Function:
        assert name == "main0"
        return _Function(self.src)


class _Device:
    def __init__(self, log: Log) -> None:
        self.log = log

    def name(self) -> str:
        return "Fake Apple M3"

    def hasUnifiedMemory(self) -> bool:
        return True

    def maxBufferLength(self) -> int:
        return 1 << 30

    def recommendedMaxWorkingSetSize(self) -> int:
        return 8 << 30

    def currentAllocatedSize(self) -> int:
        return 0

    def newCommandQueue(self) -> Any:
        log = self.log
        return types.SimpleNamespace(commandBuffer=lambda: _CommandBuffer(log))

    def newBufferWithLength_options_(self, n: int, opts: int) -> _Buffer:
        assert opts == FakeMetal.MTLResourceStorageModeShared
        return _Buffer(n)

    def newBufferWithBytesNoCopy_length_options_deallocator_(self, mem: Any, n: int, opts: int, d: None) -> _Buffer:
        return _Buffer(n)

    def newLibraryWithSource_options_error_(self, src: str, opts: Any, err: None) -> tuple[_Library, None]:
        self.log.append(("library", len(src)))
        return _Library(src), None

    def newComputePipelineStateWithFunction_error_(self, fn: _Function, err: None) -> tuple[_State, None]:
        return _State("function_constant" in fn.src or "is_function_constant_defined" in fn.src), None

    def newSharedEvent(self) -> _Event:
        return _Event()


class FakeMetal(types.ModuleType):
    MTLResourceStorageModeShared = 0
    MTLDispatchTypeSerial = 0
    MTLCommandBufferStatusError = 5
    MTLCompileOptions = types.SimpleNamespace(new=lambda: object())


@pytest.fixture
def objc(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    log = Log()
    metal = FakeMetal("Metal")
    metal.MTLCopyAllDevices = lambda: [_Device(log)]  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "Metal", metal)
    monkeypatch.delitem(sys.modules, "pyggml_metal.objc_driver", raising=False)
    importlib.import_module("pyggml_metal.objc_driver")
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.delenv("PYGGML_METAL_SIM", raising=False)
    yield log
    sys.modules.pop("pyggml_metal.objc_driver", None)


def test_objc_driver_records_a_graph(objc: Log) -> None:
    (dev,) = MetalRegistry().devices()
    assert dev.name == "Metal0" and dev.description == "Fake Apple M3" and dev.memory()[1] == 8 << 30
    ctx = Context(no_alloc=True)
    a = ctx.new_tensor("f32", 300, 3, name="a")
    y = ops.soft_max(ops.scale(a, 0.5))
    g = build_graph(y)
    place_graph(g, dev.buffer_type())
    a.set(np.ones((3, 300), np.float32))
    assert np.all(a.numpy() == 1)  # shared storage: written and read through contents()
    be = dev.init_backend()
    ev = dev.event_new()
    be.graph_compute(g)
    be.event_record(ev)
    ev.synchronize()
    kinds = [e[0] for e in objc]
    assert kinds.count("library") == 2  # one library per (kernel, constants): unary, soft_max
    assert [e for e in objc if e[0] == "pipeline"] == [("pipeline", False)] * 2  # constants fixed in the source
    lay = layouts(msl_dir(MetalOptions.from_env().cache_dir))
    first = kinds.index("encoder")
    assert kinds[first:kinds.index("commit")] == [
        "encoder", *(k for name in ("unary", "soft_max")
                     for k in ("pipeline", *["buffer"] * lay[name].n_buffers, "dispatch")), "end"]
    assert ("dispatch", (3, 1, 1), (128, 1, 1)) in objc  # soft_max: a row per threadgroup of its local size
    assert kinds[-2:] == ["signal", "commit"]  # an event: a command buffer of its own, after the graph's
    be.synchronize()
    assert objc[-1] == ("completed",)
    be.free()
