"""A fake CUDA driver at the lowest boundary the plugin calls: the `pycuda.driver` module and the libcuda
symbols reached through ctypes (`pyggml_cuda.cudalib`). Device memory is real bytes (numpy) behind fake
addresses, so buffer contents are checked for real; kernel launches are recorded, not executed. Out-parameters
arrive as ctypes byref objects, whose `_obj` the fake writes through. Streams under capture record launches into
a graph, and launching the graph records them again, marked as replayed.
"""

from __future__ import annotations

import itertools
import struct
import sys
import types
from dataclasses import dataclass, field
from typing import Any

import numpy as np

FATBIN_MAGIC = b"\x50\xed\x55\xba"


@dataclass
class GPU:
    name: str = "Fake H200"
    cc: tuple[int, int] = (9, 0)
    memory: int = 1 << 30
    used: int = 0


@dataclass
class Launched:
    symbol: str
    grid: tuple[int, ...]
    block: tuple[int, ...]
    args: tuple[Any, ...]
    stream: int
    via_graph: bool = False


@dataclass
class State:
    gpus: list[GPU] = field(default_factory=lambda: [GPU()])
    init_error: str | None = None
    peer: bool = True
    memory: dict[int, tuple[int, np.ndarray]] = field(default_factory=dict)
    """address -> (gpu index, bytes)"""
    stack: list[Any] = field(default_factory=list)
    launches: list[Launched] = field(default_factory=list)
    capturing: dict[int, list[Launched]] = field(default_factory=dict)
    graphs: dict[int, list[Launched]] = field(default_factory=dict)
    execs: dict[int, list[Launched]] = field(default_factory=dict)
    calls: list[tuple[Any, ...]] = field(default_factory=list)
    fail_launch: str | None = None
    modules_loaded: int = 0
    ids: Any = field(default_factory=lambda: itertools.count(0x1000))

    def find(self, addr: int, n: int) -> tuple[np.ndarray, int]:
        for base, (_, mem) in self.memory.items():
            if base <= addr and addr + n <= base + mem.size:
                return mem, addr - base
        raise KeyError(f"fake CUDA: [{addr:#x}, +{n}) is not device memory")


