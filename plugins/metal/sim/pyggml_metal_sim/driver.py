"""The emulator as a Metal driver (`pyggml_metal.driver` interface): buffers are host memory, pipelines are the
kernels of the emulator library (`pyggml_metal_sim.build`) with their function constants, a command buffer runs its
dispatches on the calling thread when committed, one after another, as a serial compute encoder orders them on a
GPU."""

from __future__ import annotations

import ctypes
import functools
import struct
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from pyggml_metal import driver, mslgen
from pyggml_metal.options import MetalOptions
from pyggml_metal_sim.build import EmuLibrary, build, variant

MAX_BUFFERS = 31
MAX_SPEC = 16
ALIGN = 256
MEMORY_BYTES = 8 << 30
"""What the emulated device reports as its memory (the host's RAM is what it really uses)."""


class _Dims(ctypes.Structure):
    _fields_ = [("groups", ctypes.c_uint32 * 3), ("local", ctypes.c_uint32 * 3),
                ("spec", ctypes.POINTER(ctypes.c_uint32))]


class _Launch(ctypes.Structure):
    _fields_ = [("dims", ctypes.POINTER(_Dims)), ("buf", ctypes.c_void_p * MAX_BUFFERS)]


def _run(pipeline: SimPipeline, launch: _Launch, keep: list[object]) -> None:
    """One dispatch (keep: the ctypes objects the launch points into, alive as long as the step)."""
    if pipeline.run(ctypes.addressof(launch)) != 0:  # type: ignore[arg-type]
        raise driver.CommandBufferError(f"MetalSim: dispatch of {pipeline.layout.name} could not allocate its "
                                        "fibers' stacks")


class SimBuffer:
    def __init__(self, memory: npt.NDArray[np.uint8], owner: object = None,
                 on_release: Callable[[int], None] | None = None) -> None:
        self._mem: npt.NDArray[np.uint8] | None = memory
        self._owner = owner
        self._on_release = on_release
        self.length = memory.size
        self.address = memory.ctypes.data

    def contents(self) -> npt.NDArray[np.uint8]:
        if self._mem is None:
            raise driver.MetalError("MetalSim: a released buffer was used")
        return self._mem

    def release(self) -> None:
        if self._mem is not None and self._on_release is not None:
            self._on_release(self.length)
        self._mem = None
        self._owner = None


@dataclass(frozen=True)
class SimPipeline:
    layout: driver.KernelLayout
    run: Callable[[ctypes.c_void_p], int]
    spec: ctypes.Array[ctypes.c_uint32]
    threads: tuple[int, int, int]


class SimEvent:
    def __init__(self) -> None:
        self.value = 0
        self._cond = threading.Condition()

    def signaled_value(self) -> int:
        return self.value

    def signal(self, value: int) -> None:
        with self._cond:
            self.value = max(self.value, value)
            self._cond.notify_all()

    def wait_host(self, value: int) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self.value >= value)


@dataclass
class SimCommandBuffer:
    steps: list[Callable[[], None]] = field(default_factory=list)
    error: BaseException | None = None
    committed: bool = False
    start_ns: int = 0
    end_ns: int = 0
    """The host's monotonic clock around the steps run at commit (the emulator's own GPU times)."""

    def dispatch(self, pipeline: driver.DriverPipeline, bindings: Sequence[driver.Binding | None],
                 groups: tuple[int, int, int]) -> None:
        assert isinstance(pipeline, SimPipeline)
        dims = _Dims((ctypes.c_uint32 * 3)(*groups), (ctypes.c_uint32 * 3)(*pipeline.threads), pipeline.spec)
        launch = _Launch(ctypes.pointer(dims))
        keep: list[object] = [dims, pipeline.spec]
        for i, b in enumerate(bindings):
            if b is None:
                continue
            buf, offset = b
            assert isinstance(buf, SimBuffer)
            keep.append(buf.contents())  # raises on a released buffer; else held, as Metal's command buffers retain
            launch.buf[i] = buf.address + offset  # their buffers: a release meanwhile cannot unmap what runs
        self.steps.append(functools.partial(_run, pipeline, launch, keep))

    def encode_wait(self, event: driver.DriverEvent, value: int) -> None:
        assert isinstance(event, SimEvent)

        def wait() -> None:
            if event.value < value:
                raise driver.CommandBufferError(f"MetalSim: a command buffer waits for event value {value}, which "
                                                f"nothing committed before it signals (it is at {event.value})")
        self.steps.append(wait)

    def encode_signal(self, event: driver.DriverEvent, value: int) -> None:
        assert isinstance(event, SimEvent)
        self.steps.append(lambda: event.signal(value))

    def commit(self) -> None:
        if self.committed:
            raise driver.MetalError("MetalSim: a command buffer was committed twice")
        self.committed = True
        self.start_ns = time.monotonic_ns()
        try:
            for step in self.steps:
                step()
        except BaseException as e:  # reported by wait(), as Metal reports a failed command buffer
            self.error = e
        self.end_ns = time.monotonic_ns()

    def wait(self) -> None:
        if not self.committed:
            raise driver.MetalError("MetalSim: waiting for a command buffer that was never committed")
        if self.error is not None:
            e, self.error = self.error, None
            if isinstance(e, driver.CommandBufferError):
                raise e
            raise driver.CommandBufferError(f"MetalSim: command buffer failed: {type(e).__name__}: {e}") from e

    def gpu_times(self) -> tuple[int, int]:
        return self.start_ns, self.end_ns