def make_driver(state: State) -> types.ModuleType:
    m = types.ModuleType("pycuda.driver")

    class Error(Exception):
        pass

    class MemoryError_(Error):
        pass

    class LogicError(Error):
        pass

    class LaunchError(Error):
        pass

    def current() -> Any:
        if not state.stack:
            raise LogicError("no current context (the fake driver wants Context.push first)")
        return state.stack[-1]

    class device_attribute:
        MULTIPROCESSOR_COUNT = "mp"
        MAX_THREADS_PER_BLOCK = "tpb"
        MAX_SHARED_MEMORY_PER_BLOCK = "smem"
        UNIFIED_ADDRESSING = "uva"

    class Context:
        def __init__(self, dev: int) -> None:
            self.dev = dev
            self.handle = next(state.ids)

        def push(self) -> None:
            state.stack.append(self)

        @staticmethod
        def pop() -> None:
            state.stack.pop()

        @staticmethod
        def synchronize() -> None:
            state.calls.append(("context_sync", current().dev))

        @staticmethod
        def enable_peer_access(peer: Context, flags: int = 0) -> None:
            state.calls.append(("enable_peer_access", current().dev, peer.dev))

    class Device:
        def __init__(self, i: int) -> None:
            if not 0 <= i < len(state.gpus):
                raise LogicError(f"invalid device ordinal {i}")
            self.i = i
            self._ctx: Context | None = None

        @staticmethod
        def count() -> int:
            return len(state.gpus)

        def name(self) -> str:
            return state.gpus[self.i].name

        def compute_capability(self) -> tuple[int, int]:
            return state.gpus[self.i].cc

        def total_memory(self) -> int:
            return state.gpus[self.i].memory

        def pci_bus_id(self) -> str:
            return f"0000:{self.i + 1:02x}:00.0"

        def get_attributes(self) -> dict[str, int]:
            return {"mp": 132, "tpb": 1024, "smem": 49152, "uva": 1}

        def retain_primary_context(self) -> Context:
            if self._ctx is None:
                self._ctx = Context(self.i)
            return self._ctx

        def can_access_peer(self, other: Device) -> bool:
            return state.peer and other.i != self.i

    class DeviceAllocation:
        def __init__(self, addr: int, dev: int) -> None:
            self.addr = addr
            self.dev = dev

        def __int__(self) -> int:
            return self.addr

        def free(self) -> None:
            dev, mem = state.memory.pop(self.addr)
            state.gpus[dev].used -= mem.size

    def mem_alloc(n: int) -> DeviceAllocation:
        dev = current().dev
        g = state.gpus[dev]
        if g.used + n > g.memory:
            raise MemoryError_("cuMemAlloc failed: out of memory")
        addr = (max((a + m.size for a, (_, m) in state.memory.items()), default=0x7F0000000000) + 511) // 256 * 256
        state.memory[addr] = (dev, np.zeros(n, np.uint8))
        g.used += n
        return DeviceAllocation(addr, dev)

    def mem_get_info() -> tuple[int, int]:
        g = state.gpus[current().dev]
        return g.memory - g.used, g.memory

    def memcpy_htod(dst: int, src: np.ndarray) -> None:
        current()
        src = np.ascontiguousarray(src).view(np.uint8).reshape(-1)
        mem, off = state.find(int(dst), src.size)
        mem[off : off + src.size] = src

    def memcpy_htod_async(dst: int, src: np.ndarray, stream: Any = None) -> None:
        memcpy_htod(dst, src)

    def memcpy_dtoh(dst: np.ndarray, src: int) -> None:
        current()
        out = dst.view(np.uint8).reshape(-1)
        mem, off = state.find(int(src), out.size)
        out[:] = mem[off : off + out.size]

    def memcpy_dtod(dst: int, src: int, n: int) -> None:
        current()
        smem, so = state.find(int(src), n)
        dmem, do = state.find(int(dst), n)
        dmem[do : do + n] = smem[so : so + n].copy()

    def memcpy_dtod_async(dst: int, src: int, n: int, stream: Any = None) -> None:
        memcpy_dtod(dst, src, n)

    def memset_d8(dst: int, value: int, n: int) -> None:
        current()
        mem, off = state.find(int(dst), n)
        mem[off : off + n] = value

    def pagelocked_empty(shape: Any, dtype: Any, order: str = "C", mem_flags: int = 0) -> np.ndarray:
        current()
        return np.empty(shape, dtype)

    class Stream:
        def __init__(self, flags: int = 0) -> None:
            current()
            self.handle = next(state.ids)

        def synchronize(self) -> None:
            state.calls.append(("stream_sync", self.handle))

        def wait_for_event(self, ev: Event) -> None:
            state.calls.append(("wait_for_event", self.handle, ev.handle))

    class Event:
        def __init__(self, flags: int = 0) -> None:
            current()
            self.handle = next(state.ids)
            self.at = 0.0
            """A fake time (ms): how many driver calls were made when the event was last recorded."""

        def record(self, stream: Stream | None = None) -> None:
            state.calls.append(("event_record", self.handle, stream.handle if stream else 0))
            self.at = float(len(state.calls))

        def time_till(self, end: Event) -> float:
            """ms from this event to `end` (cuEventElapsedTime), on the fake clock."""
            return end.at - self.at

        def synchronize(self) -> None:
            state.calls.append(("event_sync", self.handle))

    class Function:
        def __init__(self, name: str) -> None:
            self.name = name
            self.fmt: str | None = None

        def prepare(self, fmt: str) -> Function:
            self.fmt = fmt
            return self

        def prepared_async_call(self, grid: Any, block: Any, stream: Stream, *args: Any) -> None:
            current()
            assert self.fmt is not None, "prepared_async_call before prepare"
            struct.pack(self.fmt, *args)  # the values fit their codes, as PyCUDA's packer requires
            if state.fail_launch and state.fail_launch in self.name:
                raise LaunchError("cuLaunchKernel failed: too many resources requested for launch")
            rec = Launched(self.name, tuple(grid), tuple(block), args, stream.handle)
            cap = state.capturing.get(stream.handle)
            (cap if cap is not None else state.launches).append(rec)

    class Module:
        def __init__(self, image: bytes) -> None:
            self.image = image

        def get_function(self, name: str) -> Function:
            return Function(name)

    def module_from_buffer(image: bytes, options: Any = None, message_handler: Any = None) -> Module:
        current()
        if not bytes(image[:4]) == FATBIN_MAGIC:
            raise LogicError("cuModuleLoadData failed: device kernel image is invalid")
        state.modules_loaded += 1
        return Module(bytes(image))

    def init(flags: int = 0) -> None:
        if state.init_error:
            raise LogicError(state.init_error)

    for name, obj in dict(locals()).items():
        if name not in ("m", "state"):
            setattr(m, name, obj)
    setattr(m, "MemoryError", MemoryError_)  # noqa: B010 - a name the module type does not declare
    return m


class FakeLib:
    """libcuda's ctypes symbols used by pyggml_cuda.cudalib, over the same state."""

    def __init__(self, state: State, driver: types.ModuleType) -> None:
        self.s = state
        self.d = driver
        self.fail: set[str] = set()

    def _ok(self, name: str) -> int:
        self.s.calls.append((name,))
        return 999 if name in self.fail else 0

    def cuGetErrorString(self, code: Any, out: Any) -> int:
        out._obj.value = b"fake failure"
        return 0

    def cuStreamBeginCapture_v2(self, stream: Any, mode: Any) -> int:
        r = self._ok("cuStreamBeginCapture_v2")
        if not r:
            self.s.capturing[stream.value] = []
        return r

    def cuStreamEndCapture(self, stream: Any, out: Any) -> int:
        launches = self.s.capturing.pop(stream.value)
        g = next(self.s.ids)
        self.s.graphs[g] = launches
        out._obj.value = g
        return self._ok("cuStreamEndCapture")

    def cuGraphInstantiateWithFlags(self, out: Any, graph: Any, flags: Any) -> int:
        e = next(self.s.ids)
        self.s.execs[e] = self.s.graphs[graph.value]
        out._obj.value = e
        return self._ok("cuGraphInstantiateWithFlags")

    def cuGraphLaunch(self, e: Any, stream: Any) -> int:
        for la in self.s.execs[e.value]:
            self.s.launches.append(Launched(la.symbol, la.grid, la.block, la.args, stream.value, via_graph=True))
        return self._ok("cuGraphLaunch")

    def cuGraphDestroy(self, g: Any) -> int:
        self.s.graphs.pop(g.value, None)
        return self._ok("cuGraphDestroy")

    def cuGraphExecDestroy(self, e: Any) -> int:
        self.s.execs.pop(e.value, None)
        return self._ok("cuGraphExecDestroy")

    def _peer(self, dst: Any, src: Any, n: Any) -> None:
        size = n.value
        smem, so = self.s.find(src.value, size)
        dmem, do = self.s.find(dst.value, size)
        dmem[do : do + size] = smem[so : so + size].copy()

    def cuMemcpyPeer(self, dst: Any, dctx: Any, src: Any, sctx: Any, n: Any) -> int:
        self._peer(dst, src, n)
        return self._ok("cuMemcpyPeer")

    def cuMemcpyPeerAsync(self, dst: Any, dctx: Any, src: Any, sctx: Any, n: Any, stream: Any) -> int:
        self._peer(dst, src, n)
        return self._ok("cuMemcpyPeerAsync")


def install(monkeypatch: Any, state: State) -> types.ModuleType:
    """Put the fake driver in place of pycuda.driver and libcuda for one test."""
    from pyggml_cuda.cudalib import CudaLib

    driver = make_driver(state)
    pkg = types.ModuleType("pycuda")
    pkg.driver = driver  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pycuda", pkg)
    monkeypatch.setitem(sys.modules, "pycuda.driver", driver)
    monkeypatch.setattr("pyggml_cuda.cudalib._LIB", CudaLib(FakeLib(state, driver)))
    return driver


def fakelib(state: State) -> FakeLib:
    from pyggml_cuda.cudalib import cudalib

    lib = cudalib().lib
    assert isinstance(lib, FakeLib)
    return lib