def spec_words(spec: driver.Spec) -> ctypes.Array[ctypes.c_uint32]:
    if len(spec) > MAX_SPEC:
        raise driver.MetalError(f"MetalSim: {len(spec)} function constants, at most {MAX_SPEC}")
    words = [struct.unpack("<I", struct.pack("<f", v))[0] if isinstance(v, float) else v & 0xFFFFFFFF
             for v in spec]
    return (ctypes.c_uint32 * MAX_SPEC)(*words)


class SimDevice:
    """The emulated device. Its library is built (or taken from the cache) at the first pipeline, not when the
    registry enumerates devices: a first build takes g++ a minute on a slow machine, past the plugin timeout."""

    name = "pyggml MSL emulator"
    unified_memory = True
    working_set_bytes = MEMORY_BYTES
    max_buffer_length = MEMORY_BYTES

    def __init__(self, options: MetalOptions) -> None:
        self.options = options
        """Where the MSL and the emulator library are cached (`cache_dir`) and the shaders (`shader_dir`)."""
        self._lib: EmuLibrary | None = None
        self._dll: ctypes.CDLL | None = None
        self._pipelines: dict[tuple[str, driver.Spec], SimPipeline] = {}
        self._variants: dict[str, ctypes.CDLL] = {}
        self._allocated = 0
        self._lock = threading.Lock()

    def library(self) -> tuple[EmuLibrary, ctypes.CDLL]:
        with self._lock:
            if self._lib is None or self._dll is None:
                lib = build(self.options)
                self._dll = ctypes.CDLL(str(lib.path))
                self._lib = lib
            return self._lib, self._dll

    def allocated_bytes(self) -> int:
        return self._allocated

    def _released(self, size: int) -> None:
        with self._lock:
            self._allocated -= size

    def new_buffer(self, size: int) -> SimBuffer:
        raw = np.zeros(size + ALIGN, np.uint8)
        start = (-raw.ctypes.data) % ALIGN
        with self._lock:
            self._allocated += size
        return SimBuffer(raw[start:start + size], raw, on_release=self._released)

    def buffer_no_copy(self, memory: npt.NDArray[np.uint8]) -> SimBuffer:
        return SimBuffer(memory)

    def pipeline(self, kernel: str, spec: driver.Spec) -> SimPipeline:
        key = (kernel, spec)
        p = self._pipelines.get(key)
        if p is None:
            lib, dll = self.library()
            if kernel not in lib.kernels:
                why = lib.failed.get(kernel, "no such kernel")
                raise driver.MetalError(f"MetalSim: kernel {kernel} is not in the emulator library: {why}")
            lay = driver.layouts(Path(lib.msl_dir))[kernel]
            if lay.array_spec:  # constants that size arrays: a compilation per value
                defines = mslgen.array_defines((lib.msl_dir / f"{kernel}.metal").read_text(), spec)
                vkey = f"{kernel}:{defines}"  # a variant holds this one kernel, compiled with these values
                dll = self._variants.get(vkey) or ctypes.CDLL(str(variant(lib, kernel, defines)))
                self._variants[vkey] = dll
            fn = getattr(dll, f"pyg_run_{kernel}")
            fn.argtypes = [ctypes.c_void_p]
            fn.restype = ctypes.c_int
            p = self._pipelines[key] = SimPipeline(lay, fn, spec_words(spec), lay.threads(spec))
        return p

    def command_buffer(self) -> SimCommandBuffer:
        return SimCommandBuffer()

    def new_event(self) -> SimEvent:
        return SimEvent()


class SimDriver:
    name = "MetalSim"

    def __init__(self, options: MetalOptions) -> None:
        self.options = options

    def devices(self) -> list[SimDevice]:
        return [SimDevice(self.options)]
